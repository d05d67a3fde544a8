"""14. Device nodes, FIFOs and sockets (mknod), including through tar."""
import os
import stat
import threading

from conftest import assert_trees_equal, tar_copy


def check_nodes(root):
    st = os.lstat(os.path.join(root, "chr"))
    assert stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == (1, 3)
    assert stat.S_IMODE(st.st_mode) == 0o640
    st = os.lstat(os.path.join(root, "blk"))
    assert stat.S_ISBLK(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == (259, 65537)
    st = os.lstat(os.path.join(root, "fifo"))
    assert stat.S_ISFIFO(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    st = os.lstat(os.path.join(root, "sock"))
    assert stat.S_ISSOCK(st.st_mode)
    st = os.lstat(os.path.join(root, "reg"))
    assert stat.S_ISREG(st.st_mode) and st.st_size == 0


def test_mknod(archive):
    m = archive.m
    os.mknod(m("chr"), stat.S_IFCHR | 0o640, os.makedev(1, 3))
    os.mknod(m("blk"), stat.S_IFBLK | 0o600, os.makedev(259, 65537))  # a large minor
    os.mknod(m("fifo"), stat.S_IFIFO | 0o600)
    os.mknod(m("sock"), stat.S_IFSOCK | 0o644)
    os.mknod(m("reg"), stat.S_IFREG | 0o644)
    check_nodes(archive.mnt)

    # the FIFO works as a pipe
    got = []
    reader = threading.Thread(target=lambda: got.append(open(m("fifo"), "rb").read()))
    reader.start()
    with open(m("fifo"), "wb") as w:
        w.write(b"through the fifo")
    reader.join(10)
    assert got == [b"through the fifo"]

    archive.remount()
    check_nodes(archive.mnt)


def test_tar_device_nodes(archive):
    src = archive.s("src")
    os.mkdir(src)
    os.mknod(os.path.join(src, "null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mknod(os.path.join(src, "loop7"), stat.S_IFBLK | 0o660, os.makedev(7, 7))
    os.chown(os.path.join(src, "loop7"), 0, 6)
    os.mkfifo(os.path.join(src, "pipe"), 0o620)
    dst = archive.m("dev")
    tar_copy(src, dst)
    assert_trees_equal(src, dst)
    back = archive.s("back")
    tar_copy(dst, back)
    assert_trees_equal(src, back)
    archive.remount()
    assert_trees_equal(src, dst)
