"""The fstab mount forms, status, inspect, and a bad config key."""
import fcntl
import json
import os
import re

from conftest import CAIRN, cairn, is_mounted, read_file, run, write_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATH_WITH_CAIRN = os.path.dirname(CAIRN) + ":" + os.environ.get("PATH", "/usr/bin:/bin")


def _mount_with_helper(archive, cmd):
    """Mounts through an fstab helper (cairn found via PATH, as mount(8) would run it)."""
    archive.umount()
    env = dict(os.environ, PATH=PATH_WITH_CAIRN)
    run(cmd, env=env, timeout=120)
    assert is_mounted(archive.mnt)
    archive.pids.add(archive.daemon_pid())


def test_fstab_type_fuse_cairn(archive):
    # fstab "ARCH MNT fuse.cairn defaults,persist_idle=3": mount(8) runs mount.fuse3 like this.
    write_file(archive.m("kept"), b"before\n")
    _mount_with_helper(archive, ["mount.fuse3", archive.arch, archive.mnt, "-t", "cairn", "-o",
                                 "defaults,persist_idle=3"])
    assert read_file(archive.m("kept")) == b"before\n"
    with open("/proc/mounts") as f:
        line = next(l for l in f if f" {archive.mnt} " in l)
    assert line.split()[0] == archive.arch and line.split()[2] == "fuse.cairn"


def test_fstab_type_cairn_helper(archive):
    # fstab "ARCH MNT cairn noauto,cache_size=64M": mount(8) runs mount.cairn like this.
    write_file(archive.m("kept"), b"before\n")
    _mount_with_helper(archive, [os.path.join(REPO, "scripts", "mount.cairn"), archive.arch, archive.mnt,
                                 "-o", "rw,noauto,cache_size=64M"])
    assert read_file(archive.m("kept")) == b"before\n"
    # mount -f (fake) must not mount
    archive.umount()
    run([os.path.join(REPO, "scripts", "mount.cairn"), archive.arch, archive.mnt, "-f"],
        env=dict(os.environ, PATH=PATH_WITH_CAIRN))
    assert not is_mounted(archive.mnt)
    archive.mount()


def test_status_reports_disks_cache_and_queue(archive):
    write_file(archive.m("a"), os.urandom(3 << 20))
    archive.persist()
    s = archive.status()
    assert s["mounted_by_pid"] == archive.daemon_pid()
    assert len(s["disks"]) == 4 and s["extents"] >= 1
    assert s["bytes_persisted"] == 3 << 20
    assert s["files_queued"] == 0
    assert sum(d["used"] for d in s["disks"]) == s["extent_bytes"]
    text = run([CAIRN, "status", archive.arch]).stdout
    assert f"mounted at {archive.mnt} (daemon pid {archive.daemon_pid()})" in text and "disk-000.img" in text
    conf_limit = s["cache_limit"]
    archive.umount()
    s = json.loads(run([CAIRN, "status", archive.arch, "--json"]).stdout)
    assert s["mounted_by_pid"] == 0 and s["cache_limit"] == conf_limit
    # The limit shown is the one the daemon runs with: a mount's -o cache_size overrides cairn.conf's.
    archive.mount("cache_size=96M")
    assert archive.status()["cache_limit"] == 96 << 20 != conf_limit
    assert "(limit 96.0 MiB)" in run([CAIRN, "status", archive.arch]).stdout


def test_an_archive_an_offline_command_holds_is_not_taken_for_mounted(archive):
    """While a process that serves no mount holds the archive's lock (an offline scrub, say),
    status said "mounted (daemon pid N)" and the commands that talk to a daemon said they could
    not reach its socket: both now say the archive is in use and by whom."""
    archive.umount()
    with open(os.path.join(archive.arch, "lock"), "r+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        text = run([CAIRN, "status", archive.arch]).stdout
        assert f"state     in use by pid {os.getpid()} (not mounted" in text, text
        assert json.loads(run([CAIRN, "status", archive.arch, "--json"]).stdout)["mounted_by_pid"] == 0
        for args in (["scrub", archive.arch], ["persist", archive.arch], ["disk", "fail", archive.arch, "0"]):
            r = cairn(*args, check=False)
            assert r.returncode == 1, (args, r)
            assert f"in use by another cairn process (pid {os.getpid()}) that is not a mounted daemon" in r.stderr, (
                args, r.stderr)
    assert "failed" not in run([CAIRN, "disk", "list", archive.arch]).stdout
    archive.mount()


def test_inspect_dumps_an_extent_header(archive):
    write_file(archive.m("big"), os.urandom(5 << 20))
    archive.umount()
    found = []
    for disk in range(4):
        r = run([CAIRN, "inspect", archive.arch, "--disk", str(disk), "--offset", "4096"], check=False)
        if r.returncode == 0:
            found.append(r.stdout)
        else:
            assert "all-zero" in r.stderr or "magic" in r.stderr, r.stderr
    assert found, "no extent at offset 4096 on any disk"
    # format v3: the payload is the 4 MiB segment followed by the member table
    def segment_bytes(out):
        m = re.search(r"payload (\d+) bytes.*of which member table (\d+) bytes", out, re.S)
        return m and int(m.group(1)) - int(m.group(2))
    assert any("file segment" in out and segment_bytes(out) == 4194304 for out in found), found
    archive.mount()


def test_unknown_config_key_is_refused(archive):
    archive.umount()
    conf = os.path.join(archive.arch, "cairn.conf")
    original = read_file(conf)
    with open(conf, "ab") as f:
        f.write(b"colour = blue\n")
    try:
        r = run([CAIRN, "mount", archive.arch, archive.mnt], check=False)
        assert r.returncode != 0
        assert 'unknown option "colour"' in r.stderr and "cairn.conf" in r.stderr, r.stderr  # quoted and escaped
        assert not is_mounted(archive.mnt)
    finally:
        with open(conf, "wb") as f:
            f.write(original)
    archive.mount()


def test_persist_waits_for_a_writer_that_is_closing(archive):
    # close() returns before the kernel's RELEASE reaches the daemon, so `cp f MNT && cairn
    # persist` may find f still open for writing. A writer that closes within a moment is
    # waited for; one that stays open is reported.
    import subprocess
    import time
    f = open(archive.m("closing"), "wb")
    f.write(b"x" * 100_000)
    f.flush()
    persist = subprocess.Popen([CAIRN, "persist", archive.arch], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    f.close()
    _, err = persist.communicate(timeout=60)
    assert persist.returncode == 0, err
    assert os.getxattr(archive.m("closing"), "user.cairn.state") == b"persisted"

    with open(archive.m("open"), "wb") as held:
        held.write(b"y" * 100_000)
        held.flush()
        started = time.monotonic()
        r = run([CAIRN, "persist", archive.arch], check=False)
        assert r.returncode != 0 and "still being written" in r.stderr
        assert time.monotonic() - started < 30


def test_persist_succeeds_when_the_background_persists_an_open_file_while_it_waits(archive):
    """`cairn persist` waits up to 2 s for a file open for writing to close; when the daemon
    persists that file meanwhile (it went persist_idle without a write), nothing is left."""
    archive.remount("persist_idle=1")
    with open(archive.m("idle"), "wb") as held:
        held.write(b"y" * 100_000)
        held.flush()
        r = run([CAIRN, "persist", archive.arch], check=False)
        assert r.returncode == 0, r.stderr
        assert os.getxattr(archive.m("idle"), "user.cairn.state") == b"persisted"


def test_persist_and_evict_take_the_archive_or_its_mount_point(archive):
    write_file(archive.m("f"), b"z" * 300_000)
    cairn("persist", archive.mnt)
    assert os.getxattr(archive.m("f"), "user.cairn.state") == b"persisted"
    cairn("evict", archive.mnt)
    assert read_file(archive.m("f")) == b"z" * 300_000
    os.makedirs(archive.s("elsewhere"), exist_ok=True)
    r = cairn("persist", archive.s("elsewhere"), check=False)
    assert r.returncode == 1 and "is neither an archive nor a mounted archive" in r.stderr, r.stderr


def test_numbers_and_durations_that_are_not_are_refused(archive):
    for args, why in [(["scrub", archive.arch, "--budget", "nan"], "is not a duration"),
                      (["scrub", archive.arch, "--budget", "inf"], "is not a duration"),
                      (["scrub", archive.arch, "--budget", "1e300s"], "is not a duration"),
                      (["inspect", archive.arch, "--disk", "abc", "--offset", "4096"], "'abc' is not a number"),
                      (["inspect", archive.arch, "--disk", "0", "--offset", "-1"], "'-1' is not a number"),
                      (["scrub", archive.arch, "--budget", "1e-10"], "at least 1ns"),
                      (["scrub", archive.arch, "--budget", "0x10"], "is not a duration"),
                      (["scrub", archive.arch, "--budget", " 1e1m"], "is not a duration"),
                      (["scrub", archive.arch, "--budget", "+5s"], "is not a duration"),
                      (["mkfs", archive.s("new"), "--disks", "+2", "--disk-size", "1M"], "--disks +2: expected"),
                      (["key", "create", archive.arch, "k9", "--allow", "uid:1", "--allow", "uid:2"],
                       "--allow is given twice"),
                      (["mkfs", archive.s("new"), "--disks", "2", "--disks", "3", "--disk-size", "1M"],
                       "--disks is given twice"),
                      (["mkfs", archive.s("new"), "--disks", "1", "--disk-size", "1M", "--disk-size", "2M"],
                       "--disk-size is given twice"),
                      (["mkfs", archive.s("new"), "--group", "g:pool:1", "--devices", "/a", "--devices", "/b",
                        "--disk-size", "1M"], "--devices is given twice"),
                      (["group", "add", archive.arch, "g:pool:1", "--disk-size", "1M", "--disk-size", "2M"],
                       "--disk-size is given twice"),
                      (["scrub", archive.arch, "--rate", "1M", "--rate", "2M"], "--rate is given twice"),
                      (["mount", archive.arch, archive.mnt, "--wait", "1", "--wait", "2"], "--wait is given twice"),
                      (["disk", "fail", archive.arch, "-18446744073709551615"], "is not a disk of this archive"),
                      (["disk", "fail", archive.arch, " 1"], "is not a disk of this archive"),
                      (["disk", "fail", archive.arch, "+1"], "is not a disk of this archive")]:
        r = cairn(*args, check=False)
        assert r.returncode != 0 and why in r.stderr, (args, r.stderr)


def test_a_disk_path_cairn_conf_cannot_record_is_refused_before_it_is_used(archive):
    archive.umount()
    spare_dir = archive.s("spare#2")
    os.mkdir(spare_dir)
    new = os.path.join(spare_dir, "d1.img")
    r = cairn("disk", "replace", archive.arch, "1", new, check=False)
    assert r.returncode != 0 and "cairn.conf cannot hold a path with '#'" in r.stderr, r
    assert not os.path.exists(new)
    assert "#" not in open(os.path.join(archive.arch, "cairn.conf")).read().split("\n", 1)[1]
    archive.mount()


def test_the_daemon_of_an_archive_at_a_long_path_takes_requests(archive):
    """A socket path holds 107 bytes: the control socket of an archive whose path is longer is
    reached through a descriptor of the archive, never through a path cut short."""
    arch = archive.s("a" * 60, "b" * 60, "arch")
    mnt = archive.s("long-mnt")
    os.makedirs(mnt)
    os.makedirs(os.path.dirname(arch))
    cairn("mkfs", arch, "--disks", "2", "--disk-size", "64M")
    cairn("mount", arch, mnt)
    try:
        write_file(os.path.join(mnt, "f"), b"x" * 100_000)
        cairn("persist", arch)
        assert os.getxattr(os.path.join(mnt, "f"), "user.cairn.state") == b"persisted"
        cairn("umount", mnt)
    finally:
        if is_mounted(mnt):
            run(["fusermount3", "-u", "-z", mnt], check=False)
