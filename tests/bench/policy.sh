#!/bin/bash
# cairn policy benchmark: what the admin's rules cost on metadata, and how fast 'cairn policy apply' re-encodes.
#
# Usage: tests/bench/policy.sh [--quick] [--reps N] [--only rules|reencode]
#   (default)  rules: 10,000 files of 100 B in 100 dirs created, persisted, stat'ed (cold) and unlinked on an
#              archive whose rules file has 1 rule and on one with 1,000 rules, none of which match the files;
#              the two alternate, median of 3 repetitions. reencode: a 1 GiB file of random data written with 4M
#              segments, set to 16M and re-encoded by 'cairn policy apply', against dd read+write of the same
#              data on the tmpfs that holds the archive's disks; then checked (sha256, state, segments).
#   --quick    smoke run: 2,000 files, 1 repetition, 256 MiB.
#   --reps N   repetitions of the rules test (default 3, --quick 1).
#   --only X   run only the rules test (X = rules) or only the re-encode test (X = reencode).
# Environment: CAIRN_BIN (default build/cairn), BENCH_TMPDIR (parent of the temp dir, default $TMPDIR or /tmp),
#   BENCH_STEP_TIMEOUT (seconds per step, default 1800).
# Needs root (drop_caches, tmpfs mounts) and /dev/fuse. Installs missing Debian packages with apt-get.
# Prints PASS/MISS beside each target; exits 1 if a step fails, fsck complains or the re-encoded file is wrong.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
CAIRN=${CAIRN_BIN:-$repo/build/cairn}
STEP_TIMEOUT=${BENCH_STEP_TIMEOUT:-1800}
CLEANUP_CAIRN_UMOUNT=1  # on an abnormal exit, try 'cairn umount' before fusermount3
# shellcheck source=tests/bench/lib.sh
source "$repo/tests/bench/lib.sh"

quick=0 reps="" only=all
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --reps) reps=${2:?--reps needs a number}; shift ;;
    --reps=*) reps=${1#--reps=} ;;
    --only) only=${2:?--only needs rules or reencode}; shift ;;
    --only=*) only=${1#--only=} ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--quick] [--reps N] [--only rules|reencode]" >&2; exit 2 ;;
  esac
  shift
done
[[ -z $reps || $reps =~ ^[1-9][0-9]*$ ]] || { echo "--reps needs a positive integer" >&2; exit 2; }
[[ $only == all || $only == rules || $only == reencode ]] || { echo "--only takes rules or reencode" >&2; exit 2; }

if ((quick)); then
  NFILES=2000 REENC_MIB=256 reps=${reps:-1}
else
  NFILES=10000 REENC_MIB=1024 reps=${reps:-3}
fi
NDIRS=100
FILE_BYTES=100
NRULES_BIG=1000
CREATE_TARGET=0.95 STAT_TARGET=0.95  # 1000-rules rate / 1-rule rate
OLD_SEG_MIB=4 NEW_SEG_MIB=16
MOUNT_OPTS=reconcile_idle=3600,reconcile_rate=0  # keep the background reconciler out of the timings
CFGS=(r1 r1000)
declare -A CFG_LABEL=([r1]="1 rule" [r1000]="$NRULES_BIG rules") CFG_NRULES=([r1]=1 [r1000]=$NRULES_BIG)

# ---------------------------------------------------------------- prerequisites
bench_check_prereqs
need_pkgs=()
command -v fusermount3 >/dev/null || need_pkgs+=(fuse3)
command -v setfattr >/dev/null && command -v getfattr >/dev/null || need_pkgs+=(attr)
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v python3 >/dev/null || need_pkgs+=(python3)
bench_apt_install "${need_pkgs[@]}"
((REENC_MIB % NEW_SEG_MIB == 0)) || die "the re-encode size must be a multiple of $NEW_SEG_MIB MiB"

# ---------------------------------------------------------------- temp dir and cleanup
bench_make_tmp cairn-policy-bench
need_kib=$(((5 * REENC_MIB * MiB + 2 * GiB) / 1024))
(($(mem_avail_kib) > need_kib)) || die "not enough free memory: need about $((need_kib / 1024)) MiB"

# ---------------------------------------------------------------- helpers built in the temp dir
log "building the metadata helper in $BIN"
bench_build_tool metabench

cat >"$BIN/gen_rules.py" <<'EOF'
# gen_rules.py OUT NRULES SEED: an admin rules file (cairn.rules(5)) of a few named policies, NRULES rules and a
# default. The last rule, 'probe', matches only files named *.cairn-bench-probe. No rule matches the benchmark's
# files (/meta-R/dNNN/fNNNNNN, 100 bytes, owned by root, just written, no user.* xattrs): each rule holds at least
# one condition that fails for them, among conditions that hold, in random order, so every lookup tries every rule.
import random, re, sys
out, nrules, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
projects = ["alpha", "beta", "gamma", "delta", "climate", "genome", "lidar", "seismic", "ocean", "cryo", "hubble",
            "plasma", "neuro", "fluid", "ice-core", "atlas"]
users = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
instruments = ["tem1", "sem2", "nmr600", "xrd", "ms-orbitrap", "lightsheet", "cryo-em", "sequencer3"]
exts = ["log", "nc", "h5", "tif", "fits", "csv", "tmp", "bak", "dat", "raw", "mrc", "bam", "fastq", "parquet", "zarr",
        "iso", "mp4", "ckpt", "npz", "json"]
tags = ["user.project", "user.archive.state", "user.retention", "user.owner.team", "user.dataset", "user.keep"]
values = ["final", "raw", "\"alpha team\"", "7y", "scratch", "published", "\"do not delete\"", "v2"]
sizes = ["64K", "128K", "256K", "512K", "1M", "2M", "8M", "16M", "32M", "64M", "128M", "256M"]
policies = {"small-files": "segment_size=256K", "bulk": "segment_size=64M", "instrument-raw": "segment_size=256M",
            "media": "segment_size=16M"}
P = lambda l: rng.choice(l)

def killer():  # a condition that never holds for the benchmark's files
    k = rng.randrange(7)
    if k == 0:
        return "path " + P([f"/projects/{P(projects)}/**/raw/**", f"/instruments/{P(instruments)}/**",
                            f"/home/{P(users)}/**/*.{P(exts)}", f"/**/{P(projects)}/checkpoints/*",
                            f"/scratch/{P(users)}/**", f"/archive/{rng.randint(1990, 2030)}/**/{P(projects)}-*.{P(exts)}",
                            f"/**/.snapshot/**", f"/projects/*/{P(projects)}[0-9][0-9]/**/*.{P(exts)}"])
    if k == 1:
        return "name " + P([f"*.{P(exts)}", f"{P(projects)}_*.{P(exts)}", "core.[0-9]*", "*~", "\".#*\"",
                            f"[A-Z]*.{P(exts)}", f"*.{P(exts)}.gz", f"*.[{P(exts)[0]}{P(exts)[0].upper()}]*",
                            f"{P(users)}-????-??-??.{P(exts)}"])
    if k == 2:
        return P([f"size >= {P(sizes)}", f"size > {rng.randint(100, 10**6)}", f"size < {rng.randint(1, 100)}",
                  "size = 0", f"size>={rng.randint(1, 999)}G", f"size <= {rng.randint(0, 99)}"])
    if k == 3:
        return f"{P(['mtime', 'atime'])} {P(['>', '>='])} " + P([f"{rng.randint(30, 600)}m", f"{rng.randint(1, 48)}h",
                                                               f"{rng.randint(1, 400)}d", f"{rng.randint(1, 52)}w",
                                                               f"{rng.randint(1, 30)}y"])
    if k == 4:
        return P([f"xattr {P(tags)}", f"xattr {P(tags)} = {P(values)}"])
    if k == 5:
        return f"owner {rng.randint(1000, 60000)}"
    return f"group {rng.randint(1000, 60000)}"

def filler():  # a condition that holds for them
    return P(["size < 1G", "size <= 10M", "size > 0", "mtime < 1y", "atime < 52w", "mtime <= 30d", "path /**",
              "path /*/**", "name *[0-9]", "name f*", f"xattr {P(tags)} != {P(values)}", "owner 0", "group 0"])

lines = ["# Generated by tests/bench/policy.sh (gen_rules.py); see cairn.rules(5).", ""]
for name, setting in policies.items():
    lines += [f"policy {name}{' selectable' if rng.random() < 0.5 else ''}", f"    set {setting}", ""]
for i in range(nrules - 1):
    conds = [killer()] + [P([filler, killer])() for _ in range(rng.choice([0, 0, 1, 1, 1, 2, 3]))]
    rng.shuffle(conds)
    kind = re.match(r"[a-z]+", conds[0]).group(0)
    lines.append(f"rule {kind}-{P(projects)}-{i:04d}")
    if len(conds) > 1 and rng.random() < 0.5:
        lines.append("    where " + " and ".join(conds))
    else:
        lines.append("    where " + conds[0])
        lines += ["    and " + c for c in conds[1:]]
    r = rng.random()
    if r < 0.6:
        lines.append(f"    set segment_size={P(sizes)}")
    elif r < 0.85:
        lines.append(f"    set policy={P(list(policies))}")
    else:
        lines.append(f"    set policy={P(list(policies))} segment_size={P(sizes)}")
lines += ["rule probe", "    where name *.cairn-bench-probe", "    set segment_size=64K", "", "default",
          "    set segment_size=4M", ""]
with open(out, "w") as f:
    f.write("\n".join(lines))
EOF

# xattr_of FILE KEY: the value, or a "(getfattr ...)" text that no check accepts
xattr_of() {
  try getfattr --only-values -n "$2" "$1"
  if ((RC == 0)); then cat "$LOGS/last.out"; else echo "(getfattr -n $2 failed: $(head -c 300 "$LOGS/last.err"))"; fi
}
# ---------------------------------------------------------------- test 1: rules overhead on metadata
declare -A ARCH=() MNT=() PIDOF=() VALS=()
use_cfg() { CUR_ARCH=${ARCH[$1]}; CUR_PID=${PIDOF[$1]}; DPID=${PIDOF[$1]}; }

setup_rules_cfg() {  # setup_rules_cfg CFG: mkfs, rules file, mount
  local c=$1 arch=$T/cairn-$1 m=$MNTS/cairn-$1 t0 t1 src ok
  ARCH[$c]=$arch MNT[$c]=$m
  cairn_mkfs "$arch" --disks 4 --disk-size 2G
  run setup python3 "$BIN/gen_rules.py" "$arch/rules" "${CFG_NRULES[$c]}" 42
  t0=$(now_ns)
  run setup "$CAIRN" rules check "$arch/rules"
  t1=$(now_ns)
  R[check,$c]=$(secs $((t1 - t0)))
  t0=$(now_ns)
  cairn_mount_existing "$arch" "$m" -o "$MOUNT_OPTS"
  t1=$(now_ns)
  R[mount,$c]=$(secs $((t1 - t0)))
  PIDOF[$c]=$DPID
  log "$c: mounted $m (daemon pid $DPID, $(grep -c '^rule ' "$arch/rules") rules, mount took ${R[mount,$c]} s)"
  # the probe: the last rule must match it, which shows the daemon has all the rules and walks them to the end
  run "cairn-$c" mkdir "$m/probe"
  run "cairn-$c" cp "$BENCH_LIB_DIR/metabench.c" "$m/probe/p.cairn-bench-probe"
  run "cairn-$c" "$CAIRN" persist "$arch"
  src=$(xattr_of "$m/probe/p.cairn-bench-probe" user.cairn.effective.source)
  ok=0; [[ " $src " == *" segment_size=rule:probe "* ]] && ok=1
  check "${CFG_LABEL[$c]}: a probe file gets its segment size from rule 'probe', the last one" $ok \
    "user.cairn.effective.source is '$src'"
}

rules_rep() {  # rules_rep CFG REP
  local c=$1 rep=$2 m=${MNT[$1]} w t0 t1 v src st ok
  w=$m/meta-$rep
  use_cfg "$c"
  log "rep $rep, ${CFG_LABEL[$c]}: $(with_commas "$NFILES") files"
  run "cairn-$c" mkdir "$w"
  run "cairn-$c" "$BIN/metabench" mkdirs "$w" "$NFILES" "$NDIRS" 0
  run "cairn-$c" "$CAIRN" persist "${ARCH[$c]}"
  drop_caches
  run "cairn-$c" "$BIN/metabench" create "$w" "$NFILES" "$NDIRS" "$FILE_BYTES"
  VALS[create,$c]+=" $(cat "$LOGS/last.out")"
  # at once: closed files wait only for 0.5 s of quiet before the persister takes them in the background
  t0=$(now_ns)
  run "cairn-$c" "$CAIRN" persist "${ARCH[$c]}"
  t1=$(now_ns)
  VALS[persist,$c]+=" $(rate "$NFILES" $((t1 - t0)))"
  if ((rep == 1)); then
    src=$(xattr_of "$w/d007/f000007" user.cairn.effective.source)
    st=$(xattr_of "$w/d007/f000007" user.cairn.state)
    ok=0; [[ $st == persisted && " $src " == *" segment_size=rule:default "* ]] && ok=1
    check "${CFG_LABEL[$c]}: a benchmark file is persisted with no rule matching (rule:default)" $ok \
      "state '$st', user.cairn.effective.source '$src'"
  fi
  drop_caches
  run "cairn-$c" "$BIN/metabench" stat "$w" "$NFILES" "$NDIRS" "$FILE_BYTES"
  VALS[stat,$c]+=" $(cat "$LOGS/last.out")"
  drop_caches
  run "cairn-$c" "$BIN/metabench" unlink "$w" "$NFILES" "$NDIRS" 0
  VALS[unlink,$c]+=" $(cat "$LOGS/last.out")"
  run "cairn-$c" rm -rf "$w"
  v=${VALS[create,$c]##* }; log "rep $rep, ${CFG_LABEL[$c]}: create $v, persist ${VALS[persist,$c]##* }, stat ${VALS[stat,$c]##* }, unlink ${VALS[unlink,$c]##* } files/s"
  sleep 1  # let this daemon finish its background work (freeing space) before the other one is timed
}

rules_phase() {
  local rep c k t0 t1 order
  log "== rules overhead: generating rules files and mounting two archives"
  for c in "${CFGS[@]}"; do setup_rules_cfg "$c"; done
  for ((rep = 1; rep <= reps; rep++)); do
    if ((rep % 2)); then order=(r1 r1000); else order=(r1000 r1); fi
    for c in "${order[@]}"; do rules_rep "$c" "$rep"; done
  done
  for k in create stat persist unlink; do
    for c in "${CFGS[@]}"; do
      # shellcheck disable=SC2086  # the list is space-separated on purpose
      R[$k,$c]=$(median ${VALS[$k,$c]})
    done
    NOTES+=("rules: $k files/s per repetition: 1 rule [${VALS[$k,r1]# }], $NRULES_BIG rules [${VALS[$k,r1000]# }]")
  done
  if ((reps > 1)); then
    for k in create stat; do
      # shellcheck disable=SC2086
      if awk -v a="${VALS[$k,r1]}" -v b="${VALS[$k,r1000]}" 'function lo(s, v, i, n, m) { n = split(s, v, " ")
            m = v[1]; for (i = 2; i <= n; i++) if (v[i] < m) m = v[i]; return m }
          function hi(s, v, i, n, m) { n = split(s, v, " "); m = v[1]; for (i = 2; i <= n; i++) if (v[i] > m) m = v[i]
            return m }
          BEGIN { exit !(lo(a) <= hi(b) && lo(b) <= hi(a)) }'; then
        NOTES+=("rules: the $k rates of the two configurations overlap (1 rule $(tr ' ' '\n' <<<"${VALS[$k,r1]# }" | sort -g | sed -n '1p;$p' | paste -sd-), $NRULES_BIG rules $(tr ' ' '\n' <<<"${VALS[$k,r1000]# }" | sort -g | sed -n '1p;$p' | paste -sd-)): the difference is within this machine's noise")
      fi
    done
  fi
  # reloading the big rules file (the daemon parses it again and queues a policy check of every file)
  use_cfg r1000
  t0=$(now_ns)
  run cairn-r1000 "$CAIRN" rules reload "${ARCH[r1000]}"
  t1=$(now_ns)
  NOTES+=("rules: 'cairn rules check' took ${R[check,r1]} s (1 rule) and ${R[check,r1000]} s ($NRULES_BIG rules); 'cairn mount' ${R[mount,r1]} s and ${R[mount,r1000]} s; 'cairn rules reload' of $NRULES_BIG rules $(secs $((t1 - t0))) s")
  for c in "${CFGS[@]}"; do
    use_cfg "$c"
    log "$c: unmounting"
    cairn_unmount_and_fsck "${ARCH[$c]}" "${MNT[$c]}" "cairn-$c"
    ((RC == 0)) || FAILURES+=("cairn fsck of the ${CFG_LABEL[$c]} archive failed (see the warning)")
  done
  CUR_ARCH=""
}

# ---------------------------------------------------------------- test 2: re-encode throughput
reencode_phase() {
  local arch=$T/cairn-reenc m=$MNTS/cairn-reenc f src_sha got st loc n_old n_new n_bad i t0 t1 vals=() out ok
  f=$m/big.bin
  log "== re-encode: generating $(human_mib "$REENC_MIB") of random data on tmpfs"
  run setup dd if=/dev/urandom of="$T/src.bin" bs=1M count="$REENC_MIB" iflag=fullblock status=none
  run setup sha256sum "$T/src.bin"
  src_sha=$(cut -d' ' -f1 "$LOGS/last.out")
  cairn_mkfs "$arch" --disks 4 --disk-size 2G --segment-size "${OLD_SEG_MIB}M"
  cairn_mount_existing "$arch" "$m" -o "$MOUNT_OPTS"
  log "re-encode: cairn daemon pid $DPID; writing the file"
  t0=$(now_ns)
  run cairn-reenc dd if="$T/src.bin" of="$f" bs=1M conv=fsync status=none
  t1=$(now_ns)
  R[write,reenc]=$(rate "$REENC_MIB" $((t1 - t0)))
  run cairn-reenc "$CAIRN" persist "$arch"
  R[persist,reenc]=$(rate "$REENC_MIB" $(($(now_ns) - t0)))
  R[persist_s,reenc]=$(secs $(($(now_ns) - t1)))
  st=$(xattr_of "$f" user.cairn.state)
  loc=$(xattr_of "$f" user.cairn.location)
  n_old=$(tr ' ' '\n' <<<"$loc" | grep -cE "^[0-9]+=disk[0-9]+@[0-9]+\+$((OLD_SEG_MIB * MiB))(,cached)?$" || true)
  ok=0; ((n_old == REENC_MIB / OLD_SEG_MIB)) && [[ $st == persisted ]] && ok=1
  check "before: the file is persisted in $((REENC_MIB / OLD_SEG_MIB)) segments of $OLD_SEG_MIB MiB" $ok \
    "state '$st', $n_old segments of $OLD_SEG_MIB MiB in user.cairn.location ('${loc:0:200}...')"

  log "re-encode: cold sequential read through the mount"
  run cairn-reenc "$CAIRN" evict "$arch"
  drop_caches
  t0=$(now_ns)
  run cairn-reenc dd if="$f" of=/dev/null bs=1M status=none
  t1=$(now_ns)
  R[read,reenc]=$(rate "$REENC_MIB" $((t1 - t0)))

  log "re-encode: ${OLD_SEG_MIB}M -> ${NEW_SEG_MIB}M segments with cairn policy apply"
  run cairn-reenc "$CAIRN" evict "$arch"
  drop_caches
  run cairn-reenc setfattr -n user.cairn.segment_size -v "${NEW_SEG_MIB}M" "$f"
  st=$(xattr_of "$f" user.cairn.state)
  ok=0; [[ $st == out-of-policy ]] && ok=1
  check "after setfattr the file is out-of-policy" $ok "user.cairn.state is '$st'"
  drop_caches
  t0=$(now_ns)
  run cairn-reenc "$CAIRN" policy apply "$f"
  t1=$(now_ns)
  out=$(cat "$LOGS/last.out")
  R[reencode,reenc]=$(rate "$REENC_MIB" $((t1 - t0)))
  R[reencode_s,reenc]=$(secs $((t1 - t0)))
  ok=0; [[ $out == *": 1 out-of-policy file(s), 1 re-encoded"* ]] && ok=1
  check "cairn policy apply re-encoded the file" $ok "it printed '$out'"
  log "re-encode: $(human_mib "$REENC_MIB") in ${R[reencode_s,reenc]} s = ${R[reencode,reenc]} MiB/s"

  # correctness, from the disks: state, layout, content
  st=$(xattr_of "$f" user.cairn.state)
  loc=$(xattr_of "$f" user.cairn.location)
  n_new=$(tr ' ' '\n' <<<"$loc" | grep -cE "^[0-9]+=disk[0-9]+@[0-9]+\+$((NEW_SEG_MIB * MiB))(,cached)?$" || true)
  n_bad=$(tr ' ' '\n' <<<"$loc" | grep -cvE "^[0-9]+=disk[0-9]+@[0-9]+\+$((NEW_SEG_MIB * MiB))(,cached)?$" || true)
  ok=0; [[ $st == persisted ]] && ok=1
  check "after the re-encode user.cairn.state is persisted" $ok "it is '$st'"
  ok=0; ((n_new == REENC_MIB / NEW_SEG_MIB && n_bad == 0)) && ok=1
  check "after the re-encode user.cairn.location lists $((REENC_MIB / NEW_SEG_MIB)) segments of $NEW_SEG_MIB MiB" $ok \
    "$n_new segments of $NEW_SEG_MIB MiB and $n_bad other entries ('${loc:0:300}...')"
  run cairn-reenc "$CAIRN" evict "$arch"
  drop_caches
  run cairn-reenc sha256sum "$f"
  got=$(cut -d' ' -f1 "$LOGS/last.out")
  ok=0; [[ $got == "$src_sha" ]] && ok=1
  check "after the re-encode (evict, drop_caches) the file's sha256 matches the source" $ok \
    "got $got, expected $src_sha"
  try "$CAIRN" status "$arch" --json
  ((RC == 0)) && NOTES+=("re-encode: after it, cairn status says $(python3 -c 'import json, sys
s = json.load(sys.stdin)
print("%d extents, %.1f MiB on disk for %.1f MiB of file data"
      % (s["extents"], s["extent_bytes"] / 2**20, s["bytes_persisted"] / 2**20))' <"$LOGS/last.out" 2>/dev/null || echo "?")")
  cairn_unmount_and_fsck "$arch" "$m" cairn-reenc
  ((RC == 0)) || FAILURES+=("cairn fsck of the re-encode archive failed (see the warning)")
  rm -rf "$arch"
  CUR_ARCH=""

  # baseline: read + write of the same data on the same file system (the tmpfs that held the disk images)
  log "re-encode baseline: dd read+write on the tmpfs, 3 times"
  for i in 1 2 3; do
    rm -f "$T/raw-copy.bin"
    drop_caches
    t0=$(now_ns)
    run raw dd if="$T/src.bin" of="$T/raw-copy.bin" bs=4M conv=fsync status=none
    t1=$(now_ns)
    vals+=("$(rate "$REENC_MIB" $((t1 - t0)))")
  done
  R[raw,reenc]=$(median "${vals[@]}")
  NOTES+=("re-encode baseline: dd read+write MiB/s per run: ${vals[*]} (median ${R[raw,reenc]})")
  rm -f "$T/raw-copy.bin" "$T/src.bin"
}

# ---------------------------------------------------------------- main
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "cairn policy benchmark ($( ((quick)) && echo quick || echo full), reps $reps, only $only) in $TMP"
[[ $only == reencode ]] || rules_phase
[[ $only == rules ]] || reencode_phase

# ---------------------------------------------------------------- report
echo
echo "cairn policy benchmark — $( ((quick)) && echo "quick" || echo "full") run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $((mem_total_kib / 1024 / 1024)) GiB RAM, kernel $(uname -r)"
echo "cairn: $CAIRN ($(cairn_revision)); archives: 4 disks x 2 GiB on tmpfs, mounted with -o $MOUNT_OPTS"
echo "load average at start: $LOAD_START (other work on this machine skews the numbers)"
if [[ $only != reencode ]]; then
  echo
  echo "rules overhead on metadata: $(with_commas "$NFILES") files of $FILE_BYTES B in $NDIRS dirs; median of $reps, configurations alternated"
  echo "(the $NRULES_BIG rules match none of the files, so every persist tries all of them and then the default)"
  printf '%-36s %-8s %10s %12s %9s  %-14s %s\n' test unit "1 rule" "$NRULES_BIG rules" "$NRULES_BIG/1" target result
  printf '%s\n' "$(printf '%.0s-' $(seq 1 102))"
  rrow() {  # rrow KEY LABEL TARGET(ratio or "")
    local r t res; r=$(ratio "${R[$1,r1000]:-}" "${R[$1,r1]:-}")
    if [[ -n $3 ]]; then t=">= ${3}x" res=$(verdict "ge:$3" "$r"); else t="(info)" res=""; fi
    printf '%-36s %-8s %10s %12s %9s  %-14s %s\n' "$2" files/s "$(fmt "${R[$1,r1]:-}")" "$(fmt "${R[$1,r1000]:-}")" \
      "$r" "$t" "$res"
  }
  rrow create "create + write $FILE_BYTES B + close" "$CREATE_TARGET"
  rrow stat "stat (cold)" "$STAT_TARGET"
  rrow persist "cairn persist (rules evaluated)" ""
  rrow unlink "unlink (cold)" ""
fi
if [[ $only != rules ]]; then
  echo
  echo "re-encode: $(human_mib "$REENC_MIB") of random data, $OLD_SEG_MIB MiB -> $NEW_SEG_MIB MiB segments, cairn policy apply (unthrottled), from cold"
  printf '%-52s %-7s %9s %13s\n' test unit value "vs raw r+w"
  printf '%s\n' "$(printf '%.0s-' $(seq 1 84))"
  erow() { printf '%-52s %-7s %9s %13s\n' "$2" MiB/s "$(fmt "${R[$1,reenc]:-}")" "$(ratio "${R[$1,reenc]:-}" "${R[raw,reenc]:-}")"; }
  erow reencode "cairn policy apply (read + write, ${R[reencode_s,reenc]:-?} s)"
  erow raw "raw read+write: dd bs=4M conv=fsync, same tmpfs"
  erow read "cairn sequential read through the mount (cold)"
  erow write "cairn write (dd 1M, fsync)"
  erow persist "  same, until persisted (+ ${R[persist_s,reenc]:-?} s cairn persist)"
  echo "re-encode / raw read+write: $(ratio "${R[reencode,reenc]:-}" "${R[raw,reenc]:-}") (information; no target)"
fi
echo
finish_report "correctness checks: all passed"
