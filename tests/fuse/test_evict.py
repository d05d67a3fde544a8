"""10. Eviction from the staging cache; reads then come from the disks, byte-identical."""
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
    deadline = time.monotonic() + 15
    while archive.status()["bytes_cached"] > 8 * MiB and time.monotonic() < deadline:
        time.sleep(0.2)
    assert archive.status()["bytes_cached"] <= 8 * MiB, archive.status()
    check_set(expected)
    # one file larger than the whole cache
    single = write_set(archive, "huge", [20 * MiB + 7], 300)
    check_set(single)
    archive.remount("cache_size=8M")
    check_set(expected)
    check_set(single)
