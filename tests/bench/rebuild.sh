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
FAILURES=()
NCHECKS=0

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
check() {  # check WHAT OK(0|1) DETAIL: logs the result, records a failure
  NCHECKS=$((NCHECKS + 1))
  if (($2)); then log "ok: $1"; else log "FAILED: $1: $3"; FAILURES+=("$1: $3"); fi
}
status_json() {  # status_json ARCH OUT: cairn status --json into OUT
  run status "$CAIRN" status "$1" --json
  cp "$LOGS/last.out" "$2"
}
jget() {  # jget JSONFILE PYEXPR (s = the parsed object)
  python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
mib_of() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
mib_rate() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.1f", b / 1048576 / (ns / 1e9) }'; }  # bytes, ns -> MiB/s
image_paths() {  # image_paths ARCH JSON DISK...: absolute paths of those disks' images
  local d p
  for d in "${@:3}"; do
    p=$(jget "$2" "s['disks'][$d]['path']")
    [[ $p == /* ]] || p=$1/$p
    echo "$p"
  done
}
# rotated I: file I's bytes on stdout: the source rotated left by I x (1 MiB + 4 KiB), so that no two files (and no
# two segments) are equal and a chunk rebuilt into the wrong extent cannot pass for the right one
rot_off() { echo $((($1 * 1052672) % (SRC_MIB * MiB))); }
ROTATE='set -o pipefail; { tail -c +$(($2 + 1)) "$1"; head -c "$2" "$1"; }'

# sampled LABEL CMD...: runs CMD (try: no abort) under /usr/bin/time with vmstat sampling every second; sets S_NS
# (wall), S_CPU ("user s / sys s / max RSS"), S_VM (vmstat averages)
sampled() {
  local label=$1 t0 t1 vpid; shift
  vmstat -n 1 >"$LOGS/vmstat.$label" 2>/dev/null &
  vpid=$!
  PID_TAG[$vpid]=vmstat
  t0=$(now_ns)
  try /usr/bin/time -o "$LOGS/time.$label" -f '%U %S %M' "$@"
  t1=$(now_ns)
  kill "$vpid" 2>/dev/null || true
  wait "$vpid" 2>/dev/null || true
  unset "PID_TAG[$vpid]"
  S_NS=$((t1 - t0))
  S_CPU=$(awk 'NF == 3 && $1 ~ /^[0-9.]+$/ { printf "%.1f s user + %.1f s sys, max RSS %.0f MiB", $1, $2, $3 / 1024 }' \
    "$LOGS/time.$label" 2>/dev/null)
  # vmstat: r b swpd free buff cache si so bi bo in cs us sy id wa st; line 3 is the average since boot
  S_VM=$(awk 'NR > 3 && $1 ~ /^[0-9]+$/ { n++; bi += $9; bo += $10; us += $13; sy += $14; id += $15; wa += $16 }
    END { if (n) printf "%d samples: disk read %.0f MiB/s, write %.0f MiB/s; CPU us %.0f%% sy %.0f%% idle %.0f%% iowait %.0f%%",
      n, bi / n / 1024, bo / n / 1024, us / n, sy / n, id / n, wa / n }' "$LOGS/vmstat.$label")
}

# readdata: reads what a disk image holds (not the holes of the sparse file), as cat would; the baseline
cat >"$BIN/readdata.c" <<'EOF'
/* readdata FILE...: reads the data regions of each file (SEEK_DATA/SEEK_HOLE), 1 MiB per read; prints the bytes read.
 * Reading a hole costs no disk I/O, so cat of a sparse image would flatter the baseline. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
static char buf[1 << 20];
int main(int argc, char **argv) {
  long long total = 0;
  for (int i = 1; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    if (fd < 0) { perror(argv[i]); return 1; }
    off_t end = lseek(fd, 0, SEEK_END), pos = 0;
    while (pos < end) {
      off_t data = lseek(fd, pos, SEEK_DATA);
      if (data < 0 && errno == ENXIO) break;
      off_t hole = data < 0 ? -1 : lseek(fd, data, SEEK_HOLE);
      if (data < 0 || hole < 0) { perror(argv[i]); return 1; }
      for (off_t o = data; o < hole;) {
        ssize_t r = pread(fd, buf, hole - o < (off_t)sizeof buf ? (size_t)(hole - o) : sizeof buf, o);
        if (r <= 0) { fprintf(stderr, "%s: read failed at %lld\n", argv[i], (long long)o); return 1; }
        o += r;
        total += r;
      }
      pos = hole;
    }
    close(fd);
  }
  printf("%lld\n", total);
  return 0;
}
EOF
cc -O2 -Wall -o "$BIN/readdata" "$BIN/readdata.c" || die "compiling readdata failed"

# read_baseline KEY FILE...: median MiB/s of BASE_REPS readdata runs over FILE... one after the other (each after
# drop_caches) into R[KEY,base]; then as many runs with one readdata per FILE, all at once, into R[KEY,par]
read_baseline() {
  local key=$1 t0 t1 vals=() secs_=() pvals=() psecs=() i; shift
  for ((i = 1; i <= BASE_REPS; i++)); do
    drop_caches
    t0=$(now_ns)
    run baseline "$BIN/readdata" "$@"
    t1=$(now_ns)
    vals+=("$(mib_rate "$(cat "$LOGS/last.out")" $((t1 - t0)))") secs_+=("$(secs $((t1 - t0)))")
    log "baseline $key $i: $(mib_of "$(cat "$LOGS/last.out")") MiB in ${secs_[-1]} s, ${vals[-1]} MiB/s"
  done
  R[$key,base]=$(median "${vals[@]}")
  R[$key,bytes]=$(cat "$LOGS/last.out")
  NOTES+=("baseline $key: readdata of $# image(s) one after the other, $(mib_of "${R[$key,bytes]}") MiB of data, cold; MiB/s per run: ${vals[*]} (s: ${secs_[*]})")
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
  local i f off t0 t1 t2 tf0 tf1 want got bc nfiles_ok=0 st
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
    SHA[$i]=$(cut -d' ' -f1 "$LOGS/last.out")
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
  run fill "$CAIRN" umount "$MNT"
  pid_alive "$DPID" && { WARNINGS+=("fill: the daemon (pid $DPID) was still running after 'cairn umount' returned"); stop_pid "$DPID"; }
  CUR_PID=""

  status_json "$ARCH" "$LOGS/healthy.json"
  R[used0]=$(jget "$LOGS/healthy.json" "s['disks'][$FAIL_DISK]['used']")
  R[chunks0]=$(jget "$LOGS/healthy.json" "s['disks'][$FAIL_DISK]['extents']")
  R[used_all]=$(jget "$LOGS/healthy.json" "sum(d['used'] for d in s['disks'])")
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
  local t0 t1 app
  log "== baseline: readdata of the $((NDISKS - 1)) surviving images ($BASE_REPS times, cold)"
  read_baseline rebuild "${IMGS[@]:1}"
  app=$(stat -c %s "${IMGS[@]:1}" | awk '{ n += $1 } END { print n }')
  drop_caches
  t0=$(now_ns)
  run baseline bash -c 'cat "$@" >/dev/null' cat "${IMGS[@]:1}"
  t1=$(now_ns)
  R[cat,base]=$(mib_rate "$app" $((t1 - t0)))
  NOTES+=("baseline rebuild: plain 'cat' of the $((NDISKS - 1)) whole survivor images (sparse, $(mib_of "$app") MiB apparent, holes read as zeros without disk I/O) ran at ${R[cat,base]} MiB/s in $(secs $((t1 - t0))) s; the baseline reads the data regions only")
}

# ---------------------------------------------------------------- phase 3: rebuild
rebuild_phase() {
  local i old new out lost bad rep used0 line nbytes ns
  RB_NS=()
  for ((i = 1; i <= reps; i++)); do
    if ((i == 1)); then
      old=${IMGS[$FAIL_DISK]}
      log "== rebuild $i: cairn disk fail $ARCH $FAIL_DISK"
      run rebuild "$CAIRN" disk fail "$ARCH" "$FAIL_DISK"
    else
      old=$new
      log "== rebuild $i: replacing the rebuilt disk $FAIL_DISK with yet another empty image"
    fi
    new=$NEWDIR/disk-$FAIL_DISK-$i.img
    run rebuild "$CAIRN" disk replace "$ARCH" "$FAIL_DISK" "$new"
    rm -f "$old"  # no longer a disk of the archive
    drop_caches
    log "rebuild $i: cairn rebuild (reads $(mib_of $((R[used0] * RS_K))) MiB, writes $(mib_of "${R[used0]}") MiB)"
    sampled "rebuild$i" "$CAIRN" rebuild "$ARCH"
    ((RC == 0)) || fail_step rebuild "$RC" "$CAIRN" rebuild "$ARCH"
    RB_NS+=("$S_NS")
    NOTES+=("rebuild $i: $(secs "$S_NS") s; $S_CPU; vmstat: $S_VM")
    out=$(grep '^rebuild:' "$LOGS/last.out" | tail -n 1 || true)
    [[ -s $LOGS/last.err ]] && NOTES+=("rebuild $i: 'cairn rebuild' printed on stderr (exit 0): $(head -c 300 "$LOGS/last.err" | tr '\n' '|')")
    RB_OUT=$out
    lost=$(sed -nE 's/.* ([0-9]+) extent\(s\) lost.*/\1/p' <<<"$out")
    bad=$(sed -nE 's/.* ([0-9]+) bad chunk\(s\).*/\1/p' <<<"$out")
    rep=$(sed -nE 's/.* ([0-9]+) repaired.*/\1/p' <<<"$out")
    check "rebuild $i: every chunk of disk $FAIL_DISK (${R[chunks0]}) recreated, no extent lost" \
      "$([[ $lost == 0 && $bad == "${R[chunks0]}" && $rep == "${R[chunks0]}" ]] && echo 1 || echo 0)" "'$out'"
    status_json "$ARCH" "$LOGS/rebuilt.json"
    used0=$(jget "$LOGS/rebuilt.json" "s['disks'][$FAIL_DISK]['used']")
    check "rebuild $i: disk $FAIL_DISK holds as many chunk bytes as before it failed" $((used0 == R[used0])) \
      "${used0} bytes, ${R[used0]} before"
    run rebuild "$CAIRN" disk list "$ARCH"
    line=$(awk -v d="$FAIL_DISK" '$1 == d' "$LOGS/last.out")
    check "rebuild $i: cairn disk list shows disk $FAIL_DISK on the new image, ok" \
      "$([[ $line == *"$new"* && $line == *" ok" ]] && echo 1 || echo 0)" "'$line'"
    log "rebuild $i: $(mib_of "${R[used0]}") MiB rebuilt from $(mib_of $((R[used0] * RS_K))) MiB in $(secs "$S_NS") s: $(mib_rate $((R[used0] * RS_K)) "$S_NS") MiB/s read"
  done
  IMGS[$FAIL_DISK]=$new
  NOTES+=("rebuild: cairn printed '$RB_OUT'")
  ((reps == 1)) || NOTES+=("rebuild: the first rebuild follows 'cairn disk fail'; the others replace the rebuilt disk $FAIL_DISK with yet another empty image. Seconds per run: $(for ns in "${RB_NS[@]}"; do printf '%s ' "$(secs "$ns")"; done)")
  R[rebuild_ns]=$(median "${RB_NS[@]}")
  R[rebuild_read]=$((R[used0] * RS_K))  # the k surviving chunks of every extent with a chunk on the failed disk
  R[rebuild,cairn]=$(mib_rate "${R[rebuild_read]}" "${R[rebuild_ns]}")
  R[rebuilt,cairn]=$(mib_rate "${R[used0]}" "${R[rebuild_ns]}")
}

# ---------------------------------------------------------------- phase 4: fsck and scrub
scrub_phase() {
  local t0 t1 i out vals=() ns
  log "== cairn fsck (reads every extent)"
  drop_caches
  t0=$(now_ns)
  try "$CAIRN" fsck "$ARCH"
  t1=$(now_ns)
  check "after the rebuild cairn fsck is clean" "$([[ $RC == 0 && $(cat "$LOGS/last.out") == *": clean"* ]] && echo 1 || echo 0)" \
    "exit $RC: $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 500 | tr '\n' '|')"
  NOTES+=("fsck after the rebuild ($(secs $((t1 - t0))) s, $(mib_rate "${R[used_all]}" $((t1 - t0))) MiB/s of chunks, cold): $(tail -n 1 "$LOGS/last.out")")
  for ((i = 1; i <= reps; i++)); do
    drop_caches
    log "scrub $i: cairn scrub ($(mib_of "${R[used_all]}") MiB of chunks)"
    sampled "scrub$i" "$CAIRN" scrub "$ARCH"
    out=$(grep '^scrub:' "$LOGS/last.out" | tail -n 1 || true)
    check "scrub $i after the rebuild is clean" \
      "$([[ $RC == 0 && $out == *" 0 bad chunk(s), 0 repaired, 0 extent(s) lost" ]] && echo 1 || echo 0)" \
      "exit $RC: $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 500 | tr '\n' '|')"
    vals+=("$S_NS")
    NOTES+=("scrub $i: $(secs "$S_NS") s; $S_CPU; vmstat: $S_VM")
    log "scrub $i: $(secs "$S_NS") s, $(mib_rate "${R[used_all]}" "$S_NS") MiB/s"
  done
  NOTES+=("scrub: cairn printed '$out'")
  [[ -s $LOGS/last.err ]] && NOTES+=("scrub: 'cairn scrub' printed on stderr: $(head -c 300 "$LOGS/last.err" | tr '\n' '|')")
  ns=$(median "${vals[@]}")
  R[scrub,cairn]=$(mib_rate "${R[used_all]}" "$ns")
  R[scrub_s]=$(secs "$ns")
  log "== baseline: readdata of all $NDISKS images ($BASE_REPS times, cold)"
  read_baseline scrub "${IMGS[@]}"
}

# ---------------------------------------------------------------- phase 5: read back
readback_phase() {
  local i f got bad=0 t0 t1 bc first=""
  log "== read back: mount, cairn evict, drop_caches, sha256 of every file"
  cairn_mount_existing "$ARCH" "$MNT" -o "$MOUNT_OPTS"
  run readback "$CAIRN" evict "$ARCH"
  status_json "$ARCH" "$LOGS/status.json"
  bc=$(jget "$LOGS/status.json" 's["bytes_cached"]')
  check "read back: after cairn evict the staging cache is empty (reads come from the disks)" $((bc == 0)) "bytes_cached is $bc"
  drop_caches
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
  run readback "$CAIRN" umount "$MNT"
  pid_alive "$DPID" && { WARNINGS+=("read back: the daemon (pid $DPID) was still running after 'cairn umount' returned"); stop_pid "$DPID"; }
  CUR_PID=""
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
  model=$(cat "/sys/block/$pk/device/model" 2>/dev/null | xargs || true)
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
printf '%-44s %10s %10s %8s  %-38s %s\n' "test (MiB/s)" baseline cairn ratio target result
printf '%s\n' "$(printf '%.0s-' $(seq 1 126))"
srow() {  # srow LABEL BASE VALUE TARGET(ratio or "") BASELABEL
  local r t res=""
  r=$(ratio "$3" "$2")
  if [[ -n $4 ]]; then t=">= ${4}x $5"; res=$(verdict "ge:$4" "$r"); else t="(info) $5"; fi
  printf '%-44s %10s %10s %8s  %-38s %s\n' "$1" "$(fmt "$2")" "$(fmt "$3")" "$r" "$t" "$res"
}
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
