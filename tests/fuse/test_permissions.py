"""8. POSIX permission checks for an unprivileged user (uid/gid 65534)."""
import os
import stat

from conftest import NOBODY, read_file, run, run_as_nobody, write_file

# Runs as nobody: performs each named operation and reports "ok" or the errno name.
PROBE = r'''
import errno, json, os, sys
mnt = sys.argv[1]
p = lambda *a: os.path.join(mnt, *a)
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def create(path, data=b"by nobody\n"):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, data)
    os.close(fd)
def read(path):
    with open(path, "rb") as f:
        return f.read()
out = {
    "read_secret": attempt(lambda: read(p("secret"))),
    "read_public": attempt(lambda: read(p("public"))),
    "read_group_readable": attempt(lambda: read(p("group_readable"))),
    "write_public": attempt(lambda: open(p("public"), "ab").close()),
    "create_in_rootdir": attempt(lambda: create(p("rootdir", "x"))),
    "mkdir_in_rootdir": attempt(lambda: os.mkdir(p("rootdir", "d"))),
    "unlink_in_rootdir": attempt(lambda: os.unlink(p("rootdir", "inside"))),
    "list_private_dir": attempt(lambda: os.listdir(p("private_dir"))),
    "create_in_sticky": attempt(lambda: create(p("sticky", "mine"))),
    "rename_own_in_sticky": attempt(lambda: os.rename(p("sticky", "mine"), p("sticky", "mine2"))),
    "unlink_roots_in_sticky": attempt(lambda: os.unlink(p("sticky", "roots"))),
    "chmod_secret": attempt(lambda: os.chmod(p("secret"), 0o666)),
    "chown_public": attempt(lambda: os.chown(p("public"), NOBODY, NOBODY)),
    "utime_public": attempt(lambda: os.utime(p("public"), (0, 0))),
    "setxattr_public": attempt(lambda: os.setxattr(p("public"), "user.x", b"y")),
    "truncate_public": attempt(lambda: os.truncate(p("public"), 0)),
    "read_acl_granted": attempt(lambda: read(p("acl_granted"))),
    "write_acl_granted": attempt(lambda: open(p("acl_granted"), "ab").close()),
    "read_acl_denied": attempt(lambda: read(p("acl_denied"))),
    "create_in_acl_dir": attempt(lambda: create(p("acl_dir", "made_by_nobody"))),
}
out["chmod_own"] = attempt(lambda: os.chmod(p("sticky", "mine2"), 0o600))
out["read_own"] = read(p("sticky", "mine2")).decode() if out["create_in_sticky"] == "ok" else None
print(json.dumps(out))
'''.replace("NOBODY", str(NOBODY))


def test_nobody_is_denied_where_posix_says(archive):
    m = archive.m
    write_file(m("secret"), b"root only\n", 0o600)
    write_file(m("public"), b"world readable\n", 0o644)
    write_file(m("group_readable"), b"group 65534 may read\n", 0o640)
    os.chown(m("group_readable"), 0, NOBODY)
    os.mkdir(m("rootdir"), 0o755)
    write_file(m("rootdir", "inside"), b"x")
    os.mkdir(m("private_dir"), 0o700)
    os.mkdir(m("sticky"))
    os.chmod(m("sticky"), 0o1777)
    write_file(m("sticky", "roots"), b"root's file in /tmp-like dir\n", 0o666)
    write_file(m("acl_granted"), b"granted by ACL\n", 0o600)
    run(["setfacl", "-m", f"u:{NOBODY}:r", m("acl_granted")])
    write_file(m("acl_denied"), b"denied by ACL\n", 0o644)
    run(["setfacl", "-m", f"u:{NOBODY}:-", m("acl_denied")])
    os.mkdir(m("acl_dir"), 0o755)
    run(["setfacl", "-m", f"u:{NOBODY}:rwx", m("acl_dir")])

    got = run_as_nobody(PROBE, archive.mnt)
    expected = {
        "read_secret": "EACCES",
        "read_public": "ok",
        "read_group_readable": "ok",
        "write_public": "EACCES",
        "create_in_rootdir": "EACCES",
        "mkdir_in_rootdir": "EACCES",
        "unlink_in_rootdir": "EACCES",
        "list_private_dir": "EACCES",
        "create_in_sticky": "ok",
        "rename_own_in_sticky": "ok",
        "unlink_roots_in_sticky": "EPERM",
        "chmod_secret": "EPERM",
        "chown_public": "EPERM",
        "utime_public": "EPERM",
        "setxattr_public": "EACCES",
        "truncate_public": "EACCES",
        "chmod_own": "ok",
        "read_own": "by nobody\n",
        "read_acl_granted": "ok",          # 0600 root file, ACL user:65534:r--
        "write_acl_granted": "EACCES",
        "read_acl_denied": "EACCES",       # 0644 file, ACL user:65534:---
        "create_in_acl_dir": "ok",         # 0755 root dir, ACL user:65534:rwx
    }
    assert got == expected

    # nothing changed where nobody was refused; what nobody made is nobody's
    assert stat.S_IMODE(os.stat(m("secret")).st_mode) == 0o600
    assert os.stat(m("public")).st_uid == 0 and read_file(m("public")) == b"world readable\n"
    assert os.listdir(m("rootdir")) == ["inside"]
    assert sorted(os.listdir(m("sticky"))) == ["mine2", "roots"]
    st = os.stat(m("sticky", "mine2"))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY, NOBODY, 0o600)
    archive.remount()
    st = os.stat(m("sticky", "mine2"))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY, NOBODY, 0o600)
    assert run_as_nobody(PROBE.split("out = {")[0] + 'print(json.dumps(attempt(lambda: read(p("secret")))))',
                         archive.mnt) == "EACCES"


def test_a_change_of_owner_or_content_clears_setuid_and_setgid(archive):
    # The kernel clears them (cairn leaves FUSE_CAP_HANDLE_KILLPRIV off): on chown, and on a
    # write or truncate by someone who is not privileged.
    paths = {name: archive.m(name) for name in ("chowned", "written", "truncated")}
    for path in paths.values():
        write_file(path, b"#!/bin/sh\necho hello\n")
        os.chmod(path, 0o6777)
    os.chown(paths["chowned"], 1000, 1000)
    run_as_nobody(r'''
import json, os, sys
with open(sys.argv[1], "ab") as f:
    f.write(b"appended\n")
os.truncate(sys.argv[2], 3)
print(json.dumps("ok"))
''', paths["written"], paths["truncated"])
    archive.remount()  # what the catalog holds, not the kernel's copy
    for name, path in paths.items():
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode & (stat.S_ISUID | stat.S_ISGID) == 0, f"{name}: {oct(mode)}"
        assert mode & 0o777 == 0o777, f"{name}: {oct(mode)}"
    assert read_file(paths["written"]).endswith(b"appended\n")
    assert read_file(paths["truncated"]) == b"#!/"


def test_an_acl_set_by_an_owner_outside_the_files_group_clears_setgid(archive):
    """As chmod would (and ext4 does): the owner may set the ACL, but keeps setgid only when in the
    file's group. Root keeps it."""
    outside, inside, by_root = (archive.m(name) for name in ("outside", "inside", "by_root"))
    for path, group in ((outside, 0), (inside, NOBODY), (by_root, 0)):
        write_file(path, b"x")
        os.chown(path, NOBODY, group)
        os.chmod(path, 0o2775)
    run_as_nobody(r'''
import json, subprocess, sys
for path in sys.argv[1:]:
    subprocess.run(["setfacl", "-m", "u:2000:r", path], check=True)
print(json.dumps("ok"))
''', outside, inside)
    run(["setfacl", "-m", "u:2000:r", by_root])
    archive.remount()  # what the catalog holds, not the kernel's copy
    assert stat.S_IMODE(os.stat(outside).st_mode) & stat.S_ISGID == 0, oct(os.stat(outside).st_mode)
    assert stat.S_IMODE(os.stat(inside).st_mode) & stat.S_ISGID, oct(os.stat(inside).st_mode)
    assert stat.S_IMODE(os.stat(by_root).st_mode) & stat.S_ISGID, oct(os.stat(by_root).st_mode)
