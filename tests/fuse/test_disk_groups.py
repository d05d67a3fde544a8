"""Disk groups named in cairn.conf: chunks are placed and rebuilt within a group, new data goes to
the first group, and a bad group definition stops the mount with the line and the problem."""
import errno
import mmap
import os
import re
import shutil

import pytest

from conftest import MiB, cairn, random_bytes, read_file, write_file
from test_redundancy import chunks_of


def regroup(archive, disks, lines):
    """Replaces the fixture's archive with an unmounted one of `disks` disks whose cairn.conf ends
    with `lines`."""
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", str(disks), "--disk-size", "1G")
    with open(os.path.join(archive.arch, "cairn.conf"), "a") as conf:
        conf.write("".join(line + "\n" for line in lines))


def test_chunks_are_placed_and_rebuilt_within_the_first_group(archive):
    regroup(archive, 6, ["group.hot.disks = 3-5", "group.cold.type = pool", "group.cold.disks = 0-2"])
    archive.mount()
    os.setxattr(archive.mnt, "user.cairn.raid", b"mirror-2")
    with pytest.raises(OSError) as e:  # group hot, where new data goes, has 3 of the 6 disks
        os.setxattr(archive.mnt, "user.cairn.raid", b"mirror-4")
    assert e.value.errno == errno.EINVAL
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert "raid=mirror-4 puts 4 chunks on distinct disks; group hot (where new data goes) has 3 disks" in log.read()
    files = {f"f{i}": random_bytes(size, 300 + i) for i, size in enumerate([5 * MiB, 300 * 1024, 10])}
    for name, data in files.items():
        write_file(archive.m(name), data)
    archive.evict()
    victim = chunks_of(archive.m("f0"))[0][0][0]
    listing = cairn("disk", "list", archive.arch).stdout
    assert re.search(r"^\s+0 .* cold\s+ok$", listing, re.M) and re.search(r"^\s+5 .* hot\s+ok$", listing, re.M), listing
    for name in files:
        for places in chunks_of(archive.m(name)).values():
            assert {disk for disk, _ in places} <= {3, 4, 5} and len(places) == 2, (name, places)

    cairn("disk", "fail", archive.arch, str(victim))
    r = cairn("rebuild", archive.arch)
    assert "0 extent(s) lost" in r.stdout and " 0 repaired" not in r.stdout, r.stdout
    for name in files:
        for places in chunks_of(archive.m(name)).values():
            disks = {disk for disk, _ in places}
            assert victim not in disks and disks <= {3, 4, 5} and len(disks) == 2, (name, places)
    archive.evict()
    for name, data in files.items():
        assert read_file(archive.m(name)) == data, name
    archive.umount()
    # The config keeps the groups when cairn rewrites it (disk fail recorded the victim).
    with open(os.path.join(archive.arch, "cairn.conf")) as conf:
        text = conf.read()
    assert "group.hot.disks = 3,4,5" in text and f"failed_disks = {victim}" in text, text
    cairn("disk", "replace", archive.arch, str(victim), os.path.join(archive.base, "spare.img"))
    assert "0 of 0 extents checked" in cairn("rebuild", archive.arch).stdout  # nothing left on the victim
    archive.mount()


@pytest.mark.no_fsck
@pytest.mark.parametrize("lines, problem", [
    (["group.a.disks = 0-2", "group.b.disks = 2,3"], "disk 2 is in groups a and b; a disk belongs to one group"),
    (["group.a.disks = 0-2"], "disk 3 is in no group; once groups are named, every disk belongs to one"),
    (["group.a.type = mirror", "group.a.disks = 0-3"], 'group.a.type = "mirror": unknown group type (known: pool, lonestar)'),
    (["group.a.disks = 0-4"], "group a lists disk 4; the archive has disks 0..3"),
])
def test_a_bad_group_stops_the_mount_naming_the_problem(archive, lines, problem):
    regroup(archive, 4, lines)
    r = cairn("mount", archive.arch, archive.mnt, check=False, timeout=120)
    assert r.returncode != 0 and problem in r.stdout + r.stderr, r.stdout + r.stderr
    assert not archive.is_mounted()
    r = cairn("status", archive.arch, check=False)
    assert r.returncode != 0 and problem in r.stdout + r.stderr, r.stdout + r.stderr


def log_text(archive):
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        return log.read()


def test_a_policy_naming_a_group_keeps_its_chunks_and_their_rebuild_there(archive):
    regroup(archive, 6, ["group.hot.disks = 3-5", "group.cold.disks = 0-2"])
    archive.mount()
    os.mkdir(archive.m("cold"))
    with pytest.raises(OSError) as e:
        os.setxattr(archive.m("cold"), "user.cairn.placement", b"group=lukewarm")
    assert e.value.errno == errno.EINVAL
    assert "placement=group=lukewarm: this archive has no disk group lukewarm (groups: hot, cold)" in log_text(archive)
    os.setxattr(archive.m("cold"), "user.cairn.placement", b"group=cold")
    os.setxattr(archive.m("cold"), "user.cairn.raid", b"mirror-2")
    files = {os.path.join("cold", f"f{i}"): random_bytes(size, 400 + i) for i, size in enumerate([5 * MiB, 10])}
    files["hot_file"] = random_bytes(300 * 1024, 410)
    for name, data in files.items():
        write_file(archive.m(name), data)
    archive.persist()
    archive.evict()

    def disks_of(name):
        return [{disk for disk, _ in places} for places in chunks_of(archive.m(name)).values()]

    for name in files:
        want = {0, 1, 2} if name.startswith("cold") else {3, 4, 5}
        assert all(disks <= want for disks in disks_of(name)), (name, disks_of(name))
    victim = min(disks_of("cold/f0")[0])
    cairn("disk", "fail", archive.arch, str(victim))
    r = cairn("rebuild", archive.arch)
    assert "0 extent(s) lost" in r.stdout, r.stdout
    for name in files:
        if name.startswith("cold"):
            for disks in disks_of(name):
                assert victim not in disks and disks <= {0, 1, 2} and len(disks) == 2, (name, disks)
    archive.evict()
    for name, data in files.items():
        assert read_file(archive.m(name)) == data, name
    archive.umount()
    cairn("disk", "replace", archive.arch, str(victim), os.path.join(archive.base, "spare.img"))
    archive.mount()


def test_a_plan_that_cannot_be_resolved_is_logged_as_such(archive):
    """A directory placed in a group that cairn.conf no longer has: persisting a file there
    fails naming the inode and the missing group (not the staging cache), and the data stays."""
    regroup(archive, 4, ["group.a.disks = 0,1", "group.b.disks = 2,3"])
    archive.mount()
    os.mkdir(archive.m("d"))
    os.setxattr(archive.m("d"), "user.cairn.placement", b"group=b")
    archive.umount()
    conf_path = os.path.join(archive.arch, "cairn.conf")
    with open(conf_path) as conf:
        text = conf.read()
    with open(conf_path, "w") as conf:
        conf.write(text.replace("group.b.", "group.c."))
    archive.mount()
    data = random_bytes(200 * 1024, 420)
    write_file(archive.m("d", "f"), data)
    ino = os.stat(archive.m("d", "f")).st_ino
    r = cairn("persist", archive.arch, check=False)
    assert r.returncode != 0, r.stdout + r.stderr
    log = log_text(archive)
    assert (f"inode {ino}: cannot resolve its policy into a write plan: placement=group=b: "
            "this archive has no disk group b") in log, log
    assert "staging cache" not in log, log
    assert read_file(archive.m("d", "f")) == data
    os.setxattr(archive.m("d"), "user.cairn.placement", b"group=c")
    archive.persist()
    archive.evict()
    assert all({disk for disk, _ in places} <= {2, 3} for places in chunks_of(archive.m("d", "f")).values())
    assert read_file(archive.m("d", "f")) == data


def test_group_add_refuses_a_device_listed_twice_or_already_a_disk_of_the_archive(archive):
    archive.umount()
    disk0 = os.path.join(archive.arch, "disks", "disk-000.img")
    with open(disk0, "rb") as f:
        head = f.read(MiB)
    spare = archive.s("spare")
    write_file(spare, random_bytes(MiB, 5))
    alias = archive.s("alias-of-disk-0")
    os.symlink(disk0, alias)
    r = cairn("group", "add", archive.arch, "extra:pool:2", "--devices", f"{spare},{alias}", check=False)
    assert r.returncode != 0 and "a disk of this archive already" in r.stderr, r
    others = [archive.s(f"dev{i}") for i in range(2)]
    for path in others:
        write_file(path, random_bytes(MiB, 6))
    r = cairn("group", "add", archive.arch, "extra:pool:3", "--devices", ",".join(others + [others[0]]), check=False)
    assert r.returncode != 0 and "are the same disk" in r.stderr, r
    with open(disk0, "rb") as f:
        assert f.read(MiB) == head  # neither zeroed nor formatted
    archive.mount()


def test_group_add_and_mkfs_refuse_bad_devices_before_writing_and_leave_nothing_behind(archive, tmp_path):
    """A device that is one of the archive's own files (its catalog, even through a link) or
    inside its directory is refused, so is a device too small; a relative device path is
    recorded absolute; a group add that fails part way removes the images it made; a failed
    mkfs leaves no half archive; and group add on a directory without cairn.conf makes no lock
    file there."""
    archive.umount()
    catalog = os.path.join(archive.arch, "catalog.db")
    with open(catalog, "rb") as f:
        before = f.read()
    link = archive.s("catalog-link")
    os.symlink(catalog, link)
    for device in (catalog, link, os.path.join(archive.arch, "disks")):
        r = cairn("group", "add", archive.arch, "g:pool:1", "--devices", device, check=False)
        assert r.returncode != 0 and "refused" in r.stderr, r
    with open(catalog, "rb") as f:
        assert f.read() == before
    small = archive.s("small.img")
    write_file(small, b"\0" * 16384)
    r = cairn("group", "add", archive.arch, "g:pool:1", "--devices", small, check=False)
    assert r.returncode != 0 and "too small" in r.stderr, r
    r = cairn("group", "add", archive.arch, "g:pool:2", "--disk-size", "4K", check=False)
    assert r.returncode != 0 and "too small" in r.stderr, r
    images = sorted(os.listdir(os.path.join(archive.arch, "disks")))
    # Part way: the second image cannot be made (a file is in its place), the first goes again.
    blocker = os.path.join(archive.arch, "disks", f"disk-{len(images) + 1:03}.img")
    write_file(blocker, b"x")
    r = cairn("group", "add", archive.arch, "g:pool:2", "--disk-size", "1M", check=False)
    assert r.returncode != 0 and "exists already" in r.stderr, r
    os.unlink(blocker)
    assert sorted(os.listdir(os.path.join(archive.arch, "disks"))) == images
    relative = "rel.img"
    write_file(os.path.join(tmp_path, relative), b"\0" * MiB)
    cairn("group", "add", archive.arch, "g:pool:1", "--devices", relative, cwd=tmp_path)
    status = cairn("disk", "list", archive.arch).stdout
    assert os.path.join(tmp_path, relative) in status and "missing" not in status, status
    archive.mount()
    archive.umount()
    plain = tmp_path / "not-an-archive"
    plain.mkdir()
    r = cairn("group", "add", str(plain), "g:pool:1", "--disk-size", "1M", check=False)
    assert r.returncode != 0 and "not a cairn archive" in r.stderr, r
    assert os.listdir(plain) == []
    fresh = str(tmp_path / "fresh")
    r = cairn("mkfs", fresh, "--disks", "2", "--disk-size", "1M", "--group", "g:pool:2", "--devices", small,
              check=False)
    assert r.returncode != 0 and "needs 2 disks" in r.stderr, r
    assert not os.path.exists(fresh)
    for bad in (" 4", "+4", "0x4", "4x"):
        r = cairn("mkfs", fresh, "--disks", bad, "--disk-size", "1M", check=False)
        assert r.returncode == 2, (bad, r)
    r = cairn("mkfs", fresh, "--disks", "1", "--disk-size", "12345678901234567890", check=False)  # ftruncate fails
    assert r.returncode != 0 and not os.path.exists(fresh), r
    archive.mount()


def test_a_write_is_checked_against_the_free_space_of_its_own_group_and_copies(archive):
    """A write may wait in the staging cache only when the group the file's policy sends it to
    can hold it with its copies: a file for a roomy lonestar group is taken although the first
    group is small; a mirror-2 file that its pool could not hold twice is refused with ENOSPC
    (not taken, to wait forever)."""
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", "2", "--group", "cold:lonestar:4x4:2+1", "--disk-size", "16M")
    archive.mount()
    os.mkdir(archive.m("cold"))
    os.setxattr(archive.m("cold"), "user.cairn.placement", b"group=cold")
    data = random_bytes(40 * MiB, 81)  # more than the 2 x 16M of the first group, less than 8 buckets of 16M
    write_file(archive.m("cold", "f"), data)
    cairn("persist", archive.arch)
    archive.evict()
    assert read_file(archive.m("cold", "f")) == data
    os.mkdir(archive.m("m"))
    os.setxattr(archive.m("m"), "user.cairn.raid", b"mirror-2")
    with pytest.raises(OSError) as e:
        write_file(archive.m("m", "big"), random_bytes(20 * MiB, 82))  # 2 x 20M > 2 x 16M
    assert e.value.errno == errno.ENOSPC, e
    os.unlink(archive.m("m", "big"))
    small = random_bytes(4 * MiB, 83)
    write_file(archive.m("m", "small"), small)
    cairn("persist", archive.arch)
    assert os.getxattr(archive.m("m", "small"), "user.cairn.state") == b"persisted"
    # What waits for another group does not count against this one: 20M wait for the
    # lonestar group (a file kept open, not persisted meanwhile), and 2 x 6M still fit the pool.
    archive.umount()
    archive.mount("persist_idle=3600")
    fd = os.open(archive.m("cold", "open"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, random_bytes(20 * MiB, 84))
        os.fsync(fd)
        write_file(archive.m("m", "more"), random_bytes(6 * MiB, 85))
    finally:
        os.close(fd)


def test_a_write_is_taken_only_while_the_disks_have_room_for_whole_segments(archive):
    """A segment is one chunk on one disk: room on a disk too small for a whole chunk holds
    none, so it does not count. Written until ENOSPC (O_DIRECT: the daemon answers each write
    itself), the file is persisted whole and the unmount succeeds; before, the room left over
    on each disk was counted, 63 MiB were taken, and no part of the file was ever persisted."""
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", "4", "--disk-size", "16M")
    archive.mount()
    path = archive.m("f")
    block = random_bytes(MiB, 86)
    buffer = mmap.mmap(-1, MiB)  # aligned, as O_DIRECT wants
    buffer.write(block)
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        with pytest.raises(OSError) as e:
            while True:
                written += os.write(fd, buffer)
        assert e.value.errno == errno.ENOSPC, e
    finally:
        os.close(fd)
    assert 40 * MiB <= written <= 48 * MiB  # 4 disks with room for 3 chunks of a 4 MiB segment each
    cairn("persist", archive.arch)
    assert os.getxattr(path, "user.cairn.state") == b"persisted"
    archive.umount()
    archive.mount()
    archive.evict()
    assert read_file(path) == block * (written // MiB)
