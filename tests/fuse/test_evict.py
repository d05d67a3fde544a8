"""10. Eviction from the staging cache; reads then come from the disks, byte-identical."""
import hashlib
import os
import time

from conftest import KiB, MiB, random_bytes, sha256, sha256_file, write_file

# sizes around the pack threshold (256 KiB) and the segment size (4 MiB)
SIZES = [1, 100, 4096, 200 * KiB, 256 * KiB, 256 * KiB + 1, MiB, 4 * MiB, 4 * MiB + 1, 11 * MiB + 333]


def write_set(archive, prefix, sizes, seed):
    expected = {}
    for i, size in enumerate(sizes):
        path = archive.m(prefix, f"f{i:02d}_{size}")
        data = random_bytes(size, seed + i)
        write_file(path, data)
        expected[path] = sha256(data)
    return expected


def check_set(expected):
    bad = [p for p, h in expected.items() if sha256_file(p) != h]
    assert not bad, f"content differs: {bad}"


def test_evict_then_reread(archive):
    expected = write_set(archive, "set", SIZES, 100)
    total = sum(SIZES)
    archive.evict()
    st = archive.status()
    assert st["files_queued"] == 0
    assert st["bytes_cached"] <= 64 * KiB, f"after evict {st['bytes_cached']} bytes still cached"
    assert st["bytes_persisted"] >= total
    check_set(expected)
    archive.remount()
    archive.evict()
    check_set(expected)


def test_small_cache(archive):
    archive.remount("cache_size=8M")
    # 64 MiB in all: twelve 5 MiB files and one 4 MiB file, each bigger than half the cache
    sizes = [5 * MiB] * 12 + [4 * MiB]
    assert sum(sizes) == 64 * MiB
    expected = write_set(archive, "big", sizes, 200)
    check_set(expected)
    archive.persist()
    # once everything is persisted the cache must shrink back under its limit
    cached = wait_cache_within(archive, 8 * MiB, 15)
    assert cached <= 8 * MiB, f"{cached / MiB:.1f} MiB cached 15 s after persist (cache_size=8M): {archive.status()}"
    check_set(expected)
    # one file larger than the whole cache
    single = write_set(archive, "huge", [20 * MiB + 7], 300)
    check_set(single)
    archive.remount("cache_size=8M")
    check_set(expected)
    check_set(single)


def wait_cache_within(archive, limit, seconds):
    deadline = time.monotonic() + seconds
    while archive.status()["bytes_cached"] > limit and time.monotonic() < deadline:
        time.sleep(0.25)
    return archive.status()["bytes_cached"]


def test_cache_shrinks_once_open_file_is_closed(archive):
    """A file held open cannot be evicted; once closed, the cache must come back under
    cache_size (without waiting for some unrelated later write)."""
    archive.remount("cache_size=8M")
    expected = write_set(archive, "held", [5 * MiB], 400)
    archive.persist()
    held = next(iter(expected))
    with open(held, "rb") as f:
        f.read(10)
        expected.update(write_set(archive, "more", [5 * MiB] * 12, 401))
        archive.persist()
    archive.persist()
    cached = wait_cache_within(archive, 8 * MiB, 10)
    assert cached <= 8 * MiB, (f"{cached / MiB:.1f} MiB still cached 10 s after the last file was closed "
                               f"and `cairn persist` ran (cache_size=8M)")
    check_set(expected)


def test_large_file_written_behind_and_evicted_while_open(archive):
    """A file much larger than cache_size, written in one open: its finished segments are
    persisted and dropped from the cache before the file is closed."""
    archive.remount("cache_size=16M")
    path = archive.m("large")
    expected = hashlib.sha256()
    peak_cached = 0
    with open(path, "wb") as f:
        for i in range(160):
            chunk = random_bytes(MiB, 1000 + i)
            f.write(chunk)
            expected.update(chunk)
            if i % 8 == 7:
                f.flush()
                time.sleep(0.3)  # give the persister its polls, as a slow source would
                peak_cached = max(peak_cached, archive.status()["bytes_cached"])
        # Still open: the persister catches up on its own (a loaded machine may need a few polls).
        deadline = time.monotonic() + 15
        while (before_close := archive.status())["bytes_persisted"] < 100 * MiB and time.monotonic() < deadline:
            time.sleep(0.2)
    assert before_close["bytes_persisted"] >= 100 * MiB, before_close
    assert peak_cached < 96 * MiB, f"cache reached {peak_cached / MiB:.0f} MiB with cache_size=16M"
    archive.evict()
    assert sha256_file(path) == expected.hexdigest()


def test_reads_at_any_offset_from_the_disks_match_the_bytes(archive):
    """Reads the daemon serves from decoded extents (O_DIRECT: exactly the offsets and sizes
    asked for) at odd offsets, across segment boundaries, into holes, past a short last
    segment (also once the file is extended), from a segment inside a pack, and across
    persisted and dirty segments of one file: every byte as written."""
    seg = 4 * MiB
    big = random_bytes(2 * seg + 333, 700)  # two whole segments and a short one
    sparse = bytearray(3 * seg)             # data, a hole over a boundary, data
    sparse[:MiB] = random_bytes(MiB, 701)
    sparse[2 * seg + 5:2 * seg + 5 + 100 * KiB] = random_bytes(100 * KiB, 702)
    small = random_bytes(5000, 703)         # packed with others: its bytes start inside an extent
    files = {archive.m("odd", "big"): bytearray(big), archive.m("odd", "small"): bytearray(small)}
    write_file(archive.m("odd", "small2"), random_bytes(3000, 704))
    for path, data in files.items():
        write_file(path, bytes(data))
    sparse_path = archive.m("odd", "sparse")
    with open(sparse_path, "wb") as f:
        f.write(sparse[:MiB])
        f.seek(2 * seg + 5)
        f.write(sparse[2 * seg + 5:2 * seg + 5 + 100 * KiB])
        f.truncate(len(sparse))
    files[sparse_path] = sparse
    archive.evict()
    assert archive.status()["bytes_cached"] <= 64 * KiB

    def check(label):
        for path, data in files.items():
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                n = len(data)
                for offset, size in [(0, 1), (1, 4095), (seg - 3, 7), (seg - 100, seg + 200), (seg + 1, 2 * seg),
                                     (2 * seg - 1, 2), (n - 10, 100), (n, 10), (n - 1, 1), (4095, 128 * KiB + 3),
                                     (MiB - 7, 20), (2 * seg, 6), (3, n)]:
                    got = os.pread(fd, size, offset)
                    assert got == bytes(data[offset:offset + size]), (
                        f"{label}: {path} bytes {offset}..{offset + size}: {len(got)} bytes read, differ")
            finally:
                os.close(fd)

    check("all on the disks")
    # Extended past its short last segment: the bytes after what that segment stored read as zeros.
    os.truncate(archive.m("odd", "big"), 3 * seg + 1000)
    files[archive.m("odd", "big")].extend(bytes(3 * seg + 1000 - len(big)))
    check("extended")
    # One segment of `big` dirty in the cache, the ones around it still on the disks.
    with open(archive.m("odd", "big"), "r+b") as f:
        f.seek(seg + 10)
        f.write(b"changed!")
    files[archive.m("odd", "big")][seg + 10:seg + 18] = b"changed!"
    check("one segment dirty")
