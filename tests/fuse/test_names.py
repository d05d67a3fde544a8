"""Names longer than NAME_MAX (255 bytes) are ENAMETOOLONG for every call that takes one,
as on ext4, never ENOENT (FUSE hands names of up to 1024 bytes to the filesystem)."""
import errno
import os

import pytest

from conftest import write_file


def _errno_of(fn):
    try:
        fn()
    except OSError as e:
        return errno.errorcode[e.errno]
    return "ok"


@pytest.mark.parametrize("length", [256, 1000])
def test_every_call_on_a_too_long_name_is_enametoolong(archive, length):
    long = archive.m("x" * length)
    write_file(archive.m("f"), b"data")
    os.mkdir(archive.m("d"))
    calls = {
        "lookup": lambda: os.stat(long),
        "lstat": lambda: os.lstat(long),
        "open": lambda: open(long, "rb"),
        "create": lambda: open(long, "wb"),
        "mkdir": lambda: os.mkdir(long),
        "chmod": lambda: os.chmod(long, 0o600),
        "chown": lambda: os.chown(long, 1, 1),
        "truncate": lambda: os.truncate(long, 0),
        "unlink": lambda: os.unlink(long),
        "rmdir": lambda: os.rmdir(long),
        "link_from": lambda: os.link(long, archive.m("g")),
        "link_to": lambda: os.link(archive.m("f"), long),
        "rename_from": lambda: os.rename(long, archive.m("g")),
        "rename_to": lambda: os.rename(archive.m("f"), long),
        "getxattr": lambda: os.getxattr(long, "user.x"),
        "setxattr": lambda: os.setxattr(long, "user.x", b"y"),
    }
    got = {name: _errno_of(fn) for name, fn in calls.items()}
    assert got == {name: "ENAMETOOLONG" for name in calls}
    # Nothing was made or lost on the way.
    assert sorted(os.listdir(archive.mnt)) == ["d", "f"]
    # 255 bytes is still a good name for every one of them.
    longest = archive.m("y" * 255)
    os.link(archive.m("f"), longest)
    os.chmod(longest, 0o600)
    os.rename(longest, longest[:-1] + "z")
    os.unlink(longest[:-1] + "z")
    os.mkdir(longest)
    os.rmdir(longest)
