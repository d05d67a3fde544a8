"""4. Hard links and symlinks."""
import errno
import os
import stat

import pytest

from conftest import FUSERMOUNT, assert_file_equals, random_bytes, read_file, run, wait_pid_gone, write_file
from test_encryption import images
from test_plugins import image_contains, log_text


def test_hard_links(archive):
    data = random_bytes(300_000, 40)
    a, b, c = archive.m("a"), archive.m("b"), archive.m("dir", "c")
    write_file(a, data)
    os.mkdir(archive.m("dir"))
    os.link(a, b)
    os.link(a, c)
    sa, sb, sc = os.stat(a), os.stat(b), os.stat(c)
    assert sa.st_ino == sb.st_ino == sc.st_ino
    assert sa.st_nlink == sb.st_nlink == sc.st_nlink == 3
    assert_file_equals(c, data)

    # a write through one name is seen through the others (the data is shared)
    with open(b, "r+b") as f:
        f.seek(1000)
        f.write(b"written via b")
    data = data[:1000] + b"written via b" + data[1013:]
    assert_file_equals(a, data)
    assert_file_equals(c, data)
    os.chmod(c, 0o600)
    assert stat.S_IMODE(os.stat(a).st_mode) == 0o600  # metadata is per inode too

    os.unlink(a)
    assert not os.path.exists(a)
    assert os.stat(b).st_nlink == 2
    assert_file_equals(b, data)

    # link to a name that exists fails; linking a directory fails
    with pytest.raises(FileExistsError):
        os.link(b, c)
    with pytest.raises(PermissionError):
        os.link(archive.m("dir"), archive.m("dirlink"))

    archive.remount()
    sb, sc = os.stat(b), os.stat(c)
    assert sb.st_ino == sc.st_ino and sb.st_nlink == sc.st_nlink == 2
    assert_file_equals(c, data)
    archive.evict()
    assert_file_equals(b, data)

    os.unlink(b)
    assert os.stat(c).st_nlink == 1
    assert_file_equals(c, data)
    os.unlink(c)
    assert os.listdir(archive.m("dir")) == []


def test_unlinked_open_file_stays_readable(archive):
    data = random_bytes(5 * 1024 * 1024 + 3, 41)
    path = archive.m("doomed")
    write_file(path, data)
    with open(path, "rb") as f:
        os.unlink(path)
        assert not os.path.exists(path)
        assert f.read() == data
        assert os.fstat(f.fileno()).st_nlink == 0


def test_files_open_at_a_lazy_unmount_are_persisted_and_one_unlinked_is_freed(archive):
    """Files still open when their mount is lazily unmounted: when the session ends, the one
    with a name is persisted (the kernel sends no release for it) and the unlinked one freed,
    its bytes never on the disks (the next mount would only free them). Whether the kernel's
    release and forget of the unlinked one, closed first, reach the daemon before the session
    ends is a race: the unit test "the unmount frees a file unlinked while looked up" covers
    that case for sure."""
    marker = b"cairn-unlinked-while-open-at-unmount"
    kept = random_bytes(3 * 1024 * 1024 + 5, 42)
    doomed = os.open(archive.m("doomed"), os.O_WRONLY | os.O_CREAT, 0o644)
    named = os.open(archive.m("kept"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(doomed, marker * 1000)
        os.write(named, kept)
        os.unlink(archive.m("doomed"))
        pid = archive.daemon_pid()
        run([FUSERMOUNT, "-u", "-z", archive.mnt])
    finally:
        os.close(doomed)
        os.close(named)  # the last reference: the session ends, the daemon stops
    assert wait_pid_gone(pid, 60), f"daemon {pid} still running after the lazy unmount"
    assert "all data persisted" in log_text(archive).splitlines()[-1]
    for image in images(archive):
        assert not image_contains(image, marker), image
    status = archive.status()
    # Only the named file is left, persisted; the unlinked one's cache file is gone too.
    assert (status["inodes"], status["files_queued"], status["bytes_persisted"], status["cache_files"]) == \
        (2, 0, len(kept), 1)
    archive.mount()
    assert os.listdir(archive.mnt) == ["kept"]
    assert_file_equals(archive.m("kept"), kept)


def test_symlinks(archive):
    write_file(archive.m("target"), b"target data\n")
    os.mkdir(archive.m("d"))
    links = {
        "rel": "target",
        "abs": archive.m("target"),
        "dangling": "nowhere/at/all",
        "todir": "d",
        "d/up": "../target",
        "long": "x" * 4000,
        "unicode": "\u65e5\u672c\u8a9e/\U0001F600",
    }
    for name, target in links.items():
        os.symlink(target, archive.m(name))

    def check():
        for name, target in links.items():
            p = archive.m(name)
            st = os.lstat(p)
            assert stat.S_ISLNK(st.st_mode), name
            assert os.readlink(p) == target, name
            assert st.st_size == len(os.fsencode(target)), name
        assert read_file(archive.m("rel")) == b"target data\n"
        assert read_file(archive.m("abs")) == b"target data\n"
        assert read_file(archive.m("d", "up")) == b"target data\n"
        assert os.path.isdir(archive.m("todir")) and os.listdir(archive.m("todir")) == ["up"]
        with pytest.raises(FileNotFoundError):
            open(archive.m("dangling"))
        # writing through a symlink writes the target
    check()
    with open(archive.m("rel"), "ab") as f:
        f.write(b"more\n")
    assert read_file(archive.m("target")) == b"target data\nmore\n"
    with open(archive.m("rel"), "wb") as f:
        f.write(b"target data\n")
    # a symlink loop is ELOOP, not a hang
    os.symlink("loop2", archive.m("loop1"))
    os.symlink("loop1", archive.m("loop2"))
    with pytest.raises(OSError) as e:
        open(archive.m("loop1"))
    assert e.value.errno == errno.ELOOP
    # hard link to a symlink links the symlink itself
    os.link(archive.m("rel"), archive.m("rel_hard"), follow_symlinks=False)
    assert os.readlink(archive.m("rel_hard")) == "target"
    assert os.lstat(archive.m("rel")).st_nlink == 2
    archive.remount()
    check()
    assert os.readlink(archive.m("rel_hard")) == "target"
