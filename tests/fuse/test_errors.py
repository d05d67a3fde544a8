"""13. Refusals with useful messages."""
import os

from conftest import (MiB, cairn, is_mounted, pid_alive, random_bytes, read_file, sha256, sha256_file,
                      wait_pid_gone, write_file)


def test_mount_locked_archive(archive):
    write_file(archive.m("f"), b"first mount\n")
    pid = archive.daemon_pid()
    other = os.path.join(archive.base, "mnt2")
    os.mkdir(other)
    r = cairn("mount", archive.arch, other, check=False, timeout=60)
    assert r.returncode != 0
    assert f"is mounted at {archive.mnt}" in (r.stdout + r.stderr), r.stdout + r.stderr
    assert not is_mounted(other)
    # the first mount is undisturbed
    assert read_file(archive.m("f")) == b"first mount\n"
    assert_still_owned(archive, pid)


def assert_still_owned(archive, pid):
    """The running daemon's pid is still in ARCH/lock and status still reports it."""
    lock = read_file(os.path.join(archive.arch, "lock")).decode().strip()
    assert lock == str(pid), f"ARCH/lock now holds {lock!r}, expected the running daemon's pid {pid}"
    assert archive.status()["mounted_by_pid"] == pid


def test_mount_missing_disk(archive):
    archive.umount()
    disk = os.path.join(archive.arch, "disks", "disk-002.img")
    moved = os.path.join(archive.base, "disk-002.img.away")
    os.rename(disk, moved)
    try:
        r = cairn("mount", archive.arch, archive.mnt, check=False, timeout=60)
        assert r.returncode != 0
        assert "disk-002.img" in (r.stdout + r.stderr), r.stdout + r.stderr
        assert not is_mounted(archive.mnt)
    finally:
        os.rename(moved, disk)
    archive.mount()


def test_mount_unknown_option(archive):
    archive.umount()
    for opt, word in (("frobnicate", "frobnicate"), ("no_such_key=1", "no_such_key"),
                      ("cache_size=lots", "cache_size")):
        r = cairn("mount", archive.arch, archive.mnt, "-o", opt, check=False, timeout=60)
        assert r.returncode == 2, f"-o {opt}: not a usage error (exit {r.returncode})"
        msg = r.stdout + r.stderr
        assert word in msg, f"-o {opt}: message does not name the option: {msg!r}"
        assert not is_mounted(archive.mnt)
    for flag in ("-o", "--wait"):
        r = cairn("mount", archive.arch, archive.mnt, flag, check=False, timeout=60)
        assert r.returncode == 2 and f"{flag} needs a value" in r.stderr, r
    archive.mount("defaults,noatime,nofail")  # fstab words are ignored


def test_mkfs_into_non_empty_dir(archive):
    target = os.path.join(archive.base, "occupied")
    os.mkdir(target)
    write_file(os.path.join(target, "precious"), b"do not touch\n")
    r = cairn("mkfs", target, "--disks", "1", "--disk-size", "64M", check=False)
    assert r.returncode != 0
    assert r.stdout + r.stderr, "no message"
    assert os.listdir(target) == ["precious"]
    assert read_file(os.path.join(target, "precious")) == b"do not touch\n"
    # mkfs over an existing archive is refused too
    r = cairn("mkfs", archive.arch, "--disks", "1", "--disk-size", "64M", check=False)
    assert r.returncode != 0


def test_fsck_refuses_mounted_archive(archive):
    pid = archive.daemon_pid()
    r = cairn("fsck", archive.arch, check=False, timeout=60)
    assert r.returncode != 0, "fsck ran on a mounted archive"
    assert_still_owned(archive, pid)


def test_umount_after_refused_mount_still_waits(archive):
    """A refused second mount must not make `cairn umount` stop waiting for the daemon:
    right after umount returns, fsck and mount must work."""
    pid = archive.daemon_pid()
    other = os.path.join(archive.base, "mnt2")
    os.mkdir(other)
    assert cairn("mount", archive.arch, other, check=False, timeout=60).returncode != 0
    for i in range(4):
        write_file(archive.m(f"f{i}"), random_bytes(32 * MiB, 800 + i))
    r = cairn("umount", archive.mnt, timeout=300)
    still_running = pid_alive(pid)
    fsck = cairn("fsck", archive.arch, check=False, timeout=300)
    assert not still_running, f"cairn umount returned while daemon {pid} was still running"
    assert fsck.returncode == 0 and "clean" in fsck.stdout, f"fsck right after umount: {fsck.stdout}{fsck.stderr}"
    assert wait_pid_gone(pid, 60)
    archive.mount()
    for i in range(4):
        assert sha256_file(archive.m(f"f{i}")) == sha256(random_bytes(32 * MiB, 800 + i))
