"""A damaged catalog (rows edited with sqlite3 on an unmounted archive) and a damaged cairn.conf:
fsck and scrub report the row instead of crashing, the daemon mounts and answers EIO for the
damaged file only, and never reads zeros where data is or persists zeros over it."""
import contextlib
import errno
import os
import sqlite3

import pytest

from conftest import CAIRN, MiB, cairn, random_bytes, read_file, run, write_file

INT64_MAX = 2**63 - 1


def make_damageable(archive):
    """Files persisted and evicted (reads come from the disks), the archive unmounted.
    d/big is Reed–Solomon 2+1; returns ({name: bytes}, {name: inode})."""
    os.mkdir(archive.m("d"))
    os.setxattr(archive.m("d"), "user.cairn.raid", b"rs-2-1")
    files = {"d/big": random_bytes(5 * MiB, 1), "other": random_bytes(5 * MiB, 2), "d/small": random_bytes(1000, 3)}
    for name, data in files.items():
        write_file(archive.m(name), data)
    archive.evict()
    inodes = {name: os.stat(archive.m(name)).st_ino for name in files}
    archive.umount()
    return files, inodes


def edit_catalog(archive, sql, *params):
    db = sqlite3.connect(os.path.join(archive.arch, "catalog.db"))
    try:
        with db:
            changed = db.execute(sql, params).rowcount
    finally:
        db.close()
    assert changed >= 1, f"{sql} {params} changed nothing"


def query_catalog(archive, sql, *params):
    db = sqlite3.connect(os.path.join(archive.arch, "catalog.db"))
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def extent_of(archive, ino, index=0):
    return query_catalog(archive, "SELECT extent FROM segments WHERE ino = ? AND idx = ?", ino, index)[0][0]


def assert_no_signal(r, what):
    # A process killed by a signal shows as a negative code here (or 128+N through a shell).
    assert r.returncode in (0, 1, 2), f"{what} died (exit {r.returncode}): {r.stdout}{r.stderr}"


def assert_eio(path):
    with pytest.raises(OSError) as e:
        read_file(path)
    assert e.value.errno == errno.EIO, f"reading {path}: {e.value!r}, expected EIO"


def assert_others_read(archive, files, damaged):
    for name, data in files.items():
        if name != damaged:
            assert read_file(archive.m(name)) == data, f"{name} does not read back"


def log_text(archive):
    with open(os.path.join(archive.arch, "cairn.log"), errors="replace") as f:
        return f.read()


def mount_with_memory_limit(archive, gib=3):
    """Mounts with the daemon's address space capped, so a daemon that allocates by a damaged
    size fails fast instead of taking the machine's memory (and the OOM killer's attention)."""
    r = run(["bash", "-c", f'ulimit -v {gib << 20}; exec "$0" mount "$1" "$2"', CAIRN, archive.arch, archive.mnt],
            check=False, timeout=120)
    if r.returncode == 0:
        archive.pids.add(archive.daemon_pid())
    assert r.returncode == 0 and archive.is_mounted(), f"mount failed (exit {r.returncode}): {r.stdout}{r.stderr}"
    return r


# (column value, what the report must name): redundancy packs scheme | data << 8 | parity << 16.
BAD_EXTENT_FIELDS = [
    ("redundancy", 2, "data_chunks 0 is out of range"),                 # rs with zero data chunks: SIGFPE
    ("redundancy", 2 | 2 << 8, "parity_chunks 0 is out of range"),      # rs-2-0
    ("redundancy", 0xff | 0xff << 8 | 0xff << 16, "unknown redundancy scheme 255"),
    ("redundancy", 2 | 2 << 8 | 1 << 16 | 200 << 24, "idr_scramble 200 is out of range"),
    ("payload_length", 2**62, "payload_length 4611686018427387904 is above the maximum"),
    ("kind", 9, "kind 9 is unknown"),
]


@pytest.mark.no_fsck  # the damage stays; fsck's report of it is what the test checks
@pytest.mark.parametrize("column,value,why", BAD_EXTENT_FIELDS, ids=[f"{c}={v}" for c, v, _ in BAD_EXTENT_FIELDS])
def test_damaged_extent_row_is_reported_by_fsck_and_scrub_and_is_eio_for_its_file_only(archive, column, value, why):
    files, inodes = make_damageable(archive)
    extent = extent_of(archive, inodes["d/big"])
    edit_catalog(archive, f"UPDATE extents SET {column} = ? WHERE id = ?", value, extent)
    row = f"catalog: extents row {extent}: "

    r = cairn("fsck", archive.arch, check=False, timeout=300)
    assert_no_signal(r, "cairn fsck")
    assert r.returncode == 1 and row in r.stdout and why in r.stdout, r.stdout + r.stderr
    r = cairn("scrub", archive.arch, check=False, timeout=300)  # offline
    assert_no_signal(r, "cairn scrub (offline)")
    assert r.returncode == 1 and row in r.stdout + r.stderr and "1 extent(s) lost" in r.stdout, r.stdout + r.stderr

    archive.mount()
    assert_eio(archive.m("d/big"))
    assert_others_read(archive, files, "d/big")
    r = cairn("scrub", archive.arch, check=False, timeout=300)  # online, in the daemon
    assert_no_signal(r, "cairn scrub (online)")
    assert r.returncode == 1 and row in r.stdout + r.stderr, r.stdout + r.stderr
    assert archive.is_mounted() and archive.daemon_pid() in archive.own_daemons()
    assert_others_read(archive, files, "d/big")
    assert f"inode {inodes['d/big']} segment 0: {row}" in log_text(archive)


@pytest.mark.no_fsck
def test_inode_size_int64_max_mounts_and_only_that_file_fails(archive):
    files, inodes = make_damageable(archive)
    ino = inodes["other"]
    # Marked dirty too: mount queues the file for persisting, which used to loop by its size.
    edit_catalog(archive, "UPDATE inodes SET size = ?, dirty = 1 WHERE ino = ?", INT64_MAX, ino)
    mount_with_memory_limit(archive)
    assert os.stat(archive.m("other")).st_size == INT64_MAX  # the names stay visible, as stored
    assert_eio(archive.m("other"))
    assert_others_read(archive, files, "other")
    write_file(archive.m("new"), b"new data")
    archive.persist()  # the damaged file is not queued: persisting everything else finishes
    assert f"inodes row {ino}: size {INT64_MAX} is above the largest file" in log_text(archive)
    archive.umount()
    assert query_catalog(archive, "SELECT COUNT(*) FROM segments WHERE ino = ?", ino) == [(2,)]
    r = cairn("fsck", archive.arch, check=False, timeout=300)
    assert_no_signal(r, "cairn fsck")
    assert r.returncode == 1 and f"catalog: inodes row {ino}: size {INT64_MAX}" in r.stdout, r.stdout + r.stderr
    # rm is the way out: the damaged row goes, and the archive is clean again
    archive.mount()
    os.unlink(archive.m("other"))
    archive.umount()
    archive.fsck()


@pytest.mark.no_fsck
@pytest.mark.parametrize("segment_size", [4096, 1 << 20, 1 << 30])
def test_segment_size_changed_in_the_catalog_is_eio_never_zeros(archive, segment_size):
    files, inodes = make_damageable(archive)
    ino = inodes["other"]  # 4 MiB segments: rows 0 and 1
    edit_catalog(archive, "UPDATE inodes SET segment_size = ? WHERE ino = ?", segment_size, ino)
    archive.mount()
    assert_eio(archive.m("other"))
    with pytest.raises(OSError) as e:  # a read in the middle too, not only from the start
        with open(archive.m("other"), "rb") as f:
            f.seek(3 * MiB)
            f.read(64 * 1024)
    assert e.value.errno == errno.EIO
    assert_others_read(archive, files, "other")
    archive.umount()
    # mount did not persist zeros over the file under the wrong segment size
    rows = query_catalog(archive, "SELECT idx, length FROM segments WHERE ino = ? ORDER BY idx", ino)
    assert rows == [(0, 4 * MiB), (1, 5 * MiB - 4 * MiB)], rows
    r = cairn("fsck", archive.arch, check=False, timeout=300)
    assert r.returncode == 1 and f"catalog: segments row ({ino}, " in r.stdout, r.stdout + r.stderr
    edit_catalog(archive, "UPDATE inodes SET segment_size = ? WHERE ino = ?", 4 * MiB, ino)
    archive.mount()
    assert read_file(archive.m("other")) == files["other"]  # repaired by hand: the data was never touched


@pytest.mark.no_fsck
def test_segment_pointing_at_a_missing_extent_is_eio_not_enoent(archive):
    files, inodes = make_damageable(archive)
    edit_catalog(archive, "DELETE FROM extents WHERE id = ?", extent_of(archive, inodes["other"]))
    archive.mount()
    assert_eio(archive.m("other"))
    assert_others_read(archive, files, "other")
    assert f"segments row ({inodes['other']}, 0): extent" in log_text(archive)


@contextlib.contextmanager
def conf_line_added(archive, line):
    """cairn.conf with `line` appended, restored afterwards (also when the test fails)."""
    path = os.path.join(archive.arch, "cairn.conf")
    with open(path) as f:
        good = f.read()
    try:
        with open(path, "a") as f:
            f.write(line + "\n")
        yield good.count("\n") + 1
    finally:
        with open(path, "w") as f:
            f.write(good)


@pytest.mark.parametrize("line,message", [
    ("read_buffer_segments = 4294967297", '"read_buffer_segments" = "4294967297" is out of range (1..4294967295)'),
    ("persist_idle = 18446744073709551616", '"persist_idle" = "18446744073709551616" is out of range (0..4294967295)'),
    ("failed_disks = 4294967296", '"failed_disks" = "4294967296" is out of range (0..4294967295)'),
    ("segment_size = 2G", 'segment_size = "2G" is out of range (4096..1073741824 bytes)'),
])
def test_cairn_conf_numbers_out_of_range_are_refused(archive, line, message):
    archive.umount()
    with conf_line_added(archive, line) as n:
        for args in (["mount", archive.arch, archive.mnt], ["fsck", archive.arch]):
            r = cairn(*args, check=False, timeout=60)
            assert r.returncode != 0 and f"cairn.conf:{n}: {message}" in r.stderr, r.stdout + r.stderr
        assert not archive.is_mounted()


def test_garbage_in_cairn_conf_is_escaped_when_printed(archive):
    archive.umount()
    # a terminal title change, a screen clear and a bell, on a line without '='
    with conf_line_added(archive, "\x1b]0;pwned\x07\x1b[2J garbage\x01") as n:
        for args in (["mount", archive.arch, archive.mnt], ["fsck", archive.arch], ["status", archive.arch]):
            r = cairn(*args, check=False, timeout=60)
            out = r.stdout + r.stderr
            assert r.returncode != 0 and f"cairn.conf:{n}: expected 'key = value'" in out, out
            assert "\x1b" not in out and "\x07" not in out and "\x01" not in out, repr(out)
            assert r'\x1b]0;pwned\x07\x1b[2J garbage\x01' in out, repr(out)


def test_a_listing_goes_on_past_a_whole_batch_of_entries_whose_inodes_are_missing(archive):
    """ls must not stop early when a whole batch of entries is left out (here: their inodes
    missing; the same path serves entries removed between listing and looking up). The
    kernel asks for up to a page of entries per request, or more: 40,000 entries come first."""
    os.mkdir(archive.m("d"))
    names = [f"f{i:03d}" for i in range(100)]
    for name in names:
        write_file(archive.m("d", name), b"")
    d = os.stat(archive.m("d")).st_ino
    archive.umount()
    missing = 10**12  # no such inode
    edit_catalog(archive, "INSERT INTO dentries(parent, name, ino) WITH RECURSIVE n(i) AS "
                 "(SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 39999) "
                 "SELECT ?, CAST('gone' || i AS BLOB), ? + i FROM n", d, missing)
    edit_catalog(archive, "UPDATE dentries SET cookie = cookie + 100000000 WHERE parent = ? AND ino < ?",
                 d, missing)  # the files' entries after those
    archive.mount()
    try:
        assert sorted(os.listdir(archive.m("d"))) == names
        r = run(["ls", "-l", archive.m("d")], check=False)  # readdirplus, the kernel's choice for ls -l
        assert r.returncode == 0 and r.stdout.count("\n-rw") == 100, r.stdout[-2000:] + r.stderr
    finally:
        archive.umount()
        edit_catalog(archive, "DELETE FROM dentries WHERE ino >= ?", missing)
        archive.mount()
    assert sorted(os.listdir(archive.m("d"))) == names
