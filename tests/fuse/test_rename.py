"""5. rename(2) and renameat2(2) semantics."""
import errno
import os

import pytest

from conftest import (RENAME_EXCHANGE, RENAME_NOREPLACE, libc_renameat2, random_bytes, read_file,
                      write_file)


def test_rename_over_existing_file(archive):
    a, b = archive.m("a"), archive.m("b")
    write_file(a, b"AAAA")
    write_file(b, random_bytes(1_000_000, 50))
    ino_a = os.stat(a).st_ino
    os.rename(a, b)
    assert not os.path.exists(a)
    assert read_file(b) == b"AAAA"
    assert os.stat(b).st_ino == ino_a
    assert sorted(os.listdir(archive.mnt)) == ["b"]
    # across directories, over an existing file
    os.mkdir(archive.m("d"))
    write_file(archive.m("d", "x"), b"x content")
    os.rename(b, archive.m("d", "x"))
    assert read_file(archive.m("d", "x")) == b"AAAA"
    assert os.listdir(archive.mnt) == ["d"]
    archive.remount()
    assert read_file(archive.m("d", "x")) == b"AAAA"
    assert os.listdir(archive.m("d")) == ["x"]


def test_rename_directories(archive):
    os.makedirs(archive.m("src", "inner"))
    write_file(archive.m("src", "inner", "f"), b"payload")
    os.mkdir(archive.m("empty"))
    os.rename(archive.m("src"), archive.m("empty"))  # over an empty directory: allowed
    assert not os.path.exists(archive.m("src"))
    assert read_file(archive.m("empty", "inner", "f")) == b"payload"

    os.makedirs(archive.m("other"))
    write_file(archive.m("other", "g"), b"g")
    with pytest.raises(OSError) as e:
        os.rename(archive.m("other"), archive.m("empty"))  # onto a non-empty directory
    assert e.value.errno == errno.ENOTEMPTY
    assert read_file(archive.m("other", "g")) == b"g"
    assert read_file(archive.m("empty", "inner", "f")) == b"payload"

    with pytest.raises(IsADirectoryError):
        os.rename(archive.m("other", "g"), archive.m("empty"))  # file over a directory
    write_file(archive.m("plainfile"), b"p")
    with pytest.raises(NotADirectoryError):
        os.rename(archive.m("other"), archive.m("plainfile"))  # directory over a file
    with pytest.raises(OSError) as e:
        os.rename(archive.m("empty"), archive.m("empty", "inner", "sub"))  # into its own subtree
    assert e.value.errno == errno.EINVAL

    # moving a directory to another parent keeps its contents and fixes '..'
    os.rename(archive.m("empty", "inner"), archive.m("other", "moved"))
    assert read_file(archive.m("other", "moved", "f")) == b"payload"
    assert os.stat(archive.m("other", "moved", "..")).st_ino == os.stat(archive.m("other")).st_ino
    archive.remount()
    assert read_file(archive.m("other", "moved", "f")) == b"payload"
    assert sorted(os.listdir(archive.mnt)) == ["empty", "other", "plainfile"]
    assert os.listdir(archive.m("empty")) == []


def test_renameat2_noreplace(archive):
    a, b = archive.m("a"), archive.m("b")
    write_file(a, b"A")
    write_file(b, b"B")
    with pytest.raises(OSError) as e:
        libc_renameat2(a, b, RENAME_NOREPLACE)
    assert e.value.errno == errno.EEXIST
    assert read_file(a) == b"A" and read_file(b) == b"B"
    libc_renameat2(a, archive.m("c"), RENAME_NOREPLACE)
    assert not os.path.exists(a) and read_file(archive.m("c")) == b"A"


def test_renameat2_exchange(archive):
    a, b = archive.m("a"), archive.m("d", "b")
    write_file(a, b"content of a")
    write_file(b, random_bytes(600_000, 51))
    ino_a, ino_b = os.stat(a).st_ino, os.stat(b).st_ino
    libc_renameat2(a, b, RENAME_EXCHANGE)
    assert read_file(b) == b"content of a"
    assert read_file(a) == random_bytes(600_000, 51)
    assert os.stat(a).st_ino == ino_b and os.stat(b).st_ino == ino_a

    # a file and a directory can be exchanged too
    os.makedirs(archive.m("dir", "sub"))
    libc_renameat2(a, archive.m("dir"), RENAME_EXCHANGE)
    assert os.path.isdir(a) and os.listdir(a) == ["sub"]
    assert read_file(archive.m("dir")) == random_bytes(600_000, 51)

    with pytest.raises(FileNotFoundError):
        libc_renameat2(archive.m("dir"), archive.m("missing"), RENAME_EXCHANGE)
    with pytest.raises(OSError) as e:
        libc_renameat2(archive.m("dir"), b, RENAME_EXCHANGE | RENAME_NOREPLACE)
    assert e.value.errno == errno.EINVAL

    archive.remount()
    assert read_file(b) == b"content of a"
    assert os.listdir(a) == ["sub"]
    assert read_file(archive.m("dir")) == random_bytes(600_000, 51)
