#!/bin/bash
# cairn lonestar benchmark (issue 11): an 8x5:3+1 lonestar group per write mode against a pool group with raid=none,
# all on file-backed images on the machine's disk (not tmpfs), with a cold page cache. The archive's own files
# (catalog, promise journals with delayed mode's deltas, staging cache) are on a tmpfs, standing in for the fast
# storage (an SSD) they are meant for; ARCH/disks is a symlink to the images' directory on the disk.
#
# Usage: tests/bench/lonestar.sh [--quick] [--reps N] [--size MIB] [--allow-tmpfs]
#   One archive: pool group "default" (8 disks) and lonestar groups cold_s, cold_d, cold_l (8x5:3+1, 40 disks each,
#   write modes serialized, direct, delayed). Disk images are sparse, S + 1/16 + 32 MiB each.
#   1. Sequential write and cold read, each rep in its own mount: for pool (raid=none) and each mode, S MiB of random
#      data written with dd bs=1M + fsync, then 'cairn persist' (timed together: until persisted); 'cairn evict',
#      drop_caches, dd the file to /dev/null (timed). Targets: delayed write >= 0.8x pool, cold read >= 0.9x pool
#      (the other modes' writes are shown without a target). In rep 1 every file must sit whole on one bucket of its
#      group (user.cairn.location) and read back (from the disks) with the source's sha256.
#   2. Write amplification: the daemon logs, at unmount, per lonestar group, the bytes written to its buckets (B) and
#      the bytes its disks read (R) and wrote (W) since the mount, so the writes have mounts of their own (the reads
#      another); (R+W)/B of rep 1 (one file, fresh group) against the theory (seed-lonestar.md 2.3): 8 for serialized
#      and direct (d, hP, vP, vhP each read and written), 4 in fresh space (nothing is read past a disk's high-water
#      mark: the old bytes are zeros); delayed the same once its parity is flushed (the unmount does), the deltas
#      still pending after the unmount (cairn status) are reported. Merged deltas: group cold_m (delayed, added with
#      48 MiB disks) gets 24 files of 10.75 MiB one after the other, which the placer puts on the 24 buckets at the
#      same offsets; their deltas pass the 256 MiB delta_cache with the 24th file and are flushed in the background,
#      merged per parity disk: theory 2(d+p)/d = 2(24+16)/24 = 3.33, (d+p)/d = 1.67 in fresh space (for the hn
#      buckets of one hPG 2(2hn+2hk)/hn = 5.33, shown only). The same 24 files also go into the pool: the first 23
#      of each, until persisted, give a delayed write rate without a parity flush (info).
#   3. Rebuild of one bucket: the one holding the serialized rep-1 file is replaced ('cairn disk replace', the old
#      image removed) and 'cairn rebuild' timed (N times, each on yet another empty image), against dd of the 3
#      surviving images of its hPG (the smaller parity group: 4 disks vs 5 in a column) all at once, each baseline
#      rep right before a rebuild rep; target >= 0.7x.
#      Then 'cairn fsck' must be clean and the file read back from the disks must have the source's sha256.
#   --quick       smoke run: S = 64 MiB.
#   --reps N      writes, reads and rebuilds N times, the median counts (default 3); baselines min(N, 3) times.
#   --size MIB    S (default 512; or BENCH_SIZE_MIB), a multiple of 4, at least 64.
#   --allow-tmpfs accept a BENCH_DISK_DIR on tmpfs/ramfs.
# Environment: CAIRN_BIN (default build/cairn), BENCH_DISK_DIR (default /var/tmp), BENCH_STEP_TIMEOUT (seconds per
#   step, default 1800). The random source lives on a small tmpfs of our own; everything is removed on exit.
# Needs root (drop_caches, tmpfs mount) and /dev/fuse. Prints PASS/MISS beside each target; exits 1 if a step fails
# or a correctness check does (layout, sha256, rebuild, fsck).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
CAIRN=${CAIRN_BIN:-$repo/build/cairn}
STEP_TIMEOUT=${BENCH_STEP_TIMEOUT:-1800}
CLEANUP_CAIRN_UMOUNT=1  # on an abnormal exit, try 'cairn umount' before fusermount3
# shellcheck source=tests/bench/lib.sh
source "$repo/tests/bench/lib.sh"

quick=0 reps=3 size=${BENCH_SIZE_MIB:-} allow_tmpfs=0
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --reps) reps=${2:?--reps needs a number}; shift ;;
    --reps=*) reps=${1#--reps=} ;;
    --size) size=${2:?--size needs a number of MiB}; shift ;;
    --size=*) size=${1#--size=} ;;
    --allow-tmpfs) allow_tmpfs=1 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "usage: $0 [--quick] [--reps N] [--size MIB] [--allow-tmpfs]" >&2; exit 2 ;;
  esac
  shift
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "--reps needs a positive integer" >&2; exit 2; }
[[ -n $size ]] || { ((quick)) && size=64 || size=512; }
[[ $size =~ ^[0-9]+$ ]] && ((size >= 64 && size % 4 == 0)) || { echo "--size: a multiple of 4 MiB, at least 64" >&2; exit 2; }

S=$size                                          # MiB per sequential file
up4() { echo $((($1 + 3) / 4 * 4)); }
DISK_MIB=$(up4 $((S + S / 16 + 32)))             # a bucket holds one file of S MiB (extent headers, superblock)
POOL_NEED=$(((reps * S * 9 / 8 + 300) / 8 + 32))  # the pool's 8 disks hold every rep's file and 24 small ones
((DISK_MIB >= POOL_NEED)) || DISK_MIB=$(up4 "$POOL_NEED")
MDISK_MIB=48                                     # cold_m: a bucket holds one file of 10.75 MiB
CACHE_MIB=$((2 * S > 1024 ? 2 * S : 1024))
BASE_REPS=$((reps < 3 ? reps : 3))
GEOM=8x5:3+1 HN1=4 NBUCKETS=24                   # hPG = runs of hn+1 = 4 grid positions, 24 buckets
MODES=(serialized direct delayed)
declare -A GRP=([serialized]=cold_s [direct]=cold_d [delayed]=cold_l)
WRITE_TARGET=0.8 READ_TARGET=0.9 REBUILD_TARGET=0.7
MOUNT_OPTS=reconcile_idle=3600,reconcile_rate=0  # keep the background reconciler out of the timings
DISK_DIR=${BENCH_DISK_DIR:-/var/tmp}

# ---------------------------------------------------------------- prerequisites, temp dir on the disk
bench_check_prereqs
need_pkgs=()
for c in fusermount3:fuse3 setfattr:attr getfattr:attr python3:python3 findmnt:util-linux; do
  command -v "${c%%:*}" >/dev/null || need_pkgs+=("${c#*:}")
done
bench_apt_install $(printf '%s\n' "${need_pkgs[@]}" | sort -u)
[[ -d $DISK_DIR ]] || die "BENCH_DISK_DIR=$DISK_DIR is not a directory"
DISK_DIR=$(cd "$DISK_DIR" && pwd -P)
DISK_FSTYPE=$(stat -f -c %T "$DISK_DIR")
if [[ $DISK_FSTYPE == tmpfs || $DISK_FSTYPE == ramfs ]] && ((!allow_tmpfs)); then
  die "$DISK_DIR is on $DISK_FSTYPE: set BENCH_DISK_DIR to a disk-backed directory (or pass --allow-tmpfs)"
fi
# allocated at the peak: per lonestar group reps files and their parity (hP, 3 vP, vhP), the pool's copies, the
# staging cache, the merged case (24 files and 16 parity ranges), new images, 2 GiB of slack
need_mib=$((3 * 5 * reps * S + reps * S + CACHE_MIB + 430 + 2 * DISK_MIB + 2048))
avail_mib=$(($(df -P -k "$DISK_DIR" | awk 'NR == 2 { print $4 }') / 1024))
((avail_mib >= need_mib)) || die "$DISK_DIR: need about $need_mib MiB free, $avail_mib MiB available (use --size)"
BENCH_TMPDIR=$DISK_DIR
bench_make_tmp cairn-lonestar-bench
ARCH=$T/arch MNT=$MNTS/arch  # on the tmpfs: cairn's fast storage
DISK_ARCH=$TMP/arch          # mkfs makes the archive here, then all but its disks/ moves to ARCH
mkdir -p "$TMP/newdisks"

# ---------------------------------------------------------------- helpers
# group_field JSON GROUP EXPR: EXPR of that group's entry g in a cairn status --json
group_field() { jget "$1" "[$3 for g in s['groups'] if g['name'] == '$2'][0]"; }
# amp_of GROUP: "B R W" of GROUP's write-amplification line logged since LOG_OFF (empty: none)
amp_of() {
  tail -c +$((LOG_OFF + 1)) "$ARCH/cairn.log" | sed -nE "s/.*lonestar group $1: ([0-9]+) bytes written to its \
buckets; its disks had ([0-9]+) bytes read and ([0-9]+) written.*/\1 \2 \3/p" | tail -n 1
}
amp() { awk -v b="$1" -v r="$2" -v w="$3" 'BEGIN { if (b > 0) printf "%.2f", (r + w) / b; else print "-" }'; }
# where_is FILE: WHERE_GROUPS (lonestar groups named), WHERE_DISKS (distinct disks), WHERE_OFFS (each extent's
# @offset+length on its disk, in order) from user.cairn.location
where_is() {
  local loc
  run where getfattr --only-values -n user.cairn.location "$1"
  loc=$(cat "$LOGS/last.out")
  WHERE_GROUPS=$({ grep -oE '=[A-Za-z0-9_-]+\.b[0-9]+@' <<<"$loc" || true; } | sed -E 's/^=|\.b[0-9]+@$//g' | sort -u | xargs)
  WHERE_DISKS=$({ grep -oE 'disk[0-9]+@' <<<"$loc" || true; } | tr -dc '0-9\n' | sort -un | xargs)
  WHERE_OFFS=$({ grep -oE '@[0-9]+\+[0-9]+' <<<"$loc" || true; } | xargs)
}
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15) / t }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# sha_check FILE LABEL: from the disks (evict, drop_caches), FILE must have the source's sha256
sha_check() {
  evict_cold "$ARCH" "$2"
  run "$2" sha256sum "$1"
  local got; got=$(cut -d' ' -f1 "$LOGS/last.out")
  check "$2: sha256 of the file read back from the disks is the source's" "$([[ $got == "$SRC_SHA" ]] && echo 1 || echo 0)" \
    "got $got, expected $SRC_SHA"
}

# ---------------------------------------------------------------- phase 1: sequential write and cold read
# write_session SYS REP: a mount of its own (the daemon counts a group's disk I/O from mount to unmount): write
# seq-REP.bin into SYS's directory until persisted; then R[amp,SYS,REP] = "B R W" and the deltas still pending
declare -A WV=() RV=()
write_session() {
  local sys=$1 i=$2 f=$MNT/$1/seq-$2.bin g=${GRP[$1]:-} t0 t1 c0 c1 b r w
  LOG_OFF=$(stat -c %s "$ARCH/cairn.log")
  cairn_mount_existing "$ARCH" "$MNT" -o "$MOUNT_OPTS"
  drop_caches
  c0=$(cpu_s "$DPID") t0=$(now_ns)
  run "$sys" dd if="$T/src.bin" of="$f" bs=1M conv=fsync status=none
  run "$sys" "$CAIRN" persist "$ARCH"
  t1=$(now_ns) c1=$(cpu_s "$DPID")
  WV[$sys]+=" $(rate "$S" $((t1 - t0)))"
  log "$sys $i: write until persisted $(rate "$S" $((t1 - t0))) MiB/s ($(secs $((t1 - t0))) s, daemon CPU $(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }') s)"
  ((i == 1)) && NOTES+=("$sys: write+persist of $S MiB: $(secs $((t1 - t0))) s, daemon CPU $(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }') s")
  cairn_unmount "$MNT" "$sys $i"
  [[ -n $g ]] || return 0
  read -r b r w <<<"$(amp_of "$g")" || true
  R[amp,$sys,$i]="${b:-0} ${r:-0} ${w:-0}"
  check "$sys $i: the daemon logged the write amplification of group $g at unmount" "$([[ -n ${b:-} ]] && echo 1 || echo 0)" "no line in cairn.log"
  status_json "$ARCH" "$LOGS/st.json"
  R[pending,$sys,$i]=$(group_field "$LOGS/st.json" "$g" "g['pending_delta_bytes']")
}
# read_session SYS REP: a mount of its own: evict, drop_caches, read seq-REP.bin (timed); in rep 1 also its place
# on the disks and its sha256
read_session() {
  local sys=$1 i=$2 f=$MNT/$1/seq-$2.bin g=${GRP[$1]:-} t0 t1 re='^[0-7]( [0-7])*$'
  cairn_mount_existing "$ARCH" "$MNT" -o "$MOUNT_OPTS"
  evict_cold "$ARCH" "$sys $i"
  t0=$(now_ns)
  run "$sys" dd if="$f" of=/dev/null bs=1M status=none
  t1=$(now_ns)
  RV[$sys]+=" $(rate "$S" $((t1 - t0)))"
  log "$sys $i: cold read $(rate "$S" $((t1 - t0))) MiB/s"
  if ((i == 1)); then
    where_is "$f"
    if [[ -n $g ]]; then
      check "$sys: the file lies whole on one bucket of group $g" \
        "$([[ $WHERE_GROUPS == "$g" && $WHERE_DISKS =~ ^[0-9]+$ ]] && echo 1 || echo 0)" "groups '$WHERE_GROUPS', disks '$WHERE_DISKS'"
      [[ $sys != serialized ]] || R[rb_disk]=$WHERE_DISKS
    else
      check "pool: the file is on pool disks 0-7 only" \
        "$([[ -z $WHERE_GROUPS && $WHERE_DISKS =~ $re ]] && echo 1 || echo 0)" "groups '$WHERE_GROUPS', disks '$WHERE_DISKS'"
    fi
    sha_check "$f" "$sys"
  fi
  cairn_unmount "$MNT" "$sys $i"
}

# ---------------------------------------------------------------- phase 2: merged deltas (delayed, 24 equal files)
# 24 files of 10.75 MiB (43 x 256 KiB: 3 extents, about 10.96 MiB of parity units each): 23 files' deltas stay
# under the default delta_cache (256 MiB), the 24th's pass it, so its sync flushes all 24 in one merged batch
merged_phase() {
  local j f sys t0 prev=0 early=0 offs="" disks="" same=1 b r w pend=()
  local -A ns=([pool]=0 [merged]=0)
  log "== merged deltas: group cold_m (delayed), $NBUCKETS files of 10.75 MiB (and the same into the pool)"
  run merged "$CAIRN" group add "$ARCH" "cold_m:lonestar:$GEOM:delayed" --disk-size "${MDISK_MIB}M"
  LOG_OFF=$(stat -c %s "$ARCH/cairn.log")
  cairn_mount_existing "$ARCH" "$MNT" -o "$MOUNT_OPTS"
  run merged mkdir "$MNT/merged"
  run merged setfattr -n user.cairn.placement -v group=cold_m "$MNT/merged"
  for ((j = 0; j < NBUCKETS; j++)); do
    for sys in pool merged; do  # each file until persisted; the first 23 timed (no parity flush in them)
      f=$MNT/$sys/m-$j.bin t0=$(now_ns)
      run merged dd if="$T/src.bin" of="$f" bs=256K skip=$(((j * 43) % (S * 4 - 43))) count=43 conv=fsync status=none
      run merged "$CAIRN" persist "$ARCH"
      ((j == NBUCKETS - 1)) && R[last,$sys]=$(secs $(($(now_ns) - t0))) || ns[$sys]=$((ns[$sys] + $(now_ns) - t0))
    done
    where_is "$f"
    [[ -n $offs ]] || offs=$WHERE_OFFS
    [[ $WHERE_OFFS == "$offs" && $WHERE_GROUPS == cold_m ]] || same=0
    disks+="$WHERE_DISKS "
    status_json "$ARCH" "$LOGS/st.json"
    pend+=("$(group_field "$LOGS/st.json" cold_m "g['pending_delta_bytes']")")
    ((j == NBUCKETS - 1 || pend[-1] > prev)) || early=1  # a flush before the last file: not one batch
    prev=${pend[-1]}
  done
  for sys in pool merged; do R[small,$sys]=$(rate $(((NBUCKETS - 1) * 43 / 4)) "${ns[$sys]}"); done
  check "merged: the $NBUCKETS files lie on $NBUCKETS distinct buckets of cold_m at the same offsets" \
    "$( ((same)) && [[ $(tr ' ' '\n' <<<"$disks" | sort -u | grep -c .) == "$NBUCKETS" ]] && echo 1 || echo 0)" \
    "disks '$disks', same offsets: $same"
  cairn_unmount "$MNT" merged
  read -r b r w <<<"$(amp_of cold_m)" || true
  R[amp,merged]="${b:-0} ${r:-0} ${w:-0}"
  status_json "$ARCH" "$LOGS/st.json"
  R[mpending]=$(group_field "$LOGS/st.json" cold_m "g['pending_delta_bytes']")
  R[mearly]=$early
  NOTES+=("merged: the 24th file until persisted (its sync starts the background flush of all 24): ${R[last,merged]} s, into the pool ${R[last,pool]} s; MiB of deltas pending after each persist: $(for v in "${pend[@]}"; do printf '%s ' "$(mib_of "$v")"; done)")
}

# ---------------------------------------------------------------- phase 3: rebuild one bucket
rebuild_phase() {
  local d=${R[rb_disk]} i p q new old t0 t1 out vals=() bvals=()
  local -a gd surv
  status_json "$ARCH" "$LOGS/healthy.json"
  mapfile -t gd < <(group_field "$LOGS/healthy.json" cold_s "'\n'.join(map(str, g['disks']))")
  for ((p = 0; p < ${#gd[@]}; p++)); do if [[ ${gd[p]} == "$d" ]]; then break; fi; done
  ((p < 32)) || die "disk $d is not a bucket of cold_s"
  for ((q = p / HN1 * HN1; q < (p / HN1 + 1) * HN1; q++)); do ((q == p)) || surv+=("${gd[q]}"); done
  mapfile -t SURV_IMGS < <(image_paths "$ARCH" "$LOGS/healthy.json" "${surv[@]}")
  old=$(image_paths "$ARCH" "$LOGS/healthy.json" "$d")
  R[surv_alloc]=$(du -cm "${SURV_IMGS[@]}" | tail -n 1 | cut -f1)
  log "== rebuild: bucket disk $d (grid position $p of cold_s), hPG survivors: disks ${surv[*]}"
  # Each rep's baseline right before its rebuild: the two see the same state of the machine's disk (whose speed
  # drifts from minute to minute on a shared host) rather than one batch early and the other late.
  for ((i = 1; i <= reps; i++)); do
    if ((i <= BASE_REPS)); then
      drop_caches
      t0=$(now_ns)
      run baseline bash -c 'pids=() rc=0; for f; do dd if="$f" of=/dev/null bs=1M status=none & pids+=($!); done
        for p in "${pids[@]}"; do wait "$p" || rc=1; done; exit $rc' par "${SURV_IMGS[@]}"
      t1=$(now_ns)
      bvals+=("$((t1 - t0))")
    fi
    new=$TMP/newdisks/bucket-$i.img
    run rebuild "$CAIRN" disk replace "$ARCH" "$d" "$new"
    rm -f "$old"  # no longer a disk of the archive
    drop_caches
    t0=$(now_ns)
    run rebuild "$CAIRN" rebuild "$ARCH"
    t1=$(now_ns)
    out=$(grep '^rebuild:' "$LOGS/last.out" | tail -n 1 || true)
    check "rebuild $i: no extent lost, lonestar disk rebuilt" \
      "$([[ $out == *" 0 extent(s) lost"* && $out == *"of lonestar disks rebuilt"* ]] && echo 1 || echo 0)" "'$out'"
    vals+=("$((t1 - t0))")
    log "rebuild $i: $(secs $((t1 - t0))) s: $out"
    old=$new
  done
  NOTES+=("rebuild: cairn printed '$out'; seconds per run: $(for v in "${vals[@]}"; do printf '%s ' "$(secs "$v")"; done)")
  # MiB/s of the 3 survivors' apparent size (mostly data, some holes): what both must read
  R[rb,base]=$(mib_rate $((3 * DISK_MIB * MiB)) "$(median "${bvals[@]}")")
  R[rb,cairn]=$(mib_rate $((3 * DISK_MIB * MiB)) "$(median "${vals[@]}")")
  NOTES+=("rebuild baseline: dd of the 3 survivor images at once ($((3 * DISK_MIB)) MiB apparent, ${R[surv_alloc]} MiB allocated), seconds per run: $(for v in "${bvals[@]}"; do printf '%s ' "$(secs "$v")"; done)")
  fsck_after_rebuild "$ARCH"  # every extent and parity relation
  cairn_mount_existing "$ARCH" "$MNT" -o "$MOUNT_OPTS"
  sha_check "$MNT/serialized/seq-1.bin" "after the rebuild"
  cairn_unmount "$MNT" "after the rebuild"
}

# ---------------------------------------------------------------- main
START_NS=$(now_ns)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "cairn lonestar benchmark ($( ((quick)) && echo quick || echo full), $S MiB files, $reps reps) in $TMP"
run setup dd if=/dev/urandom of="$T/src.bin" bs=1M count="$S" iflag=fullblock status=none
run setup sha256sum "$T/src.bin"
SRC_SHA=$(cut -d' ' -f1 "$LOGS/last.out")
cairn_mkfs "$DISK_ARCH" --disks 8 --group "cold_s:lonestar:$GEOM:serialized" --group "cold_d:lonestar:$GEOM:direct" \
  --group "cold_l:lonestar:$GEOM:delayed" --disk-size "${DISK_MIB}M" --cache-size "${CACHE_MIB}M"
mkdir -m "$(stat -c %a "$DISK_ARCH")" "$ARCH"
for f in "$DISK_ARCH"/*; do [[ ${f##*/} == disks ]] || mv "$f" "$ARCH/"; done
ln -s "$DISK_ARCH/disks" "$ARCH/disks"
CUR_ARCH=$ARCH
cairn_mount_existing "$ARCH" "$MNT" -o "$MOUNT_OPTS"
run setup mkdir "$MNT/pool"
run setup setfattr -n user.cairn.raid -v none "$MNT/pool"
for m in "${MODES[@]}"; do
  run setup mkdir "$MNT/$m"
  run setup setfattr -n user.cairn.placement -v "group=${GRP[$m]}" "$MNT/$m"
done
cairn_unmount "$MNT" setup
for ((i = 1; i <= reps; i++)); do
  log "== rep $i of $reps: $S MiB written until persisted, then read cold, pool and each mode"
  for sys in pool "${MODES[@]}"; do write_session "$sys" "$i"; read_session "$sys" "$i"; done
done
for sys in pool "${MODES[@]}"; do
  read -ra v <<<"${WV[$sys]}"; R[write,$sys]=$(median "${v[@]}")
  read -ra v <<<"${RV[$sys]}"; R[read,$sys]=$(median "${v[@]}")
  ((reps == 1)) || NOTES+=("$sys: MiB/s per rep: write until persisted${WV[$sys]}; cold read${RV[$sys]}")
done
for sys in "${MODES[@]}"; do
  a=() p=()
  for ((i = 1; i <= reps; i++)); do a+=("$(amp ${R[amp,$sys,$i]})") p+=("$(mib_of "${R[pending,$sys,$i]}")"); done
  NOTES+=("$sys: (R+W)/B per rep: ${a[*]}; MiB of deltas left pending after each rep's unmount: ${p[*]}")
done
merged_phase
rebuild_phase
CUR_ARCH=""
TOTAL_S=$(secs $(($(now_ns) - START_NS)))

# ---------------------------------------------------------------- report
dev=$(findmnt -n -o SOURCE -T "$DISK_DIR" 2>/dev/null || echo "?") devinfo=""
pk=$(lsblk -dno PKNAME "$dev" 2>/dev/null || true); [[ -n $pk ]] || pk=$(basename "$dev")
[[ -r /sys/block/$pk/queue/rotational ]] && devinfo=" (rotational=$(cat "/sys/block/$pk/queue/rotational"))"
echo
echo "cairn lonestar benchmark — $( ((quick)) && echo quick || echo full) run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $((mem_total_kib / 1024 / 1024)) GiB RAM, kernel $(uname -r)"
echo "cairn: $CAIRN ($(cairn_revision))"
echo "disk: $DISK_DIR on $(findmnt -n -o FSTYPE -T "$DISK_DIR" 2>/dev/null || echo "$DISK_FSTYPE"), $dev$devinfo; page cache dropped before every timed step"
echo "archive: pool group of 8 disks + lonestar groups $GEOM (40 disks) per write mode, sparse images of $DISK_MIB MiB; files of $S MiB; staging cache $CACHE_MIB MiB; -o $MOUNT_OPTS"
echo "reps: $reps (median; baselines $BASE_REPS); whole run $TOTAL_S s; load average at start $LOAD_START, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
srow_header "test (MiB/s)" 44 34
for m in "${MODES[@]}"; do
  [[ $m == delayed ]] && t=$WRITE_TARGET || t=""
  srow "seq write until persisted, $m" "${R[write,pool]:-}" "${R[write,$m]:-}" "$t" "pool, raid=none"
done
srow "  delayed, 23 files of 10.75 MiB (no flush)" "${R[small,pool]:-}" "${R[small,merged]:-}" "" "the same files into the pool"
for m in "${MODES[@]}"; do
  srow "cold seq read, $m" "${R[read,pool]:-}" "${R[read,$m]:-}" "$READ_TARGET" "pool, raid=none"
done
srow "rebuild of one bucket (cold_s)" "${R[rb,base]:-}" "${R[rb,cairn]:-}" "$REBUILD_TARGET" "dd of its 3 hPG survivors at once"
echo "(rebuild MiB/s: the 3 survivors' apparent size, $((3 * DISK_MIB)) MiB, ${R[surv_alloc]:-?} MiB allocated, per second)"
echo
echo "write amplification: bytes of disk I/O (R + W, the daemon's count at unmount) per byte written to the buckets (B)"
printf '%-36s %10s %10s %10s %9s %8s\n' case "B MiB" "R MiB" "W MiB" measured theory
printf '%s\n' "$(printf '%.0s-' $(seq 1 88))"
arow() {  # arow LABEL KEY THEORY
  local b r w; read -r b r w <<<"${R[amp,$2]:-0 0 0}"
  printf '%-36s %10s %10s %10s %9s %8s\n' "$1" "$(mib_of "$b")" "$(mib_of "$r")" "$(mib_of "$w")" "$(amp "$b" "$r" "$w")" "$3"
}
arow "serialized, one file" serialized,1 "8 / 4"
arow "direct, one file" direct,1 "8 / 4"
arow "delayed, one file" delayed,1 "8 / 4"
arow "delayed, $NBUCKETS equal files, merged" merged "3.33 / 1.67"
read -r b r w <<<"${R[amp,delayed,1]:-0 0 0}"
proj=$(awk -v b="$b" -v r="$r" -v w="$w" -v p="${R[pending,delayed,1]:-0}" 'BEGIN { if (b > 0) printf "%.2f", (r + w + 6 * p) / b }')
echo "(theory: with the reads of a read-modify-write / in fresh space, where nothing past a disk's high-water mark is read;"
echo " delayed, one file: $(mib_of "${R[pending,delayed,1]:-0}") MiB of deltas were still pending after the unmount, each owing"
echo " 6 bytes of parity I/O: ${proj:-?} once they are flushed alone)"
echo "(merged: $( ((${R[mearly]:-1})) && echo "NOT one batch: the parity was flushed before the last file" ||
  echo "one batch: no flush before the last file"); $(mib_of "${R[mpending]:-0}") MiB of deltas left pending after the unmount;"
echo " 2(d+p)/d for d = 24 buckets, p = 16 parity disks; for the hn buckets of one hPG 2(2hn+2hk)/hn = 5.33, not measured)"
echo "(writes cover whole 68 KiB parity units: a 4 MiB extent plus its 8 KiB header is 4.07 MiB of disk range, ~1.6 % over the theory)"
echo
finish_report "correctness checks: all $NCHECKS passed"
