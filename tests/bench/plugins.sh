#!/bin/bash
# cairn plugin benchmark: the transform plugins through the mount, in one run.
#
#   compression  a real corpus (tar of /usr/share/doc and /usr/include) written into a compress=zstd (then lz4)
#                directory with dd + fsync, then 'cairn persist' (timed together: until persisted); its stored ratio
#                (cairn status: payload bytes after / before the chain) and MiB/s against 'zstd -3' and 'lz4' on the
#                same bytes, tmpfs to tmpfs (target: >= 0.8x their MiB/s, the ratio within 2 %); compressed files
#                take the archive's compressed_segment_size (8 MiB; each extent is compressed on its own, and a
#                larger one compresses better); then zstd again in a directory with segment_size=4M (what archives
#                made before compressed_segment_size do)
#   auto         random data written until persisted with compress=auto against compress=off, in turn after a
#                write that is not timed (target >= 0.9x)
#   workers      the corpus with zstd-3 and transform_workers=2 against transform_workers=1 (target >= 1.6x)
#   empty chain  compress=off (no plugin in the chain) with this cairn against --before BIN, a cairn from before
#                plugins, interleaved (target >= 0.98x); skipped without --before
# Archive, disks and sources all on one tmpfs (the same storage for cairn and the command lines). Medians of --reps.
#
# Usage: tests/bench/plugins.sh [--quick] [--reps N] [--before BIN]
#   --quick   /usr/include only and 256 MiB of random data (a smoke run)
# Environment: CAIRN_BIN (default build/cairn), BENCH_TMPDIR, BENCH_STEP_TIMEOUT (seconds per step, default 1800).
# Needs root (drop_caches, tmpfs) and /dev/fuse; installs zstd, lz4, attr and fuse3 with apt-get when missing.
# Prints PASS/MISS beside each target; exits 0 unless the benchmark itself or a correctness check fails.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
CAIRN=${CAIRN_BIN:-$repo/build/cairn}
STEP_TIMEOUT=${BENCH_STEP_TIMEOUT:-1800}
# shellcheck source=tests/bench/lib.sh
source "$repo/tests/bench/lib.sh"

quick=0 reps=3 before=""
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --reps) reps=${2:?--reps needs a number}; shift ;;
    --before) before=${2:?--before needs a cairn binary}; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--quick] [--reps N] [--before BIN]" >&2; exit 2 ;;
  esac
  shift
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "--reps needs a positive integer" >&2; exit 2; }
[[ -z $before || -x $before ]] || die "--before $before: not an executable"
if ((quick)); then CORPUS_DIRS=(usr/include) RANDOM_MIB=256; else CORPUS_DIRS=(usr/share/doc usr/include) RANDOM_MIB=1024; fi

bench_check_prereqs
need_pkgs=()
for c in zstd:zstd lz4:lz4 setfattr:attr fusermount3:fuse3 python3:python3; do
  command -v "${c%%:*}" >/dev/null || need_pkgs+=("${c#*:}")
done
bench_apt_install "${need_pkgs[@]}"
bench_make_tmp cairn-plugins-bench

# ---------------------------------------------------------------- sources and command-line baselines
START_NS=$(now_ns)
log "plugin benchmark ($( ((quick)) && echo quick || echo full), $reps reps) in $TMP"
run setup tar -cf "$T/corpus.tar" -C / "${CORPUS_DIRS[@]}"
CORPUS=$(stat -c %s "$T/corpus.tar")
run setup dd if=/dev/urandom of="$T/random.bin" bs=1M count="$RANDOM_MIB" iflag=fullblock status=none
RANDOM_BYTES=$((RANDOM_MIB * MiB))
log "corpus: $(mib_of "$CORPUS") MiB (${CORPUS_DIRS[*]}), random: $RANDOM_MIB MiB"

# cli NAME CMD...: CMD compresses the corpus to stdout; R[cli,NAME] = median MiB/s, R[cli_ratio,NAME] = bytes out / in
cli() {
  local name=$1 i t0 vals=(); shift
  for ((i = 0; i < reps; i++)); do
    drop_caches
    t0=$(now_ns)
    run "$name" bash -c '"$@" <"$0" >"$0.out"' "$T/corpus.tar" "$@"
    vals+=("$(mib_rate "$CORPUS" $(($(now_ns) - t0)))")
  done
  R[cli,$name]=$(median "${vals[@]}")
  R[cli_ratio,$name]=$(awk -v o="$(stat -c %s "$T/corpus.tar.out")" -v i="$CORPUS" 'BEGIN { printf "%.4f", o / i }')
  rm -f "$T/corpus.tar.out"
  log "$name command line: ${R[cli,$name]} MiB/s, ratio ${R[cli_ratio,$name]}"
}
cli zstd zstd -3 -T1 -q -c
cli lz4 lz4 -1 -q -c
# the same command lines on pieces of the corpus as large as cairn's extents (8 MiB, the compressed segment size
# cairn mkfs sets, and 4 MiB for zstd4), compressed one by one, as cairn compresses its extents
for c in "zstd 8 zstd -3 -T1 -q -c" "lz4 8 lz4 -1 -q -c" "zstd4 4 zstd -3 -T1 -q -c"; do
  read -r name piece_mib cmd <<<"$c"
  mkdir -p "$T/pieces"
  run setup split -b $((piece_mib * MiB)) "$T/corpus.tar" "$T/pieces/p"
  out=0
  for p in "$T/pieces"/p*; do out=$((out + $($cmd <"$p" | wc -c))); done
  R[piece_ratio,$name]=$(awk -v o="$out" -v i="$CORPUS" 'BEGIN { printf "%.4f", o / i }')
  rm -rf "$T/pieces"
done
R[cli_ratio,zstd4]=${R[cli_ratio,zstd]} R[cli,zstd4]=${R[cli,zstd]}

# ---------------------------------------------------------------- cairn
ARCH=$T/arch MNT=$MNTS/arch
disk_mib=$(((CORPUS + RANDOM_BYTES) / MiB / 2 + 1024))
# write_until_persisted SYS SRC DIR: dd SRC into DIR/f (fsync), then 'cairn persist'; W_RATE = its MiB/s, P_RATE = the
# persist's alone; R[stored,SYS] and R[logical,SYS] = payload bytes the write added after and before the chain
write_until_persisted() {
  local sys=$1 src=$2 dir=$3 bytes s0 l0
  bytes=$(stat -c %s "$src")
  # payload totals and a read-back; not for the empty-chain timings (a cairn from before plugins has no totals)
  local measured=1
  [[ $sys == off* || $sys == before* ]] && measured=0
  if ((measured)); then
    status_json "$ARCH" "$LOGS/st0.json"
    s0=$(jget "$LOGS/st0.json" "s['payload_stored_bytes']") l0=$(jget "$LOGS/st0.json" "s['payload_logical_bytes']")
  fi
  timed_write_persist "$sys" "$src" "$dir/f" "$ARCH"
  if ((measured)); then  # what went in comes out, from the disks
    status_json "$ARCH" "$LOGS/st1.json"
    R[stored,$sys]=$(($(jget "$LOGS/st1.json" "s['payload_stored_bytes']") - s0))
    R[logical,$sys]=$(($(jget "$LOGS/st1.json" "s['payload_logical_bytes']") - l0))
    evict_cold "$ARCH" "$sys"
    try cmp "$src" "$dir/f"
    check "$sys: the file read back from the disks is the one written" $((RC == 0)) "cmp exit $RC"
  fi
  run "$sys" rm -f "$dir/f"
  run "$sys" "$CAIRN" persist "$ARCH"  # the deletion, so the disks do not fill over the reps
  W_RATE=$(mib_rate "$bytes" $((DD_NS + PERSIST_NS))) P_RATE=$(mib_rate "$bytes" "$PERSIST_NS")
}
# session SYS SRC DIR REPS [mount options]: a mount of its own; R[SYS] = median MiB/s until persisted, R[persist,SYS]
# of the persist alone
session() {
  local sys=$1 src=$2 dir=$3 n=$4 opts=${5:-} i vals=() pvals=()
  cairn_mount_existing "$ARCH" "$MNT" ${opts:+-o "$opts"}
  for ((i = 0; i < n; i++)); do
    write_until_persisted "$sys" "$src" "$MNT/$dir"
    vals+=("$W_RATE") pvals+=("$P_RATE")
  done
  cairn_unmount "$MNT" "$sys"
  R[$sys]=$(median "${vals[@]}") R[persist,$sys]=$(median "${pvals[@]}")
  log "$sys: ${vals[*]} MiB/s until persisted (median ${R[$sys]}), the persist alone ${pvals[*]}"
}

cairn_mkfs "$ARCH" --disks 4 --disk-size "${disk_mib}M" --cache-size "$((CORPUS / MiB * 2 + RANDOM_MIB + 512))M"
cairn_mount_existing "$ARCH" "$MNT"
for d in zstd lz4 auto off zstd4; do
  run setup mkdir "$MNT/$d"
  [[ $d == off ]] || run setup setfattr -n user.cairn.compress -v "${d/zstd4/zstd}" "$MNT/$d"
done
run setup setfattr -n user.cairn.segment_size -v 4M "$MNT/zstd4"
run setup "$CAIRN" plugins "$ARCH"
NOTES+=("cairn plugins: $(tr '\n' '|' <"$LOGS/last.out")")
cairn_unmount "$MNT" setup

session zstd "$T/corpus.tar" zstd "$reps"
session lz4 "$T/corpus.tar" lz4 "$reps"
session zstd4 "$T/corpus.tar" zstd4 "$reps"
# auto against off: a write that is not timed first (the first GiB into fresh disk space pays for memory this
# machine has not touched yet), then the two in turn, so neither gets the faster moments of the run
session off-warmup "$T/random.bin" off 1
declare -a auto_vals=() off_vals=()
for ((i = 0; i < reps; i++)); do
  session auto "$T/random.bin" auto 1; auto_vals+=("${R[auto]}")
  session off "$T/random.bin" off 1; off_vals+=("${R[off]}")
done
R[auto]=$(median "${auto_vals[@]}") R[off]=$(median "${off_vals[@]}")
NOTES+=("auto and off in turn: MiB/s per rep until persisted, auto ${auto_vals[*]}; off ${off_vals[*]}")
session workers1 "$T/corpus.tar" zstd "$reps" transform_workers=1
session workers2 "$T/corpus.tar" zstd "$reps" transform_workers=2
if [[ -n $before ]]; then
  # interleaved: this cairn and the one from before plugins take turns on the same archive
  declare -a now_vals=() before_vals=()
  for ((i = 0; i < reps; i++)); do
    session off "$T/random.bin" off 1; now_vals+=("${R[off]}")
    saved=$CAIRN CAIRN=$before
    session before "$T/random.bin" off 1; before_vals+=("${R[before]}")
    CAIRN=$saved
  done
  R[chain_now]=$(median "${now_vals[@]}") R[chain_before]=$(median "${before_vals[@]}")
  NOTES+=("empty chain: MiB/s per rep, this cairn ${now_vals[*]}; before plugins ($before) ${before_vals[*]}")
fi
try "$CAIRN" fsck "$ARCH"
check "cairn fsck is clean after every run (it decodes every extent)" \
  "$([[ $RC == 0 && $(cat "$LOGS/last.out") == *": clean"* ]] && echo 1 || echo 0)" "$(head -c 300 "$LOGS/last.out")"

for c in zstd lz4 zstd4; do
  R[ratio,$c]=$(awk -v s="${R[stored,$c]}" -v l="${R[logical,$c]}" 'BEGIN { printf "%.4f", s / l }')
  R[ratio_diff,$c]=$(awk -v a="${R[ratio,$c]}" -v b="${R[cli_ratio,$c]}" 'BEGIN { printf "%+.1f %%", (a - b) / b * 100 }')
  R[ratio_ok,$c]=$(awk -v a="${R[ratio,$c]}" -v b="${R[cli_ratio,$c]}" 'BEGIN { d = (a - b) / b; print (d <= 0.02 && d >= -0.02) ? "PASS" : "MISS" }')
done

# ---------------------------------------------------------------- report
echo
echo "cairn plugin benchmark — $( ((quick)) && echo quick || echo full) run, $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) cores, kernel $(uname -r)"
echo "cairn: $CAIRN ($(cairn_revision)); corpus: tar of ${CORPUS_DIRS[*]}, $(mib_of "$CORPUS") MiB; random data: $RANDOM_MIB MiB"
echo "archive, disks and sources on one tmpfs; write with dd bs=1M + fsync, then 'cairn persist' (until persisted)"
echo "reps: $reps (median); whole run $(secs $(($(now_ns) - START_NS))) s"
echo
srow_header "test (MiB/s)" 46 32
srow "corpus, compress=zstd vs zstd -3 -T1" "${R[cli,zstd]}" "${R[zstd]}" 0.8 "the zstd command line"
srow "corpus, compress=lz4 vs lz4 -1" "${R[cli,lz4]}" "${R[lz4]}" 0.8 "the lz4 command line"
srow "corpus, zstd, segment_size=4M vs zstd -3" "${R[cli,zstd]}" "${R[zstd4]}" 0.8 "the zstd command line"
srow "random data, compress=auto vs compress=off" "${R[off]}" "${R[auto]}" 0.9 "compress=off"
srow "corpus, zstd-3, the persist: 2 workers vs 1" "${R[persist,workers1]}" "${R[persist,workers2]}" 1.6 "transform_workers=1"
srow "  the same until persisted (dd + persist)" "${R[workers1]}" "${R[workers2]}" "" "transform_workers=1"
if [[ -n $before ]]; then
  srow "compress=off: this cairn vs before plugins" "${R[chain_before]}" "${R[chain_now]}" 0.98 "cairn before plugins"
else
  echo "(compress=off against a cairn from before plugins: not measured; give --before BIN)"
fi
echo
printf '%-34s %8s %12s %10s  %-20s %s\n' "stored / logical bytes" cairn "command line" difference "target: within 2 %" \
  "command line on pieces of an extent's size"
for c in zstd lz4 zstd4; do
  label="corpus, $c"
  [[ $c == zstd4 ]] && label="corpus, zstd, segment_size=4M"
  printf '%-34s %8s %12s %10s  %-20s %s\n' "$label" "${R[ratio,$c]}" "${R[cli_ratio,$c]}" "${R[ratio_diff,$c]}" \
    "${R[ratio_ok,$c]}" "${R[piece_ratio,$c]}"
done
printf '%-34s %8s\n' "random data, auto" "$(awk -v s="${R[stored,auto]}" -v l="${R[logical,auto]}" 'BEGIN { printf "%.4f", s / l }')"
echo "(cairn compresses each extent, a segment of a file (8 MiB, or 4 MiB with segment_size=4M) plus its member table,"
echo " on its own; the command lines see one stream)"
echo "(encryption against gocryptfs: tests/bench/encryption.sh)"
echo
finish_report "correctness checks: all $NCHECKS passed"
