"""cairn mount right after fusermount3 -u: it waits (--wait SECONDS, Ctrl-C) for the old daemon
to finish persisting and release the archive, then mounts."""
import os
import signal
import subprocess
import time

from conftest import (CAIRN, FUSERMOUNT, KiB, MiB, Archive, cairn, is_mounted, pid_alive, random_bytes, read_file,
                      run, sha256, write_file)

# Holds ARCHIVE/lock as a cairn daemon does (flock, pid inside) until its stdin closes.
HOLD_LOCK = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, f"{os.getpid()}\n".encode())
print("locked", flush=True)
sys.stdin.read()
"""


def hold_lock(a):
    holder = subprocess.Popen(["/usr/bin/python3", "-c", HOLD_LOCK, os.path.join(a.arch, "lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "locked\n"
    return holder


def release(holder):
    holder.stdin.close()
    holder.wait(timeout=30)


def start_mount(a, *extra):
    return subprocess.Popen([CAIRN, "mount", a.arch, a.mnt, *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_mount_waits_for_the_process_holding_the_archive(archive):
    a = archive
    a.umount()
    holder = hold_lock(a)
    try:
        mount = start_mount(a)
        line = mount.stderr.readline()
        assert f"waiting up to 300 s for pid {holder.pid} to finish persisting" in line, line
        assert mount.poll() is None and not is_mounted(a.mnt)
    finally:
        release(holder)
    out, err = mount.communicate(timeout=60)
    assert mount.returncode == 0, err
    a.pids.add(a.daemon_pid())
    assert is_mounted(a.mnt)


def test_umount_then_mount_at_once_keeps_the_data(archive):
    a = archive
    data = random_bytes(192 * MiB, 13)
    write_file(a.m("big"), data)
    old = a.daemon_pid()
    run([FUSERMOUNT, "-u", a.mnt])
    still_persisting = pid_alive(old)
    r = cairn("mount", a.arch, a.mnt, check=False, timeout=300)
    assert r.returncode == 0, r.stderr
    a.pids.add(a.daemon_pid())
    if still_persisting:  # the usual case: 192 MiB take a while to persist
        assert f"for pid {old} to finish persisting" in r.stderr, r.stderr
    assert sha256(read_file(a.m("big"))) == sha256(data)


def test_mount_gives_up_after_wait_seconds(archive):
    a = archive
    a.umount()
    holder = hold_lock(a)
    try:
        t0 = time.monotonic()
        r = cairn("mount", a.arch, a.mnt, "--wait", "1", check=False, timeout=60)
        took = time.monotonic() - t0
        assert r.returncode == 1
        assert f"pid {holder.pid} still holds {a.arch} after 1 s; not mounted" in r.stderr, r.stderr
        assert took < 10 and not is_mounted(a.mnt)
        r = cairn("mount", a.arch, a.mnt, "--wait", "0", check=False, timeout=60)
        assert r.returncode == 1 and f"in use by another cairn process (pid {holder.pid})" in r.stderr, r.stderr
        r = cairn("mount", a.arch, a.mnt, "--wait", " 5", check=False, timeout=60)
        assert r.returncode == 2 and "expected whole seconds" in r.stderr, r.stderr
    finally:
        release(holder)
    a.mount()


def test_ctrl_c_stops_the_wait(archive):
    a = archive
    a.umount()
    holder = hold_lock(a)
    try:
        mount = start_mount(a)
        assert "waiting up to" in mount.stderr.readline()
        mount.send_signal(signal.SIGINT)
        out, err = mount.communicate(timeout=30)
        assert mount.returncode == 130, err
        assert f"interrupted while waiting for pid {holder.pid}; {a.arch} is not mounted" in err, err
        assert not is_mounted(a.mnt)
    finally:
        release(holder)
    assert a.own_daemons() == []
    a.mount()


def test_mounting_a_mounted_archive_fails_at_once(archive):
    a = archive
    other = a.s("elsewhere")
    os.makedirs(other)
    t0 = time.monotonic()
    r = cairn("mount", a.arch, other, check=False, timeout=60)
    assert r.returncode == 1 and f"is mounted at {a.mnt}" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 5 and not is_mounted(other)


def test_mounting_another_archive_over_a_mount_point_in_use_is_refused(archive):
    """A second archive mounted over the first one's mount point hid it, its daemon running on."""
    write_file(archive.m("f"), b"first")
    second = Archive(os.path.join(archive.base, "second"))
    second.mkfs()
    r = cairn("mount", second.arch, archive.mnt, check=False, timeout=60)
    assert r.returncode == 1 and f"{archive.mnt} is already the mount point of archive {archive.arch}" in r.stderr, r
    with open("/proc/self/mountinfo") as mounts:
        assert [line.split()[4] for line in mounts].count(os.path.realpath(archive.mnt)) == 1
    assert second.status()["mounted_by_pid"] == 0
    assert read_file(archive.m("f")) == b"first"


def test_an_archive_whose_path_has_a_space_and_a_comma(archive):
    # /proc/mounts shows a space as \040, and a comma ends a mount option unless escaped.
    odd = Archive(os.path.join(archive.base, "my archives, 2026"))
    try:
        odd.mkfs()
        odd.mount()
        data = random_bytes(300 * KiB, 7)
        write_file(odd.m("f"), data)
        cairn("persist", odd.mnt)  # finds its archive from the mount point
        assert os.getxattr(odd.m("f"), "user.cairn.state") == b"persisted"
        odd.umount()
        assert not odd.late_exits, f"cairn umount returned before the daemon exited: {odd.late_exits}"
        odd.mount()
        assert read_file(odd.m("f")) == data
        odd.umount()
        assert not odd.late_exits, f"cairn umount returned before the daemon exited: {odd.late_exits}"
    finally:
        problems = odd.cleanup()
    assert not problems, problems
