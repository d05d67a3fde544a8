# shellcheck shell=bash
# Helpers shared by the cairn benchmarks (run.sh, policy.sh, redundancy.sh, rebuild.sh). Source it at the top level of
# the script, after setting CAIRN (the cairn binary) and STEP_TIMEOUT (seconds per step); then call bench_check_prereqs
# and bench_make_tmp.
#
# What a benchmark gets from here:
#   TMP, T (a tmpfs of our own inside TMP), BIN, LOGS, MNTS     temp dirs, removed on exit
#   cleanup on every exit path: unmounts what we mounted (newest first), stops only the pids we started
#   run SYS CMD... / try CMD...       a step with a timeout; output in $LOGS/last.{out,err}
#   timed LABEL CMD...                try, with the wall time in S_NS (a RUNNER for scrub_runs and rebuild_runs)
#   cairn_mkfs / cairn_mount_existing / cairn_mount / cairn_unmount / cairn_unmount_and_fsck
#   bench_mount_tmpfs DIR SIZE_KIB    one more tmpfs inside T (a device of its own), unmounted on exit
#   R (results), NOTES, WARNINGS; median, rate, secs, fmt, ratio, verdict for the report
#   check WHAT OK DETAIL              a correctness check: NCHECKS, FAILURES (finish_report prints them)
#   status_json, jget, image_paths, record_disk_usage, evict_cold     cairn status --json and what it says
#   timed_write_persist               dd into a mount, then cairn persist, each timed
#   mib_of, mib_rate                  bytes (and ns) -> MiB, MiB/s
#   bench_build_tool NAME             compiles tests/bench/NAME.c (readdata.c, metabench.c) into $BIN/NAME
#   read_baseline, cat_baseline_note  the readdata baseline of rebuild and scrub
#   rebuild_runs, fsck_after_rebuild, scrub_runs             timed and checked cairn rebuild / fsck / scrub
#   srow_header, srow                 a "baseline / cairn / ratio / target" report table
# Set CLEANUP_CAIRN_UMOUNT=1 to have the cleanup try 'cairn umount' on cairn mounts before fusermount3.

MiB=$((1024 * 1024)) GiB=$((1024 * 1024 * 1024))
BENCH_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # tests/bench

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { echo "bench: error: $*" >&2; exit 1; }
human_mib() { awk -v m="$1" 'BEGIN { if (m >= 1024 && m % 1024 == 0) printf "%d GiB", m / 1024; else printf "%d MiB", m }'; }
with_commas() { printf "%'d" "$1" 2>/dev/null || printf "%d" "$1"; }

# ---------------------------------------------------------------- prerequisites
bench_check_prereqs() {
  (($(id -u) == 0)) || die "must run as root (drop_caches, tmpfs mounts, FUSE mounts)"
  [[ -c /dev/fuse ]] || die "/dev/fuse is missing"
  [[ -w /proc/sys/vm/drop_caches ]] || die "/proc/sys/vm/drop_caches is not writable"
  [[ -x $CAIRN ]] || die "cairn binary not found at $CAIRN (build it with ninja -C build)"
}
bench_apt_install() {  # bench_apt_install PKG...: install missing Debian packages (none: nothing to do)
  (($#)) || return 0
  log "installing missing packages: $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
    die "apt-get install $* failed"
}

# ---------------------------------------------------------------- temp dir and cleanup
FUSE_MOUNTS=()         # FUSE mountpoints this script mounted
declare -A PID_TAG=()  # pid -> a string its cmdline must contain (guards against pid reuse)
declare -A CAIRN_ARCH_OF=()  # cairn mountpoint -> its archive
TMPFS_MOUNTED=0
EXTRA_TMPFS=()        # more tmpfs mounts inside T (bench_mount_tmpfs), unmounted before T
CHILD=""              # the step running in the background (see run)
RC=0
CLEANUP_CAIRN_UMOUNT=${CLEANUP_CAIRN_UMOUNT:-0}
TMP="" T="" BIN="" LOGS="" MNTS=""

is_mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }
pid_alive() { [[ -n ${PID_TAG[$1]:-} ]] && kill -0 "$1" 2>/dev/null &&
  tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "${PID_TAG[$1]}"; }

unmount_fuse() {  # orderly first, lazy as the last resort
  local m=$1 i
  is_mounted "$m" || return 0
  fusermount3 -u "$m" 2>/dev/null && return 0
  for i in 1 2 3 4 5; do sleep 1; fusermount3 -u "$m" 2>/dev/null && return 0; done
  fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
}

stop_pid() {  # only pids this script started, and only while they are still the same process
  local p=$1 i
  pid_alive "$p" || return 0
  for i in $(seq 1 50); do pid_alive "$p" || return 0; sleep 0.2; done
  kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 1 25); do pid_alive "$p" || return 0; sleep 0.2; done
  pid_alive "$p" && kill -KILL "$p" 2>/dev/null || true
}

cleanup() {
  local rc=$? i m p
  set +e
  trap - EXIT INT TERM
  for ((i = ${#FUSE_MOUNTS[@]} - 1; i >= 0; i--)); do
    m=${FUSE_MOUNTS[i]}
    if ((CLEANUP_CAIRN_UMOUNT)) && [[ -n ${CAIRN_ARCH_OF[$m]:-} ]] && is_mounted "$m"; then
      log "cleanup: cairn umount $m"
      timeout -k 5 120 "$CAIRN" umount "$m" >/dev/null 2>&1 </dev/null
    fi
    unmount_fuse "$m"
  done
  for p in "${!PID_TAG[@]}"; do stop_pid "$p"; done
  for ((i = ${#EXTRA_TMPFS[@]} - 1; i >= 0; i--)); do
    m=${EXTRA_TMPFS[i]}
    is_mounted "$m" || continue
    umount "$m" 2>/dev/null || { sleep 1; umount "$m" 2>/dev/null; } || umount -l "$m" 2>/dev/null
  done
  if ((TMPFS_MOUNTED)); then
    umount "$T" 2>/dev/null || { sleep 2; umount "$T" 2>/dev/null; } || umount -l "$T" 2>/dev/null
  fi
  [[ -n $TMP ]] && rm -rf --one-file-system "$TMP" 2>/dev/null
  exit "$rc"
}
on_signal() {
  log "$1: stopping"
  if [[ -n $CHILD ]]; then kill -TERM "$CHILD" 2>/dev/null; wait "$CHILD" 2>/dev/null || true; fi
  exit "$2"
}

mem_avail_kib() { awk '/^MemAvailable:/ { print $2 }' /proc/meminfo; }

# bench_make_tmp PREFIX: TMP=$BENCH_TMPDIR/PREFIX.XXXXXX with our own tmpfs T (90% of RAM) inside; sets the traps
bench_make_tmp() {
  TMP=$(mktemp -d "${BENCH_TMPDIR:-${TMPDIR:-/tmp}}/$1.XXXXXX")
  T=$TMP/tmpfs           # our own tmpfs: sources, native baseline, FUSE backing dirs, cairn archives
  BIN=$TMP/bin LOGS=$TMP/logs MNTS=$TMP/mnt
  mkdir -p "$T" "$BIN" "$LOGS" "$MNTS"
  trap cleanup EXIT
  trap 'on_signal interrupted 130' INT
  trap 'on_signal terminated 143' TERM
  mem_total_kib=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
  mount -t tmpfs -o "size=$((mem_total_kib * 9 / 10))k,mode=0755" cairn-bench "$T" || die "cannot mount tmpfs on $T"
  TMPFS_MOUNTED=1
}

# bench_mount_tmpfs DIR SIZE_KIB: one more tmpfs (its own device, for tools that want one file system per disk),
# unmounted on exit
bench_mount_tmpfs() {
  mkdir -p "$1"
  mount -t tmpfs -o "size=${2}k,mode=0755" cairn-bench "$1" || die "cannot mount a tmpfs on $1"
  EXTRA_TMPFS+=("$1")
}

# ---------------------------------------------------------------- failure reporting and steps
CUR_ARCH=""  # archive of the cairn mount under test, for log tails
CUR_PID=""   # its daemon
fail_step() {  # fail_step SYS RC CMD...  (output of the failed command is in $LOGS/last.{out,err})
  local sys=$1 rc=$2; shift 2
  {
    echo
    echo "bench: FAILED on $sys: $* (exit $rc$( ((rc == 124 || rc == 137)) && echo ", timed out after ${STEP_TIMEOUT}s"))"
    echo "---- stdout"; tail -n 40 "$LOGS/last.out" 2>/dev/null
    echo "---- stderr"; tail -n 40 "$LOGS/last.err" 2>/dev/null
    if [[ $sys == cairn* && -n $CUR_ARCH && -f $CUR_ARCH/cairn.log ]]; then
      echo "---- last lines of $CUR_ARCH/cairn.log"; tail -n 40 "$CUR_ARCH/cairn.log"
    fi
    if [[ $sys == cairn* && -n ${CUR_PID:-} ]] && ! kill -0 "$CUR_PID" 2>/dev/null; then
      echo "---- the cairn daemon (pid $CUR_PID) is no longer running"
    fi
    echo "---- space"; df -h "$T" "$TMP" 2>/dev/null
    [[ -n $CUR_ARCH ]] && du -sh "$CUR_ARCH/cache" "$CUR_ARCH/disks" 2>/dev/null
    dmesg 2>/dev/null | tail -n 5 | grep -iE 'fuse|segfault|cairn|oom' | sed 's/^/dmesg: /'
  } >&2
  exit 1
}
# run SYS CMD...: run a step with a timeout; on failure print the details and abort. stdout -> $LOGS/last.out
# (in the background + wait, so that INT/TERM reach our trap at once instead of after the step)
# try CMD...: the same without aborting; the exit code is in RC
try() {
  RC=0
  timeout -k 10 "$STEP_TIMEOUT" "$@" >"$LOGS/last.out" 2>"$LOGS/last.err" </dev/null &
  CHILD=$!
  wait "$CHILD" || RC=$?
  CHILD=""
}
run() {
  local sys=$1; shift
  try "$@"
  ((RC == 0)) || fail_step "$sys" "$RC" "$@"
}
# timed LABEL CMD...: try CMD, with its wall time in S_NS (LABEL: unused; a RUNNER of scrub_runs, rebuild_runs)
timed() {
  local t0; shift
  t0=$(now_ns)
  try "$@"
  S_NS=$(($(now_ns) - t0))
}
drop_caches() { timeout 300 sync || true; echo 3 >/proc/sys/vm/drop_caches; }
now_ns() { date +%s%N; }
declare -A R=()   # R[test,sys] = value
NOTES=()
WARNINGS=()
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
rate() { awk -v n="$1" -v ns="$2" 'BEGIN { printf "%.1f", n / (ns / 1e9) }'; }   # units per second
secs() { awk -v ns="$1" 'BEGIN { printf "%.2f", ns / 1e9 }'; }
vmhwm_mib() { awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null; }
vmrss_mib() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null; }

# ---------------------------------------------------------------- FUSE daemons and cairn archives
DIR="" DPID=""

wait_mounted() {  # wait_mounted MNT PID LOGFILE
  local m=$1 p=$2 lf=$3 i
  for i in $(seq 1 100); do
    is_mounted "$m" && return 0
    kill -0 "$p" 2>/dev/null || { cat "$lf" >&2; die "daemon for $m exited before mounting"; }
    sleep 0.1
  done
  cat "$lf" >&2; die "$m did not get mounted within 10 s"
}

cairn_pid_of() {  # cairn_pid_of ARCH MNT: the daemon pid from ARCH/lock, else the process whose cmdline names MNT
  local arch=$1 m=$2 p="" q
  [[ -r $arch/lock ]] && p=$(tr -dc '0-9' <"$arch/lock")
  if [[ -z $p ]] || ! kill -0 "$p" 2>/dev/null; then
    p=""
    for q in /proc/[0-9]*; do
      tr '\0' ' ' 2>/dev/null <"$q/cmdline" | grep -qF -- " $m" && { p=${q#/proc/}; break; }
    done
  fi
  echo "$p"
}

cairn_mkfs() {  # cairn_mkfs ARCH [mkfs args...]
  local arch=$1; shift
  CUR_ARCH=$arch
  run cairn "$CAIRN" mkfs "$arch" "$@"
}
cairn_mount_existing() {  # cairn_mount_existing ARCH MNT [mount args...]: sets DIR, DPID, CUR_ARCH, CUR_PID
  local arch=$1 m=$2; shift 2
  mkdir -p "$m"
  CUR_ARCH=$arch
  FUSE_MOUNTS+=("$m")
  CAIRN_ARCH_OF[$m]=$arch
  run cairn "$CAIRN" mount "$arch" "$m" "$@"
  is_mounted "$m" || { echo "cairn mount exited 0 but $m is not mounted" >"$LOGS/last.err"; fail_step cairn 0 "$CAIRN" mount "$arch" "$m" "$@"; }
  DPID=$(cairn_pid_of "$arch" "$m")
  [[ -n $DPID ]] || die "cannot find the cairn daemon pid for $m (lock file: $(cat "$arch/lock" 2>/dev/null))"
  PID_TAG[$DPID]=$m
  CUR_PID=$DPID
  DIR=$m
}
cairn_mount() {  # cairn_mount ARCH MNT [mkfs args...]: mkfs + mount; sets DIR, DPID, CUR_ARCH, CUR_PID
  local arch=$1 m=$2; shift 2
  mkdir -p "$m"
  cairn_mkfs "$arch" "$@"
  cairn_mount_existing "$arch" "$m"
}
cairn_unmount() {  # cairn_unmount MNT LABEL (DPID: the daemon of MNT): cairn umount, and the daemon must be gone
  run "$2" "$CAIRN" umount "$1"
  if pid_alive "$DPID"; then
    WARNINGS+=("$2: the daemon (pid $DPID) was still running after 'cairn umount' returned")
    stop_pid "$DPID"
  fi
  CUR_PID=""
}
cairn_unmount_and_fsck() {  # cairn_unmount_and_fsck ARCH MNT LABEL (DPID: the daemon of MNT)
  local arch=$1 m=$2 label=$3
  cairn_unmount "$m" "$label"
  log "$label: cairn fsck"
  try "$CAIRN" fsck "$arch"
  if ((RC == 0)); then
    NOTES+=("$label: cairn fsck after unmount: $(tail -n 1 "$LOGS/last.out")")
  else
    WARNINGS+=("$label: 'cairn fsck $arch' exited $RC: $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 2000 | tr '\n' '|')")
  fi
}

# ---------------------------------------------------------------- correctness checks
FAILURES=()  # the failed checks, for finish_report
NCHECKS=0
check() {  # check WHAT OK(0|1) DETAIL: logs the result, records a failure
  NCHECKS=$((NCHECKS + 1))
  if (($2)); then log "ok: $1"; else log "FAILED: $1: $3"; FAILURES+=("$1: $3"); fi
}

# ---------------------------------------------------------------- cairn status, disk images
mib_of() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
mib_rate() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.1f", b / 1048576 / (ns / 1e9) }'; }  # bytes, ns -> MiB/s
status_json() {  # status_json ARCH OUT: cairn status --json into OUT
  run "$(basename "$1")" "$CAIRN" status "$1" --json
  cp "$LOGS/last.out" "$2"
}
jget() {  # jget JSONFILE PYEXPR (s = the parsed object)
  python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
image_paths() {  # image_paths ARCH JSON DISK...: absolute paths of those disks' images
  local d p
  for d in "${@:3}"; do
    p=$(jget "$2" "s['disks'][$d]['path']")
    [[ $p == /* ]] || p=$1/$p
    echo "$p"
  done
}
# record_disk_usage JSON DISK: from a status_json of the healthy archive, R[used0] and R[chunks0] (chunk bytes and
# chunks on DISK, the one to fail) and R[used_all] (chunk bytes on all disks): what rebuild_runs and scrub_runs check
record_disk_usage() {
  R[used0]=$(jget "$1" "s['disks'][$2]['used']")
  R[chunks0]=$(jget "$1" "s['disks'][$2]['extents']")
  R[used_all]=$(jget "$1" "sum(d['used'] for d in s['disks'])")
}
# timed_write_persist SYS SRC DEST ARCH: dd SRC to DEST (1 MiB writes, fsync) from a cold page cache, then
# 'cairn persist ARCH'; DD_NS and PERSIST_NS: how long each took
timed_write_persist() {
  local t0 t1
  drop_caches
  t0=$(now_ns)
  run "$1" dd if="$2" of="$3" bs=1M conv=fsync status=none
  t1=$(now_ns)
  run "$1" "$CAIRN" persist "$4"
  PERSIST_NS=$(($(now_ns) - t1)) DD_NS=$((t1 - t0))
}
# evict_cold ARCH LABEL: drop cairn's staging cache (checking that it is empty) and the page cache
evict_cold() {
  local bc
  run "$2" "$CAIRN" evict "$1"
  status_json "$1" "$LOGS/status.json"
  bc=$(jget "$LOGS/status.json" 's["bytes_cached"]')
  check "$2: after cairn evict the staging cache is empty (reads come from the disks)" $((bc == 0)) \
    "bytes_cached is $bc"
  drop_caches
}

# ---------------------------------------------------------------- readdata baselines (readdata.c)
bench_build_tool() {  # bench_build_tool NAME: compiles tests/bench/NAME.c into $BIN/NAME
  command -v cc >/dev/null || die "no C compiler (cc) to build $BENCH_LIB_DIR/$1.c"
  cc -O2 -Wall -o "$BIN/$1" "$BENCH_LIB_DIR/$1.c" || die "compiling $BENCH_LIB_DIR/$1.c failed"
}
# read_baseline KEY RUNS FILE...: RUNS cold runs (each after drop_caches) of readdata over FILE..., one after the other,
# as cat would; R[KEY,base] = the median MiB/s, R[KEY,bytes] = the bytes of data read
read_baseline() {
  local key=$1 runs=$2 t0 t1 vals=() secs_=() i; shift 2
  for ((i = 1; i <= runs; i++)); do
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
}
# cat_baseline_note KEY FILE...: one cold plain 'cat' of the whole (sparse) FILE..., as a note and R[KEY,cat]: why
# the baseline is readdata
cat_baseline_note() {
  local key=$1 app t0 t1; shift
  app=$(stat -c %s "$@" | awk '{ n += $1 } END { print n }')
  drop_caches
  t0=$(now_ns)
  run baseline bash -c 'cat "$@" >/dev/null' cat "$@"
  t1=$(now_ns)
  R[$key,cat]=$(mib_rate "$app" $((t1 - t0)))
  NOTES+=("baseline $key: plain 'cat' of the $# whole image(s) (sparse, $(mib_of "$app") MiB apparent) ran at ${R[$key,cat]} MiB/s in $(secs $((t1 - t0))) s: holes read as zeros, without disk I/O and faster than data, so the baseline reads the data regions only")
}

# ---------------------------------------------------------------- cairn rebuild, fsck, scrub
# A RUNNER runs a step as 'RUNNER LABEL CMD...' without aborting (as try: RC, $LOGS/last.{out,err}) and sets S_NS
# to its wall time: timed, or one of the benchmark's own (that may also add notes).

# rebuild_runs ARCH RUNS DISK OLD NEW_PREFIX RUNNER: RUNS times 'cairn disk replace ARCH DISK NEW_PREFIX-I.img' (the
# first in place of OLD, a failed disk, the others of the image rebuilt just before; the replaced image is removed),
# drop_caches, 'cairn rebuild ARCH' under RUNNER, which must recreate every chunk of DISK (R[used0], R[chunks0]: see
# record_disk_usage) and lose no extent. Sets RB_NS (per run), RB_NEW (the last image), R[rebuild_ns] (median),
# R[rebuild_read] (the bytes it must read: RS_K surviving chunks for each chunk of DISK), R[rebuild,cairn] (MiB/s of
# those), R[rebuilt,cairn] (MiB/s written to DISK)
rebuild_runs() {
  local arch=$1 runs=$2 d=$3 old=$4 prefix=$5 runner=$6 i new out lost bad rep used0 line ns
  RB_NS=()
  for ((i = 1; i <= runs; i++)); do
    ((i == 1)) || log "== rebuild $i: replacing the rebuilt disk $d with yet another empty image"
    new=$prefix-$i.img
    run rebuild "$CAIRN" disk replace "$arch" "$d" "$new"
    rm -f "$old"  # no longer a disk of the archive
    drop_caches
    log "rebuild $i: cairn rebuild (reads $(mib_of $((R[used0] * RS_K))) MiB, writes $(mib_of "${R[used0]}") MiB)"
    "$runner" "rebuild $i" "$CAIRN" rebuild "$arch"
    ((RC == 0)) || fail_step rebuild "$RC" "$CAIRN" rebuild "$arch"
    RB_NS+=("$S_NS")
    out=$(grep '^rebuild:' "$LOGS/last.out" | tail -n 1 || true)
    [[ -s $LOGS/last.err ]] && NOTES+=("rebuild $i: 'cairn rebuild' printed on stderr (exit 0): $(head -c 300 "$LOGS/last.err" | tr '\n' '|')")
    lost=$(sed -nE 's/.* ([0-9]+) extent\(s\) lost.*/\1/p' <<<"$out")
    bad=$(sed -nE 's/.* ([0-9]+) bad chunk\(s\).*/\1/p' <<<"$out")
    rep=$(sed -nE 's/.* ([0-9]+) repaired.*/\1/p' <<<"$out")
    check "rebuild $i: every chunk of disk $d (${R[chunks0]}) recreated, no extent lost" \
      "$([[ $lost == 0 && $bad == "${R[chunks0]}" && $rep == "${R[chunks0]}" ]] && echo 1 || echo 0)" "'$out'"
    status_json "$arch" "$LOGS/rebuilt.json"
    used0=$(jget "$LOGS/rebuilt.json" "s['disks'][$d]['used']")
    check "rebuild $i: disk $d holds as many chunk bytes as before it failed" $((used0 == R[used0])) \
      "${used0} bytes, ${R[used0]} before"
    run rebuild "$CAIRN" disk list "$arch"
    line=$(awk -v d="$d" '$1 == d' "$LOGS/last.out")
    check "rebuild $i: cairn disk list shows disk $d on the new image, ok" \
      "$([[ $line == *"$new"* && $line == *" ok" ]] && echo 1 || echo 0)" "'$line'"
    log "rebuild $i: $(mib_of "${R[used0]}") MiB rebuilt from $(mib_of $((R[used0] * RS_K))) MiB in $(secs "$S_NS") s: $(mib_rate $((R[used0] * RS_K)) "$S_NS") MiB/s read"
    old=$new
  done
  RB_NEW=$new
  NOTES+=("rebuild: cairn printed '$out'")
  ((runs == 1)) || NOTES+=("rebuild: the first rebuild follows 'cairn disk fail'; the others replace the rebuilt disk $d with yet another empty image. Seconds per run: $(for ns in "${RB_NS[@]}"; do printf '%s ' "$(secs "$ns")"; done)")
  R[rebuild_ns]=$(median "${RB_NS[@]}")
  R[rebuild_read]=$((R[used0] * RS_K))  # the k surviving chunks of every extent with a chunk on the failed disk
  R[rebuild,cairn]=$(mib_rate "${R[rebuild_read]}" "${R[rebuild_ns]}")
  R[rebuilt,cairn]=$(mib_rate "${R[used0]}" "${R[rebuild_ns]}")
}
# fsck_after_rebuild ARCH: a cold 'cairn fsck ARCH' (unmounted) must be clean; its time (and MiB/s of R[used_all]
# where that is known) in a note
fsck_after_rebuild() {
  local t0 t1 rate=""
  log "== cairn fsck (reads every extent)"
  drop_caches
  t0=$(now_ns)
  try "$CAIRN" fsck "$1"
  t1=$(now_ns)
  check "after the rebuild cairn fsck is clean" "$([[ $RC == 0 && $(cat "$LOGS/last.out") == *": clean"* ]] && echo 1 || echo 0)" \
    "exit $RC: $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 500 | tr '\n' '|')"
  [[ -n ${R[used_all]:-} ]] && rate=", $(mib_rate "${R[used_all]}" $((t1 - t0))) MiB/s of chunks, cold"
  NOTES+=("fsck after the rebuild ($(secs $((t1 - t0))) s$rate): $(tail -n 1 "$LOGS/last.out")")
}
# scrub_runs ARCH RUNS RUNNER: RUNS cold 'cairn scrub ARCH' runs under RUNNER, each must find nothing wrong;
# R[scrub,cairn] = the median MiB/s of all chunk bytes (R[used_all]), R[scrub_s] its seconds
scrub_runs() {
  local arch=$1 runs=$2 runner=$3 i out="" vals=() ns
  for ((i = 1; i <= runs; i++)); do
    drop_caches
    log "scrub $i: cairn scrub ($(mib_of "${R[used_all]}") MiB of chunks)"
    "$runner" "scrub $i" "$CAIRN" scrub "$arch"
    out=$(grep '^scrub:' "$LOGS/last.out" | tail -n 1 || true)
    check "scrub $i after the rebuild is clean" \
      "$([[ $RC == 0 && $out == *" 0 bad chunk(s), 0 repaired, 0 extent(s) lost" ]] && echo 1 || echo 0)" \
      "exit $RC: $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 500 | tr '\n' '|')"
    vals+=("$S_NS")
    log "scrub $i: $(secs "$S_NS") s, $(mib_rate "${R[used_all]}" "$S_NS") MiB/s"
  done
  NOTES+=("scrub: cairn printed '$out'")
  [[ -s $LOGS/last.err ]] && NOTES+=("scrub: 'cairn scrub' printed on stderr: $(head -c 300 "$LOGS/last.err" | tr '\n' '|')")
  ns=$(median "${vals[@]}")
  R[scrub,cairn]=$(mib_rate "${R[used_all]}" "$ns")
  R[scrub_s]=$(secs "$ns")
}

# ---------------------------------------------------------------- report helpers
fmt() { local v=${1:-}; [[ -z $v ]] && { echo "-"; return; }; awk -v v="$v" 'BEGIN { if (v >= 100) printf "%.0f", v; else printf "%.1f", v }'; }
ratio() { [[ -n ${1:-} && -n ${2:-} ]] || { echo "-"; return; }; awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
verdict() {  # verdict KIND value: KIND ge:X (ratio >= X) or lt:X (value < X)
  local k=${1%%:*} x=${1#*:} v=${2:-}
  [[ -n $v && $v != - ]] || { echo "n/a"; return; }
  v=${v%x}
  awk -v k="$k" -v x="$x" -v v="$v" 'BEGIN { ok = (k == "ge") ? (v >= x) : (v < x); print ok ? "PASS" : "MISS" }'
}
# srow_header TITLE LABEL_WIDTH TARGET_WIDTH: the head of a table of srow rows; srow LABEL BASE VALUE TARGET BASELABEL:
# a row, TARGET a ratio (its verdict in the last column) or "" (info)
SROW_LW=46 SROW_TW=28
srow_header() {
  SROW_LW=$2 SROW_TW=$3
  printf '%-*s %10s %10s %8s  %-*s %s\n' "$SROW_LW" "$1" baseline cairn ratio "$SROW_TW" target result
  printf '%s\n' "$(printf '%.0s-' $(seq 1 $((SROW_LW + SROW_TW + 44))))"
}
srow() {
  local r t res=""
  r=$(ratio "$3" "$2")
  if [[ -n $4 ]]; then t=">= ${4}x $5"; res=$(verdict "ge:$4" "$r"); else t="(info) $5"; fi
  printf '%-*s %10s %10s %8s  %-*s %s\n' "$SROW_LW" "$1" "$(fmt "$2")" "$(fmt "$3")" "$r" "$SROW_TW" "$t" "$res"
}
# the git revision of the tree the cairn binary was built in (else of this script's tree), +dirty when its src/ has
# uncommitted changes
cairn_revision() {
  local top
  top=$(git -C "$(dirname "$CAIRN")" rev-parse --show-toplevel 2>/dev/null) || top=$repo
  echo "$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo "?")$(git -C "$top" diff --quiet HEAD -- src 2>/dev/null || echo "+dirty")"
}

# finish_report SUCCESS_LINE: prints the notes, warnings and failures collected by a benchmark,
# then SUCCESS_LINE and exit 0, or exit 1 when a correctness check failed.
finish_report() {
  local n
  for n in "${NOTES[@]}"; do echo "note: $n"; done
  if ((${#WARNINGS[@]})); then
    echo
    for n in "${WARNINGS[@]}"; do echo "WARNING: $n"; done
  fi
  if ((${#FAILURES[@]})); then
    echo
    for n in "${FAILURES[@]}"; do echo "FAILED: $n"; done
    exit 1
  fi
  echo "$1"
  exit 0
}
