"""Admin rules, named policies, trusted.cairn.* locks and the reconciler, through a real mount."""
import errno
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import MiB, NOBODY, cairn, interruptible, random_bytes, read_file, run, run_as_nobody, sha256, write_file

RULES = """\
# test rules
policy cold selectable
    set segment_size=128K
policy vault
    set segment_size=256K

rule logs
    where name *.log
    set segment_size=64K

rule projects
    where path /projects/**
    set policy=cold

default
    set segment_size=1M
"""


def getx(path, key):
    return os.getxattr(path, "user.cairn." + key).decode()


def field(text, key):
    return dict(word.split("=", 1) for word in text.split())[key]


def install_rules(archive, text):
    with open(os.path.join(archive.arch, "rules"), "w") as f:
        f.write(text)
    return cairn("rules", "reload", archive.arch, check=False)


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {seconds} s waiting for {what}")


def segments(path):
    return getx(path, "location").split()


def stamped_policy(archive, path, index=0):
    """The policy stamped in the header of the extent holding segment `index` of a file."""
    where = dict(item.split("=", 1) for item in segments(path))[str(index)]
    m = re.fullmatch(r"disk(\d+)@(\d+)(/disk\d+@\d+)*\+\d+(,cached)?", where)  # the first copy or chunk
    assert m, where
    header = int(m.group(2)) - 4096  # location points at the payload, after the 4 KiB header
    out = cairn("inspect", archive.arch, "--disk", m.group(1), "--offset", str(header)).stdout
    return re.search(r"^  policy (.*)$", out, re.M).group(1)


def test_rules_check_reports_file_line_column(archive):
    good = archive.s("good.rules")
    with open(good, "w") as f:
        f.write(RULES)
    r = cairn("rules", "check", good)
    assert "ok: 2 named policies (1 selectable by users), 2 rules and a default" in r.stdout
    bad = archive.s("bad.rules")
    with open(bad, "w") as f:
        f.write(RULES.replace("where name *.log", "where sise > 1G"))
    r = cairn("rules", "check", bad, check=False)
    assert r.returncode == 1
    assert f"{bad}:8:11:" in r.stderr and "sise" in r.stderr, r.stderr
    r = cairn("rules", "check", archive.s("missing.rules"), check=False)
    assert r.returncode == 1 and "missing.rules" in r.stderr


def test_rules_check_with_archive_knows_its_disks(archive):
    wide = archive.s("wide.rules")
    with open(wide, "w") as f:
        f.write(RULES.replace("set segment_size=256K", "set segment_size=256K raid=rs-20-4"))
    assert cairn("rules", "check", wide).returncode == 0  # alone, any K+M is well formed
    refusal = "policy vault: raid=rs-20-4 puts 24 chunks on distinct disks; this archive has 4 disks"
    for target in (archive.arch, archive.mnt):  # the archive, or its mount point
        r = cairn("rules", "check", wide, "--archive", target, check=False)
        assert r.returncode == 1 and f"{wide}:4: {refusal}" in r.stderr, r.stdout + r.stderr
    # what check --archive refuses is what a reload refuses
    r = install_rules(archive, open(wide).read())
    assert r.returncode == 1 and refusal in r.stderr, r.stdout + r.stderr
    fits = archive.s("fits.rules")
    with open(fits, "w") as f:
        f.write(RULES.replace("set segment_size=256K", "set segment_size=256K raid=rs-2-2"))
    r = cairn("rules", "check", fits, "--archive", archive.arch)
    assert f"fits the 4 disks of {archive.arch}" in r.stdout
    assert install_rules(archive, open(fits).read()).returncode == 0
    r = cairn("rules", "check", fits, "--archive", archive.s(), check=False)
    assert r.returncode == 1 and "neither an archive nor a mounted archive" in r.stderr


def test_rules_decide_the_policy_at_persist(archive):
    assert install_rules(archive, RULES).returncode == 0
    os.makedirs(archive.m("projects", "x"))
    write_file(archive.m("a.log"), random_bytes(300 * 1024, 1))
    write_file(archive.m("projects", "x", "data.bin"), random_bytes(300 * 1024, 2))
    write_file(archive.m("other.bin"), random_bytes(3 * MiB, 3))
    archive.persist()
    log = archive.m("a.log")
    assert field(getx(log, "effective"), "segment_size") == "65536"
    assert field(getx(log, "effective.source"), "segment_size") == "rule:logs"
    assert len(segments(log)) == 5
    r = install_rules(archive, RULES)
    assert f"rules reloaded from {archive.arch}/rules" in r.stdout, r.stdout
    data = archive.m("projects", "x", "data.bin")
    assert field(getx(data, "effective"), "policy") == "cold"
    assert field(getx(data, "effective.source"), "segment_size") == "policy:cold@rule:projects"
    assert len(segments(data)) == 3
    assert field(getx(archive.m("other.bin"), "effective.source"), "segment_size") == "rule:default"
    assert len(segments(archive.m("other.bin"))) == 3
    out = cairn("policy", "explain", data).stdout
    assert "policy 'cold', admin rule 'projects'" in out
    # the extents carry the resolved policy
    assert "segment_size=131072" in stamped_policy(archive, data).split()
    assert "policy=cold" in stamped_policy(archive, data).split()
    # Without a rules file the built-in rules apply, and the reload says so (it named the file).
    os.unlink(os.path.join(archive.arch, "rules"))
    r = cairn("rules", "reload", archive.arch)
    assert "there is no" in r.stdout and "only the built-in rules apply" in r.stdout, r.stdout
    write_file(archive.m("b.log"), b"x" * 1000)
    archive.persist()
    assert field(getx(archive.m("b.log"), "effective.source"), "segment_size") == "default"


def test_broken_rules_are_refused_and_the_old_ones_stay(archive):
    assert install_rules(archive, RULES).returncode == 0
    r = install_rules(archive, RULES + "rule late\n    set segment_size=64K\n")
    assert r.returncode == 1 and "rules:17:1:" in r.stderr, r.stderr
    write_file(archive.m("b.log"), b"x" * 1000)
    archive.persist()
    assert field(getx(archive.m("b.log"), "effective.source"), "segment_size") == "rule:logs"
    # SIGHUP: reloads (never unmounts); a broken file is refused the same way
    pid = archive.daemon_pid()
    os.kill(pid, signal.SIGHUP)
    time.sleep(0.5)
    assert archive.is_mounted()
    with open(os.path.join(archive.arch, "rules"), "w") as f:
        f.write(RULES.replace("*.log", "*.txt"))
    os.kill(pid, signal.SIGHUP)
    wait_for(lambda: field(getx(archive.m("b.log"), "effective.source"), "segment_size") == "rule:default", 10,
             "SIGHUP to load the new rules")
    with open(os.path.join(archive.arch, "rules"), "w") as f:
        f.write("rule x\n")
    os.kill(pid, signal.SIGHUP)
    wait_for(lambda: "rules reload refused" in open(os.path.join(archive.arch, "cairn.log")).read(), 10,
             "the refusal in cairn.log")
    assert archive.is_mounted()
    write_file(archive.m("c.txt"), b"y")
    assert field(getx(archive.m("c.txt"), "effective.source"), "segment_size") == "rule:logs"


def test_a_broken_rules_file_stops_the_mount_with_its_location(archive):
    archive.umount()
    with open(os.path.join(archive.arch, "rules"), "w") as f:
        f.write("default\n    set placement=tier=fast\n")
    r = cairn("mount", archive.arch, archive.mnt, check=False)
    assert r.returncode == 1 and "rules:2:19:" in r.stderr and "not available in this build" in r.stderr, r.stderr
    with open(os.path.join(archive.arch, "rules"), "w") as f:
        f.write("default\n    set raid=2d\n")
    r = cairn("mount", archive.arch, archive.mnt, check=False)
    assert r.returncode == 1 and "rules:1: default: raid=2d keeps each extent whole" in r.stderr, r.stderr
    os.remove(os.path.join(archive.arch, "rules"))
    archive.mount()


def test_named_policies_as_a_non_root_user(archive):
    assert install_rules(archive, RULES).returncode == 0
    os.makedirs(archive.m("pub"))
    os.chmod(archive.m("pub"), 0o1777)
    result = run_as_nobody("""
import errno, json, os, sys
path = os.path.join(sys.argv[1], "mine")
open(path, "wb").write(b"data")
out = {}
for value in ("cold", "vault", "nosuch"):
    try:
        os.setxattr(path, "user.cairn.policy", value.encode())
        out[value] = "ok"
    except OSError as e:
        out[value] = errno.errorcode[e.errno]
try:
    os.setxattr(path, "trusted.cairn.policy", b"vault")
    out["trusted"] = "ok"
except OSError as e:
    out["trusted"] = errno.errorcode[e.errno]
print(json.dumps(out))
""", archive.m("pub"))
    assert result == {"cold": "ok", "vault": "EPERM", "nosuch": "EINVAL", "trusted": "EPERM"}
    mine = archive.m("pub", "mine")
    assert field(getx(mine, "effective"), "segment_size") == "131072"
    os.setxattr(mine, "trusted.cairn.policy", b"vault")  # root may pin any policy
    assert field(getx(mine, "effective"), "policy") == "cold"  # the user's choice still comes first
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert "policy 'vault' is not selectable by users" in log.read()


def test_trusted_lock_overrides_user_settings_below(archive):
    assert install_rules(archive, RULES).returncode == 0
    os.makedirs(archive.m("locked", "sub"))
    write_file(archive.m("locked", "sub", "f"), b"z" * 100)
    os.setxattr(archive.m("locked", "sub", "f"), "user.cairn.segment_size", b"64K")  # set before the lock
    os.setxattr(archive.m("locked"), "trusted.cairn.segment_size", b"512K")
    assert field(getx(archive.m("locked", "sub", "f"), "effective.source"), "segment_size") == "file"
    os.setxattr(archive.m("locked"), "trusted.cairn.lock", b"segment_size, policy")
    assert os.getxattr(archive.m("locked"), "trusted.cairn.lock") == b"segment_size,policy"
    f = archive.m("locked", "sub", "f")
    assert field(getx(f, "effective"), "segment_size") == "524288"
    assert field(getx(f, "effective.source"), "segment_size") == "pin:/locked"
    for key, value in (("segment_size", b"1M"), ("policy", b"cold")):
        with pytest.raises(OSError) as e:
            os.setxattr(archive.m("locked", "sub"), "user.cairn." + key, value)
        assert e.value.errno == errno.EPERM
    # A setting made before the lock stays stored: removing it is refused as setting it is.
    with pytest.raises(OSError) as e:
        os.removexattr(f, "user.cairn.segment_size")
    assert e.value.errno == errno.EPERM
    os.setxattr(f, "user.cairn.checksum", b"crc32c")  # keys the lock does not name stay open
    os.removexattr(f, "user.cairn.checksum")
    os.setxattr(f, "user.cairn.checksum", b"crc32c")
    with pytest.raises(OSError) as e:
        os.setxattr(archive.m("locked"), "trusted.cairn.lock", b"colour")
    assert e.value.errno == errno.EINVAL
    out = cairn("policy", "explain", f).stdout
    assert "pinned by the admin at /locked" in out
    os.removexattr(archive.m("locked"), "trusted.cairn.lock")
    assert field(getx(f, "effective.source"), "segment_size") == "file"


def test_policy_change_of_a_200mib_file_converges(archive):
    archive.remount("reconcile_idle=3600")  # only `cairn policy apply` re-encodes here
    data = random_bytes(200 * MiB, 4)
    path = archive.m("big.nc")
    write_file(path, data)
    archive.persist()
    assert len(segments(path)) == 50
    assert "segment_size=4194304" in stamped_policy(archive, path).split()
    os.setxattr(path, "user.cairn.segment_size", b"16M")  # accepted on a non-empty file
    assert getx(path, "state") == "out-of-policy"
    assert read_file(path) == data  # still readable from the old layout
    r = cairn("policy", "apply", path, "--progress")
    assert "1 out-of-policy file(s), 1 re-encoded" in r.stdout
    assert "re-encoded 1/1 files" in r.stderr and "200.0 MiB of 200.0 MiB" in r.stderr, r.stderr
    assert getx(path, "state") == "persisted"
    assert len(segments(path)) == 13
    for index in (0, 12):
        stamp = stamped_policy(archive, path, index).split()
        assert "segment_size=16777216" in stamp and "raid=none" in stamp
    archive.evict()
    assert sha256(read_file(path)) == sha256(data)
    again = cairn("policy", "apply", archive.mnt)
    assert "0 out-of-policy file(s)" in again.stdout


def test_reconciler_runs_in_background_and_resumes_after_kill9(archive):
    os.makedirs(archive.m("d"))
    files = {f"f{i}": random_bytes(24 * MiB + 1 + i, 10 + i) for i in range(3)}
    for name, data in files.items():
        write_file(archive.m("d", name), data)
    archive.persist()
    archive.remount("reconcile_rate=8M,reconcile_idle=0")  # slow enough to catch it mid-way
    os.setxattr(archive.m("d"), "user.cairn.segment_size", b"1M")

    def started():
        return any(getx(archive.m("d", n), "state") == "migrating" or len(segments(archive.m("d", n))) == 25
                   for n in files)
    wait_for(started, 30, "the reconciler to start")
    archive.kill9()
    archive.mount("reconcile_rate=0,reconcile_idle=0")
    for name in files:  # the queue survived: everything converges without another setfattr
        wait_for(lambda: getx(archive.m("d", name), "state") == "persisted", 60, f"{name} to be re-encoded")
        assert len(segments(archive.m("d", name))) == 25
    archive.evict()
    for name, data in files.items():
        assert sha256(read_file(archive.m("d", name))) == sha256(data), name


def test_rename_into_a_directory_with_another_policy(archive):
    archive.remount("reconcile_idle=3600")
    os.makedirs(archive.m("fast"))
    os.makedirs(archive.m("small"))
    os.setxattr(archive.m("small"), "user.cairn.segment_size", b"64K")
    data = random_bytes(MiB, 5)
    write_file(archive.m("fast", "f"), data)
    archive.persist()
    os.rename(archive.m("fast", "f"), archive.m("small", "f"))
    f = archive.m("small", "f")
    assert getx(f, "state") == "out-of-policy"
    cairn("policy", "apply", archive.m("small"))
    assert getx(f, "state") == "persisted" and len(segments(f)) == 16
    assert read_file(f) == data


def test_rsync_temp_file_ends_with_the_rules_policy(archive):
    """rsync writes .name.XXXXXX and renames it: the rule for *.log must apply in the end."""
    assert install_rules(archive, RULES).returncode == 0
    write_file(archive.s("app.log"), random_bytes(2 * MiB, 6))
    run(["rsync", "-a", archive.s("app.log"), archive.m("app.log")])
    archive.persist()
    cairn("policy", "apply", archive.mnt)  # in case the temp file was persisted before its rename
    log = archive.m("app.log")
    assert field(getx(log, "effective.source"), "segment_size") == "rule:logs"
    assert getx(log, "state") == "persisted" and len(segments(log)) == 32


def test_rules_dry_run_lists_changes_and_changes_nothing(archive):
    assert install_rules(archive, RULES).returncode == 0
    write_file(archive.m("x.dat"), random_bytes(100 * 1024, 7))
    write_file(archive.m("y.log"), b"log")
    archive.persist()
    candidate = archive.s("candidate.rules")
    with open(candidate, "w") as f:
        f.write(RULES.replace("rule logs", "rule dat\n    where name *.dat\n    set segment_size=256K\nrule logs"))
    r = cairn("rules", "dry-run", candidate, "--path", archive.mnt)
    assert f"{archive.mnt}/x.dat: segment_size=1048576->262144 (rule:dat) [persisted: would be re-encoded]" \
        in r.stdout, r.stdout
    assert "y.log" not in r.stdout and "1 file(s) would change" in r.stdout
    assert field(getx(archive.m("x.dat"), "effective"), "segment_size") == "1048576"
    assert getx(archive.m("x.dat"), "state") == "persisted"
    bad = archive.s("bad.rules")
    with open(bad, "w") as f:
        f.write("default\n  set colour=red\n")
    r = cairn("rules", "dry-run", bad, "--path", archive.mnt, check=False)
    assert r.returncode == 1 and "bad.rules:2:7:" in r.stderr, r.stderr


def test_small_files_are_re_encoded_into_shared_packs(archive):
    archive.remount("reconcile_idle=3600")
    os.makedirs(archive.m("many"))
    files = {f"f{i:03}": random_bytes(10_000 + i, 100 + i) for i in range(300)}
    for name, data in files.items():
        write_file(archive.m("many", name), data)
    archive.persist()
    os.setxattr(archive.m("many"), "user.cairn.segment_size", b"64K")
    r = cairn("policy", "apply", archive.m("many"))
    assert "300 out-of-policy file(s), 300 re-encoded" in r.stdout
    status = json.loads(cairn("status", archive.arch, "--json").stdout)
    assert status["extents"] <= 4, status  # ~3 MiB of small files: a pack or two, not 300 extents
    assert status["policy_checks_queued"] == 0
    archive.evict()
    for name, data in files.items():
        assert read_file(archive.m("many", name)) == data, name
        assert getx(archive.m("many", name), "state") == "persisted"


@pytest.mark.no_fsck  # the damaged extent stays damaged
def test_an_unreadable_file_stays_as_it_is_and_the_others_converge(archive):
    archive.remount("reconcile_idle=3600")
    os.makedirs(archive.m("d"))
    good, bad = random_bytes(2 * MiB, 20), random_bytes(2 * MiB, 21)
    write_file(archive.m("d", "good"), good)
    write_file(archive.m("d", "bad"), bad)
    archive.persist()
    where = dict(item.split("=", 1) for item in segments(archive.m("d", "bad")))["0"]
    disk, offset = re.fullmatch(r"disk(\d+)@(\d+)\+\d+(,cached)?", where).groups()[:2]
    archive.evict()
    with open(os.path.join(archive.arch, "disks", f"disk-{int(disk):03}.img"), "r+b") as f:
        f.seek(int(offset) + 1000)
        f.write(b"\xff" * 16)
    os.setxattr(archive.m("d"), "user.cairn.segment_size", b"1M")
    r = cairn("policy", "apply", archive.m("d"), check=False)
    assert r.returncode == 1 and "1 re-encoded, 1 left as they are (unreadable" in r.stdout, r.stdout + r.stderr
    assert getx(archive.m("d", "good"), "state") == "persisted" and len(segments(archive.m("d", "good"))) == 2
    assert getx(archive.m("d", "bad"), "state") == "out-of-policy"
    archive.remount("reconcile_idle=3600")  # nothing from the kernel's page cache
    assert read_file(archive.m("d", "good")) == good
    with pytest.raises(OSError) as e:
        read_file(archive.m("d", "bad"))
    assert e.value.errno == errno.EIO  # never wrong bytes
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert "stays out of policy" in log.read()


def test_every_key_set_get_remove_on_files_and_dirs_through_three_levels(archive):
    assert install_rules(archive, RULES).returncode == 0
    os.makedirs(archive.m("l1", "l2", "l3"))
    f = archive.m("l1", "l2", "l3", "f")
    write_file(f, b"x" * 5000)
    values = {"raid": b"none", "idr": b"none", "compress": b"off", "encrypt": b"off", "checksum": b"crc32c",
              "segment_size": b"512K", "plugins": b"none", "policy": b"cold"}
    canonical = dict(values, segment_size=b"524288")
    for key, value in values.items():
        for target in (f, archive.m("l1")):
            os.setxattr(target, "user.cairn." + key, value)
            assert os.getxattr(target, "user.cairn." + key) == canonical[key]
            assert "user.cairn." + key in os.listxattr(target)
        # set on l1 only, it reaches the file two directories down
        os.removexattr(f, "user.cairn." + key)
        assert field(getx(f, "effective.source"), key) == "dir:/l1", key
        assert field(getx(f, "effective"), key) == canonical[key].decode(), key
        os.removexattr(archive.m("l1"), "user.cairn." + key)
        with pytest.raises(OSError) as e:
            os.getxattr(archive.m("l1"), "user.cairn." + key)
        assert e.value.errno == errno.ENODATA
        with pytest.raises(OSError) as e:
            os.removexattr(archive.m("l1"), "user.cairn." + key)
        assert e.value.errno == errno.ENODATA
    # nearest wins: l3 over l2 over l1
    for level, size in (("l1", b"64K"), ("l1/l2", b"128K"), ("l1/l2/l3", b"256K")):
        os.setxattr(archive.m(level), "user.cairn.segment_size", size)
    assert field(getx(f, "effective.source"), "segment_size") == "dir:/l1/l2/l3"
    os.removexattr(archive.m("l1", "l2", "l3"), "user.cairn.segment_size")
    assert field(getx(f, "effective.source"), "segment_size") == "dir:/l1/l2"
    assert field(getx(f, "effective"), "segment_size") == "131072"


def test_policy_apply_can_be_interrupted_and_run_again(archive):
    archive.remount("reconcile_idle=3600")
    os.makedirs(archive.m("big"))
    files = {f"f{i}": random_bytes(64 * MiB, 30 + i) for i in range(6)}
    for name, data in files.items():
        write_file(archive.m("big", name), data)
    archive.persist()
    os.setxattr(archive.m("big"), "user.cairn.segment_size", b"8M")
    cli = subprocess.Popen([os.environ.get("CAIRN_BIN", "cairn"), "policy", "apply", archive.m("big"), "--progress"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        first = cli.stderr.readline()  # the 0/6 line: the daemon is at work
        assert "re-encoded 0/6 files" in first, first
        cli.send_signal(signal.SIGINT)  # Ctrl-C
        cli.wait(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode != 0
    # the daemon drops the unfinished batch at its next chunk and stays healthy
    states = [getx(archive.m("big", n), "state") for n in files]
    assert set(states) <= {"persisted", "out-of-policy", "migrating"}, states
    wait_for(lambda: "migrating" not in [getx(archive.m("big", n), "state") for n in files], 60,
             "the interrupted run to stop")
    r = cairn("policy", "apply", archive.m("big"))
    assert re.search(r": (\d) out-of-policy file\(s\), \1 re-encoded$", r.stdout.strip()), r.stdout
    archive.evict()
    for name, data in files.items():
        assert getx(archive.m("big", name), "state") == "persisted"
        assert len(segments(archive.m("big", name))) == 8
        assert sha256(read_file(archive.m("big", name))) == sha256(data), name


def test_a_tag_a_rule_looks_at_moves_a_persisted_file(archive):
    rules = RULES.replace("rule logs", "rule final\n    where xattr user.archive.state = final\n"
                                       "    set segment_size=256K\nrule logs")
    assert install_rules(archive, rules).returncode == 0
    data = random_bytes(MiB, 40)
    write_file(archive.m("run.nc"), data)
    archive.persist()
    assert len(segments(archive.m("run.nc"))) == 1
    archive.remount("reconcile_idle=0")
    os.setxattr(archive.m("run.nc"), "user.archive.state", b"final")  # not a cairn key, but a rule reads it
    wait_for(lambda: len(segments(archive.m("run.nc"))) == 4, 30, "the reconciler to apply rule 'final'")
    assert field(getx(archive.m("run.nc"), "effective.source"), "segment_size") == "rule:final"
    assert read_file(archive.m("run.nc")) == data


# Runs as nobody: a file at home with raid=none, hard-linked into the admin's locked directory.
LINK_INTO_LOCKED = r"""
import errno, json, os, sys
home, locked = sys.argv[1], sys.argv[2]
f = os.path.join(home, "f")
with open(f, "wb") as out:
    out.write(os.urandom(1 << 20))
os.setxattr(f, "user.cairn.raid", b"none")
os.link(f, os.path.join(locked, "f"))
try:
    os.setxattr(f, "user.cairn.raid", b"none")
    again = "ok"
except OSError as e:
    again = errno.errorcode[e.errno]
print(json.dumps({"setxattr_while_linked": again}))
"""


def copies(path):
    """How many copies each segment of a file has on the disks, from user.cairn.location."""
    return {item.split("=", 1)[0]: len(item.split("=", 1)[1].split("+")[0].split("/")) for item in segments(path)}


def test_a_hard_link_into_a_locked_directory_gets_its_pin_and_the_reconciler_follows(archive):
    """A user cannot escape trusted.cairn.lock with a hard link: the lock and pin above any name
    apply, and when names come and go the reconciler re-encodes the file by itself."""
    os.makedirs(archive.m("home"))
    os.chown(archive.m("home"), NOBODY, NOBODY)
    os.makedirs(archive.m("locked"))
    os.chmod(archive.m("locked"), 0o1777)
    os.setxattr(archive.m("locked"), "trusted.cairn.raid", b"mirror-2")
    os.setxattr(archive.m("locked"), "trusted.cairn.lock", b"raid")

    got = run_as_nobody(LINK_INTO_LOCKED, archive.m("home"), archive.m("locked"))
    assert got == {"setxattr_while_linked": "EPERM"}  # locked through the other name
    f = archive.m("home", "f")
    data = read_file(f)
    archive.persist()
    assert field(getx(f, "effective"), "raid") == "mirror-2"
    assert field(getx(f, "effective.source"), "raid") == "pin:/locked"
    assert getx(f, "state") == "persisted"
    assert copies(f) == {"0": 2}
    assert "raid=mirror-2" in stamped_policy(archive, f).split()

    # Nothing left for the reconciler, so what follows is its own doing.
    wait_for(lambda: archive.status()["policy_checks_queued"] == 0, 60, "the policy check queue to drain")
    # The locked name goes: the user's raid=none applies again, without `cairn policy apply`.
    run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "rm", archive.m("locked", "f")])
    assert field(getx(f, "effective.source"), "raid") == "file"
    wait_for(lambda: getx(f, "state") == "persisted" and copies(f) == {"0": 1}, 60,
             "the reconciler to re-encode the file as one copy")
    assert "raid=none" in stamped_policy(archive, f).split()

    # Linked again once persisted: back to the pin, again by itself.
    run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "ln", f, archive.m("locked", "g")])
    wait_for(lambda: getx(f, "state") == "persisted" and copies(f) == {"0": 2}, 60,
             "the reconciler to re-encode the file as two copies")
    archive.evict()
    assert read_file(archive.m("locked", "g")) == data
