"""9. Extended attributes (and how POSIX ACLs are stored)."""
import ctypes
import errno
import os

import pytest

from conftest import ACL_ACCESS, acl_entries, random_bytes, run, write_file


def test_setfattr_getfattr(archive):
    f = archive.m("f")
    write_file(f, b"data")
    run(["setfattr", "-n", "user.foo", "-v", "bar", f])
    out = run(["getfattr", "-d", f]).stdout
    assert 'user.foo="bar"' in out, out
    assert run(["getfattr", "-n", "user.foo", "--only-values", f]).stdout == "bar"

    run(["setfattr", "-x", "user.foo", f])
    out = run(["getfattr", "-d", f]).stdout
    assert "user.foo" not in out, out
    r = run(["getfattr", "-n", "user.foo", f], check=False)
    assert r.returncode != 0 and "No such attribute" in r.stderr, r.stderr
    with pytest.raises(OSError) as e:
        os.removexattr(f, "user.foo")
    assert e.value.errno == errno.ENODATA


def test_xattr_flags_and_values(archive):
    f = archive.m("f")
    write_file(f, b"data")
    os.setxattr(f, "user.foo", b"one", os.XATTR_CREATE)
    with pytest.raises(OSError) as e:
        os.setxattr(f, "user.foo", b"two", os.XATTR_CREATE)
    assert e.value.errno == errno.EEXIST
    assert os.getxattr(f, "user.foo") == b"one"
    with pytest.raises(OSError) as e:
        os.setxattr(f, "user.missing", b"x", os.XATTR_REPLACE)
    assert e.value.errno == errno.ENODATA
    os.setxattr(f, "user.foo", b"three", os.XATTR_REPLACE)
    assert os.getxattr(f, "user.foo") == b"three"

    big = random_bytes(4000, 90)
    os.setxattr(f, "user.binary", bytes(range(256)) + b"\0tail")
    os.setxattr(f, "user.big", big)
    os.mkdir(archive.m("d"))
    os.setxattr(archive.m("d"), "user.on_dir", "\u65e5\u672c".encode())
    assert sorted(os.listxattr(f)) == ["user.big", "user.binary", "user.foo"]
    assert os.getxattr(f, "user.binary") == bytes(range(256)) + b"\0tail"
    assert os.getxattr(f, "user.big") == big
    # asking with a too-small buffer is ERANGE (python retries; the C call is what matters)
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(10)
    assert libc.getxattr(os.fsencode(f), b"user.big", buf, ctypes.c_size_t(10)) == -1
    assert ctypes.get_errno() == errno.ERANGE
    assert libc.getxattr(os.fsencode(f), b"user.big", None, ctypes.c_size_t(0)) == 4000

    archive.remount()
    assert os.getxattr(f, "user.foo") == b"three"
    assert os.getxattr(f, "user.big") == big
    assert os.getxattr(archive.m("d"), "user.on_dir") == "\u65e5\u672c".encode()


def test_xattr_empty_value(archive):
    f = archive.m("f")
    write_file(f, b"data")
    run(["setfattr", "-n", "user.empty", f])          # a name with an empty value is legal
    assert os.getxattr(f, "user.empty") == b""
    assert "user.empty" in os.listxattr(f)
    os.setxattr(f, "user.empty2", b"", os.XATTR_CREATE)
    archive.remount()
    assert os.getxattr(f, "user.empty") == b""
    assert os.getxattr(f, "user.empty2") == b""


def test_trivial_acl_is_not_stored(archive):
    """An ACL that only restates the mode is no ACL (as on ext4/xfs/tmpfs): after
    `setfacl -b`, or after cp -a copies a plain file, no system.posix_acl_access may remain
    (otherwise `ls -l` shows '+' on every copied file)."""
    f = archive.m("f")
    write_file(f, b"data", 0o640)
    run(["setfacl", "-m", "u:65534:r", f])
    assert ACL_ACCESS in os.listxattr(f)
    assert len(acl_entries(os.getxattr(f, ACL_ACCESS))) == 5  # user::, user:65534, group::, mask, other
    run(["setfacl", "-b", f])
    assert ACL_ACCESS not in os.listxattr(f)
    assert oct(os.stat(f).st_mode & 0o7777) == oct(0o640)

    src = archive.s("plain")
    write_file(src, b"plain file\n", 0o644)
    run(["cp", "-a", src, archive.m("copied")])
    assert ACL_ACCESS not in os.listxattr(archive.m("copied"))
    assert not run(["ls", "-l", archive.m("copied")]).stdout.split()[0].endswith("+")


def test_acl_tracks_chmod(archive):
    f = archive.m("f")
    write_file(f, b"data", 0o644)
    run(["setfacl", "-m", "u:65534:rwx", f])
    os.chmod(f, 0o600)
    acl = run(["getfacl", "-cn", f]).stdout.split()
    assert "mask::---" in acl and "user::rw-" in acl and "other::---" in acl, acl
    run(["setfacl", "-m", "m::rx", f])
    assert oct(os.stat(f).st_mode & 0o777) == oct(0o650)
