"""9. Extended attributes (and how POSIX ACLs are stored)."""
import ctypes
import errno
import os

import pytest

from conftest import ACL_ACCESS, MiB, NOBODY, acl_entries, cairn, random_bytes, run, run_as_nobody, write_file


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


# Runs as nobody: each xattr call on the prepared files, "ok" or the errno name.
NAMESPACE_PROBE = r"""
import errno, json, os, subprocess, sys
p = lambda name: os.path.join(sys.argv[1], name)
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def setfacl(path):
    r = subprocess.run(["setfacl", "-m", "u:1234:r", path], capture_output=True, text=True)
    return "ok" if r.returncode == 0 else r.stderr.strip().rsplit(": ", 1)[-1]
print(json.dumps({
    "system.foo on root's 0644 file": attempt(lambda: os.setxattr(p("pub"), "system.foo", b"x")),
    "system.cairn.x on root's 0600 file": attempt(lambda: os.setxattr(p("secret"), "system.cairn.x", b"x")),
    "system.foo on own file": attempt(lambda: os.setxattr(p("mine"), "system.foo", b"x")),
    "foo.bar on own file": attempt(lambda: os.setxattr(p("mine"), "foo.bar", b"x")),
    "remove system.foo": attempt(lambda: os.removexattr(p("pub"), "system.foo")),
    "get system.foo": attempt(lambda: os.getxattr(p("pub"), "system.foo")),
    "trusted.x on own file": attempt(lambda: os.setxattr(p("mine"), "trusted.x", b"x")),
    "security.x on own file": attempt(lambda: os.setxattr(p("mine"), "security.x", b"x")),
    "remove root's security.x": attempt(lambda: os.removexattr(p("pub"), "security.x")),
    "user.x on root's 0644 file": attempt(lambda: os.setxattr(p("pub"), "user.x", b"x")),
    "user.x on own file": attempt(lambda: os.setxattr(p("mine"), "user.x", b"x")),
    "user.x on own fifo": attempt(lambda: os.setxattr(p("fifo"), "user.x", b"x")),
    "user.x on root's sticky 1777 dir": attempt(lambda: os.setxattr(p("sticky"), "user.x", b"x")),
    "user.x on root's plain 0777 dir": attempt(lambda: os.setxattr(p("open"), "user.x", b"x")),
    "setfacl on root's file": setfacl(p("pub")),
    "setfacl on own file": setfacl(p("mine")),
    "listed on root's file": sorted(os.listxattr(p("pub"))),
}))
"""


def test_only_the_linux_xattr_namespaces_are_stored(archive):
    """Like ext4: user.*, trusted.*, security.* and the POSIX ACLs; system.foo and other
    prefixes are EOPNOTSUPP for everyone, trusted.* names are not listed to users, and the
    kernel's own checks (trusted/security need CAP_SYS_ADMIN, user.* needs write permission,
    regular files and directories only, the sticky-directory rule) still hold."""
    m = archive.m
    write_file(m("pub"), b"root's\n", 0o644)
    write_file(m("secret"), b"root only\n", 0o600)
    write_file(m("mine"), b"nobody's\n", 0o644)
    os.chown(m("mine"), NOBODY, NOBODY)
    os.mkfifo(m("fifo"), 0o666)
    os.chown(m("fifo"), NOBODY, NOBODY)
    os.mkdir(m("sticky"))
    os.chmod(m("sticky"), 0o1777)
    os.mkdir(m("open"))
    os.chmod(m("open"), 0o777)
    os.setxattr(m("pub"), "trusted.admin", b"hidden")
    os.setxattr(m("pub"), "trusted.cairn.raid", b"mirror-2")
    os.setxattr(m("pub"), "security.x", b"root's label")
    os.setxattr(m("pub"), "user.visible", b"yes")

    got = run_as_nobody(NAMESPACE_PROBE, archive.mnt)
    assert errno.errorcode[errno.EOPNOTSUPP] == "ENOTSUP"  # one value on Linux, named ENOTSUP
    assert got == {
        "system.foo on root's 0644 file": "ENOTSUP",
        "system.cairn.x on root's 0600 file": "ENOTSUP",
        "system.foo on own file": "ENOTSUP",
        "foo.bar on own file": "ENOTSUP",
        "remove system.foo": "ENOTSUP",
        "get system.foo": "ENOTSUP",
        "trusted.x on own file": "EPERM",
        "security.x on own file": "EPERM",
        "remove root's security.x": "EPERM",
        "user.x on root's 0644 file": "EACCES",
        "user.x on own file": "ok",
        "user.x on own fifo": "EPERM",
        "user.x on root's sticky 1777 dir": "EPERM",
        "user.x on root's plain 0777 dir": "ok",
        "setfacl on root's file": "Operation not permitted",
        "setfacl on own file": "ok",
        "listed on root's file": ["security.x", "user.visible"],
    }

    # Root is refused the same names, and keeps what it may set.
    for name in ("system.foo", "system.cairn.x", "foo.bar", "nonamespace", "system.posix_acl_accessX"):
        with pytest.raises(OSError) as e:
            os.setxattr(m("secret"), name, b"x")
        assert e.value.errno == errno.EOPNOTSUPP, name
    with pytest.raises(OSError) as e:
        os.setxattr(m("secret"), "user.", b"x")
    assert e.value.errno == errno.EINVAL
    assert sorted(os.listxattr(m("pub"))) == ["security.x", "trusted.admin", "trusted.cairn.raid", "user.visible"]
    assert os.listxattr(m("secret")) == []
    assert sorted(os.listxattr(m("mine"))) == ["system.posix_acl_access", "user.x"]
    archive.remount()
    assert os.listxattr(m("secret")) == []
    assert os.getxattr(m("pub"), "trusted.admin") == b"hidden"


def test_a_file_never_has_more_attribute_names_than_listxattr_can_return(archive):
    """The names take at most 64 KiB (XATTR_LIST_MAX): a name past that is refused with ENOSPC,
    and the file's attributes can still be listed and copied."""
    f = archive.m("f")
    write_file(f, b"x")
    added = 0
    with pytest.raises(OSError) as e:
        for i in range(400):
            os.setxattr(f, f"user.{i:03d}" + "n" * 240, b"v")
            added += 1
    assert e.value.errno == errno.ENOSPC
    names = os.listxattr(f)
    assert len(names) == added and sum(len(n) + 1 for n in names) <= 65536, added
    os.setxattr(f, "user.000" + "n" * 240, b"replaced")  # an existing name may still change
    assert os.getxattr(f, "user.000" + "n" * 240) == b"replaced"
    os.removexattr(f, "user.001" + "n" * 240)
    os.setxattr(f, "user.new", b"room again")
    assert "user.new" in os.listxattr(f)
    archive.remount()
    assert len(os.listxattr(f)) == added


def test_the_location_of_a_file_of_many_segments_fits_an_attribute(archive):
    """user.cairn.location lists every segment; past the 64 KiB an attribute holds, it ends with
    the count of the rest instead of failing with E2BIG."""
    d = archive.m("d")
    os.mkdir(d)
    os.setxattr(d, "user.cairn.segment_size", b"64K")
    f = os.path.join(d, "f")
    with open(f, "wb") as out:
        out.truncate(1 << 30)
        out.write(random_bytes(MiB, 91))
    cairn("persist", archive.mnt)
    value = os.getxattr(f, "user.cairn.location").decode()
    assert len(value) < 65536
    first, *_, more, last = value.split(" ")
    assert first.startswith("0=disk") and last == "more" and more.startswith("+"), value[-200:]
    shown = len(value.split(" ")) - 2  # (and "+N", "more")
    assert shown + int(more[1:]) == (1 << 30) // (64 << 10), (shown, more)
