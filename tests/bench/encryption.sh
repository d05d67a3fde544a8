#!/bin/bash
# cairn encryption benchmark: compress=off encrypt=aes-256-gcm through the cairn mount against gocryptfs (the Debian
# package) on the same storage, in one run.
#
#   write      random data (generated once, on tmpfs) copied with dd bs=1M conv=fsync from a cold page cache: into a
#              gocryptfs mount (the dd: its fsync puts the data in the cipher files), into an encrypted cairn
#              directory until persisted (the dd, then 'cairn persist': timed_write_persist); target cairn >= 1.2x
#   cold read  cat of the file to /dev/null: gocryptfs unmounted, page cache dropped, remounted; cairn after 'cairn
#              evict' (its staging cache empty, reads come from the disks) and drop_caches; target cairn >= 1.2x
#   plain      the same cairn run in an encrypt=off directory (compress=off too): what encryption costs (info)
# The gocryptfs cipher dir and the cairn archive (disk images, catalog, staging cache) sit in one directory of one
# tmpfs, with the source file. Each rep does gocryptfs, cairn encrypted and cairn plain in turn, each on a fresh
# mount; the bytes read back are compared with the source once per system. Medians of --reps.
#
# Usage: tests/bench/encryption.sh [--quick] [--reps N]
#   (default)  a 512 MiB file, 3 reps
#   --quick    a 128 MiB file, 1 rep (a smoke run)
#   --reps N   N reps (the median is reported)
# Environment: CAIRN_BIN (default build/cairn), BENCH_TMPDIR, BENCH_STEP_TIMEOUT (seconds per step, default 1800).
# Needs root (drop_caches, tmpfs) and /dev/fuse; installs gocryptfs, attr, fuse3 and python3 with apt-get when missing.
# Needs a cairn with encryption ('cairn key create'); stops with a message (and nothing left mounted) without it.
# Prints PASS/MISS beside each target; exits 0 unless the benchmark itself or a correctness check fails.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
CAIRN=${CAIRN_BIN:-$repo/build/cairn}
STEP_TIMEOUT=${BENCH_STEP_TIMEOUT:-1800}
# shellcheck source=tests/bench/lib.sh
source "$repo/tests/bench/lib.sh"

quick=0 reps=""
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --reps) reps=${2:?--reps needs a number}; shift ;;
    --reps=*) reps=${1#--reps=} ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--quick] [--reps N]" >&2; exit 2 ;;
  esac
  shift
done
if ((quick)); then SIZE_MIB=128 reps=${reps:-1}; else SIZE_MIB=512 reps=${reps:-3}; fi
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "--reps needs a positive integer" >&2; exit 2; }
SIZE=$((SIZE_MIB * MiB))
TARGET=1.2   # cairn / gocryptfs, for the write and for the cold read
KEY=k1

bench_check_prereqs
need_pkgs=()
for c in gocryptfs:gocryptfs setfattr:attr fusermount3:fuse3 python3:python3; do
  command -v "${c%%:*}" >/dev/null || need_pkgs+=("${c#*:}")
done
bench_apt_install "${need_pkgs[@]}"
bench_make_tmp cairn-encryption-bench

START_NS=$(now_ns)
STORE=$T/store                              # the same storage: both systems' backing data in one directory
ARCH=$STORE/cairn.arch MNT=$MNTS/cairn
GC_CIPHER=$STORE/gocryptfs.cipher GC_PLAIN=$MNTS/gocryptfs GC_PID="" GC_TRACKED=0
SRC=$T/random.bin
mkdir -p "$STORE"
log "encryption benchmark ($( ((quick)) && echo quick || echo full), $(human_mib "$SIZE_MIB"), $reps reps) in $TMP"

# ---------------------------------------------------------------- cairn archive and key (first: fail fast)
cairn_mkfs "$ARCH" --disks 4 --disk-size "$((SIZE_MIB + 1024))M" --cache-size "$((SIZE_MIB * 2 + 512))M"
try "$CAIRN" key create "$ARCH" "$KEY"
if ((RC != 0)); then
  echo "bench: error: '$CAIRN key create $ARCH $KEY' failed (exit $RC): this cairn cannot create encryption keys" \
    "(encryption not built in it yet?); nothing measured" >&2
  fail_step cairn "$RC" "$CAIRN" key create "$ARCH" "$KEY"
fi
NOTES+=("cairn key create: $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 300 | tr '\n' '|')")

setfattr_or_die() {  # setfattr_or_die KEY VALUE DIR: set user.cairn.KEY, or stop saying what the mount refused
  try setfattr -n "user.cairn.$1" -v "$2" "$3"
  if ((RC != 0)); then
    echo "bench: error: the cairn mount refused user.cairn.$1=$2 on $3 (exit $RC)" >&2
    fail_step cairn "$RC" setfattr -n "user.cairn.$1" -v "$2" "$3"
  fi
}
cairn_mount_existing "$ARCH" "$MNT"
run setup mkdir "$MNT/aes" "$MNT/plain"
setfattr_or_die compress off "$MNT/plain"
setfattr_or_die compress off "$MNT/aes"
setfattr_or_die encrypt aes-256-gcm "$MNT/aes"
setfattr_or_die key "$KEY" "$MNT/aes"
try getfattr -d -m '^user\.cairn\.' "$MNT/aes"
NOTES+=("cairn: the encrypted directory's xattrs: $(grep -v '^#' "$LOGS/last.out" | grep . | tr '\n' ' ' || true)")
run setup "$CAIRN" plugins "$ARCH"
NOTES+=("cairn plugins: $(tr '\n' '|' <"$LOGS/last.out")")
cairn_unmount "$MNT" setup

# ---------------------------------------------------------------- the source and gocryptfs
log "generating $(human_mib "$SIZE_MIB") of random data on tmpfs"
run setup dd if=/dev/urandom of="$SRC" bs=1M count="$SIZE_MIB" iflag=fullblock status=none

mkdir -p "$GC_CIPHER" "$GC_PLAIN"
run gocryptfs gocryptfs -init -q -scryptn 10 -extpass 'echo pw' "$GC_CIPHER"
GC_VERSION=$(gocryptfs -version 2>/dev/null | head -n 1)

gc_mount() {  # in the foreground of a background job of ours, so that we know (and only ever stop) its pid
  ((GC_TRACKED)) || { FUSE_MOUNTS+=("$GC_PLAIN"); GC_TRACKED=1; }  # cleanup unmounts it from now on
  gocryptfs -fg -q -extpass 'echo pw' "$GC_CIPHER" "$GC_PLAIN" >>"$LOGS/gocryptfs.log" 2>&1 </dev/null &
  GC_PID=$!
  PID_TAG[$GC_PID]=$GC_PLAIN
  wait_mounted "$GC_PLAIN" "$GC_PID" "$LOGS/gocryptfs.log"
}
gc_unmount() {
  run gocryptfs fusermount3 -u "$GC_PLAIN"
  stop_pid "$GC_PID"
  wait "$GC_PID" 2>/dev/null || true
  unset "PID_TAG[$GC_PID]"
  GC_PID=""
}
# timed_cat SYS FILE: a cat of FILE to /dev/null (from whatever state the caller left the caches in); CAT_NS
timed_cat() {
  local t0
  t0=$(now_ns)
  # shellcheck disable=SC2016  # $1 is the inner shell's
  run "$1" bash -c 'cat "$1" >/dev/null' cat "$2"
  CAT_NS=$(($(now_ns) - t0))
}
# read_back_check SYS FILE: the bytes read back through the mount are the source's
read_back_check() {
  try cmp "$SRC" "$2"
  ((RC == 0)) || log "DATA MISMATCH: $1: $2 read back differs from the source: $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 300 | tr '\n' '|')"
  check "$1: the $(human_mib "$SIZE_MIB") file read back through the mount is the one written (cmp)" $((RC == 0)) \
    "DATA MISMATCH, cmp exit $RC: $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 300 | tr '\n' '|')"
}

declare -A VALS=()  # VALS[test,sys] = the MiB/s of each rep, space separated
add_val() { VALS[$1,$2]="${VALS[$1,$2]:-}${VALS[$1,$2]:+ }$3"; }

gc_rep() {  # gc_rep REP
  local t0 t1
  gc_mount
  drop_caches
  t0=$(now_ns)
  run gocryptfs dd if="$SRC" of="$GC_PLAIN/f" bs=1M conv=fsync status=none
  t1=$(now_ns)
  add_val write gocryptfs "$(mib_rate "$SIZE" $((t1 - t0)))"
  gc_unmount
  drop_caches
  gc_mount
  timed_cat gocryptfs "$GC_PLAIN/f"
  add_val read gocryptfs "$(mib_rate "$SIZE" "$CAT_NS")"
  (($1 > 1)) || read_back_check gocryptfs "$GC_PLAIN/f"
  run gocryptfs rm -f "$GC_PLAIN/f"
  gc_unmount
  log "gocryptfs $1: write $(mib_rate "$SIZE" $((t1 - t0))) MiB/s, cold read $(mib_rate "$SIZE" "$CAT_NS") MiB/s"
}

# ---------------------------------------------------------------- cairn
# plaintext_samples_on_disks JSON: ON_DISK = how many of 8 64-byte samples of the source the disk images hold (their
# data regions; the images are sparse)
cat >"$BIN/samples_on_disks.py" <<'EOF'
import os, sys
src, images = sys.argv[1], sys.argv[2:]
size = os.path.getsize(src)
with open(src, "rb") as f:
    samples = [os.pread(f.fileno(), 64, i * size // 8 + 4093) for i in range(8)]
found, piece = set(), 64 << 20
for img in images:
    fd = os.open(img, os.O_RDONLY)
    end, pos = os.fstat(fd).st_size, 0
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:  # ENXIO: no data after pos
            break
        hole = os.lseek(fd, data, os.SEEK_HOLE)
        for p in range(data, hole, piece):
            buf = os.pread(fd, min(piece, hole - p) + 63, p)
            found.update(i for i, s in enumerate(samples) if i not in found and buf.find(s) >= 0)
        pos = hole
    os.close(fd)
print(len(found))
EOF
plaintext_samples_on_disks() {
  local n images
  n=$(jget "$1" "len(s['disks'])")
  # shellcheck disable=SC2046  # disk numbers
  mapfile -t images < <(image_paths "$ARCH" "$1" $(seq 0 $((n - 1))))
  ((${#images[@]} == n)) || die "cannot read the disk image paths from cairn status --json"
  run check python3 "$BIN/samples_on_disks.py" "$SRC" "${images[@]}"
  ON_DISK=$(cat "$LOGS/last.out")
  [[ $ON_DISK =~ ^[0-8]$ ]] || die "samples_on_disks.py printed '$ON_DISK'"
}

cairn_rep() {  # cairn_rep SYS DIR REP: a mount of its own; write until persisted, cold read
  local sys=$1 dir=$2 rep=$3 s0 l0 on_disk stored logical
  cairn_mount_existing "$ARCH" "$MNT"
  status_json "$ARCH" "$LOGS/st0.json"
  s0=$(jget "$LOGS/st0.json" "s['payload_stored_bytes']") l0=$(jget "$LOGS/st0.json" "s['payload_logical_bytes']")
  timed_write_persist "$sys" "$SRC" "$MNT/$dir/f" "$ARCH"
  add_val write "$sys" "$(mib_rate "$SIZE" $((DD_NS + PERSIST_NS)))"
  add_val dd "$sys" "$(mib_rate "$SIZE" "$DD_NS")"
  if ((rep == 1)); then
    status_json "$ARCH" "$LOGS/st1.json"
    stored=$(($(jget "$LOGS/st1.json" "s['payload_stored_bytes']") - s0))
    logical=$(($(jget "$LOGS/st1.json" "s['payload_logical_bytes']") - l0))
    NOTES+=("$sys: the write added $logical payload bytes before the chain, $stored after ($(awk -v s="$stored" \
      -v l="$logical" 'BEGIN { if (l > 0) printf "%.4f", s / l; else print "-" }') stored / logical)")
    try "$CAIRN" policy explain "$MNT/$dir/f"
    NOTES+=("$sys: cairn policy explain: $(grep -iE '^ *(encrypt|key|compress)' "$LOGS/last.out" | tr -s ' ' | tr '\n' '|' || true)")
    # the source's bytes as they are must not be on the disks when encrypted (rep 1 of the encrypted directory comes
    # before any plain write to this archive, so nothing else can have left them there); when plain they should be
    plaintext_samples_on_disks "$LOGS/st1.json"
    on_disk=$ON_DISK
    if [[ $sys == aes ]]; then
      check "aes: the disk images hold none of 8 samples of the plaintext" $((on_disk == 0)) \
        "$on_disk of 8 64-byte samples of the source found in the disk images"
    elif ((on_disk == 0)); then
      WARNINGS+=("plain: none of 8 samples of the source found in the disk images of an unencrypted write: the aes check above proves nothing")
    else
      NOTES+=("plaintext on the disks: $on_disk of 8 64-byte samples found after the plain write (the aes check's control)")
    fi
  fi
  evict_cold "$ARCH" "$sys"
  timed_cat "$sys" "$MNT/$dir/f"
  add_val read "$sys" "$(mib_rate "$SIZE" "$CAT_NS")"
  ((rep > 1)) || read_back_check "$sys" "$MNT/$dir/f"
  run "$sys" rm -f "$MNT/$dir/f"
  run "$sys" "$CAIRN" persist "$ARCH"  # the deletion, so the disks do not fill over the reps
  cairn_unmount "$MNT" "$sys"
  log "cairn $sys $rep: until persisted $(mib_rate "$SIZE" $((DD_NS + PERSIST_NS))) MiB/s (the dd alone $(mib_rate \
    "$SIZE" "$DD_NS")), cold read $(mib_rate "$SIZE" "$CAT_NS") MiB/s"
}

# ---------------------------------------------------------------- the runs, interleaved
for ((i = 1; i <= reps; i++)); do
  log "== rep $i of $reps"
  gc_rep "$i"
  cairn_rep aes aes "$i"       # first: see plaintext_samples_on_disks
  cairn_rep plain plain "$i"
done
try "$CAIRN" fsck "$ARCH"
check "cairn fsck is clean after every run" \
  "$([[ $RC == 0 && $(cat "$LOGS/last.out") == *": clean"* ]] && echo 1 || echo 0)" "$(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 300)"

for t in write read dd; do
  for s in gocryptfs aes plain; do
    # shellcheck disable=SC2086  # VALS holds space-separated numbers
    [[ -n ${VALS[$t,$s]:-} ]] && R[$t,$s]=$(median ${VALS[$t,$s]})
  done
done
for s in gocryptfs aes plain; do
  NOTES+=("$s: MiB/s per rep: write ${VALS[write,$s]}; cold read ${VALS[read,$s]}${VALS[dd,$s]:+; the dd alone ${VALS[dd,$s]}}")
done

# ---------------------------------------------------------------- report
erow() {  # erow LABEL GOCRYPTFS AES PLAIN TARGET: a row; TARGET "" = info only
  local r res="" t="(info)"
  r=$(ratio "$3" "$2")
  [[ -n $5 ]] && { t=">= ${5}x"; res=$(verdict "ge:$5" "$r"); }
  printf '%-40s %10s %10s %8s  %-9s %-5s %12s %9s\n' "$1" "$(fmt "$2")" "$(fmt "$3")" "$r" "$t" "$res" "$(fmt "$4")" \
    "$(ratio "$3" "$4")"
}
echo
echo "cairn encryption benchmark — $( ((quick)) && echo quick || echo full) run, $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) cores, kernel $(uname -r)"
echo "cairn: $CAIRN ($(cairn_revision)); $GC_VERSION"
echo "file: $(human_mib "$SIZE_MIB") of random data; reps: $reps (median); whole run $(secs $(($(now_ns) - START_NS))) s"
echo "same storage: the gocryptfs cipher dir and the cairn archive (4 disks, catalog, staging cache) in $STORE (tmpfs)"
echo "cairn: compress=off encrypt=aes-256-gcm key=$KEY (aes), compress=off encrypt=off (plain)"
echo "write: dd bs=1M conv=fsync from a cold page cache; cairn until persisted (the dd, then 'cairn persist')"
echo "cold read: cat to /dev/null; gocryptfs remounted after drop_caches, cairn after 'cairn evict' and drop_caches"
echo
printf '%-40s %10s %10s %8s  %-9s %-5s %12s %9s\n' "test (MiB/s)" gocryptfs "cairn aes" "aes/gc" target result \
  "cairn plain" aes/plain
printf '%s\n' "$(printf '%.0s-' $(seq 1 112))"
erow "sequential write $(human_mib "$SIZE_MIB")" "${R[write,gocryptfs]}" "${R[write,aes]}" "${R[write,plain]}" "$TARGET"
erow "cold read $(human_mib "$SIZE_MIB")" "${R[read,gocryptfs]}" "${R[read,aes]}" "${R[read,plain]}" "$TARGET"
erow "  cairn: the dd alone (fsync to cache)" "${R[write,gocryptfs]}" "${R[dd,aes]}" "${R[dd,plain]}" ""
echo "(aes/gc: cairn encrypted against gocryptfs, the target; aes/plain: what encryption costs cairn, info)"
echo "(tmpfs: a cold read decrypts from memory for both, no device I/O; drop_caches empties the page cache of the mounts)"
echo
finish_report "correctness checks: all $NCHECKS passed"
