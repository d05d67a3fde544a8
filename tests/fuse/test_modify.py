"""6. Modifying a persisted, evicted file in place: pwrite, append, truncate down/up."""
import os
import subprocess

from conftest import MiB, assert_files_identical, random_bytes, write_file


def apply(path, op):
    kind = op[0]
    with open(path, "r+b") as f:
        if kind == "pwrite":
            os.pwrite(f.fileno(), op[2], op[1])
        elif kind == "append":
            f.seek(0, os.SEEK_END)
            f.write(op[1])
        elif kind == "truncate":
            f.truncate(op[1])
        else:
            raise ValueError(kind)


OPS = [
    ("pwrite", 7_777_777, random_bytes(MiB + 3, 61)),           # middle, crossing the 8 MiB segment edge
    ("pwrite", 0, b"HEAD"),                                      # first bytes
    ("append", random_bytes(3 * MiB + 123, 62)),                 # grows the file past 23 MiB
    ("truncate", 13_333_337),                                    # down to an odd size
    ("truncate", 25 * MiB + 1),                                  # up: a hole up to 25 MiB + 1
    ("pwrite", 20 * MiB + 5, b"in the hole"),                    # into the hole
    ("pwrite", 13_333_330, random_bytes(20, 63)),                # across the old EOF
    ("append", b"tail"),
]


def test_modify_persisted_evicted_file(archive):
    data = random_bytes(20 * MiB, 60)
    path, ref = archive.m("file"), archive.s("reference")
    write_file(path, data)
    write_file(ref, data)
    archive.persist()
    archive.evict()
    assert archive.status()["bytes_cached"] < 20 * MiB, "evict left the file in the cache"
    assert_files_identical(ref, path)

    for i, op in enumerate(OPS):
        apply(path, op)
        apply(ref, op)
        try:
            assert_files_identical(ref, path)
        except AssertionError as e:
            raise AssertionError(f"after op {i} {op[0]} {op[1] if op[0] != 'append' else len(op[1])}: {e}")

    archive.persist()
    archive.evict()
    assert_files_identical(ref, path)
    archive.remount()
    assert_files_identical(ref, path)
    archive.evict()
    assert_files_identical(ref, path)


def test_a_file_being_written_survives_a_listing_of_its_directory(archive):
    """The entry a listing (readdirplus) gives for a new file or directory is the one its creation
    gave: the kernel marks an inode whose generation changed as stale, and fails its I/O."""
    os.mkdir(archive.m("d"))
    data = [random_bytes(MiB, 70 + i) for i in range(3)]
    with open(archive.m("d", "f"), "wb") as f:
        f.write(data[0])
        os.mkdir(archive.m("d", "sub"))
        os.chdir(archive.m("d", "sub"))
        try:
            listed = subprocess.run(["ls", "-l", archive.m("d")], capture_output=True, text=True, check=True)
            assert " f\n" in listed.stdout
            f.write(data[1])
            os.stat(".")  # the working directory is still a directory
        finally:
            os.chdir("/")
        f.write(data[2])
    with open(archive.m("d", "f"), "rb") as f:
        assert f.read() == b"".join(data)
