#!/bin/bash
# cairn rebuild benchmark on a real disk: how fast 'cairn rebuild' refills one disk of G GiB, and how fast
# 'cairn scrub' verifies the archive, against reading the same disk images directly, with a cold page cache.
#
# Usage: tests/bench/rebuild.sh [--quick] [--reps N] [--disk-gib G] [--allow-tmpfs]
#   The archive (catalog, staging cache, 6 disk images of G GiB + 12 %) lives in a temp dir under BENCH_DISK_DIR,
#   which must be disk-backed (a tmpfs is refused unless --allow-tmpfs: its baseline would be memory bandwidth).
#   1. Fill: 4 x G GiB of random data written into a user.cairn.raid=rs-4-2 directory (files of 1 GiB, --quick
#      256 MiB, each a rotation of one random source so no two segments are equal; dd bs=1M + fsync, then
#      'cairn persist'). rs-4-2 puts one chunk of every extent on each of the 6 disks: disk 0 then holds G GiB of
#      chunks. Checked with 'cairn status --json'. Untimed (its rate is printed as a note).
#   2. Baseline: readdata (the data regions of the images, SEEK_DATA/SEEK_HOLE, 1 MiB reads) of the 5 surviving
#      images one after the other, as cat would, after drop_caches; median of min(N, 3). Also (no target) one
#      readdata per image, all at once, as the rebuild reads them; and one plain 'cat' as a note.
#   3. Rebuild: 'cairn disk fail ARCH 0', 'cairn disk replace ARCH 0 NEW', drop_caches, 'cairn rebuild ARCH'
#      timed. Rate = the bytes it must read (4 surviving chunks for each chunk of disk 0) per second; target
#      >= 0.7x the baseline. The bytes written to the new disk per second are shown too (no target). Every chunk of
#      disk 0 must be repaired and no extent lost. With --reps N it runs N times, each on yet another empty image
#      in place of disk 0; the median counts.
#   4. 'cairn fsck' must be clean. Scrub: drop_caches, 'cairn scrub ARCH' (N times, median), which must find no bad
#      chunk; MiB/s of all chunk bytes against readdata of all 6 images, serial and parallel (no target).
#   5. Mount, 'cairn evict', drop_caches, read every file back from the disks: each sha256 must be its source's.
#   vmstat is sampled during the rebuilds and scrubs (CPU and disk MiB/s averages in the notes).
#   --quick       smoke run: G = 0.5, files of 256 MiB.
#   --reps N      rebuilds and scrubs N times, baselines min(N, 3) times (default 3).
#   --disk-gib G  chunk bytes on each disk, in GiB (default 4; --quick 0.5); a multiple of 4 MiB.
#   --allow-tmpfs accept a BENCH_DISK_DIR on tmpfs/ramfs.
# Environment: CAIRN_BIN (default build/cairn), BENCH_DISK_DIR (default /var/tmp; needs about 9 x G GiB free, more
#   precisely 6 images x 1.1 + the new image + staging cache headroom; checked up front), BENCH_STEP_TIMEOUT
#   (seconds per step, default 1800). The temp dir (BENCH_TMPDIR is set to BENCH_DISK_DIR) holds a small tmpfs of
#   our own for the random source; everything is removed on exit.
# Needs root (drop_caches, tmpfs mount) and /dev/fuse. Installs missing Debian packages with apt-get.
# Prints PASS/MISS beside the target; exits 1 if a step fails or any correctness check does (layout, rebuild, fsck,
# scrub, sha256 of the data read back).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
CAIRN=${CAIRN_BIN:-$repo/build/cairn}
STEP_TIMEOUT=${BENCH_STEP_TIMEOUT:-1800}
CLEANUP_CAIRN_UMOUNT=1  # on an abnormal exit, try 'cairn umount' before fusermount3
# shellcheck source=tests/bench/lib.sh
source "$repo/tests/bench/lib.sh"

usage() { echo "usage: $0 [--quick] [--reps N] [--disk-gib G] [--allow-tmpfs]" >&2; exit 2; }
quick=0 reps=3 disk_gib="" allow_tmpfs=0
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --reps) reps=${2:?--reps needs a number}; shift ;;
    --reps=*) reps=${1#--reps=} ;;
    --disk-gib) disk_gib=${2:?--disk-gib needs a number}; shift ;;
    --disk-gib=*) disk_gib=${1#--disk-gib=} ;;
    --allow-tmpfs) allow_tmpfs=1 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) usage ;;
  esac
  shift
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "--reps needs a positive integer" >&2; exit 2; }
[[ -z $disk_gib || $disk_gib =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "--disk-gib needs a number of GiB" >&2; exit 2; }
[[ -n $disk_gib ]] || { ((quick)) && disk_gib=0.5 || disk_gib=4; }

DISK_MIB=$(awk -v g="$disk_gib" 'BEGIN { printf "%d", g * 1024 + 0.5 }')  # chunk bytes on each disk
((DISK_MIB >= 64 && DISK_MIB % 4 == 0)) || { echo "--disk-gib: $disk_gib GiB is not a multiple of 4 MiB of at least 64 MiB" >&2; exit 2; }
NDISKS=6 RAID=rs-4-2 RS_K=4 RS_M=2 FAIL_DISK=0
SEG_MIB=4                                   # the default segment size: one 1 MiB chunk per disk per segment
DATA_MIB=$((DISK_MIB * RS_K))               # rs-4-2 on 6 disks: each disk holds 1/4 of the data
NSEG=$((DATA_MIB / SEG_MIB))                # = the chunks disk 0 must hold
IMG_MIB=$(((DISK_MIB * 112 / 100 + 3) / 4 * 4))  # 12 % headroom for extent headers and allocation
CACHE_MIB=256                               # staging cache limit: keep it from filling the disk
if ((quick)); then SRC_MIB=256; else SRC_MIB=1024; fi
((SRC_MIB > DATA_MIB)) && SRC_MIB=$DATA_MIB
while ((DATA_MIB % SRC_MIB)); do SRC_MIB=$((SRC_MIB / 2)); done  # DATA_MIB is a multiple of 16 MiB
NFILES=$((DATA_MIB / SRC_MIB))
BASE_REPS=$((reps < 3 ? reps : 3))
REBUILD_TARGET=0.7
MOUNT_OPTS=reconcile_idle=3600,reconcile_rate=0  # keep the background reconciler out of the timings
DISK_DIR=${BENCH_DISK_DIR:-/var/tmp}

# ---------------------------------------------------------------- prerequisites
bench_check_prereqs
need_pkgs=()
command -v fusermount3 >/dev/null || need_pkgs+=(fuse3)
command -v setfattr >/dev/null || need_pkgs+=(attr)
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v python3 >/dev/null || need_pkgs+=(python3)
command -v openssl >/dev/null || need_pkgs+=(openssl)
command -v vmstat >/dev/null || need_pkgs+=(procps)
[[ -x /usr/bin/time ]] || need_pkgs+=(time)
command -v findmnt >/dev/null || need_pkgs+=(util-linux)
bench_apt_install "${need_pkgs[@]}"

[[ -d $DISK_DIR ]] || die "BENCH_DISK_DIR=$DISK_DIR is not a directory"
DISK_DIR=$(cd "$DISK_DIR" && pwd -P)
DISK_FSTYPE=$(stat -f -c %T "$DISK_DIR")  # tmpfs, ramfs, ext2/ext3 (also for ext4), xfs, ...
DISK_FSNAME=$(findmnt -n -o FSTYPE -T "$DISK_DIR" 2>/dev/null || echo "$DISK_FSTYPE")
if [[ $DISK_FSTYPE == tmpfs || $DISK_FSTYPE == ramfs ]] && ((!allow_tmpfs)); then
  die "$DISK_DIR is on $DISK_FSTYPE: this benchmark measures a real disk; set BENCH_DISK_DIR to a disk-backed directory (or pass --allow-tmpfs)"
fi
# at the peak: 6 images (sparse, up to IMG each; 10 % slack), the new image, the staging cache (its limit plus one
# unpersisted file), 1 GiB for the catalog and the rest
need_mib=$(awk -v n="$NDISKS" -v i="$IMG_MIB" -v c="$CACHE_MIB" -v s="$SRC_MIB" \
  'BEGIN { printf "%d", n * i * 1.1 + i + c + s + 1024 }')
avail_mib=$(($(df -P -k "$DISK_DIR" | awk 'NR == 2 { print $4 }') / 1024))
((avail_mib >= need_mib)) ||
  die "not enough free space in $DISK_DIR for $NDISKS disks of $(human_mib "$IMG_MIB"): need about $need_mib MiB, $avail_mib MiB available (use --disk-gib or BENCH_DISK_DIR)"

# ---------------------------------------------------------------- temp dir and cleanup
# TMP on the disk (the archive goes in TMP/arch, removed with TMP on every exit path); T, our tmpfs inside it,
# holds only the random source
BENCH_TMPDIR=$DISK_DIR
bench_make_tmp cairn-rebuild-bench
((($(mem_avail_kib) / 1024) > SRC_MIB + 512)) || die "not enough free memory for a $SRC_MIB MiB source on tmpfs"
ARCH=$TMP/arch MNT=$MNTS/arch NEWDIR=$TMP/newdisks
mkdir -p "$NEWDIR"
[[ $(stat -f -c %T "$TMP") == "$DISK_FSTYPE" ]] || die "$TMP is not on $DISK_DIR's file system"

# ---------------------------------------------------------------- helpers
# rotated I: file I's bytes on stdout: the source rotated left by I x (1 MiB + 4 KiB), so that no two files (and no
# two segments) are equal and a chunk rebuilt into the wrong extent cannot pass for the right one
rot_off() { echo $((($1 * 1052672) % (SRC_MIB * MiB))); }
ROTATE='set -o pipefail; { tail -c +$(($2 + 1)) "$1"; head -c "$2" "$1"; }'

# sampled LABEL CMD...: runs CMD (try: no abort) under /usr/bin/time with vmstat sampling every second; sets S_NS
# (wall), S_CPU ("user s / sys s / max RSS"), S_VM (vmstat averages), and notes them for LABEL (a RUNNER, see lib.sh)
# shellcheck disable=SC2317  # called indirectly, as the RUNNER of rebuild_runs and scrub_runs
sampled() {
  local label=$1 f=${1// /} t0 t1 vpid; shift
  vmstat -n 1 >"$LOGS/vmstat.$f" 2>/dev/null &
  vpid=$!
  PID_TAG[$vpid]=vmstat
  t0=$(now_ns)
  try /usr/bin/time -o "$LOGS/time.$f" -f '%U %S %M' "$@"
  t1=$(now_ns)
  kill "$vpid" 2>/dev/null || true
  wait "$vpid" 2>/dev/null || true
  unset "PID_TAG[$vpid]"
  S_NS=$((t1 - t0))
  S_CPU=$(awk 'NF == 3 && $1 ~ /^[0-9.]+$/ { printf "%.1f s user + %.1f s sys, max RSS %.0f MiB", $1, $2, $3 / 1024 }' \
    "$LOGS/time.$f" 2>/dev/null)
  # vmstat: r b swpd free buff cache si so bi bo in cs us sy id wa st; line 3 is the average since boot
  S_VM=$(awk 'NR > 3 && $1 ~ /^[0-9]+$/ { n++; bi += $9; bo += $10; us += $13; sy += $14; id += $15; wa += $16 }
    END { if (n) printf "%d samples: disk read %.0f MiB/s, write %.0f MiB/s; CPU us %.0f%% sy %.0f%% idle %.0f%% iowait %.0f%%",
      n, bi / n / 1024, bo / n / 1024, us / n, sy / n, id / n, wa / n }' "$LOGS/vmstat.$f")
  NOTES+=("$label: $(secs "$S_NS") s; $S_CPU; vmstat: $S_VM")
}

bench_build_tool readdata  # the baseline (readdata.c)

# read_baselines KEY FILE...: read_baseline KEY over FILE... one after the other (BASE_REPS runs) into R[KEY,base];
# then as many runs with one readdata per FILE, all at once, into R[KEY,par]
read_baselines() {
  local key=$1 t0 t1 pvals=() psecs=() i; shift
  read_baseline "$key" "$BASE_REPS" "$@"
  for ((i = 1; i <= BASE_REPS; i++)); do
    drop_caches
    t0=$(now_ns)
    run baseline bash -c 'rd=$1 pids=() rc=0; shift; for f; do "$rd" "$f" >/dev/null & pids+=($!); done
      for p in "${pids[@]}"; do wait "$p" || rc=1; done; exit $rc' \
      par "$BIN/readdata" "$@"
    t1=$(now_ns)
    pvals+=("$(mib_rate "${R[$key,bytes]}" $((t1 - t0)))") psecs+=("$(secs $((t1 - t0)))")
    log "baseline $key $i, in parallel: ${psecs[-1]} s, ${pvals[-1]} MiB/s"
  done
  R[$key,par]=$(median "${pvals[@]}")
  NOTES+=("baseline $key, parallel: one readdata per image, all $# at once, cold; MiB/s per run: ${pvals[*]} (s: ${psecs[*]})")
}

# ---------------------------------------------------------------- phase 1: fill
fill_phase() {
  local i f off t0 t1 t2 tf0 tf1 bc nfiles_ok=0 st
  log "== fill: $NDISKS disks of $(human_mib "$IMG_MIB") in $ARCH ($DISK_FSNAME), $NFILES x $(human_mib "$SRC_MIB") into a raid=$RAID directory"
  cairn_mkfs "$ARCH" --disks "$NDISKS" --disk-size "${IMG_MIB}M" --cache-size "${CACHE_MIB}M"
  cairn_mount_existing "$ARCH" "$MNT" -o "$MOUNT_OPTS"
  run fill mkdir "$MNT/data"
  run fill setfattr -n user.cairn.raid -v "$RAID" "$MNT/data"
  tf0=$(now_ns)
  for ((i = 0; i < NFILES; i++)); do
    f=$MNT/data/file-$(printf %03d "$i").bin
    off=$(rot_off "$i")
    run fill bash -c "$ROTATE | openssl dgst -sha256 -r" rotate "$T/src.bin" "$off"
    SHA[i]=$(cut -d' ' -f1 "$LOGS/last.out")
    t0=$(now_ns)
    run fill bash -c "$ROTATE"' | dd of="$3" bs=1M iflag=fullblock conv=fsync status=none' rotate "$T/src.bin" "$off" "$f"
    t1=$(now_ns)
    run fill "$CAIRN" persist "$ARCH"  # keeps the staging cache from growing: at most one unpersisted file
    t2=$(now_ns)
    log "fill: $((i + 1))/$NFILES: write $(rate "$SRC_MIB" $((t1 - t0))) MiB/s, persist $(secs $((t2 - t1))) s; $(df -h --output=avail "$DISK_DIR" | tail -n 1 | tr -d ' ') free"
  done
  tf1=$(now_ns)
  R[fill]=$(rate "$DATA_MIB" $((tf1 - tf0)))
  NOTES+=("fill (untimed phase): $(human_mib "$DATA_MIB") written and persisted in $(secs $((tf1 - tf0))) s, ${R[fill]} MiB/s of file data ($(awk -v r="${R[fill]}" -v k=$RS_K -v m=$RS_M 'BEGIN { printf "%.0f", r * (k + m) / k }') MiB/s of chunks)")
  for ((i = 0; i < NFILES; i++)); do
    f=$MNT/data/file-$(printf %03d "$i").bin
    try getfattr --only-values -n user.cairn.state "$f"
    st=$(cat "$LOGS/last.out")
    [[ $RC == 0 && $st == persisted ]] && nfiles_ok=$((nfiles_ok + 1))
  done
  check "fill: all $NFILES files are persisted" $((nfiles_ok == NFILES)) "$nfiles_ok of $NFILES say persisted"
  log "fill: cairn umount"
  cairn_unmount "$MNT" fill

  status_json "$ARCH" "$LOGS/healthy.json"
  record_disk_usage "$LOGS/healthy.json" "$FAIL_DISK"
  R[chunks_all]=$(jget "$LOGS/healthy.json" "' '.join(str(d['extents']) for d in s['disks'])")
  bc=$(jget "$LOGS/healthy.json" "s['bytes_persisted']")
  check "fill: cairn status counts $(human_mib "$DATA_MIB") of file data persisted" $((bc == DATA_MIB * MiB)) "bytes_persisted is $bc"
  check "fill: disk $FAIL_DISK holds one chunk of every segment ($NSEG)" $((R[chunks0] == NSEG)) \
    "it holds ${R[chunks0]} (chunks per disk: ${R[chunks_all]})"
  check "fill: disk $FAIL_DISK holds about $(human_mib "$DISK_MIB") of chunks" \
    "$(awk -v u="${R[used0]}" -v d=$((DISK_MIB * MiB)) 'BEGIN { print (u >= d && u <= d * 1.02) ? 1 : 0 }')" \
    "it uses ${R[used0]} bytes"
  NOTES+=("after the fill: disk $FAIL_DISK holds ${R[chunks0]} chunks, $(mib_of "${R[used0]}") MiB; all $NDISKS disks $(mib_of "${R[used_all]}") MiB (chunks per disk: ${R[chunks_all]})")
  mapfile -t IMGS < <(image_paths "$ARCH" "$LOGS/healthy.json" $(seq 0 $((NDISKS - 1))))
  NOTES+=("disk images: $(du -ch "${IMGS[@]}" | tail -n 1 | cut -f1) allocated on $DISK_DIR for $(stat -c %s "${IMGS[@]}" | awk '{ n += $1 } END { printf "%.1f GiB", n / 2^30 }') apparent")
}

# ---------------------------------------------------------------- phase 2: baseline
baseline_phase() {
  log "== baseline: readdata of the $((NDISKS - 1)) surviving images ($BASE_REPS times, cold)"
  read_baselines rebuild "${IMGS[@]:1}"
  cat_baseline_note rebuild "${IMGS[@]:1}"
}

# ---------------------------------------------------------------- phase 3: rebuild
rebuild_phase() {
  log "== rebuild 1: cairn disk fail $ARCH $FAIL_DISK"
  run rebuild "$CAIRN" disk fail "$ARCH" "$FAIL_DISK"
  rebuild_runs "$ARCH" "$reps" "$FAIL_DISK" "${IMGS[$FAIL_DISK]}" "$NEWDIR/disk-$FAIL_DISK" sampled
  IMGS[FAIL_DISK]=$RB_NEW
}

# ---------------------------------------------------------------- phase 4: fsck and scrub
scrub_phase() {
  fsck_after_rebuild "$ARCH"
  scrub_runs "$ARCH" "$reps" sampled
  log "== baseline: readdata of all $NDISKS images ($BASE_REPS times, cold)"
  read_baselines scrub "${IMGS[@]}"
}

# ---------------------------------------------------------------- phase 5: read back
readback_phase() {
  local i f got bad=0 t0 t1 first=""
  log "== read back: mount, cairn evict, drop_caches, sha256 of every file"
  cairn_mount_existing "$ARCH" "$MNT" -o "$MOUNT_OPTS"
  evict_cold "$ARCH" "read back"
  t0=$(now_ns)
  for ((i = 0; i < NFILES; i++)); do
    f=$MNT/data/file-$(printf %03d "$i").bin
    run readback openssl dgst -sha256 -r "$f"
    got=$(cut -d' ' -f1 "$LOGS/last.out")
    if [[ $got != "${SHA[$i]}" ]]; then bad=$((bad + 1)); [[ -n $first ]] || first="$f: got $got, expected ${SHA[$i]}"; fi
  done
  t1=$(now_ns)
  check "read back: the sha256 of all $NFILES files read from the disks matches their sources" $((bad == 0)) \
    "$bad wrong, the first: $first"
  R[readback]=$(rate "$DATA_MIB" $((t1 - t0)))
  NOTES+=("read back through the mount after the rebuild (cold, sequential, one file at a time, sha256 on the way): $(human_mib "$DATA_MIB") in $(secs $((t1 - t0))) s, ${R[readback]} MiB/s")
  log "read back: ${R[readback]} MiB/s; cairn umount"
  cairn_unmount "$MNT" "read back"
}

# ---------------------------------------------------------------- main
START_NS=$(now_ns)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
declare -a SHA=() IMGS=()
log "cairn rebuild benchmark ($( ((quick)) && echo quick || echo full), $(human_mib "$DISK_MIB") of chunks per disk) in $TMP"
log "generating a $(human_mib "$SRC_MIB") random source file on tmpfs"
run setup dd if=/dev/urandom of="$T/src.bin" bs=1M count="$SRC_MIB" iflag=fullblock status=none
fill_phase
baseline_phase
rebuild_phase
scrub_phase
readback_phase
CUR_ARCH=""
rm -rf "$ARCH" "$NEWDIR"
TOTAL_S=$(secs $(($(now_ns) - START_NS)))

# ---------------------------------------------------------------- report
dev=$(findmnt -n -o SOURCE -T "$DISK_DIR" 2>/dev/null || echo "?")
devinfo=$dev
if [[ -b $dev ]]; then
  pk=$(lsblk -dno PKNAME "$dev" 2>/dev/null || true); [[ -n $pk ]] || pk=$(basename "$dev")
  model=$(xargs 2>/dev/null <"/sys/block/$pk/device/model" || true)
  [[ -r /sys/block/$pk/queue/rotational ]] && devinfo+=" (rotational=$(cat "/sys/block/$pk/queue/rotational")${model:+, $model})"
fi
echo
echo "cairn rebuild benchmark — $( ((quick)) && echo "quick" || echo "full") run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $((mem_total_kib / 1024 / 1024)) GiB RAM, kernel $(uname -r)"
if git -C "$(dirname "$CAIRN")" rev-parse --show-toplevel >/dev/null 2>&1; then bin_rev=$(cairn_revision); else
  bin_rev="not built in a git tree; this tree is at $(cairn_revision)"; fi
echo "cairn: $CAIRN ($bin_rev)"
echo "disk: $DISK_DIR on $DISK_FSNAME, $devinfo; page cache dropped before every timed step"
echo "archive: $NDISKS disks x $(human_mib "$IMG_MIB") (sparse images), $RAID, $(human_mib "$DATA_MIB") in $NFILES files, segments of $SEG_MIB MiB, staging cache $CACHE_MIB MiB, -o $MOUNT_OPTS"
echo "reps: $reps (median; baselines $BASE_REPS); whole run $TOTAL_S s"
echo "load average at start: $LOAD_START, at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine skews the numbers)"
echo
srow_header "test (MiB/s)" 44 38
srow "rebuild of disk $FAIL_DISK (bytes it must read)" "${R[rebuild,base]:-}" "${R[rebuild,cairn]:-}" "$REBUILD_TARGET" "readdata $((NDISKS - 1)) survivors"
srow "  same, against parallel reads" "${R[rebuild,par]:-}" "${R[rebuild,cairn]:-}" "" "readdata, 1 per image at once"
srow "  same, bytes written to the new disk" "${R[rebuild,base]:-}" "${R[rebuilt,cairn]:-}" "" "readdata $((NDISKS - 1)) survivors"
srow "scrub, all chunks (${R[scrub_s]:-?} s)" "${R[scrub,base]:-}" "${R[scrub,cairn]:-}" "" "readdata all $NDISKS images"
srow "  same, against parallel reads" "${R[scrub,par]:-}" "${R[scrub,cairn]:-}" "" "readdata, 1 per image at once"
echo "(the target's baseline reads the survivors one after the other, as cat does; cairn rebuild reads them all at once, so
 a device that serves parallel reads faster lets it pass 1x; the parallel rows show that ceiling. On a VM the host's cache
 may serve some of the reads even after drop_caches)"
echo "(disk $FAIL_DISK held ${R[chunks0]:-?} chunks, $(mib_of "${R[used0]:-0}") MiB; the rebuild must read $(mib_of "${R[rebuild_read]:-0}") MiB of the survivors' $(mib_of "${R[rebuild,bytes]:-0}") MiB; median rebuild $(secs "${R[rebuild_ns]:-0}") s)"
echo
finish_report "correctness checks: all $NCHECKS passed"
