"""cairn recover: a catalog rebuilt from the disks alone (format v3 member tables), and
archives of format v2 still readable."""
import errno
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import time

import pytest

from conftest import CAIRN, NOBODY, GiB, KiB, MiB, assert_file_equals, cairn, make_rich_tree, random_bytes, run, sh, write_file

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN_V2 = os.path.join(HERE, "..", "data", "format-v2", "archive.tar.gz")
GOLDEN_V3 = os.path.join(HERE, "..", "data", "format-v3", "archive.tar.gz")
RSYNC = ["rsync", "-aHAX", "--numeric-ids"]
TiB = 1 << 40


def itemize(src, dst):
    return run(RSYNC + ["-n", "--itemize-changes", f"{src}/", f"{dst}/"]).stdout.strip()


def lose_catalog(archive):
    """Unmounts and deletes catalog.db and its -wal/-shm."""
    if archive.is_mounted():
        archive.umount()
    doomed = glob.glob(os.path.join(archive.arch, "catalog.db*"))
    assert doomed, "no catalog to lose"
    for path in doomed:
        os.remove(path)


def recover(archive, *extra, expect=0):
    r = cairn("recover", archive.arch, *extra, check=False, timeout=300)
    assert r.returncode == expect, f"cairn recover exit {r.returncode} (want {expect}):\n{r.stdout}{r.stderr}"
    return r


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def extent_headers(archive):
    """(disk image, offset, inode, payload length, extent id) of every extent chunk header on the disks."""
    found = []
    for image in sorted(glob.glob(os.path.join(archive.arch, "disks", "*.img"))):
        with open(image, "rb") as f:
            data = f.read()
        for m in re.finditer(b"CAIRNEXT", data):
            if m.start() % 4096 == 0 and m.start() > 0:
                extent_id, inode, _, length = struct.unpack_from("<QQQQ", data, m.start() + 32)
                found.append((image, m.start(), inode, length, extent_id))
    return found


def flip_byte(image, offset):
    with open(image, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def test_recover_after_tar_and_rsync_matches_source(archive):
    """The issue's scenario: tar and rsync a real tree in, lose the catalog, recover; rsync
    -aHAX finds nothing to do (hard links come back as hard links), fsck is clean, and data
    striped rs-2-1 is joined from its chunks."""
    src = make_rich_tree(archive.s("src"), devices=True)
    write_file(os.path.join(src, "sub", "twelve_mib"), random_bytes(12 * MiB + 5, 11))  # three segments
    for i in range(40):  # packed together
        write_file(os.path.join(src, "many", f"f{i:02}"), random_bytes(i * 97 + 1, 100 + i))
    docs = "/usr/share/doc/rsync"
    os.mkdir(archive.m("tar"))
    opts = "--format=posix --xattrs --xattrs-include='*' --acls"
    sh(f'tar -C "{src}" {opts} -cf - . | tar -C "{archive.m("tar")}" {opts} -xpf -')
    run(RSYNC + [f"{src}/", archive.m("rsync") + "/"])
    run(RSYNC + [f"{docs}/", archive.m("doc") + "/"])
    os.mkdir(archive.m("rs"))
    os.setxattr(archive.m("rs"), "user.cairn.raid", b"rs-2-1")
    striped = random_bytes(6 * MiB + 3, 12)
    write_file(archive.m("rs", "striped"), striped)
    archive.persist()
    for dst in ("tar", "rsync"):
        assert itemize(src, archive.m(dst)) == "", f"{dst}: the copy differs before the catalog is lost"
    lose_catalog(archive)

    r = recover(archive, "--progress")
    assert "not recovered: 0" in r.stdout, r.stdout
    assert re.search(r"recovered \d+ files", r.stdout), r.stdout
    archive.fsck()
    archive.mount()
    for dst in ("tar", "rsync"):
        assert itemize(src, archive.m(dst)) == "", f"{dst}: rsync still finds differences after recover"
        assert itemize(archive.m(dst), src) == "", f"{dst}: reverse rsync finds differences after recover"
    assert itemize(docs, archive.m("doc")) == ""
    assert_file_equals(archive.m("rs", "striped"), striped)
    assert os.stat(archive.m("rsync", "hl", "a")).st_ino == os.stat(archive.m("rsync", "sub", "hl_c")).st_ino
    # the recovered archive takes new files (inode and extent ids above the recovered ones)
    write_file(archive.m("new"), b"after recovery\n")
    archive.remount()
    assert_file_equals(archive.m("new"), b"after recovery\n")
    assert itemize(src, archive.m("tar")) == ""


def test_recover_refuses_an_existing_catalog_without_force(archive):
    write_file(archive.m("kept"), random_bytes(300 * KiB, 3))
    archive.persist()
    r = cairn("recover", archive.arch, "--force", check=False)
    assert r.returncode == 1 and "in use" in r.stderr, f"recover on a mounted archive: {r.stdout}{r.stderr}"
    archive.umount()
    catalog = os.path.join(archive.arch, "catalog.db")
    before = sha(catalog)

    r = cairn("recover", archive.arch, check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "catalog.db exists" in r.stderr and "--force" in r.stderr, r.stderr
    assert sha(catalog) == before, "a refused recover touched the catalog"
    assert not glob.glob(catalog + ".bak-*")

    r = recover(archive, "--force")
    backups = glob.glob(catalog + ".bak-*")
    backups = [b for b in backups if not b.endswith(("-wal", "-shm"))]
    assert len(backups) == 1 and backups[0] in r.stdout, r.stdout
    assert sha(backups[0]) == before, "the old catalog was not kept as it was"
    archive.mount()
    assert_file_equals(archive.m("kept"), random_bytes(300 * KiB, 3))


def test_recover_refuses_a_report_it_cannot_write_or_inside_the_archive_before_changing_anything(archive):
    """--report naming the archive's own cairn.conf overwrote it (the archive no longer opened),
    and one in a missing directory was found unwritable only after the catalog had been set
    aside and rebuilt. Both are refused first, as is a directory that is not an archive, which
    was left with a lock and a log file."""
    write_file(archive.m("kept"), random_bytes(300 * KiB, 4))
    archive.umount()
    before = {name: sha(os.path.join(archive.arch, name)) for name in ("cairn.conf", "catalog.db")}
    listing = sorted(os.listdir(archive.arch))
    for report, code, words in [(os.path.join(archive.arch, "cairn.conf"), 2, "inside the archive"),
                                (os.path.join(archive.arch, "new-report"), 2, "inside the archive"),
                                (os.path.join(archive.scratch, "missing", "report"), 1, "cannot write it")]:
        r = recover(archive, "--force", "--report", report, expect=code)
        assert words in r.stderr and "--report" in r.stderr, r.stderr
        assert sorted(os.listdir(archive.arch)) == listing, report
        assert {name: sha(os.path.join(archive.arch, name)) for name in before} == before, report
    not_an_archive = os.path.join(archive.scratch, "plain")
    os.mkdir(not_an_archive)
    r = cairn("recover", not_an_archive, "--force", check=False)
    assert r.returncode == 1 and "is this a cairn archive?" in r.stderr, r.stderr
    assert os.listdir(not_an_archive) == []
    recover(archive, "--force", "--report", "/dev/null")  # not a regular file: written as it is, not truncated
    archive.mount()
    assert_file_equals(archive.m("kept"), random_bytes(300 * KiB, 4))


def test_a_recover_the_disks_refuse_leaves_the_archive_as_it_found_it(archive):
    """Two disk images swapped: the open of the archive refuses them, and recover stops with
    the catalog and the staging cache where they were (it had set them aside, leaving a new
    catalog that a later recover without --force refused); once the swap is undone, it works."""
    write_file(archive.m("f"), random_bytes(100 * KiB, 7))
    lose_catalog(archive)
    cache_file = os.path.join(archive.arch, "cache", "stale")  # a name the cache keeps, as it found it
    with open(cache_file, "wb") as f:
        f.write(b"x")
    disks = os.path.join(archive.arch, "disks")
    def swap():
        os.rename(os.path.join(disks, "disk-001.img"), os.path.join(disks, "t"))
        os.rename(os.path.join(disks, "disk-002.img"), os.path.join(disks, "disk-001.img"))
        os.rename(os.path.join(disks, "t"), os.path.join(disks, "disk-002.img"))
    swap()
    before = sorted(os.listdir(archive.arch))
    r = recover(archive, expect=1)
    assert "is disk 2 of this archive but the config lists it as disk 1" in r.stderr, r.stderr
    assert sorted(os.listdir(archive.arch)) == before
    assert os.path.exists(cache_file)
    swap()
    recover(archive)
    archive.mount()
    assert_file_equals(archive.m("f"), random_bytes(100 * KiB, 7))


def test_recover_never_writes_through_a_catalog_symlink_and_gives_the_root_to_the_owner(archive):
    # The archive's owner (not root) may put a symlink where the catalog was; root's recover
    # must not create or write the file it points at. And the rebuilt root directory is the
    # owner's, as after mkfs, even when no member table recorded it.
    lose_catalog(archive)
    os.chown(archive.arch, NOBODY, NOBODY)
    target = archive.s("planted")
    catalog = os.path.join(archive.arch, "catalog.db")
    os.symlink(target, catalog)
    os.lchown(catalog, NOBODY, NOBODY)
    r = cairn("recover", archive.arch, "--force", check=False)
    assert r.returncode == 1 and "symbolic link" in r.stderr, r.stdout + r.stderr
    assert not os.path.lexists(target), "recover wrote through the owner's symlink"
    os.remove(catalog)
    recover(archive)
    archive.mount()
    st = os.stat(archive.mnt)
    assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY)


def test_recover_reports_damaged_extents(archive):
    """A damaged header and a damaged payload are reported (disk, offset, extent) and skipped;
    the rest comes back, and fsck is clean."""
    for name, seed in (("good", 1), ("bad_header", 2), ("bad_payload", 3)):
        write_file(archive.m(name), random_bytes(400 * KiB, seed))
    inos = {name: os.stat(archive.m(name)).st_ino for name in ("good", "bad_header", "bad_payload")}
    archive.persist()
    archive.umount()
    by_inode = {inode: (image, offset) for image, offset, inode, *_ in extent_headers(archive)}
    image, offset = by_inode[inos["bad_header"]]
    flip_byte(image, offset + 80)  # inside the policy stamp: the header CRC fails
    image, offset = by_inode[inos["bad_payload"]]
    flip_byte(image, offset + 4096 + 1000)  # inside the data: the payload CRC fails
    lose_catalog(archive)

    r = recover(archive, expect=3)
    disk = int(re.search(r"disk-(\d+)", by_inode[inos["bad_header"]][0]).group(1))
    assert f"disk {disk} offset {by_inode[inos['bad_header']][1]}: damaged extent header" in r.stdout, r.stdout
    assert re.search(r"extent \d+ \(disk \d+ offset \d+\): unreadable, skipped: .*checksum", r.stdout), r.stdout
    assert "not recovered: 2" in r.stdout, r.stdout
    report = os.path.join(archive.scratch, "report")
    recover(archive, "--force", "--report", report, expect=3)
    with open(report) as f:
        assert "damaged extent header" in f.read()
    archive.fsck()
    archive.mount()
    assert_file_equals(archive.m("good"), random_bytes(400 * KiB, 1))
    assert sorted(os.listdir(archive.mnt)) == ["good"]


def header_versions(archive):
    """The format version of every extent chunk header on the disks."""
    versions = []
    for image, offset, *_ in extent_headers(archive):
        with open(image, "rb") as f:
            f.seek(offset + 8)
            versions.append(struct.unpack("<H", f.read(2))[0])
    return versions


def unpack_golden(archive, tarball):
    archive.umount()
    shutil.rmtree(archive.arch)
    os.mkdir(archive.arch)
    run(["tar", "-C", archive.arch, "-xzf", tarball])


def test_v2_archive_still_reads(archive):
    """An archive written by format v2 (tests/data/format-v2) mounts and reads; new files
    in it are v4; recover brings those back and names the v2 extents it cannot place."""
    unpack_golden(archive, GOLDEN_V2)
    archive.fsck()
    archive.mount()
    want = {
        "docs/small.txt": "6a13a3f389e37acd64ad9e591cbc5032247178ee12ad05bcf329ab51bc78f3cc",
        "docs/sub/big.bin": "8ea169052436b0372b17b38104ca98e816c117cdf97041fd73a00c0bc52f1b13",
        "docs/sub/multi.bin": "df0ad29102b5bf129fe319987e891a4b309bb64f1ed2713edc9d2da5297bb473",
    }
    for path, digest in want.items():
        assert sha(archive.m(path)) == digest, path
    assert os.getxattr(archive.m("docs/small.txt"), "user.golden") == b"yes"
    write_file(archive.m("docs", "new_v4"), random_bytes(100 * KiB, 7))
    archive.evict()
    for path, digest in want.items():
        assert sha(archive.m(path)) == digest, path
    archive.umount()
    archive.fsck()
    assert sorted(set(header_versions(archive))) == [2, 4]

    r = recover(archive, "--force", expect=3)
    assert len(re.findall(r"format v2 has no member table", r.stdout)) == 5, r.stdout  # every golden extent
    archive.fsck()
    archive.mount()
    assert_file_equals(archive.m("docs", "new_v4"), random_bytes(100 * KiB, 7))


def test_v3_archive_still_reads_and_recovers(archive):
    """An archive written by format v3 (tests/data/format-v3: member tables, no transform
    chain, catalog schema 4) mounts, reads, takes v4 extents beside its own, and cairn
    recover rebuilds all of it from both versions' member tables."""
    unpack_golden(archive, GOLDEN_V3)
    archive.fsck()
    assert sorted(set(header_versions(archive))) == [3]
    archive.mount()
    want = {
        "docs/small.txt": "79f9d62e5968f0fabf2b51fbf9d6cc70b1c2abf60264e96a3850a743cd029d4c",
        "docs/sub/big.bin": "c2d1533cfebe428e9656a3552bce5ee7fbbb2ba7e26254446f9c735771bcc687",
        "docs/sub/multi.bin": "8847d82a2e833f671fe9d65d91692382ae1fb1bd5169e2363c04d5dcaa595b8f",
        "docs/mirrored.bin": "b5dd143209591096ead08401af020f2b2c4de4fa022b9ef4f186aecc642f2327",
    }

    def check_golden():
        for path, digest in want.items():
            assert sha(archive.m(path)) == digest, path
        assert os.getxattr(archive.m("docs/small.txt"), "user.golden") == b"yes"
        assert os.readlink(archive.m("docs/link")) == "sub/big.bin"

    check_golden()
    write_file(archive.m("docs", "sub", "new_v4"), random_bytes(700 * KiB, 8))
    archive.evict()
    check_golden()
    archive.umount()
    archive.fsck()
    assert sorted(set(header_versions(archive))) == [3, 4]

    recover(archive, "--force")
    archive.fsck()
    archive.mount()
    check_golden()
    assert_file_equals(archive.m("docs", "sub", "new_v4"), random_bytes(700 * KiB, 8))


def catalog_schema(archive):
    db = sqlite3.connect(f"file:{os.path.join(archive.arch, 'catalog.db')}?mode=ro", uri=True)
    try:
        return db.execute("SELECT CAST(value AS TEXT) FROM meta WHERE CAST(key AS TEXT) = 'schema_version'").fetchone()[0]
    finally:
        db.close()


@pytest.mark.parametrize("tarball, schema", [(GOLDEN_V2, "3"), (GOLDEN_V3, "4")])
def test_old_catalogs_answer_read_only_commands_before_any_mount(archive, tarball, schema):
    """cairn status, disk list and inspect read a catalog of an older schema as it is (they
    cannot upgrade it): every extent's chunks are counted on their disks; fsck, which may
    write, upgrades it and finds it clean."""
    unpack_golden(archive, tarball)
    assert catalog_schema(archive) == schema
    status = json.loads(cairn("status", archive.arch, "--json").stdout)
    assert status["extents"] > 0 and status["extent_bytes"] > 0, status
    assert sum(d["extents"] for d in status["disks"]) >= status["extents"], status
    listing = cairn("disk", "list", archive.arch).stdout
    assert sum(int(line.split()[-3]) for line in listing.splitlines()[1:]) >= status["extents"], listing
    image, offset, inode, _, extent_id = extent_headers(archive)[0]
    disk = sorted(glob.glob(os.path.join(archive.arch, "disks", "*.img"))).index(image)
    r = cairn("inspect", archive.arch, "--disk", str(disk), "--offset", str(offset))
    assert f"extent {extent_id} at" in r.stdout and f"inode {inode}" in r.stdout, r.stdout
    assert catalog_schema(archive) == schema  # read-only: nothing upgraded
    archive.fsck()


def test_recover_with_a_disk_missing_rebuilds_from_the_other_chunks(archive):
    """Mirror copies and Reed-Solomon slices on the disks that are left are joined as a read
    does; those extents are written again whole (the catalog cannot point at a chunk on a
    disk that is gone); after replacing the disk, rebuild and fsck are clean."""
    for name, raid in (("mirrored", b"mirror-2"), ("striped", b"rs-2-1")):
        os.mkdir(archive.m(name))
        os.setxattr(archive.m(name), "user.cairn.raid", raid)
        write_file(archive.m(name, "big"), random_bytes(5 * MiB + 1, len(name)))
        write_file(archive.m(name, "small"), random_bytes(1000, len(name) + 1))
    archive.persist()
    lose_catalog(archive)
    os.remove(os.path.join(archive.arch, "disks", "disk-001.img"))

    r = recover(archive, expect=3)
    assert "disk 1: not scanned" in r.stdout, r.stdout
    assert "rewritten from the others as extent" in r.stdout, r.stdout
    assert "unreadable" not in r.stdout and "not found on any disk" not in r.stdout, r.stdout
    cairn("disk", "replace", archive.arch, "1", os.path.join(archive.arch, "disks", "disk-001.new"))
    cairn("rebuild", archive.arch)
    archive.fsck()
    archive.mount()
    for name in ("mirrored", "striped"):
        assert_file_equals(archive.m(name, "big"), random_bytes(5 * MiB + 1, len(name)))
        assert_file_equals(archive.m(name, "small"), random_bytes(1000, len(name) + 1))
        assert os.getxattr(archive.m(name), "user.cairn.raid") == (b"mirror-2" if name == "mirrored" else b"rs-2-1")


def test_recover_keeps_a_mirror_whose_other_disk_is_gone_as_one_copy(archive):
    """Two disks, mirror-2, the catalog lost and a disk dead: every byte is on the other disk,
    but a rewrite as mirror-2 needs two. Each extent is written again as one copy (before, every
    file was dropped); the reconciler restores mirror-2 once a new disk is in."""
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", "2", "--disk-size", "64M")
    archive.mount()
    os.setxattr(archive.mnt, "user.cairn.raid", b"mirror-2")
    files = {"big": random_bytes(5 * MiB + 3, 60), "small": b"hello\n"}
    for name, data in files.items():
        write_file(archive.m(name), data)
    lose_catalog(archive)
    os.remove(os.path.join(archive.arch, "disks", "disk-001.img"))

    r = recover(archive, expect=3)
    assert r.stdout.count("the disks left cannot hold it as mirror-2; rewritten as one copy") == 3, r.stdout
    assert "recovered 2 files" in r.stdout, r.stdout
    archive.mount("degraded")
    for name, data in files.items():
        assert_file_equals(archive.m(name), data)
        assert os.getxattr(archive.m(name), "user.cairn.state") == b"out-of-policy"
    archive.umount()
    cairn("disk", "replace", archive.arch, "1", os.path.join(archive.arch, "disks", "disk-001-new.img"))
    cairn("rebuild", archive.arch)
    archive.mount()
    deadline = time.monotonic() + 60
    while any(os.getxattr(archive.m(name), "user.cairn.state") != b"persisted" for name in files):
        assert time.monotonic() < deadline, "the reconciler did not restore mirror-2"
        time.sleep(0.2)
    for name, data in files.items():
        for segment in os.getxattr(archive.m(name), "user.cairn.location").decode().split():
            assert "disk0@" in segment and "disk1@" in segment, (name, segment)  # a copy on each
        assert_file_equals(archive.m(name), data)


@pytest.mark.no_fsck  # a disk is missing, by design
def test_recover_rewrites_an_extent_of_format_v3_in_format_v3(archive):
    """An extent recover writes again keeps its format version: its member table is in that
    version's layout (before, a v3 extent got a v4 header over its v3 table, and the next
    recover could not read the table: its files were lost)."""
    unpack_golden(archive, GOLDEN_V3)
    os.remove(os.path.join(archive.arch, "disks", "disk-001.img"))  # docs/mirrored.bin has a copy on disk 0
    want = {"docs/sub/big.bin": "c2d1533cfebe428e9656a3552bce5ee7fbbb2ba7e26254446f9c735771bcc687",
            "docs/mirrored.bin": "b5dd143209591096ead08401af020f2b2c4de4fa022b9ef4f186aecc642f2327"}
    for attempt in range(2):
        r = recover(archive, "--force", expect=3)
        assert "rewritten as one copy" in r.stdout or attempt == 1, r.stdout
        assert sorted(set(header_versions(archive))) == [3]
        archive.mount("degraded")
        for path, digest in want.items():
            assert sha(archive.m(path)) == digest, (attempt, path)
        archive.umount()


@pytest.mark.parametrize("raid,checksum", [("mirror-2", "xxh3"), ("rs-2-1", "blake3")])
def test_recover_rebuilds_a_missing_first_chunk_whatever_the_checksum(archive, raid, checksum):
    """Recover learns no digest for a chunk it did not find: the first chunk rebuilt from the
    others is checked against the payload's CRC, not refused against an unknown digest."""
    os.mkdir(archive.m("d"))
    os.setxattr(archive.m("d"), "user.cairn.raid", raid.encode())
    os.setxattr(archive.m("d"), "user.cairn.checksum", checksum.encode())
    data = random_bytes(3 * MiB, 31)
    write_file(archive.m("d", "f"), data)
    archive.persist()
    location = os.getxattr(archive.m("d", "f"), "user.cairn.location").decode()
    first_disk = int(re.search(r"^0=disk(\d+)@", location).group(1))  # chunk 0 of segment 0
    lose_catalog(archive)
    os.remove(os.path.join(archive.arch, "disks", f"disk-{first_disk:03d}.img"))

    r = recover(archive, expect=3)
    assert "rewritten from the others as extent" in r.stdout, r.stdout
    assert "not found on any disk" not in r.stdout and "does not match" not in r.stdout, r.stdout
    cairn("disk", "replace", archive.arch, str(first_disk), os.path.join(archive.arch, "disks", "replacement.img"))
    cairn("rebuild", archive.arch)
    archive.fsck()
    archive.mount()
    assert_file_equals(archive.m("d", "f"), data)


def test_recover_brings_back_zeros_written_over_data_and_files_of_zeros(archive):
    """Holes are recorded in the member tables: a segment overwritten with zeros comes back as
    zeros, not with its older bytes (a small file's old bytes stay on the disks while its pack
    holds a live neighbour); a file of zeros and a 1 TiB sparse file come back with their size."""
    small, neighbour = random_bytes(100 * KiB, 21), random_bytes(50 * KiB, 22)
    big = random_bytes(12 * MiB, 23)  # three 4 MiB segments
    write_file(archive.m("small"), small)
    write_file(archive.m("neighbour"), neighbour)
    write_file(archive.m("big"), big)
    archive.persist()
    with open(archive.m("small"), "r+b") as f:
        f.write(bytes(len(small)))
    with open(archive.m("big"), "r+b") as f:
        f.seek(4 * MiB)
        f.write(bytes(4 * MiB))
    write_file(archive.m("zeros"), bytes(5 * MiB + 3))
    with open(archive.m("sparse"), "wb") as f:
        os.ftruncate(f.fileno(), TiB)
    archive.persist()
    lose_catalog(archive)

    r = recover(archive)
    assert "not recovered: 0" in r.stdout, r.stdout
    archive.fsck()
    archive.mount()
    assert_file_equals(archive.m("small"), bytes(len(small)))
    assert_file_equals(archive.m("neighbour"), neighbour)
    assert_file_equals(archive.m("big"), big[:4 * MiB] + bytes(4 * MiB) + big[8 * MiB:])
    assert_file_equals(archive.m("zeros"), bytes(5 * MiB + 3))
    assert os.stat(archive.m("sparse")).st_size == TiB
    with open(archive.m("sparse"), "rb") as f:
        for at in (0, 600 * GiB + 12345, TiB - 8192):
            assert os.pread(f.fileno(), 8192, at) == bytes(8192), f"sparse file: bytes at {at} are not zeros"


def start_paused_recover(archive, *args):
    """Starts `cairn recover` with CAIRN_TEST_RECOVER_PAUSE and returns (process, the FIFO's
    write end) once it is paused between making the new catalog and opening the archive;
    closing the write end lets it go on."""
    fifo = archive.s("pause")
    os.mkfifo(fifo)
    env = dict(os.environ, CAIRN_TEST_RECOVER_PAUSE=fifo)
    proc = subprocess.Popen([CAIRN, "recover", archive.arch, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # Opening the FIFO for writing succeeds once recover has opened it to read: it is paused.
    deadline = time.monotonic() + 60
    while True:
        try:
            return proc, os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:
                proc.kill()
                proc.communicate()
                raise
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"recover did not reach its pause in 60 s: {out}{err}")
        time.sleep(0.01)


def test_recover_holds_the_archive_lock_until_the_catalog_is_rebuilt(archive):
    """No daemon can open the archive between recover setting the old catalog aside and
    rebuilding it: recover is paused there (CAIRN_TEST_RECOVER_PAUSE) while the test tries
    the lock and a mount."""
    data = random_bytes(300 * KiB, 31)
    write_file(archive.m("kept"), data)
    archive.persist()
    lose_catalog(archive)
    proc, writer = start_paused_recover(archive)
    try:
        assert os.path.exists(os.path.join(archive.arch, "catalog.db")), "paused before the new catalog was made"
        with open(os.path.join(archive.arch, "lock")) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                taken = True
            except BlockingIOError:
                taken = False
        assert not taken, "the archive lock was free while recover had set the old catalog aside"
        r = cairn("mount", archive.arch, archive.mnt, "--wait", "0", check=False, timeout=60)
        assert r.returncode != 0 and "in use" in r.stderr, f"mounted a half-made archive: {r.stdout}{r.stderr}"
    finally:
        os.close(writer)  # recover goes on
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    archive.fsck()
    archive.mount()
    assert_file_equals(archive.m("kept"), data)


def test_a_recover_that_did_not_finish_leaves_a_catalog_nothing_else_opens(archive):
    """Recover killed after making its new, still empty catalog: a mount would take every
    chunk on the disks for free space and write over them. It is refused, naming the cause,
    and recover run again brings every file back."""
    data = random_bytes(300 * KiB, 32)
    write_file(archive.m("kept"), data)
    archive.persist()
    lose_catalog(archive)
    proc, writer = start_paused_recover(archive)
    proc.kill()
    proc.communicate()
    os.close(writer)
    r = cairn("mount", archive.arch, archive.mnt, "--wait", "0", check=False, timeout=60)
    assert r.returncode != 0 and "did not finish" in r.stderr, f"mounted a half-made catalog: {r.stdout}{r.stderr}"
    r = recover(archive, "--force")
    # Its id floors are not taken: it may not have saved the gap it left yet.
    assert "numbered inodes and extents is not known (a recover that did not finish made it)" in r.stdout, r.stdout
    archive.fsck()
    archive.mount()
    assert_file_equals(archive.m("kept"), data)


def extent_headers_by_id(archive):
    """{(extent id, disk image, offset, inode)} of every extent chunk header on the disks."""
    return {(extent_id, image, offset, inode) for image, offset, inode, _, extent_id in extent_headers(archive)}


def test_recover_never_hands_out_an_extent_id_that_is_on_the_disks(archive):
    """Extents recover writes again (a disk missing) get ids above those found, and so do
    the ones written after it, even when a rewritten extent holds nothing newest; inode
    generations go on above those of the lost catalog."""
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", "4", "--disk-size", "64M")  # small disks: quick scans
    archive.mount()
    archive.remount()
    archive.remount()  # a few epochs: the files below get generation 4
    os.mkdir(archive.m("m"))
    os.setxattr(archive.m("m"), "user.cairn.raid", b"mirror-2")
    first = random_bytes(300 * KiB, 41)  # above the pack threshold: an extent of its own
    write_file(archive.m("m", "f"), first)
    ino = os.stat(archive.m("m", "f")).st_ino
    archive.persist()
    archive.umount()
    with sqlite3.connect(os.path.join(archive.arch, "catalog.db")) as db:
        lost_generation = db.execute("SELECT MAX(generation) FROM inodes").fetchone()[0]
    lose_catalog(archive)
    image = next(image for _, image, _, inode in extent_headers_by_id(archive) if inode == ino)
    os.remove(image)  # one of the two mirror copies
    # The first recover writes the mirrored extent again; its old copy stays on the disks left.
    # The second finds both: the old one is written again too, but holds nothing newest.
    recover(archive, expect=3)
    r = recover(archive, "--force", expect=3)
    assert "rewritten from the others as extent" in r.stdout, r.stdout
    with sqlite3.connect(os.path.join(archive.arch, "catalog.db")) as db:
        generations = [g for (g,) in db.execute("SELECT generation FROM inodes WHERE ino != 1")]
    assert generations and min(generations) > lost_generation, (generations, lost_generation)
    before = extent_headers_by_id(archive)
    archive.mount("degraded")
    write_file(archive.m("m", "g"), random_bytes(300 * KiB, 42))
    archive.persist()
    archive.umount()
    written = extent_headers_by_id(archive) - before
    assert written, "no new extent was written"
    highest_before = max(extent_id for extent_id, _, _, _ in before)
    reused = sorted(extent_id for extent_id, _, _, _ in written if extent_id <= highest_before)
    assert not reused, f"extent id(s) {reused} handed out again (ids up to {highest_before} were on the disks)"
    disk = re.search(r"disk-(\d+)", image).group(1)
    cairn("disk", "replace", archive.arch, str(int(disk)), os.path.join(archive.arch, "disks", f"disk-{disk}.new"))
    cairn("rebuild", archive.arch)
    archive.fsck()
    archive.mount()
    assert_file_equals(archive.m("m", "f"), first)
    assert_file_equals(archive.m("m", "g"), random_bytes(300 * KiB, 42))


def test_recover_reads_a_missing_lonestar_bucket_through_its_parity(archive):
    """A bucket of a lonestar group that is gone is scanned through its group's parity, as a
    read is served: its files come back (not older copies on other buckets, nor nothing)."""
    from test_lonestar import make_lonestar
    make_lonestar(archive)
    data = {name: random_bytes(3 * MiB + i, 90 + i) for i, name in enumerate(("a", "b", "c"))}
    for name, content in data.items():
        write_file(archive.m("cold", name), content)
    archive.persist()
    location = os.getxattr(archive.m("cold", "a"), "user.cairn.location").decode()
    bucket = int(re.search(r"disk(\d+)@", location).group(1))
    lose_catalog(archive)
    os.remove(os.path.join(archive.arch, "disks", f"disk-{bucket:03}.img"))
    r = recover(archive)
    assert "recovered 3 files (9.0 MiB)" in r.stdout and "not scanned" not in r.stdout, r.stdout
    cairn("disk", "replace", archive.arch, str(bucket), os.path.join(archive.base, "new-bucket.img"))
    r = cairn("rebuild", archive.arch)
    assert "0 extent(s) lost" in r.stdout, r.stdout
    archive.fsck()
    archive.mount()
    for name, content in data.items():
        assert_file_equals(archive.m("cold", name), content)


@pytest.mark.no_fsck  # a disk is missing, by design
@pytest.mark.parametrize("case", ["disk missing, old catalog set aside", "disk missing, catalog lost",
                                  "payload damaged, catalog lost"])
def test_recover_hands_out_no_number_the_part_it_could_not_read_may_hold(archive, case):
    """The newest file is on a disk missing at recover, or in an extent whose payload does not
    read: it is numbered above everything recover could read. Nothing made after the recover
    may share its extent id or inode number: a later recover that reads it again takes the
    newest version by extent id and a file by its inode number. The numbers go on from the old
    catalog's when it reads, else they leave a gap of 2^32 (extent ids only where part of the
    disks was not scanned: a damaged payload's id is in its header)."""
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", "3", "--disk-size", "64M")  # small disks: a quick scan
    archive.mount()
    os.setxattr(archive.mnt, "user.cairn.raid", b"none")  # each extent on one disk
    for i in range(6):
        write_file(archive.m(f"f{i}"), random_bytes(300 * KiB, 70 + i))  # an extent each, not packed
        archive.persist()
    archive.umount()
    headers = extent_headers(archive)
    image, offset, lost_ino, _, lost_extent = max(headers, key=lambda h: h[4])
    assert lost_ino == max(h[2] for h in headers), headers
    assert max(h[4] for h in headers if h[0] != image) < lost_extent
    if "catalog lost" in case:
        lose_catalog(archive)
    if "disk missing" in case:
        os.remove(image)
    else:
        flip_byte(image, offset + 4096 + 1000)  # inside the data: the payload CRC fails
    r = recover(archive, *(["--force"] if "set aside" in case else []), expect=3)
    gap = "start 4294967296 above those found" in r.stdout
    assert gap == ("catalog lost" in case), r.stdout
    archive.mount("degraded")
    write_file(archive.m("new"), random_bytes(300 * KiB, 80))
    ino = os.stat(archive.m("new")).st_ino
    archive.persist()
    archive.umount()
    new_extents = [h[4] for h in extent_headers(archive) if h[2] == ino]
    assert new_extents and min(new_extents) > lost_extent, (new_extents, lost_extent)
    assert ino > lost_ino, (ino, lost_ino)
    assert (ino > 1 << 32) == gap
    assert (min(new_extents) > 1 << 32) == (gap and "disk missing" in case)
