"""The staging cache's files against the catalog: a cache file may hold bytes past its
file's end (a crash between a write and the commit of its size, a failed write), or be gone
behind segments the catalog says are cached (a cache directory lost or replaced, a name a
crash took). Neither may change what the file reads, nor what is persisted."""
import contextlib
import os

from conftest import KiB, MiB, assert_file_equals, cairn, random_bytes, write_file


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


def test_a_persisted_file_whose_cache_file_is_gone_reads_from_the_disks(archive):
    big = archive.m("big")
    small = archive.m("small")  # packed with others into a shared segment
    expected = {big: random_bytes(5 * MiB + 333, 2), small: random_bytes(3000, 3)}
    for path, data in expected.items():
        write_file(path, data)
    inos = [os.stat(path).st_ino for path in expected]
    archive.umount()  # persisted; the cache keeps its copies
    for ino in inos:
        os.unlink(cache_file(archive, ino))
    archive.mount()
    for path, data in expected.items():
        assert_file_equals(path, data)
    # A write into the middle of a segment keeps the rest of it: an open for writing makes
    # an empty cache file, which must not pass for the segment's copy.
    with open(big, "r+b") as f:
        os.pwrite(f.fileno(), b"X" * 10, MiB)
    expected[big] = expected[big][:MiB] + b"X" * 10 + expected[big][MiB + 10:]
    archive.remount()
    for path, data in expected.items():
        assert_file_equals(path, data)
    archive.evict()
    for path, data in expected.items():
        assert_file_equals(path, data)


def test_a_dirty_file_whose_cache_file_is_gone_keeps_its_persisted_bytes(archive):
    path = archive.m("f")
    data = random_bytes(MiB, 4)
    write_file(path, data)
    archive.persist()
    with open(path, "ab") as f:  # dirty, durably so
        f.write(b"appended")
        f.flush()
        os.fsync(f.fileno())
    ino = os.stat(path).st_ino
    archive.kill9()  # no persist at unmount: the file stays dirty
    os.unlink(cache_file(archive, ino))  # and with it what was appended
    archive.mount()
    archive.persist()
    assert os.path.getsize(path) == len(data) + len(b"appended")
    with open(path, "rb") as f:
        assert f.read(len(data)) == data
    archive.evict()
    with open(path, "rb") as f:
        assert f.read(len(data)) == data


def test_a_file_whose_cache_file_is_refused_does_not_hold_back_the_other_files(archive):
    # Dirty across a crash, with the lowest inode number: fsync'ed, never closed.
    stuck = archive.m("stuck")
    data = random_bytes(300 * KiB, 4)
    fd = os.open(stuck, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    ino = os.fstat(fd).st_ino
    archive.kill9()
    with contextlib.suppress(OSError):
        os.close(fd)
    # A second name for its cache file: the daemon refuses to write through such a file.
    stray = os.path.join(os.path.dirname(archive.arch), "stray-name")
    os.link(cache_file(archive, ino), stray)
    archive.mount()
    others = {archive.m(f"later-{i}"): random_bytes((i + 1) * 100 * KiB, 10 + i) for i in range(3)}
    for path, content in others.items():
        write_file(path, content)
    r = cairn("persist", archive.arch, check=False, timeout=60)
    assert r.returncode != 0 and f"inode {ino}: not persisted" in r.stderr and "one name" in r.stderr, r
    for path in others:
        assert os.getxattr(path, "user.cairn.state") == b"persisted", path
    assert os.getxattr(stuck, "user.cairn.state") != b"persisted"
    os.unlink(stray)
    archive.persist()
    assert os.getxattr(stuck, "user.cairn.state") == b"persisted"
    archive.evict()
    for path, content in {stuck: data, **others}.items():
        assert_file_equals(path, content)


def test_a_persisted_file_whose_cache_file_was_cut_short_reads_from_the_disks(archive):
    path = archive.m("f")
    data = random_bytes(5 * MiB + 333, 5)
    write_file(path, data)
    ino = os.stat(path).st_ino
    archive.umount()  # persisted; the cache keeps the whole copy
    os.truncate(cache_file(archive, ino), MiB)  # as a crash of the cache's file system might
    archive.mount()
    assert_file_equals(path, data)  # not zeros past the cut
    with open(path, "r+b") as f:  # nor persisted as zeros around a write into the lost part
        os.pwrite(f.fileno(), b"X", 4 * MiB + 7)
    data = data[:4 * MiB + 7] + b"X" + data[4 * MiB + 8:]
    archive.remount()
    assert_file_equals(path, data)
    archive.evict()
    assert_file_equals(path, data)
    with open(os.path.join(archive.arch, "cairn.log"), errors="replace") as log:
        assert f"inode {ino}: its staging cache file is shorter than the data it holds" in log.read()


def test_a_file_grown_by_truncate_then_written_keeps_its_cache_file_at_the_next_mount(archive):
    """The segment a truncate grew is persisted whole from a cache file that ends where its data
    ends: the cache file is lengthened (with a hole) to hold it, so the next mount does not take it
    for one cut short and drop it."""
    path = archive.m("f")
    data = random_bytes(1000000, 6)
    write_file(path, data)
    archive.persist()
    os.truncate(path, 20000000)  # the first segment (4 MiB) now ends in zeros nothing wrote
    archive.persist()
    archive.evict()  # fetched again by the write below: its persisted million bytes
    with open(path, "r+b") as f:
        os.pwrite(f.fileno(), b"Y" * 4096, 409600)
    data = data[:409600] + b"Y" * 4096 + data[409600 + 4096:] + bytes(20000000 - len(data))
    archive.persist()
    ino = os.stat(path).st_ino
    archive.umount()
    assert os.path.getsize(cache_file(archive, ino)) >= 4 * MiB
    archive.mount()
    with open(os.path.join(archive.arch, "cairn.log"), errors="replace") as log:
        assert "shorter than the data it holds" not in log.read()
    assert os.path.exists(cache_file(archive, ino))
    assert_file_equals(path, data)
    archive.evict()
    assert_file_equals(path, data)


def test_a_file_grown_by_truncate_after_its_eviction_keeps_its_cache_file_at_the_next_mount(archive):
    """Grown by a truncate that finds no cache file, its new segments are holes persisted from an
    empty one: holes need no bytes in the cache, and the next mount keeps it."""
    path = archive.m("f")
    data = random_bytes(1000000, 7)
    write_file(path, data)
    archive.persist()
    archive.evict()
    os.truncate(path, 20000000)
    archive.persist()
    ino = os.stat(path).st_ino
    archive.remount()
    with open(os.path.join(archive.arch, "cairn.log"), errors="replace") as log:
        assert "shorter than the data it holds" not in log.read()
    assert os.path.exists(cache_file(archive, ino))
    assert_file_equals(path, data + bytes(20000000 - len(data)))
