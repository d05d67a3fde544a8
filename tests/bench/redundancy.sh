#!/bin/bash
# cairn redundancy benchmark: what rs-4-2 costs and how fast cairn gets the data back, in one run.
#
# Usage: tests/bench/redundancy.sh [--quick] [--reps N]
#   1. ec_bench (tests/bench/ec_bench.cc, built from this tree): ErasureCode against isa-l called directly,
#      encode and decode of rs-4-2, rs-10-4 and rs-20-4; target >= 0.9x on every row.
#   2. On an 8-disk archive (disk images on a tmpfs, as run.sh), S MiB of random data (2 GiB; --quick 256 MiB)
#      written with dd bs=1M + fsync, then 'cairn persist', then evict and a cold sequential read; once into a
#      directory with user.cairn.raid=none and once, on a fresh archive, with rs-4-2. Targets: rs-4-2 / none
#      >= 0.85x for write, write+persist and read.
#   3. Degraded read: 'cairn disk fail ARCH 0', mount -o degraded, cold read; target >= 0.6x the healthy rs-4-2 read.
#   4. Rebuild: 'cairn disk replace ARCH 0 NEW', 'cairn rebuild'; the bytes it must read (k = 4 chunks for each
#      chunk of disk 0) per second against reading the data of the 7 surviving images; target >= 0.7x. Then
#      'cairn fsck' and 'cairn scrub' must be clean; scrub MiB/s against reading the data of all 8 images.
#   5. SnapRAID reference (no target): the same S MiB over 4 data dirs + 2 parity files, 'snapraid sync' and
#      'snapraid scrub -p 100 -o 0'.
#   The file's sha256 is checked (from the disks: evict + drop_caches) after every phase.
#   --reps N   the writes, cold reads, rebuilds (disk 0 replaced once more each time) and scrubs run N times, the
#              median counts (default 3); the baselines are medians of 3.
# Environment: CAIRN_BIN (default build/cairn), BENCH_TMPDIR (parent of the temp dir, default $TMPDIR or /tmp),
#   BENCH_STEP_TIMEOUT (seconds per step, default 1800).
# Needs root (drop_caches, tmpfs mounts) and /dev/fuse. Installs missing Debian packages with apt-get.
# Prints PASS/MISS beside each target; exits 1 if a step fails or any correctness check does (wrong bytes,
# layout, fsck, scrub, rebuild, ec_bench verification).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
CAIRN=${CAIRN_BIN:-$repo/build/cairn}
STEP_TIMEOUT=${BENCH_STEP_TIMEOUT:-1800}
CLEANUP_CAIRN_UMOUNT=1  # on an abnormal exit, try 'cairn umount' before fusermount3
# shellcheck source=tests/bench/lib.sh
source "$repo/tests/bench/lib.sh"

quick=0 reps=3
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --reps) reps=${2:?--reps needs a number}; shift ;;
    --reps=*) reps=${1#--reps=} ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--quick] [--reps N]" >&2; exit 2 ;;
  esac
  shift
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "--reps needs a positive integer" >&2; exit 2; }

if ((quick)); then SEQ_MIB=256; else SEQ_MIB=2048; fi
NDISKS=8
DISK_MIB=$((SEQ_MIB / 2 > 512 ? SEQ_MIB / 2 : 512))  # sparse images; rs-4-2 fills 3/16 of S on each
RAID=rs-4-2 RS_K=4 RS_M=2
SEG_MIB=4
FAIL_DISK=0
EC_TARGET=0.9 SEQ_TARGET=0.85 DEGRADED_TARGET=0.6 REBUILD_TARGET=0.7
MOUNT_OPTS=reconcile_idle=3600,reconcile_rate=0  # keep the background reconciler out of the timings
((SEQ_MIB % (SEG_MIB * RS_K) == 0)) || die "the size must be a multiple of $((SEG_MIB * RS_K)) MiB"

# ---------------------------------------------------------------- prerequisites
bench_check_prereqs
need_pkgs=()
command -v fusermount3 >/dev/null || need_pkgs+=(fuse3)
command -v setfattr >/dev/null && command -v getfattr >/dev/null || need_pkgs+=(attr)
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v g++ >/dev/null || need_pkgs+=(g++)
command -v python3 >/dev/null || need_pkgs+=(python3)
command -v snapraid >/dev/null || need_pkgs+=(snapraid)
[[ -f /usr/include/isa-l/erasure_code.h ]] || need_pkgs+=(libisal-dev)
[[ -f /usr/include/fmt/format.h ]] || need_pkgs+=(libfmt-dev)
bench_apt_install "${need_pkgs[@]}"

# ---------------------------------------------------------------- temp dir and cleanup
bench_make_tmp cairn-redundancy-bench
# at the peak: the source, an archive's disks (1.5 S) and its staging cache (S), the rebuilt disk; snapraid 1.5 S
need_kib=$(((4 * SEQ_MIB * MiB + 2 * GiB) / 1024))
(($(mem_avail_kib) > need_kib)) || die "not enough free memory: need about $((need_kib / 1024)) MiB"

# ---------------------------------------------------------------- helpers
xattr_of() {  # xattr_of FILE KEY: the value, or a "(getfattr ...)" text that no check accepts
  try getfattr --only-values -n "$2" "$1"
  if ((RC == 0)); then cat "$LOGS/last.out"; else echo "(getfattr -n $2 failed: $(head -c 300 "$LOGS/last.err"))"; fi
}
# verify_sha FILE ARCH LABEL: from the disks (evict, drop_caches), the file's sha256 must be the source's
verify_sha() {
  local got
  evict_cold "$2" "$3"
  run "$3" sha256sum "$1"
  got=$(cut -d' ' -f1 "$LOGS/last.out")
  check "$3: sha256 of the file read back from the disks matches the source" "$([[ $got == "$SRC_SHA" ]] && echo 1 || echo 0)" \
    "got $got, expected $SRC_SHA"
}
# timed_reads FILE ARCH LABEL: reps cold sequential reads (dd bs=1M), each after evict_cold; R[read,LABEL] is the
# median MiB/s
timed_reads() {
  local i t0 t1 vals=()
  for ((i = 0; i < reps; i++)); do
    evict_cold "$2" "$3"
    t0=$(now_ns)
    run "$3" dd if="$1" of=/dev/null bs=1M status=none
    t1=$(now_ns)
    vals+=("$(rate "$SEQ_MIB" $((t1 - t0)))")
  done
  R[read,$3]=$(median "${vals[@]}")
  ((reps == 1)) || NOTES+=("$3: cold read MiB/s per run: ${vals[*]}")
  log "$3: cold read ${R[read,$3]} MiB/s (median of $reps)"
}
# check_layout FILE RAID LABEL: every segment of FILE is persisted as RAID's chunks on distinct disks; sets
# LAYOUT_D0 (segments with a chunk on FAIL_DISK) and LAYOUT_D0DATA (those where it is a data chunk)
check_layout() {
  local f=$1 raid=$2 label=$3 st loc n k out nseg
  case $raid in none) n=1 k=1 ;; rs-*) n=$((RS_K + RS_M)) k=$RS_K ;; *) die "check_layout: $raid" ;; esac
  nseg=$((SEQ_MIB / SEG_MIB))
  st=$(xattr_of "$f" user.cairn.state)
  check "$label: the file is persisted" "$([[ $st == persisted ]] && echo 1 || echo 0)" "user.cairn.state is '$st'"
  loc=$(xattr_of "$f" user.cairn.location)
  out=$(python3 - "$loc" "$n" "$k" "$FAIL_DISK" <<'EOF'
import re, sys
loc, n, k, d0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
entries, bad, on_d0, d0_data = loc.split(), [], 0, 0
for e in entries:
    m = re.fullmatch(r"(\d+)=([^+]+)\+(\d+)(,cached)?", e)
    chunks = [re.fullmatch(r"disk(\d+)@(\d+)", c) for c in m.group(2).split("/")] if m else [None]
    if None in chunks or len(chunks) != n or len({int(c.group(1)) for c in chunks}) != n:
        bad.append(e)
        continue
    disks = [int(c.group(1)) for c in chunks]
    on_d0 += d0 in disks
    d0_data += d0 in disks[:k]
print(len(entries), len(bad), on_d0, d0_data, " ".join(bad[:3]))
EOF
  )
  read -r LAYOUT_NSEG LAYOUT_BAD LAYOUT_D0 LAYOUT_D0DATA _ <<<"$out"
  check "$label: user.cairn.location lists $nseg segments, each $n chunk(s) on $n distinct disk(s)" \
    "$(((LAYOUT_NSEG == nseg && LAYOUT_BAD == 0) ? 1 : 0))" \
    "$LAYOUT_NSEG segments, $LAYOUT_BAD not as expected: ${out#* * * * } (location '${loc:0:300}...')"
}

bench_build_tool readdata  # the baseline of rebuild and scrub

# ---------------------------------------------------------------- phase 1: erasure-code microbenchmark
ec_phase() {
  log "== ec_bench: building from $repo"
  run ec_bench g++ -std=c++20 -O2 -I"$repo/include" -I"$repo/src" "$repo/tests/bench/ec_bench.cc" \
    "$repo/src/redundancy/erasure_code.cc" "$repo/src/util/status.cc" "$repo/src/util/log.cc" \
    "$repo/src/util/log_rate_limiter.cc" "$repo/src/util/printable.cc" -lisal -lfmt -o "$BIN/ec_bench"
  log "ec_bench: running (about 20 s)"
  try "$BIN/ec_bench"
  cp "$LOGS/last.out" "$LOGS/ec_bench.out"
  check "ec_bench: ErasureCode encodes and reconstructs the right bytes (exit $RC)" $((RC == 0)) \
    "$(cat "$LOGS/last.out" "$LOGS/last.err" | grep -iE 'wrong|fail|error' | head -n 5 | tr '\n' '|')"
  R[ec,rows]=$(grep -cE ' (PASS|MISS)$' "$LOGS/ec_bench.out" || true)
  R[ec,miss]=$(grep -cE ' MISS$' "$LOGS/ec_bench.out" || true)
  R[ec,min]=$(awk '$NF == "PASS" || $NF == "MISS" { r = $(NF - 1); if (min == "" || r < min) min = r } END { print min }' \
    "$LOGS/ec_bench.out")
  ((${R[ec,rows]} > 0)) || check "ec_bench printed its table" 0 "no PASS/MISS rows in its output"
}

# ---------------------------------------------------------------- phase 2: sequential write/read, none vs rs-4-2
seq_phase() {  # seq_phase RAID ARCH MNT: leaves the archive mounted
  local raid=$1 arch=$2 m=$3 f i label=$1 wv=() pv=() ps=() po=()
  f=$m/data/seq.bin
  log "== $label: $NDISKS-disk archive, $(human_mib "$SEQ_MIB") written into a raid=$raid directory"
  cairn_mkfs "$arch" --disks "$NDISKS" --disk-size "${DISK_MIB}M"
  cairn_mount_existing "$arch" "$m" -o "$MOUNT_OPTS"
  run "$label" mkdir "$m/data"
  run "$label" setfattr -n user.cairn.raid -v "$raid" "$m/data"
  for ((i = 0; i < reps; i++)); do
    if ((i > 0)); then  # free the previous copy's chunks first
      run "$label" rm -f "$f"
      run "$label" "$CAIRN" persist "$arch"
    fi
    timed_write_persist "$label" "$T/src.bin" "$f" "$arch"
    wv+=("$(rate "$SEQ_MIB" "$DD_NS")") pv+=("$(rate "$SEQ_MIB" $((DD_NS + PERSIST_NS)))") ps+=("$(secs "$PERSIST_NS")")
    po+=("$(rate "$SEQ_MIB" "$PERSIST_NS")")
    log "$label: write ${wv[-1]} MiB/s, with persist ${pv[-1]} MiB/s"
  done
  R[write,$raid]=$(median "${wv[@]}") R[persist,$raid]=$(median "${pv[@]}") R[persist_s,$raid]=$(median "${ps[@]}")
  R[persistonly,$raid]=$(median "${po[@]}")
  ((reps == 1)) || NOTES+=("$label: MiB/s per run: write ${wv[*]}; write+persist ${pv[*]}")
  NOTES+=("$label: effective policy of the file: $(xattr_of "$f" user.cairn.effective.source)")
  check_layout "$f" "$raid" "$label"
  timed_reads "$f" "$arch" "$raid"
  verify_sha "$f" "$arch" "$label"
}

# ---------------------------------------------------------------- phases 3 and 4: degraded read, rebuild, scrub
degraded_phase() {  # after seq_phase rs-4-2: the archive is mounted at MNT
  local arch=$1 m=$2 f=$2/data/seq.bin label=degraded line
  status_json "$arch" "$LOGS/healthy.json"
  record_disk_usage "$LOGS/healthy.json" "$FAIL_DISK"
  R[seg_d0]=$LAYOUT_D0 R[seg_d0data]=$LAYOUT_D0DATA
  check "disk $FAIL_DISK holds data chunks of the file" $((LAYOUT_D0DATA > 0)) \
    "it holds chunks of $LAYOUT_D0 segments, data chunks of $LAYOUT_D0DATA"
  log "== $label: unmount, cairn disk fail $arch $FAIL_DISK, mount -o degraded"
  cairn_unmount_and_fsck "$arch" "$m" "$RAID healthy"
  check "$RAID: cairn fsck after the healthy phase is clean" $((RC == 0)) "see the warning below"
  run "$label" "$CAIRN" disk fail "$arch" "$FAIL_DISK"
  run "$label" "$CAIRN" disk list "$arch"
  line=$(awk -v d="$FAIL_DISK" '$1 == d' "$LOGS/last.out")
  check "cairn disk list shows disk $FAIL_DISK failed" "$([[ $line == *failed* ]] && echo 1 || echo 0)" "'$line'"
  cairn_mount_existing "$arch" "$m" -o "degraded,$MOUNT_OPTS"
  [[ -s $LOGS/last.err ]] && NOTES+=("degraded: 'cairn mount -o degraded' printed on stderr: $(head -c 300 "$LOGS/last.err" | tr '\n' '|')")
  log "$label: $LAYOUT_D0DATA of $((SEQ_MIB / SEG_MIB)) segments have a data chunk on disk $FAIL_DISK"
  timed_reads "$f" "$arch" "$label"
  verify_sha "$f" "$arch" "$label"
  log "$label: unmounting"
  cairn_unmount "$m" "$label"
}

rebuild_phase() {  # after degraded_phase: disk FAIL_DISK failed, the archive unmounted
  local arch=$1 m=$2 f=$2/data/seq.bin label=rebuild old
  local -a surv all
  log "== $label: cairn disk replace $arch $FAIL_DISK, cairn rebuild ($reps times)"
  old=$(image_paths "$arch" "$LOGS/healthy.json" "$FAIL_DISK")
  rebuild_runs "$arch" "$reps" "$FAIL_DISK" "$old" "$T/new-disk-$FAIL_DISK" timed
  mapfile -t surv < <(image_paths "$arch" "$LOGS/rebuilt.json" $(seq 1 $((NDISKS - 1))))
  mapfile -t all < <(image_paths "$arch" "$LOGS/rebuilt.json" $(seq 0 $((NDISKS - 1))))
  read_baseline rebuild 3 "${surv[@]}"
  cat_baseline_note rebuild "${surv[@]}"

  fsck_after_rebuild "$arch"
  scrub_runs "$arch" "$reps" timed
  read_baseline scrub 3 "${all[@]}"

  log "== after the rebuild: mount (healthy), cold read, sha256"
  cairn_mount_existing "$arch" "$m" -o "$MOUNT_OPTS"
  timed_reads "$f" "$arch" "$label"
  verify_sha "$f" "$arch" "$label"
  cairn_unmount_and_fsck "$arch" "$m" "$label"
  check "after the rebuild, cairn fsck after unmount is clean" $((RC == 0)) "see the warning below"
  CUR_ARCH=""
  rm -rf "$arch" "$RB_NEW"
}

# ---------------------------------------------------------------- phase 5: SnapRAID reference
snapraid_version() { dpkg-query -W -f '${Version}' snapraid 2>/dev/null || snapraid --version | awk '{ print $2; exit }'; }
snapraid_phase() {
  local s=$T/snapraid i d part=$((SEQ_MIB / 4)) size_kib t0 t1 got
  log "== SnapRAID $(snapraid_version): 4 data + 2 parity, $(human_mib "$SEQ_MIB")"
  # snapraid sync refuses disks on one device: a tmpfs of their own for each (all in RAM, as the archive's images)
  size_kib=$(((part + 64) * 1024))
  for d in d1 d2 d3 d4 p1 p2; do bench_mount_tmpfs "$s/$d" "$size_kib"; done
  mkdir -p "$s/content"
  for i in 1 2 3 4; do
    run snapraid dd if="$T/src.bin" of="$s/d$i/part.bin" bs=1M skip=$(((i - 1) * part)) count="$part" status=none
  done
  cat >"$s/snapraid.conf" <<EOF
parity $s/p1/snapraid.parity
2-parity $s/p2/snapraid.2-parity
content $s/p1/snapraid.content
content $s/p2/snapraid.content
content $s/content/snapraid.content
data d1 $s/d1/
data d2 $s/d2/
data d3 $s/d3/
data d4 $s/d4/
EOF
  drop_caches
  t0=$(now_ns)
  run snapraid snapraid -c "$s/snapraid.conf" sync
  t1=$(now_ns)
  cp "$LOGS/last.out" "$LOGS/snapraid-sync.out"
  R[sync,snapraid]=$(rate "$SEQ_MIB" $((t1 - t0)))
  R[sync_s,snapraid]=$(secs $((t1 - t0)))
  check "snapraid sync ends with 'Everything OK'" "$(grep -q 'Everything OK' "$LOGS/last.out" && echo 1 || echo 0)" \
    "$(tail -n 5 "$LOGS/last.out" | tr '\n' '|')"
  drop_caches
  t0=$(now_ns)
  run snapraid snapraid -c "$s/snapraid.conf" scrub -p 100 -o 0
  t1=$(now_ns)
  cp "$LOGS/last.out" "$LOGS/snapraid-scrub.out"
  # bytes verified: the data and both parity files, as cairn scrub reads data and parity chunks
  R[scrub,snapraid]=$(rate $((SEQ_MIB + 2 * part)) $((t1 - t0)))
  R[scrub_s,snapraid]=$(secs $((t1 - t0)))
  check "snapraid scrub -p 100 ends with 'Everything OK'" "$(grep -q 'Everything OK' "$LOGS/last.out" && echo 1 || echo 0)" \
    "$(tail -n 5 "$LOGS/last.out" | tr '\n' '|')"
  run snapraid bash -c 'cat "$@" | sha256sum' cat "$s"/d{1,2,3,4}/part.bin
  got=$(cut -d' ' -f1 "$LOGS/last.out")
  check "snapraid: the data dirs hold the source's bytes" "$([[ $got == "$SRC_SHA" ]] && echo 1 || echo 0)" \
    "got $got, expected $SRC_SHA"
  log "snapraid: sync ${R[sync,snapraid]} MiB/s, scrub ${R[scrub,snapraid]} MiB/s"
}

# ---------------------------------------------------------------- main
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "cairn redundancy benchmark ($( ((quick)) && echo quick || echo full), $(human_mib "$SEQ_MIB")) in $TMP"
ec_phase
log "generating a $(human_mib "$SEQ_MIB") random source file on tmpfs"
run setup dd if=/dev/urandom of="$T/src.bin" bs=1M count="$SEQ_MIB" iflag=fullblock status=none
run setup sha256sum "$T/src.bin"
SRC_SHA=$(cut -d' ' -f1 "$LOGS/last.out")

seq_phase none "$T/cairn-none" "$MNTS/none"
cairn_unmount_and_fsck "$T/cairn-none" "$MNTS/none" none
check "none: cairn fsck after unmount is clean" $((RC == 0)) "see the warning below"
rm -rf "$T/cairn-none"
seq_phase "$RAID" "$T/cairn-rs" "$MNTS/rs"
degraded_phase "$T/cairn-rs" "$MNTS/rs"
rebuild_phase "$T/cairn-rs" "$MNTS/rs"
snapraid_phase

# ---------------------------------------------------------------- report
echo
echo "cairn redundancy benchmark — $( ((quick)) && echo "quick" || echo "full") run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $((mem_total_kib / 1024 / 1024)) GiB RAM, kernel $(uname -r)"
# cairn_revision falls back to this tree's HEAD when the binary is not in a git tree: say so instead
if git -C "$(dirname "$CAIRN")" rev-parse --show-toplevel >/dev/null 2>&1; then bin_rev=$(cairn_revision); else
  bin_rev="not built in a git tree"; fi
echo "cairn: $CAIRN ($bin_rev); ec_bench built from $repo ($(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "?")$(git -C "$repo" diff --quiet HEAD -- src 2>/dev/null || echo "+dirty"))"
echo "reps: $reps (median); archives: $NDISKS disks x $(human_mib "$DISK_MIB") (sparse images) on tmpfs, segments of $SEG_MIB MiB, mounted with -o $MOUNT_OPTS"
echo "load average at start: $LOAD_START, at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine skews the numbers)"
echo
echo "1. erasure code: ErasureCode vs isa-l called directly (tests/bench/ec_bench.cc)"
sed 's/^/   /' "$LOGS/ec_bench.out"
echo
echo "2-4. $(human_mib "$SEQ_MIB") of random data through the mount; MiB/s"
srow_header test 46 28
srow "seq write, dd 1M + fsync ($RAID)" "${R[write,none]:-}" "${R[write,$RAID]:-}" "$SEQ_TARGET" "raid=none"
srow "  same, until persisted (+ cairn persist)" "${R[persist,none]:-}" "${R[persist,$RAID]:-}" "$SEQ_TARGET" "raid=none"
srow "seq read, cold ($RAID)" "${R[read,none]:-}" "${R[read,$RAID]:-}" "$SEQ_TARGET" "raid=none"
srow "degraded read, disk $FAIL_DISK failed" "${R[read,$RAID]:-}" "${R[read,degraded]:-}" "$DEGRADED_TARGET" "healthy $RAID read"
srow "rebuild of disk $FAIL_DISK (bytes it must read)" "${R[rebuild,base]:-}" "${R[rebuild,cairn]:-}" "$REBUILD_TARGET" "reading 7 survivors"
srow "  same, bytes written to the new disk" "${R[rebuild,base]:-}" "${R[rebuilt,cairn]:-}" "" "reading 7 survivors"
srow "scrub, all chunks (${R[scrub_s]:-?} s)" "${R[scrub,base]:-}" "${R[scrub,cairn]:-}" "" "reading all 8 images"
srow "seq read, cold, after the rebuild" "${R[read,$RAID]:-}" "${R[read,rebuild]:-}" "" "healthy $RAID read"
echo "(the baselines read tmpfs, i.e. memory: a rebuild that does any CPU work per byte cannot come near them; with
 disk-bound baselines the same ratio would mean something else)"
echo "(raid=none: persist took ${R[persist_s,none]:-?} s; $RAID: ${R[persist_s,$RAID]:-?} s. Disk $FAIL_DISK held ${R[chunks0]:-?} chunks ($(mib_of "${R[used0]:-0}") MiB) of ${R[seg_d0]:-?} segments, data chunks of ${R[seg_d0data]:-?} of $((SEQ_MIB / SEG_MIB)); the rebuild read $(mib_of "${R[rebuild_read]:-0}") MiB in $(secs "${R[rebuild_ns]:-0}") s)"
echo
echo "5. reference: SnapRAID $(snapraid_version), 4 data dirs + 2 parity files, one tmpfs each; MiB/s"
printf '%-46s %10s %10s %8s\n' test snapraid cairn cairn/snapraid
printf '%s\n' "$(printf '%.0s-' $(seq 1 78))"
printf '%-46s %10s %10s %8s\n' "sync ${R[sync_s,snapraid]:-?} s (data) / cairn persist alone" \
  "$(fmt "${R[sync,snapraid]:-}")" "$(fmt "${R[persistonly,$RAID]:-}")" \
  "$(ratio "${R[persistonly,$RAID]:-}" "${R[sync,snapraid]:-}")"
printf '%-46s %10s %10s %8s\n' "scrub -p 100 ${R[scrub_s,snapraid]:-?} s (data+parity) / cairn scrub" \
  "$(fmt "${R[scrub,snapraid]:-}")" "$(fmt "${R[scrub,cairn]:-}")" "$(ratio "${R[scrub,cairn]:-}" "${R[scrub,snapraid]:-}")"
echo
echo "summary: ec_bench ${R[ec,rows]:-0} rows, ${R[ec,miss]:-?} MISS (lowest ratio ${R[ec,min]:-?}, target >= ${EC_TARGET}x): $( ((${R[ec,rows]:-0} > 0 && ${R[ec,miss]:-1} == 0)) && echo PASS || echo MISS)"
echo
finish_report "correctness checks: all $NCHECKS passed"
