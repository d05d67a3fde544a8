"""11. Everything survives an unmount/mount cycle: names, modes, owners, xattrs, data."""
import os

from conftest import (MiB, assert_snapshots_equal, cairn, is_mounted, make_rich_tree, pid_alive, random_bytes, snapshot,
                      write_file)


def test_remount_persists_everything(archive):
    root = make_rich_tree(archive.m("tree"), devices=True)
    for i in range(200):  # many small files share pack extents
        write_file(archive.m("tree", "packed", f"p{i:03d}"), random_bytes(i * 37, 500 + i))
    os.utime(archive.m("tree", "packed"), ns=(10**18, 10**18 + 5))
    before = snapshot(root)
    # while still in the cache
    archive.remount()
    assert_snapshots_equal(before, snapshot(root), "after remount")
    # and after the data went to the disks only
    archive.evict()
    assert_snapshots_equal(before, snapshot(root), "after evict")
    archive.remount()
    archive.evict()
    assert_snapshots_equal(before, snapshot(root), "after evict + remount")
    # the mount root itself keeps its attributes
    os.chmod(archive.mnt, 0o711)
    os.chown(archive.mnt, 1234, 5678)
    os.setxattr(archive.mnt, "user.root", b"yes")
    archive.remount()
    st = os.stat(archive.mnt)
    assert (oct(st.st_mode & 0o7777), st.st_uid, st.st_gid) == (oct(0o711), 1234, 5678)
    assert os.getxattr(archive.mnt, "user.root") == b"yes"


def test_umount_returns_after_daemon_exit(archive):
    """cairn umount is documented to wait until the daemon has exited."""
    for i in range(5):
        write_file(archive.m(f"f{i}"), random_bytes(8 * MiB, 600 + i))
        pid = archive.daemon_pid()
        archive.umount()
        assert not pid_alive(pid) and not archive.late_exits, \
            f"round {i}: cairn umount returned while daemon {pid} still ran: {archive.late_exits}"
        archive.mount()


def test_times_before_1970_and_past_2262_read_back_as_set(archive):
    """Nanoseconds before 1970 count up from a whole second below (-1.5 s is -2 s + 0.5 s);
    a time past what the catalog holds is clamped to its end, never wrapped around (nor taken
    for "now")."""
    os.mkdir(archive.m("old"))
    write_file(archive.m("old", "f"), b"x")
    link = archive.m("old", "link")
    os.symlink("f", link)
    for path in (archive.m("old"), archive.m("old", "f"), link):
        os.utime(path, ns=(-1_500_000_001, -86_400_000_000_000 - 7), follow_symlinks=False)
    os.utime(archive.m("old", "f"), ns=(-1_500_000_001, 2**62 + 3))
    far = archive.m("far")  # a directory: the kernel keeps no times of its own for it
    os.mkdir(far)
    os.utime(far, (32503680000, 32503680000))  # the year 3000
    ancient = archive.m("ancient")
    os.mkdir(ancient)
    os.utime(ancient, (-20_000_000_000, -20_000_000_000))  # the year 1336
    for when in ("now", "after a remount"):
        for path in (archive.m("old"), link):
            st = os.stat(path, follow_symlinks=False)
            assert (st.st_atime_ns, st.st_mtime_ns) == (-1_500_000_001, -86_400_000_000_000 - 7), (when, path)
        st = os.stat(archive.m("old", "f"))
        assert (st.st_atime_ns, st.st_mtime_ns) == (-1_500_000_001, 2**62 + 3), when
        st = os.stat(far)
        assert st.st_mtime_ns == 2**63 - 1, (when, st.st_mtime_ns)  # 2262, not wrapped around
        st = os.stat(ancient)
        assert st.st_mtime_ns == -(2**63) + 1, (when, st.st_mtime_ns)  # 1677, not the time it was set
        archive.remount()


def _read_ahead_kb(mnt):
    st = os.stat(mnt)
    with open(f"/sys/class/bdi/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/read_ahead_kb") as f:
        return int(f.read())


def test_read_ahead_is_set_on_the_mount_and_reads_stay_byte_identical(archive):
    """The kernel reads ahead 128 KiB of a FUSE file unless told: cairn sets its mount's
    read_ahead_kb (read_ahead, default 1M; 0 leaves the kernel's); a bad value is refused."""
    data = random_bytes(7, 9 * MiB + 12345)
    write_file(archive.m("f"), data)
    assert _read_ahead_kb(archive.mnt) == 1024
    archive.evict()  # reads come from the disks, in the kernel's read-ahead steps
    with open(archive.m("f"), "rb") as f:
        assert f.read() == data
    archive.remount("read_ahead=256K")
    assert _read_ahead_kb(archive.mnt) == 256
    archive.umount()
    r = cairn("mount", archive.arch, archive.mnt, "-o", "read_ahead=1000", check=False, timeout=60)
    assert r.returncode != 0 and "read_ahead" in r.stdout + r.stderr, r.stdout + r.stderr
    assert not is_mounted(archive.mnt)
    archive.mount("read_ahead=0")
    assert _read_ahead_kb(archive.mnt) == 128  # the kernel's own
    with open(archive.m("f"), "rb") as f:
        assert f.read() == data
