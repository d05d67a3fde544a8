#!/bin/bash
# Builds cairn, creates a demo archive on four file-backed disks and a 4x4 lonestar grid of
# sixteen more, with the example admin rules (policies/archive.rules), mounts it, archives
# some data into it with tar (into the grid, compressed) and rsync, encrypts a directory with a
# master key of its keystore, changes a policy, and shows status, policies, keys and the grid.
# Leaves it mounted.
# Usage: examples/demo.sh [DEMO_DIR]   (default /tmp/cairn-demo; run as root)
set -euo pipefail
cd "$(dirname "$0")/.."
demo=${1:-/tmp/cairn-demo}
bash scripts/install-deps
[ -f build/build.ninja ] || meson setup build
ninja -C build
if grep -q " $demo/mnt fuse.cairn" /proc/mounts; then build/cairn umount "$demo/mnt"; fi
rm -rf "$demo"
mkdir -p "$demo/mnt"
build/cairn mkfs "$demo/archive" --disks 4 --group cold:lonestar:4x4:2+1 --disk-size 4G
build/cairn rules check policies/archive.rules
cp policies/archive.rules "$demo/archive/rules"
build/cairn key create "$demo/archive" demo-key
build/cairn mount "$demo/archive" "$demo/mnt"
echo "== archiving /usr/share/doc with tar into the lonestar group cold (zstd), and /etc with rsync"
build/cairn plugins "$demo/archive"
mkdir "$demo/mnt/doc"
setfattr -n user.cairn.placement -v group=cold "$demo/mnt/doc"
setfattr -n user.cairn.compress -v zstd "$demo/mnt/doc"
tar -C /usr/share -cf - doc | tar -C "$demo/mnt" -xf -
rsync -aHAX --exclude shadow --exclude gshadow /etc/ "$demo/mnt/etc/" 2>/dev/null || true
setfattr -n user.project -v demo "$demo/mnt/doc"
echo "== /private is encrypted (aes-256-gcm, each file with its own key wrapped by demo-key)"
mkdir "$demo/mnt/private"
setfattr -n user.cairn.encrypt -v aes-256-gcm "$demo/mnt/private"
setfattr -n user.cairn.key -v demo-key "$demo/mnt/private"
tar -C /etc -cf - apt | tar -C "$demo/mnt/private" -xf -
build/cairn persist "$demo/archive"
build/cairn key list "$demo/archive"
echo "== the rules gave /etc small segments; ask why, then change the policy of the directory"
build/cairn policy explain "$demo/mnt/etc/passwd"
setfattr -n user.cairn.policy -v bulk "$demo/mnt/etc"
getfattr -n user.cairn.state "$demo/mnt/etc/passwd"
build/cairn policy apply "$demo/mnt/etc" --progress
build/cairn status "$demo/archive"
echo "== the grid that holds /doc: one bucket per file, two dimensions of parity"
getfattr -n user.cairn.location "$(find "$demo/mnt/doc" -type f -size +1k | head -n 1)"
build/cairn group show "$demo/archive" cold
echo
echo "mounted at $demo/mnt — try: ls $demo/mnt; getfattr -d $demo/mnt/doc; cairn policy explain FILE"
echo "unmount with: build/cairn umount $demo/mnt"
