"""Redundancy through the mount: mirror and Reed–Solomon across disks, intra-disk parity,
degraded reads with missing and damaged disks."""
import contextlib
import errno
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import CAIRN, GiB, MiB, cairn, interruptible, random_bytes, read_file, sha256, write_file


def getx(path, key):
    return os.getxattr(path, "user.cairn." + key).decode()


def chunks_of(path):
    """{segment index: [(disk, payload offset), ...]} from user.cairn.location."""
    out = {}
    for item in getx(path, "location").split():
        index, where = item.split("=", 1)
        where = where.split(",")[0]
        places, _ = where.rsplit("+", 1)
        out[int(index)] = [tuple(map(int, re.fullmatch(r"disk(\d+)@(\d+)", p).groups())) for p in places.split("/")]
    return out


def disk_path(archive, disk):
    """The image of `disk`, as cairn.conf names it (replaced disks live elsewhere)."""
    with open(os.path.join(archive.arch, "cairn.conf")) as conf:
        for line in conf:
            key, _, value = line.partition("=")
            if key.strip() == f"disk.{disk}":
                return os.path.join(archive.arch, value.strip())  # absolute values stay as they are
    raise AssertionError(f"no disk.{disk} in cairn.conf")


def overwrite(archive, disk, offset, data):
    """Writes `data` into the image of `disk` at `offset`, behind cairn's back."""
    with open(disk_path(archive, disk), "r+b") as f:
        f.seek(offset)
        f.write(data)


def make_archive(archive, disks):
    """Replaces the fixture's 4-disk archive with one of `disks` disks, mounted."""
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", str(disks), "--disk-size", "1G")
    archive.mount()


def persisted_files(archive, disks, raid, sizes, seed):
    """A mounted archive of `disks` disks holding files f0, f1, ... of `sizes` with user.cairn.raid=`raid`,
    persisted and evicted (reads come from the disks); returns {name: bytes}."""
    make_archive(archive, disks)
    os.setxattr(archive.mnt, "user.cairn.raid", raid.encode())
    files = {f"f{i}": random_bytes(size, seed + i) for i, size in enumerate(sizes)}
    for name, data in files.items():
        write_file(archive.m(name), data)
    archive.evict()
    return files


def test_raid_values_must_fit_the_disks(archive):
    write_file(archive.m("f"), b"x")
    with pytest.raises(OSError) as e:
        os.setxattr(archive.m("f"), "user.cairn.raid", b"rs-10-4")  # 14 chunks, 4 disks
    assert e.value.errno == errno.EINVAL
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert "puts 14 chunks on distinct disks; this archive has 4 disks" in log.read()
    os.setxattr(archive.m("f"), "user.cairn.raid", b"rs-2-2")
    os.setxattr(archive.m("f"), "user.cairn.raid", b"mirror-4")


@pytest.mark.no_fsck  # fsck rightly reports the damage left behind
def test_rs_4_2_survives_two_lost_disks_and_damage_on_two_more(archive):
    make_archive(archive, 8)
    os.makedirs(archive.m("safe"))
    os.setxattr(archive.m("safe"), "user.cairn.raid", b"rs-4-2")
    os.setxattr(archive.m("safe"), "user.cairn.idr", b"spc-16-1-s8")
    files = {f"f{i}": random_bytes(size, 50 + i) for i, size in enumerate([9 * MiB + 123, 4 * MiB, 300 * 1024, 7])}
    for name, data in files.items():
        write_file(archive.m("safe", name), data)
    archive.evict()  # from now on reads come from the disks
    assert "raid=rs-4-2" in getx(archive.m("safe", "f0"), "effective").split()
    layout_of = {name: chunks_of(archive.m("safe", name)) for name in files}
    assert all(len(places) == 6 and len({d for d, _ in places}) == 6 for places in layout_of["f0"].values())
    archive.umount()
    rng = random.Random(7)
    lost = rng.sample(range(8), 2)
    for disk in lost:
        os.remove(disk_path(archive, disk))
    damaged = [d for d in range(8) if d not in lost][:2]
    hit = 0
    for name in files:  # a silently corrupted block inside every chunk on the damaged disks
        for places in layout_of[name].values():
            for disk, offset in places:
                if disk in damaged:
                    overwrite(archive, disk, offset + 4096 * rng.randrange(0, 16) + rng.randrange(0, 4000),
                              os.urandom(64))
                    hit += 1
    assert hit >= 4
    r = cairn("mount", archive.arch, archive.mnt, check=False)
    assert r.returncode != 0 and "-o degraded" in r.stderr, r.stderr
    archive.mount("degraded")
    for name, data in files.items():
        assert sha256(read_file(archive.m("safe", name))) == sha256(data), name
    status = cairn("status", archive.arch).stdout
    assert status.count("MISSING") == 2
    assert re.search(r"health +\d+ extent\(s\) degraded \(cairn rebuild\), \d+ without redundancy left, 0 unreadable",
                     status), status
    assert "/safe/f0" in status  # the files whose extents lost both parity chunks are named
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        text = log.read()
    for disk in lost:
        assert f"disk {disk} is missing, running degraded" in text
    assert "with the bytes its redundancy below rebuilt" in text  # reads went to the disks and rewrote what IDR patched


@pytest.mark.no_fsck
def test_too_much_damage_is_eio_never_wrong_bytes(archive):
    data = persisted_files(archive, 4, "mirror-2", [2 * MiB], 60)["f0"]
    places = chunks_of(archive.m("f0"))[0]
    assert len(places) == 2 and places[0][0] != places[1][0]
    archive.umount()
    os.remove(disk_path(archive, places[0][0]))
    archive.mount("degraded")
    assert read_file(archive.m("f0")) == data  # one copy is enough
    archive.umount()
    overwrite(archive, places[1][0], places[1][1] + 100, b"\x00garbage\x00")
    archive.mount("degraded")
    with pytest.raises(OSError) as e:
        read_file(archive.m("f0"))
    assert e.value.errno == errno.EIO


def test_disk_fail_replace_rebuild_leaves_fsck_and_scrub_clean(archive):
    files = persisted_files(archive, 6, "rs-3-2", [6 * MiB + 5, 1 * MiB, 100 * 1024], 70)
    archive.umount()
    assert "failed" in cairn("disk", "fail", archive.arch, "2").stdout
    listing = cairn("disk", "list", archive.arch).stdout
    assert re.search(r"^\s+2 .* failed", listing, re.M), listing
    archive.mount("degraded")
    for name, data in files.items():
        assert read_file(archive.m(name)) == data, name
    archive.umount()
    new = os.path.join(archive.base, "new-disk-2.img")
    r = cairn("disk", "replace", archive.arch, "2", os.path.relpath(new))  # kept as an absolute path
    assert f"disk 2 is now {new}" in r.stdout and "run cairn rebuild" in r.stdout, r.stdout
    assert "needs cairn rebuild" in cairn("disk", "list", archive.arch).stdout
    r = cairn("rebuild", archive.arch, "--progress")
    assert "0 extent(s) lost" in r.stdout and "repaired" in r.stdout, r.stdout
    assert int(re.search(r"(\d+) repaired", r.stdout).group(1)) > 0
    assert "rebuild:" in r.stderr
    assert "needs cairn rebuild" not in cairn("disk", "list", archive.arch).stdout
    archive.fsck()
    r = cairn("scrub", archive.arch)
    assert "0 bad chunk(s)" in r.stdout, r.stdout
    archive.mount()  # not degraded: every disk is back
    archive.evict()
    for name, data in files.items():
        assert sha256(read_file(archive.m(name))) == sha256(data), name


def test_scrub_finds_and_rewrites_silent_corruption(archive):
    data = persisted_files(archive, 4, "mirror-2", [3 * MiB], 80)["f0"]
    disk, offset = chunks_of(archive.m("f0"))[0][1]
    archive.umount()
    overwrite(archive, disk, offset + 12345, b"\xde\xad\xbe\xef")
    r = cairn("fsck", archive.arch, check=False)
    assert r.returncode != 0 and "chunk 1" in r.stdout + r.stderr
    r = cairn("scrub", archive.arch, "--budget", "10m")
    assert "1 bad chunk(s), 1 repaired" in r.stdout, r.stdout
    assert "0 bad chunk(s)" in cairn("scrub", archive.arch).stdout
    archive.fsck()
    archive.mount()
    assert read_file(archive.m("f0")) == data


@pytest.mark.no_fsck
def test_an_extent_lost_on_another_disk_does_not_keep_a_replaced_disk_waiting(archive):
    files = persisted_files(archive, 4, "mirror-2", [2 * MiB], 95)
    os.mkdir(archive.m("single"))
    os.setxattr(archive.m("single"), "user.cairn.raid", b"none")
    write_file(archive.m("single", "f"), random_bytes(MiB, 96))
    archive.persist()
    single = chunks_of(archive.m("single", "f"))[0][0][0]
    replaced = next(d for d, _ in chunks_of(archive.m("f0"))[0] if d != single)
    archive.umount()
    cairn("disk", "fail", archive.arch, str(single))  # its raid=none extent is lost for good
    cairn("disk", "replace", archive.arch, str(replaced), os.path.join(archive.base, "new.img"))
    r = cairn("rebuild", archive.arch, check=False)
    assert "1 extent(s) lost" in r.stdout and int(re.search(r"(\d+) repaired", r.stdout).group(1)) >= 1, r.stdout
    listing = cairn("disk", "list", archive.arch).stdout
    assert "needs cairn rebuild" not in listing, listing  # the replaced disk is full again
    archive.mount("degraded")
    archive.evict()
    assert read_file(archive.m("f0")) == files["f0"]


@pytest.mark.no_fsck
def test_a_lost_extent_does_not_keep_later_scrubs_from_the_extents_before_it(archive):
    files = persisted_files(archive, 4, "mirror-2", [1 * MiB, 1 * MiB], 90)
    first, lost = chunks_of(archive.m("f0"))[0], chunks_of(archive.m("f1"))[0]
    archive.umount()
    for disk, offset in lost:  # both copies of f1's extent (written after f0's)
        overwrite(archive, disk, offset + 4321, b"\xba\xad")
    r = cairn("scrub", archive.arch, check=False)
    assert "1 extent(s) lost" in r.stdout, r.stdout
    overwrite(archive, first[0][0], first[0][1] + 999, b"\xba\xad")  # now f0's extent rots
    r = cairn("scrub", archive.arch, check=False)
    assert "1 extent(s) lost" in r.stdout and int(re.search(r"(\d+) repaired", r.stdout).group(1)) == 1, r.stdout
    archive.mount()
    archive.evict()
    assert read_file(archive.m("f0")) == files["f0"]


@pytest.mark.no_fsck  # a disk is missing and an extent is lost, by design
def test_a_scrub_with_a_disk_missing_checks_every_extent(archive):
    """Two disks, mirror-2, disk 1 gone: no disk may take the copies it held. A scrub reports
    each extent it cannot restore and goes on; before, the first such copy stopped every scrub
    (and rebuild) at its first batch, so the rot in the last file was never found."""
    files = persisted_files(archive, 2, "mirror-2", [1 * MiB, 1 * MiB, 1 * MiB], 95)
    last = chunks_of(archive.m("f2"))[0]
    archive.umount()
    os.remove(disk_path(archive, 1))
    disk, offset = next(place for place in last if place[0] == 0)
    overwrite(archive, disk, offset + 5000, b"\xba\xad")
    r = cairn("scrub", archive.arch, check=False)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "1 extent(s) lost" in out, out
    assert len(re.findall(r"chunk 1: not rewritten: no disk in a failure domain", out)) == 2, out
    archive.mount("degraded")
    assert read_file(archive.m("f0")) == files["f0"]
    assert read_file(archive.m("f1")) == files["f1"]
    with pytest.raises(OSError) as e:
        read_file(archive.m("f2"))
    assert e.value.errno == errno.EIO


def test_a_read_repairs_the_chunk_it_had_to_rebuild(archive):
    data = persisted_files(archive, 4, "rs-2-1", [5 * MiB], 90)["f0"]
    disk, offset = chunks_of(archive.m("f0"))[1][0]  # segment 1, data chunk 0
    archive.umount()
    overwrite(archive, disk, offset + 777, b"\x00" * 32)
    archive.mount()
    assert read_file(archive.m("f0")) == data
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert re.search(r"repaired extent \d+ chunk 0 on disk %d from the other chunks" % disk, log.read())
    archive.umount()
    archive.fsck()  # clean again without a scrub
    archive.mount()


def _damage(archive, kind, layout, rng):
    """Applies one kind of fault to the disk images of an unmounted 8-disk archive; returns the
    mount options it then needs."""
    some_chunks = [place for places in layout.values() for place in places]
    if kind == "delete":
        os.remove(disk_path(archive, 5))
        return "degraded"
    if kind == "truncate":
        with open(disk_path(archive, 6), "r+b") as f:
            f.truncate(os.fstat(f.fileno()).st_size // 2)
        return "degraded"
    if kind == "zero-burst":  # a latent sector burst inside chunks on two disks
        for disk, offset in [p for p in some_chunks if p[0] in (1, 2)]:
            overwrite(archive, disk, offset + 3 * 4096, b"\0" * (6 * 4096))
        return None
    if kind == "bit-flips":
        for disk, offset in rng.sample(some_chunks, 6):
            with open(disk_path(archive, disk), "r+b") as f:
                for _ in range(3):
                    f.seek(offset + rng.randrange(0, MiB))
                    byte = f.read(1)
                    f.seek(-1, 1)
                    f.write(bytes([byte[0] ^ (1 << rng.randrange(8))]))
        return None
    raise AssertionError(kind)


@pytest.mark.no_fsck
@pytest.mark.parametrize("kind", ["delete", "truncate", "zero-burst", "bit-flips"])
def test_faults_end_with_correct_bytes(archive, kind):
    make_archive(archive, 8)
    os.setxattr(archive.mnt, "user.cairn.raid", b"rs-4-2")
    os.setxattr(archive.mnt, "user.cairn.idr", b"spc-16-1-s4")
    data = random_bytes(16 * MiB + 3, 100)
    write_file(archive.m("f"), data)
    archive.evict()
    layout = chunks_of(archive.m("f"))
    archive.umount()
    opts = _damage(archive, kind, layout, random.Random(kind))
    archive.mount(opts)
    assert sha256(read_file(archive.m("f"))) == sha256(data)


def damaged_single_disk_file(archive, seed):
    """/f, 2 MiB with raid=none idr=spc-16-1, persisted, with 100 bytes of one block overwritten
    on its disk, unmounted: its bytes, its disk and its payload's offset there."""
    os.setxattr(archive.mnt, "user.cairn.idr", b"spc-16-1")
    data = random_bytes(2 * MiB, seed)
    write_file(archive.m("f"), data)
    archive.evict()
    [(disk, offset)] = chunks_of(archive.m("f"))[0]
    archive.umount()
    overwrite(archive, disk, offset + 5 * 4096 + 10, b"\xff" * 100)
    return data, disk, offset


def test_a_read_that_intra_disk_parity_mends_logs_where_and_rewrites_the_chunk(archive):
    data, disk, offset = damaged_single_disk_file(archive, 111)
    archive.mount()
    assert read_file(archive.m("f")) == data
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        text = log.read()
    assert re.search(r"disk %d: extent \d+ chunk 0 at offset %d: damaged blocks, rebuilt by its intra-disk parity"
                     % (disk, offset - 4096), text), text[-2000:]  # where its header is, as other read errors say
    assert re.search(r"repaired extent \d+ chunk 0 on disk %d with the bytes its redundancy below rebuilt" % disk,
                     text), text[-2000:]
    archive.umount()
    archive.fsck()  # rewritten where it was: clean without a scrub
    archive.mount()


def test_intra_disk_parity_alone_repairs_a_single_disk_file(archive):
    """raid=none with idr: a silently damaged block is rebuilt on that disk alone; scrub rewrites it."""
    data, disk, offset = damaged_single_disk_file(archive, 110)
    r = cairn("fsck", archive.arch, check=False)
    assert r.returncode != 0 and "rebuilt by its intra-disk parity" in r.stdout + r.stderr
    assert "1 bad chunk(s), 1 repaired" in cairn("scrub", archive.arch).stdout
    archive.fsck()
    archive.mount()
    assert read_file(archive.m("f")) == data


def test_changing_raid_of_persisted_data_re_encodes_it(archive):
    archive.remount("reconcile_idle=3600")
    data = random_bytes(6 * MiB, 120)
    write_file(archive.m("f"), data)
    archive.evict()
    assert all(len(places) == 1 for places in chunks_of(archive.m("f")).values())
    os.setxattr(archive.m("f"), "user.cairn.raid", b"rs-2-1")
    assert getx(archive.m("f"), "state") == "out-of-policy"
    cairn("policy", "apply", archive.m("f"))
    assert getx(archive.m("f"), "state") == "persisted"
    assert all(len(places) == 3 for places in chunks_of(archive.m("f")).values())
    archive.evict()
    assert read_file(archive.m("f")) == data


@pytest.mark.parametrize("checksum", ["xxh3", "sha256", "blake3"])
def test_strong_checksums_are_stored_and_verified(archive, checksum):
    os.setxattr(archive.mnt, "user.cairn.raid", b"mirror-2")
    os.setxattr(archive.mnt, "user.cairn.checksum", checksum.encode())
    data = random_bytes(3 * MiB, 130)
    write_file(archive.m("f"), data)
    archive.evict()
    (disk, offset), _ = chunks_of(archive.m("f"))[0]
    out = cairn("inspect", archive.arch, "--disk", str(disk), "--offset", str(offset - 4096)).stdout
    assert re.search(r"crc32c [0-9a-f]{8}, %s [0-9a-f]{%d}$" % (checksum, 16 if checksum == "xxh3" else 64), out, re.M), out
    assert f"checksum={checksum}" in out
    archive.umount()
    overwrite(archive, disk, offset + 999, b"\x55" * 8)
    archive.mount()
    assert read_file(archive.m("f")) == data  # the other copy, and the damaged one rewritten
    archive.umount()
    archive.fsck()
    archive.mount()


def test_a_disk_failed_while_mounted_is_read_around_and_left_alone(archive):
    data = persisted_files(archive, 6, "rs-3-2", [8 * MiB], 140)["f0"]
    victim = chunks_of(archive.m("f0"))[0][0][0]  # holds data chunk 0 of segment 0
    r = cairn("disk", "fail", archive.arch, str(victim))
    assert "taken out of service" in r.stdout
    assert archive.is_mounted()
    assert read_file(archive.m("f0")) == data  # rebuilt from the other chunks on every read
    write_file(archive.m("new"), random_bytes(5 * MiB, 141))
    archive.persist()
    for places in chunks_of(archive.m("new")).values():
        assert victim not in [d for d, _ in places]  # nothing new goes to it
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert f"disk {victim} taken out of service" in log.read()
    archive.umount()
    assert "failed" in cairn("disk", "list", archive.arch).stdout  # it stays failed
    new = os.path.join(archive.base, "replacement.img")
    cairn("disk", "replace", archive.arch, str(victim), new)
    cairn("rebuild", archive.arch)
    archive.fsck()
    archive.mount()
    archive.evict()
    assert read_file(archive.m("f0")) == data


def test_replacing_a_disk_in_service_that_holds_the_only_copy_is_refused_unless_forced(archive):
    """A typo in the disk number of disk replace dropped a healthy disk's only copy of a
    raid=none file (rebuild then counted it lost). It is refused with nothing changed; a disk
    whose chunks the others rebuild is replaced, saying it was in service; --force overrides."""
    os.mkdir(archive.m("two"))
    os.setxattr(archive.m("two"), "user.cairn.raid", b"mirror-2")
    single, mirrored = random_bytes(1 * MiB, 61), random_bytes(1 * MiB, 62)
    write_file(archive.m("single"), single)
    write_file(archive.m("two", "mirrored"), mirrored)
    archive.persist()
    (holder, _), = chunks_of(archive.m("single"))[0]
    others = {disk for disk, _ in chunks_of(archive.m("two", "mirrored"))[0]} - {holder}
    archive.umount()
    conf = os.path.join(archive.arch, "cairn.conf")
    before = open(conf).read()
    refused = os.path.join(archive.base, "refused.img")
    r = cairn("disk", "replace", archive.arch, str(holder), refused, check=False)
    assert r.returncode == 1 and "holds 1 extent(s) that no other disk can rebuild" in r.stderr, r.stderr
    assert open(conf).read() == before and not os.path.exists(refused)
    if others:  # a disk of the mirror's other copy: the copy on the holder's side rebuilds it
        other = others.pop()
        r = cairn("disk", "replace", archive.arch, str(other), os.path.join(archive.base, "other.img"))
        assert f"disk {other} was in service" in r.stdout, r.stdout
        cairn("rebuild", archive.arch)
    r = cairn("disk", "replace", archive.arch, str(holder), os.path.join(archive.base, "forced.img"), "--force")
    assert f"disk {holder} was in service" in r.stdout, r.stdout
    r = cairn("rebuild", archive.arch, check=False)
    assert r.returncode == 1 and "1 extent(s) lost" in r.stdout, r.stdout
    archive.mount()
    archive.evict()
    assert read_file(archive.m("two", "mirrored")) == mirrored
    os.unlink(archive.m("single"))  # what --force lost is let go: fsck is clean again


def test_rebuild_and_scrub_run_on_a_mounted_archive_beside_other_work(archive):
    files = persisted_files(archive, 6, "rs-3-2", [3 * MiB + i for i in range(8)], 150)
    archive.umount()
    cairn("disk", "replace", archive.arch, "1", os.path.join(archive.base, "new-disk-1.img"))
    archive.mount()  # not degraded: the new disk is there, waiting to be filled
    assert read_file(archive.m("f0")) == files["f0"]  # read around disk 1
    # Writes, persists and deletes while the daemon rebuilds: nothing may be lost or corrupted.
    done = threading.Event()

    def churn():
        i = 0
        while not done.is_set() or i < 3:
            files[f"new{i}"] = random_bytes(2 * MiB, 160 + i)
            write_file(archive.m(f"new{i}"), files[f"new{i}"])
            archive.persist()
            if i % 2:
                os.unlink(archive.m(f"new{i}"))
                del files[f"new{i}"]
            i += 1

    writer = threading.Thread(target=churn)
    writer.start()
    os.unlink(archive.m("f7"))
    del files["f7"]
    try:
        r = cairn("rebuild", archive.mnt, "--progress")
    finally:
        done.set()
        writer.join()
    assert "0 extent(s) lost" in r.stdout, r.stdout
    assert int(re.search(r"(\d+) repaired", r.stdout).group(1)) > 0, r.stdout
    assert "rebuild:" in r.stderr
    with open(os.path.join(archive.arch, "cairn.conf")) as conf:
        assert "rebuild_disks" not in conf.read()  # disk 1 is in service again
    archive.persist()
    for places in chunks_of(archive.m("new0")).values():
        assert len(places) == 5  # new data may go to disk 1 again
    archive.evict()
    for name, data in files.items():
        assert read_file(archive.m(name)) == data, name
    # A silent error found by an online scrub is rewritten from the other chunks.
    disk, offset = chunks_of(archive.m("f1"))[0][0]
    overwrite(archive, disk, offset + 777, b"\x01\x02\x03\x04")
    r = cairn("scrub", archive.arch)
    assert "1 bad chunk(s), 1 repaired, 0 extent(s) lost" in r.stdout, r.stdout
    assert "0 bad chunk(s)" in cairn("scrub", archive.mnt).stdout
    archive.umount()
    archive.fsck()
    archive.mount()


def test_an_online_rebuild_moves_the_chunks_of_a_failed_disk_elsewhere(archive):
    data = persisted_files(archive, 6, "mirror-2", [6 * MiB], 170)["f0"]
    victim = chunks_of(archive.m("f0"))[0][0][0]
    cairn("disk", "fail", archive.arch, str(victim))
    r = cairn("rebuild", archive.arch)
    assert "0 extent(s) lost" in r.stdout and " 0 repaired" not in r.stdout, r.stdout
    for places in chunks_of(archive.m("f0")).values():
        assert victim not in [d for d, _ in places] and len(places) == 2
    archive.evict()
    assert read_file(archive.m("f0")) == data
    archive.umount()
    os.remove(disk_path(archive, victim))  # nothing on it is needed any more
    archive.mount("degraded")
    assert read_file(archive.m("f0")) == data
    archive.umount()
    cairn("disk", "replace", archive.arch, str(victim), os.path.join(archive.base, "spare.img"))
    assert "0 of 0 extents checked" in cairn("rebuild", archive.arch).stdout  # nothing left to rebuild
    archive.mount()


def interrupt_an_online_rebuild(archive):
    """Mounts, starts `cairn rebuild` at 20 MB/s and interrupts it after its first batch."""
    archive.mount()
    client = subprocess.Popen([CAIRN, "rebuild", archive.mnt, "--progress", "--rate", "20M"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        first = client.stderr.readline()  # after the first batch of 64 MiB
        assert first.startswith("rebuild: "), first
        client.send_signal(signal.SIGINT)
        client.wait(timeout=30)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    log = os.path.join(archive.arch, "cairn.log")
    deadline = time.monotonic() + 2  # throttled, the next batch would be due in 3 s: it notices at once
    while "(stopped early;" not in open(log).read():
        assert time.monotonic() < deadline, "the daemon went on rebuilding after the client left"
        time.sleep(0.1)


def rebuilt_counts(archive):
    """Runs `cairn rebuild` to its end; returns (extents checked, chunks repaired)."""
    r = cairn("rebuild", archive.mnt)
    done = re.search(r"(\d+) of (\d+) extents checked, .* (\d+) repaired, 0 extent\(s\) lost", r.stdout)
    assert done, r.stdout
    return int(done.group(2)), int(done.group(3))


def test_an_interrupted_online_rebuild_stops_at_once_and_continues_later(archive):
    files = persisted_files(archive, 6, "rs-3-2", [40 * MiB] * 5, 180)
    archive.umount()
    cairn("disk", "replace", archive.arch, "2", os.path.join(archive.base, "new-disk-2.img"))
    interrupt_an_online_rebuild(archive)
    total, repaired = rebuilt_counts(archive)
    assert 0 < repaired < total  # continued, did not start over
    archive.evict()
    for name, data in files.items():
        assert read_file(archive.m(name)) == data, name


def test_a_disk_replaced_again_under_the_same_path_is_rebuilt_whole(archive):
    """An interrupted rebuild continues where it stopped only onto the same disk: a new one,
    even at the path of the one it replaces (the image removed, a block device's name), holds
    none of what was rebuilt. Before, the second rebuild skipped what the first had done, and
    those chunks were missing from the new disk while the archive counted it whole."""
    files = persisted_files(archive, 6, "rs-3-2", [40 * MiB] * 5, 181)
    archive.umount()
    new_disk = os.path.join(archive.base, "new-disk-2.img")
    cairn("disk", "replace", archive.arch, "2", new_disk)
    interrupt_an_online_rebuild(archive)
    archive.umount()
    os.remove(new_disk)  # it failed too
    cairn("disk", "replace", archive.arch, "2", new_disk)
    archive.mount()
    total, repaired = rebuilt_counts(archive)
    assert repaired == total  # every extent has a chunk on disk 2
    archive.umount()
    r = cairn("scrub", archive.arch)
    assert " 0 bad chunk(s)" in r.stdout, r.stdout
    archive.mount()
    archive.evict()
    for name, data in files.items():
        assert read_file(archive.m(name)) == data, name


@contextlib.contextmanager
def loop_device(image, size):
    """A loop device over a new sparse file `image` of `size` bytes (skips without loop devices)."""
    with open(image, "wb") as f:
        f.truncate(size)
    r = subprocess.run(["losetup", "--find", "--show", image], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"no loop device: {r.stderr.strip()}")
    device = r.stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(["losetup", "-d", device], capture_output=True)


@pytest.mark.no_fsck  # checked before the devices go
def test_a_disk_is_replaced_by_a_block_device_even_under_the_old_disks_name(archive):
    """`disk replace` takes a block device, as mkfs --devices does: a disk swapped in, perhaps
    in the slot of the one it replaces and under its name. It refuses an existing file (it would
    be overwritten), a disk of the archive and the disk it replaces while that is in service."""
    files = persisted_files(archive, 4, "mirror-2", [8 * MiB] * 3, 190)
    archive.umount()
    existing = os.path.join(archive.base, "existing")
    write_file(existing, b"keep me")
    r = cairn("disk", "replace", archive.arch, "2", existing, check=False)
    assert r.returncode == 1 and "exists and is not a block device" in r.stderr, r
    assert read_file(existing) == b"keep me"
    with loop_device(os.path.join(archive.base, "drive"), GiB) as device:
        os.remove(disk_path(archive, 2))  # the disk died
        cairn("disk", "replace", archive.arch, "2", device)
        for disk in ("1", "2"):  # another disk's place, or its own while in service
            r = cairn("disk", "replace", archive.arch, disk, device, check=False)
            assert r.returncode == 1 and "a disk of this archive already" in r.stderr, (disk, r)
        r = cairn("rebuild", archive.arch)
        assert "0 extent(s) lost" in r.stdout and " 0 repaired" not in r.stdout, r.stdout
        # That drive dies too; another one takes its slot and its name, before a rebuild ends.
        subprocess.run(["losetup", "-d", device], check=True)
        with open(os.path.join(archive.base, "drive2"), "wb") as f:
            f.truncate(GiB)
        subprocess.run(["losetup", device, os.path.join(archive.base, "drive2")], check=True)
        cairn("disk", "replace", archive.arch, "2", device)
        r = cairn("rebuild", archive.arch)
        assert "0 extent(s) lost" in r.stdout and " 0 repaired" not in r.stdout, r.stdout
        assert " 0 bad chunk(s)" in cairn("scrub", archive.arch).stdout
        archive.fsck()
        archive.mount()
        for name, data in files.items():
            assert read_file(archive.m(name)) == data, name
        archive.umount()


def test_a_file_its_disks_have_no_room_for_holds_back_no_other_file(archive):
    """mirror-2, set after the data was written (the plan is made at the first persist), for a
    file its two disks cannot hold twice: it waits in the staging cache, named, and the other
    files go on to the disks (before, the no-space failure failed every batch it was in, and it
    led every batch after it). The log says so once, and again when it is persisted."""
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", "2", "--disk-size", "16M")
    archive.mount("persist_idle=3600")
    big = random_bytes(20 * MiB, 41)
    write_file(archive.m("big"), big)
    os.setxattr(archive.m("big"), "user.cairn.raid", b"mirror-2")
    write_file(archive.m("small"), b"small\n")
    r = cairn("persist", archive.arch, check=False)
    assert r.returncode != 0 and "not persisted" in r.stderr and "need as many disks with room" in r.stderr, r
    assert os.getxattr(archive.m("small"), "user.cairn.state") == b"persisted"
    assert os.getxattr(archive.m("big"), "user.cairn.state") != b"persisted"
    for _ in range(2):  # each retry fails the same way: logged once, not at every retry
        assert cairn("persist", archive.arch, check=False).returncode != 0
    log = os.path.join(archive.arch, "cairn.log")
    with open(log) as f:
        assert f.read().count(": not persisted, will retry") == 1
    os.setxattr(archive.m("big"), "user.cairn.raid", b"none")
    archive.persist()
    with open(log) as f:
        assert "its data reaches the disks again" in f.read()
    archive.evict()
    assert read_file(archive.m("big")) == big
    assert read_file(archive.m("small")) == b"small\n"
