# shellcheck shell=bash
# Helpers shared by the cairn benchmarks (run.sh, policy.sh, redundancy.sh). Source it at the top level of the
# script, after setting CAIRN (the cairn binary) and STEP_TIMEOUT (seconds per step); then call bench_check_prereqs
# and bench_make_tmp.
#
# What a benchmark gets from here:
#   TMP, T (a tmpfs of our own inside TMP), BIN, LOGS, MNTS     temp dirs, removed on exit
#   cleanup on every exit path: unmounts what we mounted (newest first), stops only the pids we started
#   run SYS CMD... / try CMD...       a step with a timeout; output in $LOGS/last.{out,err}
#   cairn_mkfs / cairn_mount_existing / cairn_mount / cairn_unmount_and_fsck
#   bench_mount_tmpfs DIR SIZE_KIB    one more tmpfs inside T (a device of its own), unmounted on exit
#   R (results), NOTES, WARNINGS; median, rate, secs, fmt, ratio, verdict for the report
# Set CLEANUP_CAIRN_UMOUNT=1 to have the cleanup try 'cairn umount' on cairn mounts before fusermount3.

MiB=$((1024 * 1024)) GiB=$((1024 * 1024 * 1024))

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
cairn_unmount_and_fsck() {  # cairn_unmount_and_fsck ARCH MNT LABEL (DPID: the daemon of MNT)
  local arch=$1 m=$2 label=$3
  run "$label" "$CAIRN" umount "$m"
  if pid_alive "$DPID"; then
    WARNINGS+=("$label: the daemon (pid $DPID) was still running after 'cairn umount' returned")
    stop_pid "$DPID"
  fi
  log "$label: cairn fsck"
  try "$CAIRN" fsck "$arch"
  if ((RC == 0)); then
    NOTES+=("$label: cairn fsck after unmount: $(tail -n 1 "$LOGS/last.out")")
  else
    WARNINGS+=("$label: 'cairn fsck $arch' exited $RC: $(cat "$LOGS/last.out" "$LOGS/last.err" | head -c 2000 | tr '\n' '|')")
  fi
  CUR_PID=""
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
