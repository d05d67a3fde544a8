"""7. Concurrent writers to different files."""
import os
import threading

from conftest import KiB, MiB, random_bytes, sha256, sha256_file

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
