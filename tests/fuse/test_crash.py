"""12. kill -9 of the daemon while writing: everything fsync'd survives."""
import os
import threading
import time

from conftest import KiB, MiB, assert_file_equals, random_bytes, read_file, write_file


def fsync_write(path, data, mode="wb"):
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_kill9_keeps_fsynced_files(archive):
    os.mkdir(archive.m("synced"))
    expected = {}
    for i, size in enumerate([1, 3000, 100 * KiB, 256 * KiB + 1, 3 * MiB, 9 * MiB + 5]):
        path = archive.m("synced", f"s{i}")
        expected[path] = random_bytes(size, 700 + i)
        fsync_write(path, expected[path])
    # a file rewritten in place and appended to, fsync'd after each change
    rewritten = archive.m("synced", "rewritten")
    data = random_bytes(6 * MiB, 710)
    fsync_write(rewritten, data)
    with open(rewritten, "r+b") as f:
        os.pwrite(f.fileno(), b"X" * 5000, 4 * MiB - 2500)
        f.seek(0, os.SEEK_END)
        f.write(b"appended")
        os.fsync(f.fileno())
    expected[rewritten] = data[:4 * MiB - 2500] + b"X" * 5000 + data[4 * MiB + 2500:] + b"appended"
    # a file that is held open, fsync'd, then written on without fsync: the fsync'd part must survive
    held = archive.m("synced", "held_open")
    held_f = open(held, "wb")
    held_f.write(random_bytes(2 * MiB, 711))
    held_f.flush()
    os.fsync(held_f.fileno())
    expected_held_prefix = random_bytes(2 * MiB, 711)
    fsync_dir(archive.m("synced"))
    fsync_dir(archive.mnt)

    # an unsynced writer still going when the daemon dies
    stop = threading.Event()
    written = [0]
    chunk = random_bytes(MiB, 720)

    def unsynced_writer():
        try:
            with open(archive.m("unsynced"), "wb") as f:
                while not stop.is_set() and written[0] < 400 * MiB:
                    f.write(chunk)
                    written[0] += len(chunk)
        except OSError:
            pass  # ENOTCONN / EIO once the daemon is gone

    t = threading.Thread(target=unsynced_writer)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while written[0] < 8 * MiB and time.monotonic() < deadline:
            time.sleep(0.01)
        held_f.write(b"unsynced tail")  # stays in the page cache / daemon only
        held_f.flush()
        archive.kill9()
    finally:
        stop.set()
        t.join(60)
        try:
            held_f.close()
        except OSError:
            pass
    assert not t.is_alive()

    archive.mount()
    for path, data in expected.items():
        assert_file_equals(path, data)
    got_held = read_file(held)
    assert got_held[:2 * MiB] == expected_held_prefix, "fsync'd part of the held-open file lost"
    # the unsynced file may hold any prefix of what was written, but must be readable
    if os.path.exists(archive.m("unsynced")):
        got = read_file(archive.m("unsynced"))
        assert len(got) <= written[0]
        full = len(got) // MiB
        assert got[:full * MiB] == chunk * full or set(got) <= {0}, "unsynced file holds garbage"

    # the recovered archive is fully usable and checks clean
    write_file(archive.m("after_crash"), b"still works\n")
    archive.evict()
    for path, data in expected.items():
        assert_file_equals(path, data)
    archive.umount()
    archive.fsck()
    archive.mount()
    assert read_file(archive.m("after_crash")) == b"still works\n"
