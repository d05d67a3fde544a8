#!/bin/bash
# cairn benchmark: cairn against native tmpfs, libfuse's passthrough_ll (plain, and with the writeback cache and
# default_permissions that cairn uses) and mergerfs, in one run.
#
# Usage: tests/bench/run.sh [--quick] [--rss | --no-rss] [--reps N]
#   (default)  2 GiB sequential write/read, tar -x of 20,000 small files, 10,000 create/stat/unlink,
#              daemon peak RSS, then the RSS phase: 10 GiB file + 100,000 small files copied into cairn
#              (peak RSS after the copy, and again after evict + a cold read-back of the 10 GiB file).
#   --quick    smoke run: 256 MiB, 2,000 files, 2,000 ops, RSS phase with 512 MiB + 5,000 files.
#   --rss      run only the RSS phase (10 GiB + 100,000 files, or the --quick sizes with --quick).
#   --no-rss   skip the RSS phase.
#   --reps N   repeat the timed write/read/tar tests N times and report the median (default 1).
# Environment: CAIRN_BIN (default build/cairn), BENCH_TMPDIR (parent of the temp dir, default $TMPDIR or /tmp),
#   BENCH_STEP_TIMEOUT (seconds per step, default 1800).
# Needs root (drop_caches, tmpfs mounts) and /dev/fuse. Installs missing Debian packages with apt-get.
# Prints PASS/MISS beside each target; exits 0 unless the benchmark itself (or a cairn command) fails.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
CAIRN=${CAIRN_BIN:-$repo/build/cairn}
STEP_TIMEOUT=${BENCH_STEP_TIMEOUT:-1800}
# shellcheck source=tests/bench/lib.sh
source "$repo/tests/bench/lib.sh"

quick=0 mode=all reps=1
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --rss) mode=rss ;;
    --no-rss) mode=norss ;;
    --reps) reps=${2:?--reps needs a number}; shift ;;
    --reps=*) reps=${1#--reps=} ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--quick] [--rss | --no-rss] [--reps N]" >&2; exit 2 ;;
  esac
  shift
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "--reps needs a positive integer" >&2; exit 2; }

if ((quick)); then
  SEQ_MIB=256 NFILES=2000 NOPS=2000 RSS_BIG_MIB=512 RSS_FILES=5000
else
  SEQ_MIB=2048 NFILES=20000 NOPS=10000 RSS_BIG_MIB=10240 RSS_FILES=100000
fi
NDIRS=100
TAR_CHUNK=10000  # files per tar process (see the note printed when NFILES is larger)
RSS_TARGET_MIB=300
SEQ_BYTES=$((SEQ_MIB * MiB))
NCHUNKS=$(((NFILES + TAR_CHUNK - 1) / TAR_CHUNK))
# the RSS phase streams the random source file several times: round its size up to a multiple
RSS_COPIES=$(((RSS_BIG_MIB + SEQ_MIB - 1) / SEQ_MIB))
RSS_BIG_MIB=$((RSS_COPIES * SEQ_MIB))

# ---------------------------------------------------------------- prerequisites
bench_check_prereqs

need_pkgs=()
command -v mergerfs >/dev/null || need_pkgs+=(mergerfs)
command -v fusermount3 >/dev/null || need_pkgs+=(fuse3)
command -v pkg-config >/dev/null || need_pkgs+=(pkg-config)
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v python3 >/dev/null || need_pkgs+=(python3)
command -v fuser >/dev/null || need_pkgs+=(psmisc)
[[ -f /usr/share/doc/libfuse3-dev/examples/passthrough_ll.c ]] && pkg-config --exists fuse3 2>/dev/null ||
  need_pkgs+=(libfuse3-dev)
bench_apt_install "${need_pkgs[@]}"
PTLL_SRC=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c
[[ -f $PTLL_SRC ]] || die "$PTLL_SRC not found (libfuse3-dev)"

# ---------------------------------------------------------------- temp dir and cleanup
bench_make_tmp cairn-bench

# ---------------------------------------------------------------- helpers built in the temp dir
log "building passthrough_ll and the ops helper in $BIN"
# shellcheck disable=SC2046  # pkg-config output must be split into words
cc -O2 -w -I"$(dirname "$PTLL_SRC")" "$PTLL_SRC" -o "$BIN/passthrough_ll" $(pkg-config --cflags --libs fuse3) ||
  die "compiling $PTLL_SRC failed"
bench_build_tool metabench
cat >"$BIN/mktar.py" <<'EOF'
# mktar.py OUT FIRST COUNT NDIRS MAXSIZE SEED: tarball of files FIRST..FIRST+COUNT-1 (random content, 0..MAXSIZE
# bytes) spread over NDIRS dirs
import io, os, random, sys, tarfile, time
out, first, count, ndirs, maxsize, seed = sys.argv[1], *map(int, sys.argv[2:7])
rng = random.Random(seed * 1000003 + first)
pool = os.urandom(8 << 20)
now = int(time.time())
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tar:
    for d in range(ndirs):
        ti = tarfile.TarInfo(f"d{d:03d}"); ti.type = tarfile.DIRTYPE; ti.mode = 0o755; ti.mtime = now
        tar.addfile(ti)
    for i in range(first, first + count):
        size = rng.randint(0, maxsize)
        off = rng.randrange(0, len(pool) - maxsize)
        ti = tarfile.TarInfo(f"d{i % ndirs:03d}/f{i:06d}"); ti.size = size; ti.mode = 0o644; ti.mtime = now
        tar.addfile(ti, io.BytesIO(pool[off:off + size]))
EOF

# ---------------------------------------------------------------- systems
# Each setup_* sets DIR (where the tests run) and DPID (the FUSE daemon pid, empty for tmpfs).
setup_tmpfs() { DIR=$T/native; mkdir -p "$DIR"; DPID=""; }
teardown_tmpfs() { rm -rf "$DIR"; }

# start_fuse NAME MOUNTPOINT CMD...: runs a FUSE daemon in the foreground, in the background.
start_fuse() {
  local name=$1 m=$2; shift 2
  "$@" >"$LOGS/$name.log" 2>&1 &
  DPID=$!; PID_TAG[$DPID]=$m; FUSE_MOUNTS+=("$m")
  wait_mounted "$m" "$DPID" "$LOGS/$name.log"
  DIR=$m
}

# start_ptll NAME [OPTION...]: passthrough_ll over its own tmpfs dir, mounted on $MNTS/NAME
start_ptll() {
  local name=$1 src=$T/$1-src m=$MNTS/$1; shift
  mkdir -p "$src" "$m"
  # passthrough_ll keeps an O_PATH fd open for every inode the kernel knows: give it room for the small-files tests
  start_fuse "$name" "$m" bash -c 'ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$0" "$@"' \
    "$BIN/passthrough_ll" -f -o "source=$src" "$@" "$m"
}
stop_ptll() {  # stop_ptll NAME
  unmount_fuse "$MNTS/$1"; stop_pid "$DPID"; rm -rf "$T/$1-src"
}
setup_ptll() { start_ptll ptll; }
teardown_ptll() { stop_ptll ptll; }
# The same passthrough with the kernel features cairn asks for: the writeback cache (the kernel then sends the
# times it keeps as extra setattrs) and default_permissions (a directory changed is asked for its attributes again
# before the next permission check). What these cost in round trips is the kernel's, not the daemon's.
setup_ptllwb() { start_ptll ptllwb -o writeback -o default_permissions; }
teardown_ptllwb() { stop_ptll ptllwb; }

setup_mergerfs() {
  local src=$T/mergerfs-branch m=$MNTS/mergerfs
  mkdir -p "$src" "$m"
  start_fuse mergerfs "$m" mergerfs -f -o cache.files=partial,dropcacheonclose=false,category.create=mfs "$src" "$m"
}
teardown_mergerfs() {
  local m=$MNTS/mergerfs
  unmount_fuse "$m"; stop_pid "$DPID"; rm -rf "$T/mergerfs-branch"
}

setup_cairn() {
  cairn_mount "$T/cairn-archive" "$MNTS/cairn" --disks 4 --disk-size 8G
}
teardown_cairn() {
  cairn_unmount_and_fsck "$T/cairn-archive" "$MNTS/cairn" cairn
  rm -rf "$T/cairn-archive"
  CUR_ARCH=""
}

# before every timed read: cairn drops its staging cache (reads must come from its disks); everyone drops the page cache
evict_ns=0
prepare_read() {
  local sys=$1 t0
  if [[ $sys == cairn ]]; then
    t0=$(now_ns)
    run cairn "$CAIRN" evict "$CUR_ARCH"
    evict_ns=$(($(now_ns) - t0))
  fi
  drop_caches
}

# ---------------------------------------------------------------- the per-system tests
RSS_TRACE=""
checkpoint() { [[ -z $DPID ]] || RSS_TRACE+=" ; $1 $(vmhwm_mib "$DPID")"; }
bench_system() {
  local sys=$1 t0 t1 i k ns vals pvals=()
  RSS_TRACE=""
  log "== $sys: setting up"
  "setup_$sys"
  log "$sys: testing in $DIR${DPID:+ (daemon pid $DPID)}"

  # sequential write, 1 MiB requests, fsync at the end
  vals=()
  for ((i = 0; i < reps; i++)); do
    rm -f "$DIR/seq.bin"; drop_caches
    t0=$(now_ns)
    run "$sys" dd if="$T/src.bin" of="$DIR/seq.bin" bs=1M count="$SEQ_MIB" conv=fsync status=none
    t1=$(now_ns)
    vals+=("$(rate "$SEQ_MIB" $((t1 - t0)))")
    # until on the disks: cairn's fsync lands the data in its staging cache, 'cairn persist' writes it out
    [[ $sys == cairn ]] && run cairn "$CAIRN" persist "$CUR_ARCH"
    pvals+=("$(rate "$SEQ_MIB" $(($(now_ns) - t0)))")
  done
  R[seqwrite,$sys]=$(median "${vals[@]}")
  R[seqpersist,$sys]=$(median "${pvals[@]}")
  checkpoint "after write"
  log "$sys: seq write ${R[seqwrite,$sys]} MiB/s"

  # sequential read, cold: cairn from its disks, everyone without page cache
  vals=()
  for ((i = 0; i < reps; i++)); do
    prepare_read "$sys"
    [[ $sys == cairn ]] && NOTES+=("cairn: 'cairn evict' after the $(human_mib "$SEQ_MIB") write (already persisted) took $(secs "$evict_ns") s")
    t0=$(now_ns)
    run "$sys" dd if="$DIR/seq.bin" of=/dev/null bs=1M status=none
    t1=$(now_ns)
    vals+=("$(rate "$SEQ_MIB" $((t1 - t0)))")
  done
  R[seqread,$sys]=$(median "${vals[@]}")
  checkpoint "after evict+read"
  log "$sys: seq read ${R[seqread,$sys]} MiB/s"
  try cmp "$T/src.bin" "$DIR/seq.bin"
  ((RC == 0)) || WARNINGS+=("$sys: DATA MISMATCH: the $(human_mib "$SEQ_MIB") file read back differs from what was written (cmp exit $RC): $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 500)")
  run "$sys" rm -f "$DIR/seq.bin"

  # tar -x of many small files
  vals=()
  for ((i = 0; i < reps; i++)); do
    rm -rf "$DIR/tarx"; mkdir "$DIR/tarx"; drop_caches
    ns=0
    for ((k = 0; k < NCHUNKS; k++)); do
      ((k == 0)) || echo 2 >/proc/sys/vm/drop_caches
      t0=$(now_ns)
      run "$sys" tar -xf "$T/small-$k.tar" -C "$DIR/tarx"
      t1=$(now_ns)
      ns=$((ns + t1 - t0))
    done
    vals+=("$(rate "$NFILES" "$ns")")
  done
  R[tarx,$sys]=$(median "${vals[@]}")
  checkpoint "after tar -x"
  log "$sys: tar -x ${R[tarx,$sys]} files/s"
  prepare_read "$sys"
  [[ $sys == cairn ]] && NOTES+=("cairn: 'cairn evict' after tar -x of $(with_commas "$NFILES") files took $(secs "$evict_ns") s")
  for ((k = 0; k < NCHUNKS; k++)); do
    ((k == 0)) || echo 2 >/proc/sys/vm/drop_caches
    try tar -df "$T/small-$k.tar" -C "$DIR/tarx"
    ((RC == 0)) || break
  done
  ((RC == 0)) || WARNINGS+=("$sys: tar -d (compare, after evict + drop_caches) found differences (exit $RC): $(cat "$LOGS/last.out" "$LOGS/last.err" | head -n 5 | tr '\n' '|')")

  # create / stat / unlink of empty files in one directory
  mkdir "$DIR/ops"
  run "$sys" "$BIN/metabench" mkdirs "$DIR/ops" "$NOPS" 1 0
  drop_caches
  run "$sys" "$BIN/metabench" create "$DIR/ops" "$NOPS" 1 0; R[create,$sys]=$(cat "$LOGS/last.out")
  drop_caches
  run "$sys" "$BIN/metabench" stat "$DIR/ops" "$NOPS" 1 0; R[stat,$sys]=$(cat "$LOGS/last.out")
  drop_caches
  run "$sys" "$BIN/metabench" unlink "$DIR/ops" "$NOPS" 1 0; R[unlink,$sys]=$(cat "$LOGS/last.out")
  log "$sys: create ${R[create,$sys]} stat ${R[stat,$sys]} unlink ${R[unlink,$sys]} ops/s"
  checkpoint "after create/stat/unlink"
  [[ -n $DPID ]] && NOTES+=("$sys: daemon VmHWM (MiB) ${RSS_TRACE# ; }")

  # daemon peak RSS after the large file and the small files
  if [[ -n $DPID ]]; then
    kill -0 "$DPID" 2>/dev/null || die "$sys daemon (pid $DPID) died during the tests"
    R[rss,$sys]=$(vmhwm_mib "$DPID")
    log "$sys: daemon VmHWM ${R[rss,$sys]} MiB"
  fi

  log "$sys: tearing down"
  "teardown_$sys"
}

# ---------------------------------------------------------------- RSS phase: big file + many small files into cairn
rss_phase() {
  local big_bytes=$((RSS_BIG_MIB * MiB)) need_kib base t0 t1 i tarball=$T/rss-small.tar
  log "== RSS phase: generating a tarball of $(with_commas "$RSS_FILES") small files"
  run setup python3 "$BIN/mktar.py" "$tarball" 0 "$RSS_FILES" "$NDIRS" 8192 2
  # archive needs: the big file on its disks AND in its staging cache (cairn keeps a file being written whole in
  # the cache, whatever cache_size says, until it is persisted after close) + the small files twice + margin
  need_kib=$(((2 * big_bytes + 2 * $(stat -c %s "$tarball") + 2 * GiB) / 1024))
  if (($(mem_avail_kib) > need_kib + 3 * 1024 * 1024 && $(df -Pk "$T" | awk 'NR == 2 { print $4 }') > need_kib)); then
    base=$T
  else
    base=$TMP/scratch; mkdir -p "$base"
    (($(df -Pk "$base" | awk 'NR == 2 { print $4 }') > need_kib)) || die "not enough memory or disk space for the RSS phase"
    NOTES+=("RSS phase: not enough free memory for tmpfs, archive on the disk-backed $base")
  fi
  cairn_mount "$base/cairn-rss-archive" "$MNTS/cairn-rss" --disks 4 --disk-size 8G
  log "RSS phase: cairn daemon pid $DPID, archive in $base; copying a $(human_mib "$RSS_BIG_MIB") file"
  t0=$(now_ns)
  run cairn-rss bash -c 'set -o pipefail; for ((i = 0; i < $1; i++)); do cat "$2"; done |
    dd of="$3" bs=1M iflag=fullblock conv=fsync status=none' copy "$RSS_COPIES" "$T/src.bin" "$DIR/big.bin"
  t1=$(now_ns)
  NOTES+=("RSS phase: $(human_mib "$RSS_BIG_MIB") file written at $(rate "$RSS_BIG_MIB" $((t1 - t0))) MiB/s, daemon VmHWM then $(vmhwm_mib "$DPID") MiB")
  log "RSS phase: tar -x of $(with_commas "$RSS_FILES") files"
  mkdir "$DIR/small"
  t0=$(now_ns)
  run cairn-rss tar -xf "$tarball" -C "$DIR/small"
  t1=$(now_ns)
  NOTES+=("RSS phase: tar -x of $(with_commas "$RSS_FILES") files at $(rate "$RSS_FILES" $((t1 - t0))) files/s")
  log "RSS phase: cairn persist"
  t0=$(now_ns)
  run cairn-rss "$CAIRN" persist "$CUR_ARCH"
  t1=$(now_ns)
  NOTES+=("RSS phase: final 'cairn persist' took $(secs $((t1 - t0))) s")
  kill -0 "$DPID" 2>/dev/null || die "cairn daemon (pid $DPID) died during the RSS phase"
  R[rssbig,cairn]=$(vmhwm_mib "$DPID")
  NOTES+=("RSS phase: after the copy daemon VmRSS $(vmrss_mib "$DPID") MiB, VmHWM ${R[rssbig,cairn]} MiB")
  log "RSS phase: daemon VmHWM ${R[rssbig,cairn]} MiB after the copy; evict + cold read-back of the big file"
  t0=$(now_ns)
  run cairn-rss "$CAIRN" evict "$CUR_ARCH"
  t1=$(now_ns)
  NOTES+=("RSS phase: 'cairn evict' took $(secs $((t1 - t0))) s")
  drop_caches
  t0=$(now_ns)
  run cairn-rss dd if="$DIR/big.bin" of=/dev/null bs=1M status=none
  t1=$(now_ns)
  kill -0 "$DPID" 2>/dev/null || die "cairn daemon (pid $DPID) died during the RSS phase read-back"
  R[rssread,cairn]=$(vmhwm_mib "$DPID")
  NOTES+=("RSS phase: cold read-back of the $(human_mib "$RSS_BIG_MIB") file at $(rate "$RSS_BIG_MIB" $((t1 - t0))) MiB/s; daemon VmRSS then $(vmrss_mib "$DPID") MiB, VmHWM ${R[rssread,cairn]} MiB")
  log "RSS phase: daemon VmHWM ${R[rssread,cairn]} MiB after the read-back"
  cairn_unmount_and_fsck "$CUR_ARCH" "$MNTS/cairn-rss" cairn-rss
  rm -rf "$base/cairn-rss-archive" "$tarball"
  CUR_ARCH=""
}

# ---------------------------------------------------------------- main
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "cairn benchmark ($( ((quick)) && echo quick || echo full), mode $mode, reps $reps) in $TMP"
log "generating a $(human_mib "$SEQ_MIB") random source file on tmpfs"
run setup dd if=/dev/urandom of="$T/src.bin" bs=1M count="$SEQ_MIB" iflag=fullblock status=none

SYSTEMS=(tmpfs ptll ptllwb mergerfs cairn)
if [[ $mode != rss ]]; then
  need_kib=$(((3 * SEQ_BYTES + 2 * GiB) / 1024))
  (($(mem_avail_kib) > need_kib)) || die "not enough free memory: need about $((need_kib / 1024)) MiB"
  log "generating $NCHUNKS tarball(s) of $(with_commas "$NFILES") files in all (0-8 KiB) in $NDIRS dirs"
  for ((k = 0; k < NCHUNKS; k++)); do
    first=$((k * TAR_CHUNK)); count=$((NFILES - first < TAR_CHUNK ? NFILES - first : TAR_CHUNK))
    run setup python3 "$BIN/mktar.py" "$T/small-$k.tar" "$first" "$count" "$NDIRS" 8192 1
  done
  ((NCHUNKS == 1)) || NOTES+=("tar -x runs as $NCHUNKS tar processes of <= $(with_commas "$TAR_CHUNK") files each (the time is their sum), with an untimed dentry/inode cache drop between them on every system: passthrough_ll keeps one fd per inode the kernel knows and the open-files hard limit here is $(ulimit -Hn)")
  for s in "${SYSTEMS[@]}"; do bench_system "$s"; done
fi
[[ $mode == norss ]] || rss_phase

# ---------------------------------------------------------------- report
rows=()
row() {  # row KEY LABEL UNIT TARGETTEXT TARGETKIND TARGETON(ptll|mfs|abs|"")
  local key=$1 label=$2 unit=$3 ttext=$4 tkind=$5 ton=$6
  local c=${R[$key,cairn]:-} p=${R[$key,ptll]:-} pw=${R[$key,ptllwb]:-} m=${R[$key,mergerfs]:-}
  local rp rpw rmf res="" tv=""
  rp=$(ratio "$c" "$p"); rpw=$(ratio "$c" "$pw"); rmf=$(ratio "$c" "$m")
  case $ton in
    ptll) tv=$rp ;; mfs) tv=$rmf ;; abs) tv=$c ;;
  esac
  [[ -n $tkind ]] && res=$(verdict "$tkind" "$tv")
  rows+=("$(printf "$ROW_FORMAT" "$label" "$unit" "$(fmt "${R[$key,tmpfs]:-}")" "$(fmt "$p")" "$(fmt "$pw")" "$(fmt "$m")" \
    "$(fmt "$c")" "$rp" "$rpw" "$rmf" "$ttext" "$res")")
}
ROW_FORMAT='%-34s %-8s %10s %14s %10s %10s %10s %11s %11s %11s  %-24s %s'
if [[ $mode != rss ]]; then
  row seqwrite "seq write $(human_mib "$SEQ_MIB") (1M, fsync)" "MiB/s" ">= 0.9x passthrough_ll" ge:0.9 ptll
  row seqpersist "  same, until persisted to disks" "MiB/s" ">= 0.6x passthrough_ll" ge:0.6 ptll
  row seqread "seq read $(human_mib "$SEQ_MIB") (1M, cold)" "MiB/s" ">= 0.9x passthrough_ll" ge:0.9 ptll
  row tarx "tar -x $(with_commas "$NFILES") small files" "files/s" ">= 1.5x mergerfs" ge:1.5 mfs
  row create "create $(with_commas "$NOPS") empty files" "ops/s" ">= 0.9x passthrough_ll" ge:0.9 ptll
  row stat "stat $(with_commas "$NOPS") files (cold)" "ops/s" "" "" ""
  row unlink "unlink $(with_commas "$NOPS") files" "ops/s" ">= 0.9x passthrough_ll" ge:0.9 ptll
  row rss "daemon peak RSS (VmHWM)" "MiB" "< $RSS_TARGET_MIB MiB" lt:$RSS_TARGET_MIB abs
fi
if [[ $mode != norss ]]; then
  row rssbig "peak RSS copy $(human_mib "$RSS_BIG_MIB")+$((RSS_FILES / 1000))k files" "MiB" "< $RSS_TARGET_MIB MiB" lt:$RSS_TARGET_MIB abs
  row rssread "  + cold read-back of the big file" "MiB" "< $RSS_TARGET_MIB MiB" lt:$RSS_TARGET_MIB abs
fi

echo
echo "cairn benchmark — $( ((quick)) && echo "quick" || echo "full") run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $((mem_total_kib / 1024 / 1024)) GiB RAM, kernel $(uname -r)"
echo "cairn: $CAIRN ($(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "?")$(git -C "$repo" diff --quiet HEAD -- src 2>/dev/null || echo "+dirty")), archive: 4 disks x 8 GiB on tmpfs; reps: $reps (median)"
echo "load average at start: $LOAD_START (other work on this machine skews the numbers)"
echo "baselines: tmpfs dir; libfuse $(pkg-config --modversion fuse3) passthrough_ll over tmpfs (ptll), the same with -o writeback,default_permissions (ptll-wb: the kernel features cairn uses; info); $(mergerfs --version 2>&1 | head -n 1 | sed 's/ version: */ /') over one tmpfs branch"
echo
printf "$ROW_FORMAT\n" test unit tmpfs passthrough_ll ptll-wb mergerfs cairn cairn/ptll cairn/ptll-wb cairn/mfs target result
printf '%s\n' "$(printf '%.0s-' $(seq 1 180))"
printf '%s\n' "${rows[@]}"
echo
for n in "${NOTES[@]}"; do echo "note: $n"; done
if ((${#WARNINGS[@]})); then
  echo
  for w in "${WARNINGS[@]}"; do echo "WARNING: $w"; done
fi
exit 0
