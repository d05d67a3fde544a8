"""Lonestar groups through the mount: a 4x4:2+1 grid of image disks (buckets and two
dimensions of parity) beside a small pool. A tree written with raid=2d reads back after losing
any three disks, a crash at any step of a write or a parity flush loses no acknowledged byte,
files move between groups, and the raid values a group cannot keep are refused."""
import errno
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import (CAIRN, MiB, cairn, random_bytes, read_file, sha256, sha256_file, sh, wait_pid_gone,
                      write_file)

POOL_DISKS = 2  # disks 0, 1; the grid's 16 disks are 2..17, position p is disk 2 + p
# 4x4:2+1, row by row:  B B H B / B H B B / H B B H / V V V V
BUCKETS = [0, 1, 3, 4, 6, 7, 9, 10]
HP = [2, 5, 8, 11]
VP = [12, 13, 14, 15]


def disk(position):
    return POOL_DISKS + position


def log_text(archive):
    with open(os.path.join(archive.arch, "cairn.log"), errors="replace") as log:
        return log.read()


def make_lonestar(archive, mode="serialized", extra=()):
    """Replaces the fixture's archive with one of a 2-disk pool and a lonestar group `cold`,
    mounted, with a directory /cold placed in the group."""
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", str(POOL_DISKS), "--group", f"cold:lonestar:4x4:2+1:{mode}",
          "--disk-size", "256M")
    if extra:
        with open(os.path.join(archive.arch, "cairn.conf"), "a") as conf:
            conf.write("".join(line + "\n" for line in extra))
    archive.mount()
    os.mkdir(archive.m("cold"))
    os.setxattr(archive.m("cold"), "user.cairn.placement", b"group=cold")


def image(archive, d):
    return os.path.join(archive.arch, "disks", f"disk-{d:03}.img")


def make_tree(root):
    """A tree of files of every kind of size, for tar; {relative path: sha256}."""
    sizes = [0, 1, 4095, 4096, 70000, 5 * MiB + 1, 300, 12345, 9 * MiB]
    digests = {}
    for i, size in enumerate(sizes):
        rel = os.path.join(f"d{i % 3}", f"f{i}")
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        data = random_bytes(size, 700 + i)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
        digests[rel] = sha256(data)
    with open(os.path.join(root, "sparse"), "wb") as f:  # a hole between two pieces of data
        f.write(b"head")
        f.seek(6 * MiB)
        f.write(b"tail")
    digests["sparse"] = sha256_file(os.path.join(root, "sparse"))
    return digests


def check_tree(root, digests):
    for rel, digest in digests.items():
        assert sha256_file(os.path.join(root, rel)) == digest, rel


def check_tree_without(archive, disks, digests):
    """Mounts the unmounted archive degraded with the disk files `disks` moved aside, checks the
    tree under /cold, and puts them back."""
    for path in disks:
        os.rename(path, path + ".aside")
    try:
        archive.mount("degraded")
        check_tree(archive.m("cold"), digests)
        archive.umount()
    finally:
        for path in disks:
            os.rename(path + ".aside", path)


def flip_bytes(path, offset, count=8):
    with open(path, "r+b") as f:
        f.seek(offset)
        damaged = bytes(b ^ 0xFF for b in f.read(count))
        f.seek(offset)
        f.write(damaged)


def bucket_file_and_its_hp(archive, seed):
    """A 3 MiB file /cold/f persisted on a bucket of a new lonestar group, then unmounted: its
    bytes, its bucket's disk, where its chunk starts there, and the disk of the bucket's hP."""
    make_lonestar(archive)
    data = random_bytes(3 * MiB, seed)
    write_file(archive.m("cold", "f"), data)
    archive.persist()
    location = os.getxattr(archive.m("cold", "f"), "user.cairn.location").decode()
    found = re.search(r"@r\d+c\d+:disk(\d+)@(\d+)\+", location)
    assert found, location
    bucket, chunk = int(found.group(1)), int(found.group(2))
    hp = disk(HP[BUCKETS.index(bucket - POOL_DISKS) // 2])  # hPG i: buckets 2i and 2i+1, and HP[i]
    archive.umount()
    return data, bucket, chunk, hp


def replace_and_rebuild_one_wrong_chunk(archive, bucket, start, length):
    """Replaces the image of an unmounted archive's bucket by a new one and rebuilds it: one
    chunk rebuilt wrong is found and repaired, and the new image holds bytes start..+length as
    the old one did (not only readable: right on the disk)."""
    with open(image(archive, bucket), "rb") as f:
        f.seek(start)
        on_disk = f.read(length)
    os.unlink(image(archive, bucket))
    replacement = os.path.join(archive.base, "new-bucket.img")
    cairn("disk", "replace", archive.arch, str(bucket), replacement)
    r = cairn("rebuild", archive.arch)
    assert "1 bad chunk(s), 1 repaired" in r.stdout and "0 extent(s) lost" in r.stdout, r.stdout
    with open(replacement, "rb") as f:
        f.seek(start)
        assert f.read(length) == on_disk


def test_a_bucket_whose_row_is_damaged_at_the_same_bytes_is_rebuilt_through_its_column(archive):
    """Silent damage to a bucket and, at the same bytes, to its hP disk: rebuilt from its
    horizontal parity group the bytes fail their checksum, so the read tries the other ways
    the grid knows, each taking one more member of its two groups for lost, and the vertical
    group rebuilds them (it was EIO)."""
    data, bucket, chunk, hp = bucket_file_and_its_hp(archive, 901)
    for d in (bucket, hp):
        flip_bytes(image(archive, d), chunk + 200000)
    archive.mount()
    archive.evict()
    assert read_file(archive.m("cold", "f")) == data
    r = cairn("scrub", archive.arch)  # the hP range is recomputed (fsck at teardown)
    assert "0 extent(s) lost" in r.stdout, r.stdout


def test_a_rebuild_reads_back_what_it_rebuilt_and_rewrites_a_chunk_its_row_made_wrong(archive):
    """A bucket replaced while its hP disk is silently damaged at the bytes of a chunk on it: its
    row rebuilds those bytes wrong. The rebuild reads back every chunk it rebuilt, finds that one
    failing its checksum and rewrites it from the column (it reported success and left the wrong
    bytes until a scrub)."""
    data, bucket, chunk, hp = bucket_file_and_its_hp(archive, 902)
    flip_bytes(image(archive, hp), chunk + 200000)
    replace_and_rebuild_one_wrong_chunk(archive, bucket, chunk - 4096, 4096 + 3 * MiB)
    archive.mount()
    archive.evict()
    assert read_file(archive.m("cold", "f")) == data
    r = cairn("scrub", archive.mnt)  # what the rewrite left of the parity groups is made right (fsck at teardown)
    assert "0 extent(s) lost" in r.stdout, r.stdout


def test_a_mirrored_chunk_its_row_and_column_rebuild_wrong_is_rewritten_from_its_copy(archive):
    """A mirror-2 file whose first copy's bucket is replaced while its hP and vP disks are both
    silently damaged within that chunk: neither dimension rebuilds it right, so the rebuild
    takes it from the other copy, header included, and the replacement holds the bytes."""
    make_lonestar(archive)
    os.setxattr(archive.m("cold"), "user.cairn.raid", b"mirror-2")
    data = random_bytes(3 * MiB, 906)
    write_file(archive.m("cold", "f"), data)
    archive.persist()
    location = os.getxattr(archive.m("cold", "f"), "user.cairn.location").decode()
    copies = re.findall(r"@r\d+c\d+:disk(\d+)@(\d+)", location)
    assert len(copies) == 2, location
    bucket, chunk = int(copies[0][0]), int(copies[0][1])
    position = bucket - POOL_DISKS
    archive.umount()
    flip_bytes(image(archive, disk(HP[BUCKETS.index(position) // 2])), chunk + 200000)
    flip_bytes(image(archive, disk(VP[position % 4])), chunk + 2200000)
    replace_and_rebuild_one_wrong_chunk(archive, bucket, chunk - 4096, 4096 + 3 * MiB)
    archive.mount()
    archive.evict()
    assert read_file(archive.m("cold", "f")) == data
    r = cairn("scrub", archive.mnt)  # the parity ranges the damage left are recomputed
    summary = r.stdout.splitlines()[-1]
    assert "0 extent(s) lost" in summary and "2 parity range(s) recomputed" in summary, r.stdout
    assert summary in log_text(archive), "the daemon's log line left out the lonestar part"


def test_policy_apply_says_which_files_it_left_and_exits_1_when_a_policy_cannot_be_met(archive):
    """A file striped by its own raid=rs-1-1 whose directory then sends it to the lonestar
    group, which keeps extents whole: the reconciler leaves it as it is, and policy apply
    says so and exits 1 (it printed 0 re-encoded and exited 0)."""
    make_lonestar(archive)
    os.mkdir(archive.m("y"))
    write_file(archive.m("y", "f"), b"")
    os.setxattr(archive.m("y", "f"), "user.cairn.raid", b"rs-1-1")
    data = random_bytes(1 * MiB, 905)
    write_file(archive.m("y", "f"), data)
    archive.persist()
    os.setxattr(archive.m("y"), "user.cairn.placement", b"group=cold")
    r = cairn("policy", "apply", archive.m("y"), check=False)
    assert r.returncode == 1, r
    assert "1 out-of-policy file(s), 0 re-encoded, 1 left as they are" in r.stdout, r.stdout
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert "stays as it is: raid=rs-1-1" in log.read()
    assert read_file(archive.m("y", "f")) == data


def test_mkfs_refuses_a_geometry_naming_the_rule_it_breaks(archive):
    for spec, rule in [("cold:lonestar:4x4:3+1", "hn+1 < X"), ("cold:lonestar:5x4:3+1", "divisible"),
                       ("cold:lonestar:4x4:2+2", "hk"), ("cold:raid5:4", "expected NAME:pool:N")]:
        target = archive.s("new-" + spec.replace(":", "_"))
        r = cairn("mkfs", target, "--group", spec, "--disk-size", "64M", check=False)
        assert r.returncode == 2 and rule in r.stderr, (spec, r.stderr)
        assert not os.path.exists(os.path.join(target, "cairn.conf"))


def test_a_tree_reads_back_after_losing_any_three_disks_and_rebuilds(archive):
    """raid=2d: each file whole on one bucket; reading the tree after deleting three disk images
    (parity only, buckets only, or a bucket with its own hP and vP) needs only the parity; then
    the disks are replaced and rebuilt, and every parity relation holds again."""
    make_lonestar(archive)
    source = archive.s("source")
    digests = make_tree(source)
    sh(f"tar -C {source} -cf - . | tar -C {archive.m('cold')} -xf -")
    archive.evict()  # reads now come from the disks
    assert "raid=2d" in os.getxattr(archive.m("cold", "d0", "f0"), "user.cairn.effective").decode()
    archive.umount()
    for lost in [HP[:1] + VP[:2], BUCKETS[:3], [0, 2, 12], [4, 7, 13], [1, 9, 5]]:
        check_tree_without(archive, [image(archive, disk(p)) for p in lost], digests)
    lost = [3, 8, 14]  # a bucket, an hP and a vP for good
    for p in lost:
        os.unlink(image(archive, disk(p)))
        cairn("disk", "replace", archive.arch, str(disk(p)), os.path.join(archive.base, f"new-{p}.img"))
    archive.mount()  # until the rebuild, the mount says what is not covered by parity
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert "lonestar group cold: 768.0 MiB of its disks are not covered by their parity yet" in log.read()
    archive.umount()
    r = cairn("rebuild", archive.arch)
    assert "0 extent(s) lost" in r.stdout and "of lonestar disks rebuilt" in r.stdout, r.stdout
    archive.fsck()  # reads every chunk and checks every parity relation
    archive.mount()
    r = cairn("scrub", archive.mnt)
    assert "0 bad chunk(s)" in r.stdout and "parity range" not in r.stdout, r.stdout
    check_tree(archive.m("cold"), digests)


def test_a_rebuild_that_cannot_rebuild_a_range_says_so_and_exits_non_zero(archive):
    """A replaced bucket whose two parity groups each lost another member too (a 2x2 square
    of lost disks: no group has one member lost) cannot be rebuilt: the rebuild reports it
    and exits 1, and with the disks back a rebuild finishes."""
    make_lonestar(archive)
    digests = {}
    for i in range(8):
        data = random_bytes(MiB, 900 + i)
        write_file(archive.m("cold", f"f{i}"), data)
        digests[f"f{i}"] = sha256(data)
    archive.umount()
    os.unlink(image(archive, disk(0)))
    cairn("disk", "replace", archive.arch, str(disk(0)), os.path.join(archive.base, "new-0.img"))
    square = [image(archive, disk(p)) for p in (1, 4, 5)]  # with 0: hPGs 0 and 1, columns 0 and 1
    for path in square:
        os.rename(path, path + ".aside")
    try:
        r = cairn("rebuild", archive.arch, check=False)
        assert r.returncode == 1 and "stopped early" in r.stdout, (r.returncode, r.stdout, r.stderr)
        assert "cannot be rebuilt" in r.stdout and "lonestar group cold: lonestar" not in r.stdout, r.stdout
    finally:
        for path in square:
            os.rename(path + ".aside", path)
    r = cairn("rebuild", archive.arch)
    assert "stopped early" not in r.stdout, r.stdout
    archive.fsck()
    archive.mount()
    check_tree(archive.m("cold"), digests)


def test_a_group_on_devices_that_held_other_data_survives_losing_three(archive):
    """--devices: the group's devices (files here) held other data before; mkfs zeroes them, so
    the parity of what the group writes holds, and a tree reads back after losing a bucket with
    its hP and vP."""
    archive.umount()
    shutil.rmtree(archive.arch)
    devices = []
    for p in range(16):
        path = archive.s(f"dev{p}")
        write_file(path, random_bytes(32 * MiB, 900 + p))  # what the device held before
        devices.append(path)
    r = cairn("mkfs", archive.arch, "--disks", str(POOL_DISKS), "--disk-size", "64M",
              "--group", "cold:lonestar:4x4:2+1", "--devices", ",".join(devices))
    assert f"zeroing {devices[0]}" in r.stderr, r.stderr
    archive.mount()
    os.mkdir(archive.m("cold"))
    os.setxattr(archive.m("cold"), "user.cairn.placement", b"group=cold")
    source = archive.s("source")
    digests = make_tree(source)
    sh(f"tar -C {source} -cf - . | tar -C {archive.m('cold')} -xf -")
    archive.evict()
    archive.umount()
    archive.fsck()  # every parity relation holds
    check_tree_without(archive, [devices[p] for p in (0, 2, 12)], digests)  # bucket 0, its hP and its vP


def wait_parity_covered(archive, seconds=120):
    """Waits until group cold's parity covers all its disks (re-derived in the background)."""
    deadline = time.monotonic() + seconds
    while True:
        cold = next(g for g in archive.status()["groups"] if g["name"] == "cold")
        if cold["defective_bytes"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert cold["defective_bytes"] == 0, f"parity not re-derived in {seconds} s: {cold}"


def test_a_lost_journal_is_re_derived_in_the_background_of_the_mount(archive):
    """Without its journal the group's parity cannot be trusted: the next mount says so and
    re-derives all of it in the background (reads go on meanwhile), the parity then covers a
    tree that reads back after losing a bucket with its hP and vP."""
    make_lonestar(archive)
    source = archive.s("source")
    digests = make_tree(source)
    sh(f"tar -C {source} -cf - . | tar -C {archive.m('cold')} -xf -")
    archive.evict()
    archive.umount()
    os.unlink(os.path.join(archive.arch, "lonestar-cold.journal"))
    r = archive.mount()
    assert "the parity of the group cannot be trusted and is re-derived" in r.stdout + r.stderr, r
    check_tree(archive.m("cold"), digests)  # from the buckets, while the parity is re-derived
    wait_parity_covered(archive)
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        text = log.read()
    assert "the parity of the group cannot be trusted and is re-derived" in text, text[-2000:]  # found at open
    assert "2.0 GiB of its disks are not covered by their parity yet" in text, text[-2000:]
    assert re.search(r"lonestar group cold: re-deriving 2\.0 GiB of parity in the background", text), text[-2000:]
    assert "lonestar group cold: parity re-derived" in text, text[-2000:]
    archive.umount()
    archive.fsck()  # every parity relation holds
    check_tree_without(archive, [image(archive, disk(p)) for p in (0, 2, 12)], digests)


def test_an_old_copy_of_the_journal_put_back_is_taken_as_damaged_not_as_current(archive):
    """A copy of the journal taken while deltas waited (delayed mode) and put back after later
    writes: applied as current, its deltas would reach the parity a second time and its
    high-water marks would hide the later file. The catalog records the journal's epoch at
    each close, so the copy is found older, set aside, and all parity is re-derived."""
    make_lonestar(archive, mode="delayed")
    journal = os.path.join(archive.arch, "lonestar-cold.journal")
    first, second = random_bytes(3 * MiB, 903), random_bytes(3 * MiB, 904)
    write_file(archive.m("cold", "f1"), first)
    archive.persist()
    shutil.copy2(journal, archive.s("journal.copy"))  # its delta still waits for the parity
    write_file(archive.m("cold", "f2"), second)
    archive.persist()
    location = os.getxattr(archive.m("cold", "f1"), "user.cairn.location").decode()
    bucket = int(re.search(r"@r\d+c\d+:disk(\d+)@", location).group(1))
    archive.umount()
    shutil.copy2(archive.s("journal.copy"), journal)
    r = archive.mount()
    assert "is older than the catalog" in r.stdout + r.stderr, r
    assert "the parity of the group cannot be trusted and is re-derived" in r.stdout + r.stderr, r
    assert [p for p in os.listdir(archive.arch) if p.startswith("lonestar-cold.journal.damaged-")]
    archive.evict()
    assert read_file(archive.m("cold", "f1")) == first
    assert read_file(archive.m("cold", "f2")) == second
    wait_parity_covered(archive)
    archive.umount()
    archive.fsck()  # every parity relation holds
    r = archive.mount()  # the new journal carries the catalog's epoch: trusted again
    assert "older than the catalog" not in r.stdout + r.stderr, r
    archive.umount()
    os.rename(image(archive, bucket), archive.s("bucket.img"))  # f1's bucket lost: its parity rebuilds it
    try:
        archive.mount("degraded")
        archive.evict()
        assert read_file(archive.m("cold", "f1")) == first
        archive.umount()
    finally:
        os.rename(archive.s("bucket.img"), image(archive, bucket))
    archive.mount()


def damage_a_delta(journal):
    """Changes bytes in the middle of the first delta record of a lonestar journal (records:
    u32 crc, u32 length, u8 type, payload; type 4 is a delta: u64 txn, then its bytes)."""
    with open(journal, "r+b") as f:
        data = f.read()
        at = 0
        while at + 9 <= len(data):
            length = int.from_bytes(data[at + 4:at + 8], "little")
            if data[at + 8] == 4:
                f.seek(at + 9 + 8 + (length - 8) // 2)
                f.write(b"damage")
                return
            at += 9 + length
    raise AssertionError(f"{journal} holds no delta")


def wait_for_log(archive, pattern, seconds):
    deadline = time.monotonic() + seconds
    while True:
        with open(os.path.join(archive.arch, "cairn.log")) as log:
            text = log.read()
        if re.search(pattern, text) or time.monotonic() > deadline:
            return text
        time.sleep(0.1)


def test_a_damaged_delta_in_the_journal_is_never_applied_to_parity(archive):
    """Delayed mode keeps each write's delta in the group's journal until its parity follows.
    Bytes of a delta changed on the fast storage meanwhile fail its CRC when the flush (here at
    the unmount) reads it back: it is not applied, the parity it was owed is recorded as not
    covered, the next mount re-derives that in the background, and the tree then survives the
    loss of a bucket with its hP and vP."""
    make_lonestar(archive, "delayed")
    source = archive.s("source")
    digests = make_tree(source)
    sh(f"tar -C {source} -cf - . | tar -C {archive.m('cold')} -xf -")
    archive.evict()  # persisted: the deltas wait in the journal (far below the delta cache)
    cold = next(g for g in archive.status()["groups"] if g["name"] == "cold")
    assert cold["pending_delta_bytes"] > 0, cold
    damage_a_delta(os.path.join(archive.arch, "lonestar-cold.journal"))
    archive.umount()  # the flush reads every delta back
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        text = log.read()
    assert re.search(r"lonestar group cold: lonestar journal \S+: the delta of promise \d+ is damaged; the parity "
                     r"ranges it was owed are left to be recomputed", text), text[-2000:]
    r = archive.mount()
    assert "cannot be trusted" not in r.stdout + r.stderr, r  # compacted without the damaged record
    wait_parity_covered(archive)
    check_tree(archive.m("cold"), digests)
    archive.umount()
    archive.fsck()  # every parity relation holds
    check_tree_without(archive, [image(archive, disk(p)) for p in (0, 2, 12)], digests)


def test_parity_a_damaged_delta_owed_is_re_derived_while_mounted(archive):
    """Below the delta cache no parity follows a write; past twice it the flush starts at once. A
    delta damaged in the journal meanwhile is not applied; the parity it was owed is re-derived
    in the background of the same mount (not only at the next), and the tree then survives the
    loss of a bucket with its hP and vP."""
    make_lonestar(archive, "delayed", ["group.cold.delta_cache = 4M"])
    damaged = r"the delta of promise \d+ is damaged"
    digests = {}
    for name, size in (("f0", 3 * MiB), ("f1", 6 * MiB)):
        data = random_bytes(size, size)
        write_file(archive.m("cold", name), data)
        digests[name] = sha256(data)
        cairn("persist", archive.arch)  # synced; f0's deltas wait, f1's take them past twice the cache
        if name == "f0":
            cold = next(g for g in archive.status()["groups"] if g["name"] == "cold")
            assert cold["pending_delta_bytes"] > 0, cold
            damage_a_delta(os.path.join(archive.arch, "lonestar-cold.journal"))
    text = wait_for_log(archive, r"lonestar group cold: parity re-derived", 60)
    assert re.search(damaged, text), text[-2000:]
    assert "lonestar group cold: parity re-derived" in text, text[-2000:]
    wait_parity_covered(archive, 0)
    check_tree(archive.m("cold"), digests)
    archive.umount()
    archive.fsck()  # every parity relation holds
    check_tree_without(archive, [image(archive, disk(p)) for p in (0, 2, 12)], digests)


@pytest.mark.parametrize("mode,steps", [
    ("serialized", ["begin", "data", "data-synced", "data-marked", "hP-written", "hP", "vP", "vhP-written"]),
    ("direct", ["begin", "data", "parity", "data-synced", "parity-synced"]),
    ("delayed", ["begin", "data", "data-marked", "hP-written", "vP-written", "vhP", "vP"]),
])
def test_a_crash_at_any_step_keeps_every_acknowledged_byte(archive, mode, steps):
    """The daemon is killed (CAIRN_TEST_CRASH_AT, as kill -9) at a step boundary of a lonestar
    write or, in delayed mode, of a parity flush (the delta cache is small so that persisting
    flushes). After the remount replays the group's journal, every fsync'd byte reads back and
    every parity relation holds."""
    make_lonestar(archive, mode, ["group.cold.delta_cache = 64K"])
    for step in steps:
        data = {f"{step}-{i}": random_bytes(300_000 + 70_000 * i, sum(map(ord, step)) + i) for i in range(3)}
        archive.umount()
        archive.mount(env=dict(os.environ, CAIRN_TEST_CRASH_AT=step))
        pid = archive.daemon_pid()
        for name, payload in data.items():
            with open(archive.m("cold", name), "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())  # acknowledged
        subprocess.run([CAIRN, "persist", archive.arch], capture_output=True, timeout=120)
        assert wait_pid_gone(pid, 60), f"the daemon did not stop at {step}"
        subprocess.run(["fusermount3", "-u", "-z", archive.mnt], check=False)
        archive.mount()
        for name, payload in data.items():
            assert read_file(archive.m("cold", name)) == payload, (step, name)
        archive.evict()  # and from the disks, once persisted again
        for name, payload in data.items():
            assert read_file(archive.m("cold", name)) == payload, (step, name)
        r = cairn("scrub", archive.mnt)
        assert "0 bad chunk(s)" in r.stdout and "parity range" not in r.stdout, (step, r.stdout)


def test_files_move_between_a_pool_and_the_grid_byte_for_byte(archive):
    make_lonestar(archive)
    os.mkdir(archive.m("projects"))
    files = {f"f{i}": random_bytes(size, 800 + i) for i, size in enumerate([3 * MiB, 200_000, 10])}
    for name, payload in files.items():
        write_file(archive.m("projects", name), payload)
    archive.persist()
    assert "cold." not in os.getxattr(archive.m("projects", "f0"), "user.cairn.location").decode()
    os.setxattr(archive.m("projects"), "user.cairn.placement", b"group=cold")
    assert os.getxattr(archive.m("projects", "f0"), "user.cairn.state") == b"out-of-policy"
    cairn("policy", "apply", archive.m("projects"))
    for name in files:
        location = os.getxattr(archive.m("projects", name), "user.cairn.location").decode()
        assert re.fullmatch(r"(\d+=cold\.b\d+@r\d+c\d+:disk\d+@\d+\+\d+(,cached)? ?)+", location), location
    archive.evict()
    for name, payload in files.items():
        assert read_file(archive.m("projects", name)) == payload
    os.removexattr(archive.m("projects"), "user.cairn.placement")  # back to the pool
    cairn("policy", "apply", archive.m("projects"))
    assert "cold." not in os.getxattr(archive.m("projects", "f1"), "user.cairn.location").decode()
    archive.evict()
    for name, payload in files.items():
        assert read_file(archive.m("projects", name)) == payload


def test_raid_values_the_group_cannot_keep_are_refused(archive):
    make_lonestar(archive)
    with pytest.raises(OSError) as e:
        os.setxattr(archive.m("cold"), "user.cairn.raid", b"rs-2-1")
    assert e.value.errno == errno.EINVAL
    write_file(archive.m("plain"), b"in the pool")
    with pytest.raises(OSError) as e:
        os.setxattr(archive.m("plain"), "user.cairn.raid", b"2d")
    assert e.value.errno == errno.EINVAL
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        text = log.read()
    assert "lonestar group cold keeps each whole on one bucket" in text and "group default is a pool" in text


def test_a_replaced_disk_is_as_large_as_the_disks_of_its_group(archive):
    """Not as large as the archive's largest disk: a lonestar group's members must be alike, or
    the archive no longer opens."""
    archive.umount()
    cairn("group", "add", archive.arch, "cold:lonestar:4x4:2+1", "--disk-size", "128M")
    new = os.path.join(archive.base, "new-5.img")
    r = cairn("disk", "replace", archive.arch, "5", new)
    assert os.path.getsize(new) == os.path.getsize(image(archive, 6)) < os.path.getsize(image(archive, 0)), r.stdout
    r = cairn("rebuild", archive.arch)
    assert "0 extent(s) lost" in r.stdout, r.stdout
    archive.mount()


def test_group_add_and_show(archive):
    """A lonestar group added to an existing archive; `cairn group show` draws its grid."""
    write_file(archive.m("before"), b"kept")
    archive.umount()
    r = cairn("group", "add", archive.arch, "cold:lonestar:4x4:2+1:delayed", "--disk-size", "128M")
    assert "added group cold (lonestar 4x4:2+1) as disks 4..19" in r.stdout, r.stdout
    shown = cairn("group", "show", archive.arch, "cold").stdout
    assert "lonestar 4x4:2+1, write mode delayed" in shown, shown
    rows = [line.split() for line in shown.splitlines() if line.startswith("  B") or line.startswith("  H")
            or line.startswith("  V")]
    assert [[cell for cell in row if cell in "BHV"] for row in rows] == [
        ["B", "B", "H", "B"], ["B", "H", "B", "B"], ["H", "B", "B", "H"], ["V", "V", "V", "V"]], shown
    assert cairn("group", "add", archive.arch, "cold:pool:2", "--disk-size", "64M", check=False).returncode == 1
    archive.mount()
    assert read_file(archive.m("before")) == b"kept"
    os.mkdir(archive.m("cold"))
    os.setxattr(archive.m("cold"), "user.cairn.placement", b"group=cold")
    write_file(archive.m("cold", "new"), random_bytes(MiB, 9))
    archive.persist()
    assert os.getxattr(archive.m("cold", "new"), "user.cairn.location").decode().startswith("0=cold.b")
    status = archive.status()
    cold = [g for g in status["groups"] if g["name"] == "cold"][0]
    assert cold["geometry"] == "4x4:2+1" and cold["journal"] == "ok", cold


def test_overwriting_a_file_on_a_missing_bucket_frees_nothing_there(archive):
    """Mounted degraded without the bucket a file is on, a write rewrites its segment elsewhere;
    the old chunk's space on the missing disk has no map to go back to (it is built from the
    catalog when the disk is back), and freeing it there was logged as a double free."""
    data, bucket, _, _ = bucket_file_and_its_hp(archive, 91)
    os.rename(image(archive, bucket), archive.s("bucket.img"))
    try:
        archive.mount("degraded")
        with open(archive.m("cold", "f"), "r+b") as f:
            os.pwrite(f.fileno(), b"Z" * 4096, MiB)
        data = data[:MiB] + b"Z" * 4096 + data[MiB + 4096:]
        archive.persist()
        location = os.getxattr(archive.m("cold", "f"), "user.cairn.location").decode()
        assert f":disk{bucket}@" not in location, location
        archive.evict()
        assert read_file(archive.m("cold", "f")) == data
        archive.umount()
    finally:
        os.rename(archive.s("bucket.img"), image(archive, bucket))
    with open(os.path.join(archive.arch, "cairn.log"), errors="replace") as log:
        assert "double free" not in log.read()
    archive.mount()
    archive.evict()
    assert read_file(archive.m("cold", "f")) == data


def test_rebuild_says_a_failed_bucket_waits_for_its_replacement(archive):
    """A pool's chunks move off a failed disk; a failed bucket's data is read through parity
    until a new disk replaces it: rebuild says so instead of reporting nothing to do."""
    data, bucket, _, _ = bucket_file_and_its_hp(archive, 92)
    archive.mount()
    cairn("disk", "fail", archive.arch, str(bucket))
    r = cairn("rebuild", archive.arch)
    assert (f"disk {bucket} of lonestar group cold is out of service (marked failed" in r.stdout and
            "rebuild fills its replacement, and until then the group runs degraded" in r.stdout), r.stdout
    archive.evict()
    assert read_file(archive.m("cold", "f")) == data
    archive.umount()
    cairn("disk", "replace", archive.arch, str(bucket), archive.s("new-bucket.img"))
    r = cairn("rebuild", archive.arch)
    assert "out of service" not in r.stdout, r.stdout
    archive.mount()
    archive.evict()
    assert read_file(archive.m("cold", "f")) == data


def test_a_damaged_extent_header_on_a_bucket_is_repaired_by_the_read_that_rebuilt_it(archive):
    """The bucket's chunk is the extent's only one: the header its parity rebuilt is the one to
    write back (there is no other copy on a disk to read it from), and the read repairs it."""
    data, bucket, chunk, _ = bucket_file_and_its_hp(archive, 93)
    with open(image(archive, bucket), "r+b") as f:  # the header block is the one before the payload
        f.seek(chunk - 4096 + 200)
        f.write(bytes(30))
    archive.mount()
    archive.evict()
    assert read_file(archive.m("cold", "f")) == data
    with open(os.path.join(archive.arch, "cairn.log"), errors="replace") as log:
        text = log.read()
    assert "cannot repair" not in text and "repaired extent" in text, text[-2000:]
    archive.umount()
    archive.fsck()  # the header and the parity over it agree again, without a scrub
    archive.mount()
