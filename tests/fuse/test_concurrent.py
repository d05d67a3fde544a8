"""7. Concurrent writers to different files, and metadata calls beside a slow disk."""
import os
import signal
import subprocess
import threading
import time

from conftest import (KiB, MiB, is_mounted, pid_alive, random_bytes, sh, sha256, sha256_file, wait_pid_gone,
                      write_file)

CHUNKS = [4 * KiB, 64 * KiB, 128 * KiB, 1 * MiB, 12345, 333 * KiB, 7, 2 * MiB + 1]


def test_eight_concurrent_writers(archive):
    size = 16 * MiB
    datas = [random_bytes(size, 70 + i) for i in range(8)]
    errors = []
    start = threading.Barrier(8)

    def writer(i):
        try:
            chunk = CHUNKS[i]
            start.wait()
            with open(archive.m(f"w{i}", "data"), "wb") as f:
                for off in range(0, size, chunk):
                    f.write(datas[i][off:off + chunk])
        except BaseException as e:  # noqa: B902 - reported below
            errors.append((i, e))

    for i in range(8):
        os.mkdir(archive.m(f"w{i}"))
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "writers hung"
    assert not errors, errors

    expected = [sha256(d) for d in datas]
    got = [sha256_file(archive.m(f"w{i}", "data")) for i in range(8)]
    assert got == expected
    assert all(os.stat(archive.m(f"w{i}", "data")).st_size == size for i in range(8))

    # concurrent readers after eviction: the data comes back from the disks
    archive.evict()
    results = {}
    readers = [threading.Thread(target=lambda i=i: results.__setitem__(i, sha256_file(archive.m(f"w{i}", "data"))))
               for i in range(8)]
    for t in readers:
        t.start()
    for t in readers:
        t.join(timeout=240)
    assert [results.get(i) for i in range(8)] == expected


def test_metadata_goes_on_while_a_disk_is_slow_to_answer(archive):
    """No lock that metadata needs is held across disk I/O: with the daemon's disks held
    (CAIRN_TEST_DISK_GATE, a disk that answers when the test says, like one spinning up),
    a read of an evicted file waits for them, while stat, ls, create, setfattr, rename and
    df on the same mount answer at once."""
    gate = archive.s("gate")
    data = random_bytes(3 * MiB, 5)
    write_file(archive.m("cold"), data)
    os.mkdir(archive.m("dir"))
    archive.persist()
    archive.evict()  # its bytes now come from the disks (the remount empties the kernel's cache)
    archive.umount()
    archive.mount(env=dict(os.environ, CAIRN_TEST_DISK_GATE=gate))
    open(gate, "w").close()
    copy = archive.s("copy")
    reader = subprocess.Popen(["cp", archive.m("cold"), copy])
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(gate + ".held"):
            assert time.monotonic() < deadline, "the read never reached the disks"
            assert reader.poll() is None, "the read finished without the disks"
            time.sleep(0.01)
        # Each must answer long before the disks do (they never do while the gate exists).
        sh(f"""cd {archive.mnt}
               stat cold dir > /dev/null
               ls -l > /dev/null
               touch new
               setfattr -n user.note -v x new
               mv new dir/moved
               df . > /dev/null""", timeout=30)
        assert reader.poll() is None, "the read did not wait for the disks: the test shows nothing"
    finally:
        os.unlink(gate)
    assert reader.wait(timeout=120) == 0
    with open(copy, "rb") as f:
        assert f.read() == data
    assert os.path.exists(archive.m("dir", "moved"))


def test_a_second_sigterm_does_not_kill_the_last_persist(archive):
    """SIGTERM unmounts, persisting what is dirty first; a second one (a service manager, a
    second Ctrl-C) while that persist waits for a slow disk must not kill it."""
    gate = archive.s("gate")
    archive.umount()
    archive.mount(env=dict(os.environ, CAIRN_TEST_DISK_GATE=gate))
    # The gate is shut before the file is closed: the persister takes a closed file within a
    # quarter second, and had it reached the disks before the gate, nothing would wait.
    open(gate, "w").close()
    try:
        data = random_bytes(2 * MiB, 6)
        write_file(archive.m("dirty"), data)  # in the staging cache only
        pid = archive.daemon_pid()
        deadline = time.monotonic() + 60
        while not os.path.exists(gate + ".held"):
            assert time.monotonic() < deadline, "the persist never reached the disks"
            time.sleep(0.01)
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while is_mounted(archive.mnt):
            assert time.monotonic() < deadline, "SIGTERM did not unmount"
            time.sleep(0.01)
        time.sleep(0.5)  # past the unmount, into the last persist, which waits at the gate
        assert pid_alive(pid)
        os.kill(pid, signal.SIGTERM)
        time.sleep(0.2)
    finally:
        os.unlink(gate)
    assert wait_pid_gone(pid, 60)
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert "all data persisted" in log.read().splitlines()[-1]
    archive.mount()
    assert sha256_file(archive.m("dirty")) == sha256(data)
