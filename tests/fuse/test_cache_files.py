"""The staging cache's files against the catalog: a cache file may hold bytes past its
file's end (a crash between a write and the commit of its size, a failed write). They may
not change what the file reads, nor what is persisted."""
import os

from conftest import KiB, MiB, assert_file_equals, random_bytes, write_file


def cache_file(archive, ino):
    """Where the staging cache keeps the data of inode `ino` (src/cache/staging_cache.cc)."""
    return os.path.join(archive.arch, "cache", str(ino))


def test_stale_bytes_past_the_end_of_a_cache_file_read_as_zeros_in_a_gap_written_past_the_end(archive):
    path = archive.m("f")
    data = random_bytes(100 * KiB, 1)
    write_file(path, data)
    ino = os.stat(path).st_ino
    archive.umount()
    # What a crash after the write of 2 MiB more, before its size was committed, leaves.
    with open(cache_file(archive, ino), "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.write(b"\xab" * (2 * MiB))
    archive.mount()
    with open(path, "r+b") as f:
        os.pwrite(f.fileno(), b"tail", 3 * MiB)
    expected = data + bytes(3 * MiB - len(data)) + b"tail"
    archive.remount()  # nothing from the kernel's page cache: the daemon's cache file
    assert_file_equals(path, expected)
    archive.evict()  # persisted as such: from the disks
    assert_file_equals(path, expected)
