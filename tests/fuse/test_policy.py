"""Policy xattrs: vocabulary checks, computed keys, inheritance decided at persist time."""
import errno
import os
import subprocess

import pytest

from conftest import MiB, NOBODY, random_bytes, read_file, run, run_as_nobody, sha256_file, write_file


def getx(path, key):
    return os.getxattr(path, "user.cairn." + key).decode()


def test_segment_size_inherited_from_directory(archive):
    archive.remount("reconcile_idle=3600")  # keep the background reconciler out of the way
    os.makedirs(archive.m("logs", "2019"))
    os.setxattr(archive.m("logs"), "user.cairn.segment_size", b"64K")
    assert os.getxattr(archive.m("logs"), "user.cairn.segment_size") == b"65536"  # printed back in bytes
    data = random_bytes(MiB + 5, 1)
    write_file(archive.m("logs", "2019", "big.log"), data)
    archive.persist()
    path = archive.m("logs", "2019", "big.log")
    assert "segment_size=65536" in getx(path, "effective").split()
    assert "segment_size=dir:/logs" in getx(path, "effective.source").split()
    assert "raid=default" in getx(path, "effective.source").split()
    assert len(getx(path, "location").split()) == 17  # 16 full segments of 64 KiB + a 5-byte tail
    assert getx(path, "state") == "persisted"
    archive.evict()
    assert read_file(path) == data
    # setfattr -x means "inherit again"
    os.removexattr(archive.m("logs"), "user.cairn.segment_size")
    assert "segment_size=default" in getx(path, "effective.source").split()
    assert getx(path, "state") == "out-of-policy"  # its layout no longer matches: re-encoding comes next


def test_policy_decided_at_persist_not_at_create(archive):
    """tar and rsync set xattrs after creating the file: the value set last wins."""
    write_file(archive.m("late"), random_bytes(300 * 1024, 2))
    os.setxattr(archive.m("late"), "user.cairn.segment_size", b"128K")
    archive.persist()
    assert "segment_size=131072" in getx(archive.m("late"), "effective").split()
    assert len(getx(archive.m("late"), "location").split()) == 3


@pytest.mark.parametrize("key,value,message", [
    ("raid", b"2d", "keeps each extent whole on one bucket of a lonestar group"),
    ("placement", b"tier=fast", "not available in this build"),
    ("key", b"k1", "does not exist (make a key with cairn key create)"),
    ("raid", b"raid5", "is not a valid value"),
    ("segment_size", b"1K", "is not a valid value"),
    ("colour", b"blue", "is not a cairn policy key"),
])
def test_bad_or_unavailable_values_are_einval_and_logged(archive, key, value, message):
    write_file(archive.m("f"), b"x")
    with pytest.raises(OSError) as e:
        os.setxattr(archive.m("f"), "user.cairn." + key, value)
    assert e.value.errno == errno.EINVAL
    with open(os.path.join(archive.arch, "cairn.log")) as log:
        assert any(message in line and key in line for line in log), f"no log line with {message!r}"
    assert "user.cairn." + key not in os.listxattr(archive.m("f"))


def test_computed_keys_are_read_only_and_not_listed(archive):
    write_file(archive.m("f"), b"data")
    os.setxattr(archive.m("f"), "user.cairn.segment_size", b"1M")
    for key in ("effective", "effective.source", "state", "location"):
        assert getx(archive.m("f"), key)
        with pytest.raises(OSError) as e:
            os.setxattr(archive.m("f"), "user.cairn." + key, b"x")
        assert e.value.errno == errno.EPERM
        with pytest.raises(OSError) as e:
            os.removexattr(archive.m("f"), "user.cairn." + key)
        assert e.value.errno == errno.EPERM
    assert [n for n in os.listxattr(archive.m("f")) if n.startswith("user.cairn.")] == ["user.cairn.segment_size"]
    dump = run(["getfattr", "-d", "-m", "-", archive.m("f")]).stdout
    assert "effective" not in dump and 'user.cairn.segment_size="1048576"' in dump


def test_cp_tar_rsync_copy_policy_keys(archive):
    src = archive.m("src")
    os.makedirs(os.path.join(src, "sub"))
    os.setxattr(src, "user.cairn.segment_size", b"128K")
    write_file(os.path.join(src, "sub", "a"), random_bytes(400 * 1024, 3))
    os.setxattr(os.path.join(src, "sub", "a"), "user.cairn.checksum", b"crc32c")
    run(["cp", "-a", src, archive.m("by-cp")])
    run(["bash", "-c", f"tar -C {src} --xattrs --xattrs-include='user.*' -cf - . | "
                       f"(mkdir -p {archive.m('by-tar')} && tar -C {archive.m('by-tar')} --xattrs "
                       f"--xattrs-include='user.*' -xf -)"])
    run(["rsync", "-aX", src + "/", archive.m("by-rsync") + "/"])
    archive.persist()
    for copy in ("by-cp", "by-tar", "by-rsync"):
        root = archive.m(copy)
        assert os.getxattr(root, "user.cairn.segment_size") == b"131072", copy
        a = os.path.join(root, "sub", "a")
        assert os.getxattr(a, "user.cairn.checksum") == b"crc32c", copy
        assert sha256_file(a) == sha256_file(os.path.join(src, "sub", "a")), copy
        assert "segment_size=131072" in getx(a, "effective").split(), copy
        assert len(getx(a, "location").split()) == 4, copy  # 400 KiB in 128 KiB segments


def test_policy_explain(archive):
    os.makedirs(archive.m("logs"))
    os.setxattr(archive.m("logs"), "user.cairn.segment_size", b"64K")
    write_file(archive.m("logs", "a"), b"hello\n")
    out = run([os.environ.get("CAIRN_BIN", "cairn"), "policy", "explain", archive.m("logs", "a")]).stdout
    lines = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert "65536" in lines["segment_size"] and "inherited from directory /logs" in lines["segment_size"]
    assert "archive default" in lines["raid"]
    bad = run([os.environ.get("CAIRN_BIN", "cairn"), "policy", "explain", archive.arch], check=False)
    assert bad.returncode == 1 and "mounted cairn archive" in bad.stderr
    # Two keys set on a directory whose path is 2,100 bytes: their sources pass 4 KiB.
    deep = archive.m(*(["d" * 200] * 10 + ["e" * 90]))
    os.makedirs(deep)
    os.setxattr(deep, "user.cairn.segment_size", b"64K")
    os.setxattr(deep, "user.cairn.compress", b"lz4")
    write_file(os.path.join(deep, "f"), b"x")
    out = run([os.environ.get("CAIRN_BIN", "cairn"), "policy", "explain", os.path.join(deep, "f")]).stdout
    assert "inherited from directory" in out, out


def test_a_64k_policy_value_from_any_user_is_einval_and_the_daemon_lives(archive):
    """std::regex recursed per character: one setfattr of a 64 KiB user.cairn.raid value crashed the daemon."""
    os.mkdir(archive.m("pub"))
    os.chown(archive.m("pub"), NOBODY, NOBODY)
    write_file(archive.m("pub", "f"), b"data")
    os.chown(archive.m("pub", "f"), NOBODY, NOBODY)
    out = run_as_nobody("""
import errno, json, os, sys
results = {}
for key, value in (("raid", b"rs-" + b"1" * 65000 + b"-1"), ("policy", b"a" * 65000),
                   ("segment_size", b"4" * 65000), ("placement", b"group=" + b"x" * 65000)):
    try:
        os.setxattr(sys.argv[1], "user.cairn." + key, value)
        results[key] = "accepted"
    except OSError as e:
        results[key] = errno.errorcode[e.errno]
print(json.dumps(results))
""", archive.m("pub", "f"))
    assert out == {"raid": "EINVAL", "policy": "EINVAL", "segment_size": "EINVAL", "placement": "EINVAL"}, out
    assert read_file(archive.m("pub", "f")) == b"data"  # the daemon still answers
    os.setxattr(archive.m("pub", "f"), "user.cairn.raid", b"mirror-2")
    assert getx(archive.m("pub", "f"), "raid") == "mirror-2"


def _peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) // 1024


def test_large_segments_are_persisted_a_few_at_a_time(archive):
    """A slice of a file read for persisting is bounded by bytes, not by its count of
    segments: ten 64 MiB segments were all read into the daemon's memory at once (16 per
    slice), 1 GiB segments would have taken 16 GiB."""
    os.makedirs(archive.m("big"))
    os.setxattr(archive.m("big"), "user.cairn.segment_size", b"64M")
    block = random_bytes(4 * MiB, 77)
    blocks = 160  # 640 MiB: ten segments
    with open(archive.m("big", "f"), "wb") as f:
        for _ in range(blocks):
            f.write(block)
    pid = archive.daemon_pid()
    before = _peak_rss_mib(pid)
    archive.persist()
    peak = _peak_rss_mib(pid)
    assert peak < max(before, 64) + 384, f"daemon peak RSS {before} MiB before the persist, {peak} MiB after"
    archive.evict()
    with open(archive.m("big", "f"), "rb") as f:
        for i in range(blocks):
            assert f.read(4 * MiB) == block, f"block {i}"
