"""encrypt=aes-256-gcm through the mount: master keys made with `cairn key`, no plaintext on the
disks, rebuild and scrub of encrypted rs-4-2 data, key rotation, who may use a key (to read, to
change how a file is encrypted), crypto-erase (and the caches it empties), and recover keeping
the files' keys."""
import errno
import json
import os
import re
import shutil
import stat

import pytest

from conftest import (KiB, MiB, NOBODY, assert_trees_equal, cairn, random_bytes, read_file, run, run_as_nobody, sha256,
                      write_file)
from test_plugins import drop_caches, image_contains, log_text

HEX1 = "11" * 32  # master keys as a key command gives them
HEX2 = "22" * 32


def images(archive):
    conf = open(os.path.join(archive.arch, "cairn.conf")).read()
    return [p if os.path.isabs(p) else os.path.join(archive.arch, p)
            for p in re.findall(r"^disk\.\d+\s*=\s*(\S+)", conf, re.M)]


def encrypt_dir(archive, path, key="k1", compress="off"):
    os.makedirs(path, exist_ok=True)
    os.setxattr(path, "user.cairn.compress", compress.encode())
    os.setxattr(path, "user.cairn.encrypt", b"aes-256-gcm")
    os.setxattr(path, "user.cairn.key", key.encode())


def use_rules(archive, text):
    with open(os.path.join(archive.arch, "rules"), "w") as f:
        f.write(text)
    cairn("rules", "reload", archive.arch)


def key_files(archive, name):
    out = cairn("key", "list", archive.arch).stdout
    m = re.search(rf"^\s+{re.escape(name)}\s.*files: (\d+)$", out, re.M)
    assert m, out
    return int(m.group(1))


def test_keys_are_made_listed_and_checked_before_use(archive):
    r = cairn("key", "create", archive.arch, "k1")
    assert "key k1 created" in r.stdout
    keystore = os.path.join(archive.arch, "keystore")
    assert stat.S_IMODE(os.stat(keystore).st_mode) == 0o600
    assert "k1" in cairn("key", "list", archive.arch).stdout
    r = cairn("key", "create", archive.arch, "k1", check=False)
    assert r.returncode == 1 and "key k1 exists" in r.stderr
    assert cairn("key", "create", archive.arch, "bad/name", check=False).returncode == 1
    assert cairn("key", "frobnicate", archive.arch, check=False).returncode == 2
    os.makedirs(archive.m("d"))
    with pytest.raises(OSError) as e:  # no such master key
        os.setxattr(archive.m("d"), "user.cairn.key", b"k2")
    assert e.value.errno == errno.EINVAL
    assert "has no key k2" in log_text(archive)
    os.chmod(keystore, 0o644)  # a keystore others may read is refused
    with pytest.raises(OSError):
        os.setxattr(archive.m("d"), "user.cairn.key", b"k1")
    assert "mode is 0644: only its owner may read or write it" in log_text(archive)
    os.chmod(keystore, 0o600)
    encrypt_dir(archive, archive.m("d"))
    assert "encrypt=aes-256-gcm key=k1" in os.getxattr(archive.m("d"), "user.cairn.effective").decode()


def test_an_encrypted_compressed_tree_leaves_no_plaintext_on_the_disks(archive):
    cairn("key", "create", archive.arch, "k1")
    src = archive.s("src")
    shutil.copytree("/usr/include/linux", src, symlinks=True)
    markers = [f"cairn-plaintext-marker-{i:04d}".encode() for i in range(20)]
    for i, marker in enumerate(markers):  # in small files (packed) and inside a large one
        write_file(os.path.join(src, f"marked-{i}.txt"), b"head " + marker + b" tail\n" * 10)
    write_file(os.path.join(src, "big.bin"), random_bytes(9 * MiB, 3) + markers[0] + random_bytes(MiB, 4))
    encrypt_dir(archive, archive.m("secret"), compress="zstd")
    run(["cp", "-a", src, archive.m("secret", "tree")])
    os.makedirs(archive.m("open"))  # the control: the same scan finds a plain file's marker
    write_file(archive.m("open", "plain.txt"), b"cairn-control-marker in the clear\n")
    archive.persist()
    archive.evict()
    drop_caches()
    for image in images(archive):
        for marker in markers:
            assert not image_contains(image, marker), (image, marker)
    assert any(image_contains(image, b"cairn-control-marker") for image in images(archive))
    assert_trees_equal(src, archive.m("secret", "tree"))
    st = archive.status()
    assert st["payload_stored_bytes"] < st["payload_logical_bytes"], st  # compressed before encrypted
    assert key_files(archive, "k1") > len(markers)
    archive.umount()
    archive.fsck()  # decodes every extent with its file's key
    archive.mount()
    assert_trees_equal(src, archive.m("secret", "tree"))


def test_rebuild_and_scrub_work_on_encrypted_compressed_rs_4_2_data(archive):
    archive.umount()
    shutil.rmtree(archive.arch)
    cairn("mkfs", archive.arch, "--disks", "6", "--disk-size", "1G")
    cairn("key", "create", archive.arch, "k1")
    archive.mount()
    encrypt_dir(archive, archive.m("safe"), compress="zstd")
    os.setxattr(archive.m("safe"), "user.cairn.raid", b"rs-4-2")
    os.setxattr(archive.m("safe"), "user.cairn.segment_size", b"4194304")  # noise: two segments
    text = open("/usr/include/stdlib.h", "rb").read() * 200
    files = {"noise": random_bytes(7 * MiB + 3, 9), "text": text, "small": b"tiny encrypted file\n"}
    for name, data in files.items():
        write_file(archive.m("safe", name), data)
    archive.persist()
    archive.evict()
    archive.umount()
    victim = images(archive)[2]
    os.remove(victim)  # the disk is gone
    archive.mount("degraded")
    for name, data in files.items():
        assert read_file(archive.m("safe", name)) == data, name
    archive.umount()
    cairn("disk", "replace", archive.arch, "2", os.path.join(archive.base, "new-disk-2.img"))
    r = cairn("rebuild", archive.arch)
    assert "0 extent(s) lost" in r.stdout and int(re.search(r"(\d+) repaired", r.stdout).group(1)) > 0, r.stdout
    assert "0 bad chunk(s)" in cairn("scrub", archive.arch).stdout
    archive.fsck()
    archive.mount()
    archive.evict()
    drop_caches()
    for name, data in files.items():
        assert sha256(read_file(archive.m("safe", name))) == sha256(data), name


def test_rotation_rewraps_file_keys_and_the_data_still_reads(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    files = {f"f{i}": random_bytes(MiB * i + 17, 20 + i) for i in range(4)}
    for name, data in files.items():
        write_file(archive.m("e", name), data)
    archive.persist()
    archive.evict()
    before = open(os.path.join(archive.arch, "keystore")).read()
    r = cairn("key", "rotate", archive.arch, "k1")  # mounted: the daemon re-wraps
    assert "version 2; 4 file key(s) re-wrapped, older versions removed" in r.stdout, r.stdout
    after = open(os.path.join(archive.arch, "keystore")).read()
    assert re.search(r"^key k1 2 hex:", after, re.M) and not re.search(r"^key k1 1 ", after, re.M), after
    assert before != after
    drop_caches()
    for name, data in files.items():
        assert read_file(archive.m("e", name)) == data, name
    archive.umount()
    r = cairn("key", "rotate", archive.arch, "k1")  # unmounted: done here
    assert "version 3; 4 file key(s) re-wrapped" in r.stdout, r.stdout
    archive.mount()
    for name, data in files.items():
        assert read_file(archive.m("e", name)) == data, name


def test_a_user_selects_and_reads_only_through_keys_granted_to_them(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    os.chmod(archive.m("e"), 0o755)
    write_file(archive.m("e", "f"), b"for granted eyes only\n", mode=0o644)
    archive.persist()
    archive.evict()
    os.makedirs(archive.m("mine"))
    os.chown(archive.m("mine"), NOBODY, NOBODY)
    probe = r"""
import errno, json, os, sys
out = {}
try:
    out["read"] = open(sys.argv[1], "rb").read().decode()
except OSError as e:
    out["read"] = errno.errorcode[e.errno]
try:
    os.setxattr(sys.argv[2], "user.cairn.key", b"k1")
    out["select"] = "ok"
except OSError as e:
    out["select"] = errno.errorcode[e.errno]
print(json.dumps(out))
"""
    assert run_as_nobody(probe, archive.m("e", "f"), archive.m("mine")) == {"read": "EACCES", "select": "EACCES"}
    assert f"uid {NOBODY} (gid {NOBODY}) is not allowed to use it" in log_text(archive)
    # A grant to a group reaches its members through their supplementary groups too.
    cairn("key", "allow", archive.arch, "k1", "gid:4242")
    drop_caches()

    def as_nobody_in(groups):
        r = run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={groups}", "/usr/bin/python3",
                 "-c", probe, archive.m("e", "f"), archive.m("mine")], cwd="/")
        return json.loads(r.stdout)

    assert as_nobody_in("4242") == {"read": "for granted eyes only\n", "select": "ok"}
    drop_caches()
    assert as_nobody_in("4243,4244") == {"read": "EACCES", "select": "EACCES"}
    assert f"uid {NOBODY} (gid {NOBODY},4243,4244) is not allowed to use it" in log_text(archive)
    r = cairn("key", "allow", archive.arch, "k1", f"uid:{NOBODY}")
    assert f"uid:{NOBODY}" in r.stdout
    drop_caches()
    assert run_as_nobody(probe, archive.m("e", "f"), archive.m("mine")) == {"read": "for granted eyes only\n",
                                                                           "select": "ok"}


def test_deleting_a_file_or_its_master_key_erases_the_data_keys(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    write_file(archive.m("e", "keep"), random_bytes(2 * MiB, 5))
    write_file(archive.m("e", "gone"), random_bytes(2 * MiB, 6))
    archive.persist()
    assert key_files(archive, "k1") == 2
    os.remove(archive.m("e", "gone"))
    archive.persist()
    assert key_files(archive, "k1") == 1  # the file's key went with it
    r = cairn("key", "delete", archive.arch, "k1", check=False)
    assert r.returncode == 1 and "the data of 1 file(s) is encrypted under key k1" in r.stderr
    r = cairn("key", "delete", archive.arch, "k1", "--erase")
    assert "1 file(s) crypto-erased" in r.stdout
    assert "k1" not in cairn("key", "list", archive.arch).stdout
    archive.evict()
    drop_caches()
    with pytest.raises(OSError) as e:
        read_file(archive.m("e", "keep"))
    assert e.value.errno == errno.EIO
    assert "data key of inode" in log_text(archive)
    os.remove(archive.m("e", "keep"))  # the name goes like any other; fsck is clean again


def test_a_file_unlinked_while_open_is_persisted_under_the_key_its_last_name_gave_it(archive):
    """Unlinked while open, a file of an encrypted directory keeps that directory's policy:
    what it holds and what is written to it after is persisted sealed, never in clear, so the
    unlink changes no key and needs no grant."""
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    os.chmod(archive.m("e"), 0o777)
    markers = [f"cairn-unlinked-while-open-{i}".encode() for i in range(2)]
    before = markers[0] * 1000
    after = random_bytes(5 * MiB, 7) + markers[1] * 1000  # a whole segment and a part
    writer = os.open(archive.m("e", "f"), os.O_WRONLY | os.O_CREAT, 0o666)
    reader = os.open(archive.m("e", "f"), os.O_RDONLY)
    held = os.open(archive.m("e", "g"), os.O_WRONLY | os.O_CREAT, 0o666)
    try:
        os.write(writer, before)
        os.unlink(archive.m("e", "f"))
        os.write(held, b"staged only\n")
        assert attempts_as_nobody('attempt("rm", lambda: os.unlink(sys.argv[1]))', archive.m("e", "g")) == {"rm": "ok"}
        os.close(held)
        held = None
        os.write(writer, after)
        os.close(writer)
        writer = None
        assert "key=k1" in os.getxattr(f"/proc/self/fd/{reader}", "user.cairn.effective").decode()
        archive.persist()
        assert key_files(archive, "k1") == 1
        for image in images(archive):
            for marker in markers:
                assert not image_contains(image, marker), (image, marker)
        archive.evict()
        drop_caches()
        assert os.pread(reader, len(before) + len(after) + 1, 0) == before + after
    finally:
        for fd in (writer, held):
            if fd is not None:
                os.close(fd)
        os.close(reader)
    assert os.listdir(archive.m("e")) == []


def test_a_file_opened_again_after_its_unlink_is_persisted_under_the_key_its_last_name_gave_it(archive):
    """A file closed when its last name goes can still be opened again while the kernel holds
    it (through /proc/self/fd): what is written then is sealed under the key it had too."""
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    marker = b"cairn-opened-again-after-unlink"
    write_file(archive.m("e", "f"), b"")
    path_only = os.open(archive.m("e", "f"), os.O_PATH)  # holds the inode, opens nothing
    try:
        os.unlink(archive.m("e", "f"))
        fd = os.open(f"/proc/self/fd/{path_only}", os.O_WRONLY)
        os.write(fd, marker * 1000)
        os.close(fd)
        archive.persist()
        assert key_files(archive, "k1") == 1
        for image in images(archive):
            assert not image_contains(image, marker), image
    finally:
        os.close(path_only)


def attempts_as_nobody(steps, *args):
    """Runs `steps` (Python lines calling attempt(NAME, FUNCTION)) as nobody; returns NAME ->
    "ok" or the errno's name."""
    probe = "import errno, json, os, sys\nout = {}\n" \
            "def attempt(what, fn):\n" \
            "    try:\n        r = fn()\n        out[what] = r.decode() if isinstance(r, bytes) else 'ok'\n" \
            "    except OSError as e:\n        out[what] = errno.errorcode[e.errno]\n" + steps + \
            "\nprint(json.dumps(out))\n"
    return run_as_nobody(probe, *args)


def test_a_user_without_the_grant_cannot_change_how_a_file_is_encrypted(archive):
    cairn("key", "create", archive.arch, "k1")
    cairn("key", "create", archive.arch, "k2", "--allow", "*")
    use_rules(archive, "policy plain selectable\n    set encrypt=off\ndefault\n")
    encrypt_dir(archive, archive.m("e"))
    os.chmod(archive.m("e"), 0o777)  # nobody may write the directory and the file, not use k1
    data = b"for granted eyes only\n" * 10000
    write_file(archive.m("e", "f"), data, mode=0o666)
    archive.persist()
    steps = """
f, d = sys.argv[1], sys.argv[2]
attempt("file encrypt=off", lambda: os.setxattr(f, "user.cairn.encrypt", b"off"))
attempt("file key=k2", lambda: os.setxattr(f, "user.cairn.key", b"k2"))
attempt("file policy=plain", lambda: os.setxattr(f, "user.cairn.policy", b"plain"))
attempt("dir encrypt=off", lambda: os.setxattr(d, "user.cairn.encrypt", b"off"))
attempt("dir -encrypt", lambda: os.removexattr(d, "user.cairn.encrypt"))
attempt("dir -key", lambda: os.removexattr(d, "user.cairn.key"))
attempt("file compress=lz4", lambda: os.setxattr(f, "user.cairn.compress", b"lz4"))
attempt("read", lambda: open(f, "rb").read(64))
"""
    assert attempts_as_nobody(steps, archive.m("e", "f"), archive.m("e")) == {
        "file encrypt=off": "EACCES", "file key=k2": "EACCES", "file policy=plain": "EACCES",
        "dir encrypt=off": "EACCES", "dir -encrypt": "EACCES", "dir -key": "EACCES",
        "file compress=lz4": "ok", "read": "EACCES"}
    assert f"setxattr user.cairn.encrypt on inode" in log_text(archive)
    assert f"key k1: uid {NOBODY} (gid {NOBODY}) is not allowed to use it" in log_text(archive)
    # The reconciler keeps it sealed under k1 (and compresses it, as nobody may ask).
    cairn("policy", "apply", archive.m("e"))
    assert "compress=lz4 encrypt=aes-256-gcm key=k1" in os.getxattr(archive.m("e", "f"),
                                                                     "user.cairn.effective").decode()
    assert key_files(archive, "k1") == 1
    archive.evict()
    drop_caches()
    assert read_file(archive.m("e", "f")) == data


def test_a_user_without_the_grant_cannot_change_an_attribute_a_rule_encrypts_by(archive):
    """A rule that encrypts by a user attribute: taking the attribute away would have the
    reconciler write the file in clear and drop its data key, for anyone with the mode bits to
    read. A user not granted the key may not change it; other attributes, and the attribute on
    files the rule does not encrypt, stay theirs to change."""
    cairn("key", "create", archive.arch, "k1")
    use_rules(archive, "rule sealed\n    where xattr user.proj = alpha\n    set encrypt=aes-256-gcm key=k1\ndefault\n")
    os.makedirs(archive.m("s"))
    os.chmod(archive.m("s"), 0o777)
    data = b"sealed by a rule\n" * 10000
    write_file(archive.m("s", "f"), b"", mode=0o666)
    os.setxattr(archive.m("s", "f"), "user.proj", b"alpha")
    write_file(archive.m("s", "f"), data, mode=0o666)
    write_file(archive.m("s", "open"), b"no key here\n", mode=0o666)
    archive.persist()
    assert key_files(archive, "k1") == 1
    steps = """
f, o = sys.argv[1], sys.argv[2]
attempt("remove user.proj", lambda: os.removexattr(f, "user.proj"))
attempt("set user.proj", lambda: os.setxattr(f, "user.proj", b"beta"))
attempt("set user.note", lambda: os.setxattr(f, "user.note", b"x"))
attempt("set user.proj elsewhere", lambda: os.setxattr(o, "user.proj", b"beta"))
attempt("read", lambda: open(f, "rb").read(64))
"""
    assert attempts_as_nobody(steps, archive.m("s", "f"), archive.m("s", "open")) == {
        "remove user.proj": "EACCES", "set user.proj": "EACCES", "set user.note": "ok",
        "set user.proj elsewhere": "ok", "read": "EACCES"}
    assert "removexattr user.proj on inode" in log_text(archive)
    cairn("policy", "apply", archive.m("s"))
    assert "encrypt=aes-256-gcm key=k1" in os.getxattr(archive.m("s", "f"), "user.cairn.effective").decode()
    assert key_files(archive, "k1") == 1
    archive.evict()
    drop_caches()
    assert read_file(archive.m("s", "f")) == data


def test_a_user_without_the_grant_cannot_truncate_or_touch_a_file_out_of_a_rule_that_encrypts_it(archive):
    """Rules that encrypt by size or age: a truncate or a utimens by a user not granted the key
    would take the file out of the rule, and the reconciler would write what is left in clear,
    for anyone with the mode bits to read. Such a change is refused; the same change of a file
    no rule encrypts is not."""
    cairn("key", "create", archive.arch, "k1")
    use_rules(archive, "rule big\n    where path /s/** and size >= 100K\n    set encrypt=aes-256-gcm key=k1\n"
                     "rule old\n    where path /s/** and mtime > 365d\n    set encrypt=aes-256-gcm key=k1\n"
                     "default\n")
    os.makedirs(archive.m("s"))
    os.chmod(archive.m("s"), 0o777)
    big = random_bytes(200 * KiB, 5)
    for name, data in (("big", big), ("old", b"old and sealed\n"), ("small", b"small\n"), ("new", b"new\n")):
        write_file(archive.m("s", name), data, mode=0o666)
    two_years_ago = os.stat(archive.m("s", "old")).st_mtime - 2 * 365 * 86400
    os.utime(archive.m("s", "old"), (two_years_ago, two_years_ago))
    archive.persist()
    cairn("policy", "apply", archive.m("s"))
    assert key_files(archive, "k1") == 2
    steps = """
d = sys.argv[1]
attempt("truncate big", lambda: os.truncate(d + "/big", 50 * 1024))
attempt("touch old", lambda: os.utime(d + "/old"))
attempt("truncate small", lambda: os.truncate(d + "/small", 3))
attempt("touch new", lambda: os.utime(d + "/new"))
attempt("read big", lambda: open(d + "/big", "rb").read(64))
"""
    assert attempts_as_nobody(steps, archive.m("s")) == {
        "truncate big": "EACCES", "touch old": "EACCES", "truncate small": "ok", "touch new": "ok", "read big": "EACCES"}
    assert "setattr on inode" in log_text(archive)
    assert os.stat(archive.m("s", "big")).st_size == len(big)
    assert os.stat(archive.m("s", "old")).st_mtime == two_years_ago
    cairn("policy", "apply", archive.m("s"))
    assert key_files(archive, "k1") == 2
    archive.evict()
    drop_caches()
    assert read_file(archive.m("s", "big")) == big


def test_a_user_without_the_grant_cannot_move_or_link_a_file_out_of_its_key(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    for d in ("e", "a-open", "z-open"):  # their paths sort before and after e's
        os.makedirs(archive.m(d), exist_ok=True)
        os.chmod(archive.m(d), 0o777)  # nobody may write the directories and the files, not use k1
    sealed = b"sealed under k1\n" * 10000
    write_file(archive.m("e", "p"), sealed, mode=0o666)
    archive.persist()
    fd = os.open(archive.m("e", "s"), os.O_WRONLY | os.O_CREAT, 0o666)  # open: not persisted yet
    try:
        os.fchmod(fd, 0o666)  # read and writable: fs.protected_hardlinks lets nobody link it
        os.write(fd, b"staged only\n")
        steps = """
e, o, z = sys.argv[1], sys.argv[2], sys.argv[3]
j = os.path.join
attempt("mv p", lambda: os.rename(j(e, "p"), j(o, "p")))
attempt("mv s", lambda: os.rename(j(e, "s"), j(o, "s")))
attempt("ln s first", lambda: os.link(j(e, "s"), j(o, "s")))
attempt("ln s after", lambda: os.link(j(e, "s"), j(z, "s")))
attempt("rm the sealed name", lambda: os.unlink(j(e, "s")))
attempt("rm the other name", lambda: os.unlink(j(z, "s")))
attempt("mv in the tree", lambda: os.rename(j(e, "p"), j(e, "p2")))
attempt("read", lambda: open(j(o, "p"), "rb").read(64))
"""
        assert attempts_as_nobody(steps, archive.m("e"), archive.m("a-open"), archive.m("z-open")) == {
            "mv p": "EACCES", "mv s": "EACCES", "ln s first": "EACCES", "ln s after": "ok",
            "rm the sealed name": "EACCES", "rm the other name": "ok", "mv in the tree": "ok", "read": "ENOENT"}
    finally:
        os.close(fd)
    assert "rename on inode" in log_text(archive) and "link on inode" in log_text(archive)
    assert "unlink on inode" in log_text(archive)
    assert sorted(os.listdir(archive.m("e"))) == ["p2", "s"] and os.listdir(archive.m("a-open")) == []
    # Still sealed under k1: the reconciler has nothing to rewrite in clear.
    cairn("policy", "apply", archive.m("e"))
    assert key_files(archive, "k1") >= 1
    assert "key=k1" in os.getxattr(archive.m("e", "p2"), "user.cairn.effective").decode()
    assert read_file(archive.m("e", "p2")) == sealed


def test_a_user_without_the_grant_cannot_move_or_rekey_a_directory_whose_files_a_key_guards(archive):
    """The files below a directory can change key while the directory's own policy does not:
    a path rule that matches the files only, or a key the files inherit through a directory
    that does not encrypt itself. Moving or re-keying such a directory takes the files with it,
    so it needs the keys of every file below that it changes; the same change of a directory
    with nothing encrypted below it does not."""
    cairn("key", "create", archive.arch, "k1")
    cairn("key", "create", archive.arch, "k2", "--allow", "*")
    use_rules(archive, "rule vault\n    where path /v/*/*\n    set encrypt=aes-256-gcm key=k1\ndefault\n")
    encrypt_dir(archive, archive.m("e"))
    for d in ("v/d", "e/off", "o", "v/empty", "e/plain"):
        os.makedirs(archive.m(d), exist_ok=True)
    os.setxattr(archive.m("e", "off"), "user.cairn.encrypt", b"off")  # its files say encrypt, key inherited
    os.setxattr(archive.m("e", "plain"), "user.cairn.encrypt", b"off")
    for d in ("v", "v/d", "e", "e/off", "o", "v/empty", "e/plain"):
        os.chmod(archive.m(d), 0o777)
    sealed = b"sealed under k1\n" * 10000
    write_file(archive.m("v", "d", "f"), sealed, mode=0o666)
    write_file(archive.m("e", "off", "f"), b"", mode=0o666)
    os.setxattr(archive.m("e", "off", "f"), "user.cairn.encrypt", b"aes-256-gcm")
    write_file(archive.m("e", "off", "f"), sealed, mode=0o666)
    write_file(archive.m("e", "plain", "f"), b"in clear\n", mode=0o666)
    archive.persist()
    assert key_files(archive, "k1") == 2
    steps = """
v, e, o = sys.argv[1], sys.argv[2], sys.argv[3]
j = os.path.join
attempt("dir key=k2", lambda: os.setxattr(j(e, "off"), "user.cairn.key", b"k2"))
attempt("mv out of the path rule", lambda: os.rename(j(v, "d"), j(o, "d")))
attempt("mv the inheriting dir", lambda: os.rename(j(e, "off"), j(o, "off")))
attempt("mv within the rule", lambda: os.rename(j(v, "d"), j(v, "d2")))
attempt("mv a dir with nothing sealed", lambda: os.rename(j(v, "empty"), j(o, "empty")))
attempt("plain dir key=k2", lambda: os.setxattr(j(e, "plain"), "user.cairn.key", b"k2"))
attempt("read", lambda: open(j(v, "d2", "f"), "rb").read(64))
"""
    assert attempts_as_nobody(steps, archive.m("v"), archive.m("e"), archive.m("o")) == {
        "mv out of the path rule": "EACCES", "mv the inheriting dir": "EACCES", "dir key=k2": "EACCES",
        "mv within the rule": "ok", "mv a dir with nothing sealed": "ok", "plain dir key=k2": "ok", "read": "EACCES"}
    assert "rename on inode" in log_text(archive) and "setxattr user.cairn.key on inode" in log_text(archive)
    assert sorted(os.listdir(archive.m("o"))) == ["empty"]
    # Both files stay sealed under k1: the reconciler has nothing to write in clear or under k2.
    cairn("policy", "apply", archive.m(""))
    assert key_files(archive, "k1") == 2
    for path in (("v", "d2", "f"), ("e", "off", "f")):
        assert "key=k1" in os.getxattr(archive.m(*path), "user.cairn.effective").decode()
    archive.evict()
    drop_caches()
    assert read_file(archive.m("v", "d2", "f")) == sealed and read_file(archive.m("e", "off", "f")) == sealed


def test_a_file_not_persisted_yet_is_guarded_by_the_key_its_policy_names(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    os.chmod(archive.m("e"), 0o777)
    steps = """
attempt("read", lambda: open(sys.argv[1], "rb").read())
attempt("create", lambda: open(os.path.join(os.path.dirname(sys.argv[1]), "new"), "wb").close())
"""
    # Written to within persist_idle (5 s), an open file is not persisted: its plaintext is in
    # the staging cache, and it has no data key yet.
    fd = os.open(archive.m("e", "f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"not sealed yet\n")
        assert key_files(archive, "k1") == 0
        assert attempts_as_nobody(steps, archive.m("e", "f")) == {"read": "EACCES", "create": "EACCES"}
    finally:
        os.close(fd)
    assert f"open on inode" in log_text(archive) and f"create on inode" in log_text(archive)
    assert not os.path.exists(archive.m("e", "new"))
    cairn("key", "allow", archive.arch, "k1", f"uid:{NOBODY}")
    assert attempts_as_nobody(steps, archive.m("e", "f")) == {"read": "not sealed yet\n", "create": "ok"}


def test_a_crypto_erase_leaves_no_plaintext_in_any_cache(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    data = random_bytes(3 * MiB, 31)
    write_file(archive.m("e", "f"), data)
    archive.persist()
    assert read_file(archive.m("e", "f")) == data  # in the staging cache and the kernel's pages
    held = os.open(archive.m("e", "f"), os.O_RDONLY)
    # Written to (and so left dirty) across the erase: the data it holds was never sealed.
    marker = b"UNSEALED-DIRTY-DATA-" * 4096
    dirty = os.open(archive.m("e", "g"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert os.pread(held, 4096, 0) == data[:4096]
        os.write(dirty, marker)
        r = cairn("key", "delete", archive.arch, "k1", "--erase")
        assert "1 file(s) crypto-erased" in r.stdout
        # Neither evicted nor dropped by hand: nothing of it may still be served.
        for read in (lambda: os.pread(held, 4096, 0), lambda: read_file(archive.m("e", "f"))):
            with pytest.raises(OSError) as e:
                read()
            assert e.value.errno == errno.EIO
    finally:
        os.close(held)
        os.close(dirty)
    assert "data key of inode" in log_text(archive)
    # The dirty file cannot be sealed any more, and does not go to the disks in clear.
    r = cairn("persist", archive.arch, check=False)
    assert r.returncode != 0 and "no data key: keystore" in r.stderr and "has no key k1" in r.stderr, r
    assert not any(image_contains(path, marker[:4096]) for path in images(archive))
    os.remove(archive.m("e", "g"))
    os.remove(archive.m("e", "f"))


def test_a_crypto_erase_takes_the_persisted_plaintext_around_a_later_write_too(archive):
    """A one-byte write to a persisted segment copies the rest of it into the staging cache:
    the erase must not leave that plaintext readable there, nor let a new key persist it
    again (the write itself is lost with the segment, and logged)."""
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    os.setxattr(archive.m("e"), "user.cairn.segment_size", b"64K")
    data = b"".join(b"SECRET line %06d\n" % i for i in range(20000))
    write_file(archive.m("e", "f"), data)
    archive.persist()
    archive.evict()
    fd = os.open(archive.m("e", "f"), os.O_WRONLY)
    try:
        os.pwrite(fd, b"X", 0)  # segment 0 is fetched into the cache and changed, not persisted
        os.fsync(fd)
    finally:
        os.close(fd)
    r = cairn("key", "delete", archive.arch, "k1", "--erase")
    assert "1 file(s) crypto-erased" in r.stdout, r
    for offset in (0, 60000, 64 * KiB):
        with open(archive.m("e", "f"), "rb") as f:
            f.seek(offset)
            with pytest.raises(OSError) as e:
                f.read(100)
            assert e.value.errno == errno.EIO, offset
    assert "1 segment(s) changed since they were persisted are erased" in log_text(archive)
    cache_dir = os.path.join(archive.arch, "cache")
    for name in os.listdir(cache_dir):
        assert b"SECRET line 003158" not in open(os.path.join(cache_dir, name), "rb").read(), name
    cairn("key", "create", archive.arch, "k1")  # a new key of the name does not bring it back
    archive.persist()
    archive.evict()
    drop_caches()
    with open(archive.m("e", "f"), "rb") as f:
        f.seek(60000)
        with pytest.raises(OSError) as e:
            f.read(100)
        assert e.value.errno == errno.EIO
    assert not any(image_contains(path, b"SECRET line 003158") for path in images(archive))
    os.remove(archive.m("e", "f"))


def test_a_crypto_erase_of_an_unmounted_archive_leaves_no_plaintext_in_its_staging_cache(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    marker = b"ERASED-WHILE-UNMOUNTED-" * 8192
    write_file(archive.m("e", "f"), marker)
    archive.persist()  # on the disks, sealed; the staging cache keeps its plaintext copy
    cache_dir = os.path.join(archive.arch, "cache")
    assert any(marker[:4096] in open(os.path.join(cache_dir, n), "rb").read() for n in os.listdir(cache_dir))
    archive.umount()
    r = cairn("key", "delete", archive.arch, "k1", "--erase")
    assert "1 file(s) crypto-erased" in r.stdout, r
    for name in os.listdir(cache_dir):
        assert marker[:4096] not in open(os.path.join(cache_dir, name), "rb").read(), name
    archive.mount()
    with pytest.raises(OSError) as e:
        read_file(archive.m("e", "f"))
    assert e.value.errno == errno.EIO
    os.remove(archive.m("e", "f"))
    # The kernel releases the reader's handle in the background: if that comes after the
    # unlink, the file is an orphan until the unmount frees it (fsck would list its erased
    # extent meanwhile).
    archive.remount()
    assert not os.path.exists(archive.m("e", "f"))


def test_a_file_whose_key_is_gone_does_not_hold_back_the_other_files(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    # More segments than one persist round takes from a file: the rounds after the first
    # must not take it again (cairn persist and the unmount would never end).
    os.setxattr(archive.m("e"), "user.cairn.segment_size", b"64K")
    marker = (b"WAITS-FOR-ITS-KEY-" * 80000)[: 40 * 64 * KiB]
    held = os.open(archive.m("e", "g"), os.O_WRONLY | os.O_CREAT, 0o644)  # open: not persisted yet
    try:
        os.write(held, marker)
        r = cairn("key", "delete", archive.arch, "k1")  # no file key wrapped by it yet
        assert "warning: /e (user.cairn.key) still name key k1: what is written there cannot be" in r.stderr, r
    finally:
        os.close(held)
    plain = random_bytes(3 * MiB, 41)
    write_file(archive.m("plain"), plain)
    write_file(archive.m("small"), b"a small file packed with others\n")
    # The encrypted file cannot be sealed; the others go to the disks all the same.
    r = cairn("persist", archive.arch, check=False, timeout=60)
    assert r.returncode != 0 and "no data key: keystore" in r.stderr and "has no key k1" in r.stderr, r
    for name in ("plain", "small"):
        assert os.getxattr(archive.m(name), "user.cairn.state") == b"persisted", name
    assert os.getxattr(archive.m("e", "g"), "user.cairn.state") != b"persisted"
    assert not any(image_contains(path, marker[:4096]) for path in images(archive))
    # An unmount says that not all reached the disks; the next mount goes on with the rest.
    r = cairn("umount", archive.mnt, check=False, timeout=120)
    assert r.returncode == 1 and "not all of its data is on the disks" in r.stderr and "no data key" in r.stderr, r
    assert not archive.is_mounted()
    archive.mount()
    # Once the key is back, it follows.
    cairn("key", "create", archive.arch, "k1")
    archive.persist()
    assert os.getxattr(archive.m("e", "g"), "user.cairn.state") == b"persisted"
    archive.evict()
    drop_caches()
    assert read_file(archive.m("e", "g")) == marker
    assert read_file(archive.m("plain")) == plain


def test_rules_that_encrypt_need_a_key_the_keystore_holds(archive):
    cairn("key", "create", archive.arch, "k1")
    rules_file = os.path.join(archive.arch, "rules")

    def install(text):
        with open(rules_file, "w") as f:
            f.write(text)
        return cairn("rules", "reload", archive.arch, check=False)

    good = "rule secrets\n    where path /vault/**\n    set encrypt=aes-256-gcm key=k1\ndefault\n"
    assert install(good).returncode == 0
    # Without key=, or under a key the keystore lacks, no file they match could be persisted:
    # refused by cairn rules check and by the daemon, naming the line, and the old rules stay.
    for text, why in [(good.replace(" key=k1", ""), "encrypt=aes-256-gcm needs key=NAME"),
                      (good.replace("key=k1", "key=k9"), "has no key of that name"),
                      ("policy sealed\n    set encrypt=aes-256-gcm key=k9\n" + good, "policy sealed")]:
        candidate = archive.s("candidate.rules")
        write_file(candidate, text.encode())
        r = cairn("rules", "check", candidate, "--archive", archive.arch, check=False)
        assert r.returncode == 1 and why in r.stderr and "candidate.rules:" in r.stderr, r.stderr
        r = install(text)
        assert r.returncode == 1 and why in r.stderr and "rules:" in r.stderr, r.stderr
    install(good)
    os.makedirs(archive.m("vault"))
    data = random_bytes(3 * MiB, 21)
    write_file(archive.m("vault", "f"), data)
    archive.persist()
    assert "encrypt=aes-256-gcm key=k1" in os.getxattr(archive.m("vault", "f"), "user.cairn.effective").decode()
    assert key_files(archive, "k1") == 1
    # A master key the rules name is not deleted from under them, not even with --erase.
    r = cairn("key", "delete", archive.arch, "k1", "--erase", check=False)
    assert r.returncode == 1 and "key k1 is named by the rules" in r.stderr and "rule secrets" in r.stderr, r.stderr
    archive.evict()
    assert read_file(archive.m("vault", "f")) == data


def test_a_file_re_encoded_without_encryption_drops_its_data_key(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    data = random_bytes(5 * MiB, 23)
    write_file(archive.m("e", "f"), data)
    write_file(archive.m("e", "stays"), b"still sealed\n")
    archive.persist()
    assert key_files(archive, "k1") == 2
    os.setxattr(archive.m("e", "f"), "user.cairn.encrypt", b"off")
    cairn("policy", "apply", archive.m("e", "f"))
    assert "encrypt=off" in os.getxattr(archive.m("e", "f"), "user.cairn.effective").decode()
    assert key_files(archive, "k1") == 1  # only the file still encrypted keeps one
    archive.evict()
    drop_caches()
    assert read_file(archive.m("e", "f")) == data
    assert read_file(archive.m("e", "stays")) == b"still sealed\n"
    # Encrypted again, it gets a new data key.
    os.setxattr(archive.m("e", "f"), "user.cairn.encrypt", b"aes-256-gcm")
    cairn("policy", "apply", archive.m("e", "f"))
    assert key_files(archive, "k1") == 2
    archive.evict()
    drop_caches()
    assert read_file(archive.m("e", "f")) == data


def test_recover_keeps_the_data_keys_of_the_old_catalog(archive):
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"), compress="zstd")
    os.setxattr(archive.m("e"), "user.cairn.segment_size", b"4194304")  # big: two segments
    files = {"big": random_bytes(6 * MiB, 30), "small": b"small encrypted\n"}
    for name, data in files.items():
        write_file(archive.m("e", name), data)
    archive.persist()
    archive.umount()
    r = cairn("recover", archive.arch, "--force", timeout=300)
    assert "2 encrypted files' data keys kept from the old catalog" in r.stdout + r.stderr, r.stdout + r.stderr
    archive.mount()
    for name, data in files.items():
        assert read_file(archive.m("e", name)) == data, name


def test_a_changed_byte_in_an_encrypted_extent_reads_eio_never_other_bytes(archive):
    from test_redundancy import chunks_of, disk_path, overwrite
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    data = random_bytes(5 * MiB, 44)
    write_file(archive.m("e", "f"), data)
    archive.persist()
    archive.evict()
    disk, offset = chunks_of(archive.m("e", "f"))[1][0]  # the second segment's only chunk
    archive.umount()
    with open(disk_path(archive, disk), "rb") as image:
        image.seek(offset + 4096 + 100)
        original = image.read(1)
    overwrite(archive, disk, offset + 4096 + 100, bytes([original[0] ^ 1]))
    archive.mount()
    with open(archive.m("e", "f"), "rb") as f:
        assert f.read(4 * MiB) == data[:4 * MiB]  # the first segment is untouched
        with pytest.raises(OSError) as e:
            f.read()
    assert e.value.errno == errno.EIO
    assert re.search(r"read of extent \d+ failed", log_text(archive))
    archive.umount()
    overwrite(archive, disk, offset + 4096 + 100, original)  # put it back for the teardown's fsck
    archive.mount()


def test_a_key_command_is_tried_as_the_version_it_becomes_and_must_be_one_line(archive):
    first = archive.s("k1.hex")
    write_file(first, HEX1.encode())
    os.chmod(first, 0o600)
    cairn("key", "create", archive.arch, "k1", "--from-file", first)
    # Told the version it is asked for, this command has version 2 only: the rotation makes it.
    command = f'case "$CAIRN_KEY_VERSION" in 2) echo {HEX2};; *) exit 1;; esac'
    r = cairn("key", "rotate", archive.arch, "k1", "--from-command", command)
    assert "version 2" in r.stdout, r
    # The keystore is line by line: a two-line command would leave it unreadable.
    r = cairn("key", "create", archive.arch, "k2", "--from-command", f"true\necho {HEX2}", check=False)
    assert r.returncode != 0 and "must be one line" in r.stderr, r
    names = [line.split()[0] for line in cairn("key", "list", archive.arch).stdout.splitlines()[1:]]
    assert names == ["k1"], names  # (not a search of the text: the keystore's path may hold "k2")


def test_a_key_file_that_gives_another_key_is_refused_for_reading_and_writing(archive):
    key_file = archive.s("k1.hex")
    write_file(key_file, HEX1.encode())
    os.chmod(key_file, 0o600)
    cairn("key", "create", archive.arch, "k1", "--from-file", key_file)
    assert "no check value" not in cairn("key", "list", archive.arch).stdout
    encrypt_dir(archive, archive.m("e"))
    data = random_bytes(2 * MiB, 60)
    write_file(archive.m("e", "f"), data)
    archive.persist()
    archive.evict()
    archive.umount()
    write_file(key_file, HEX2.encode())  # another key where it was (a KMS answering for the wrong one)
    archive.mount()
    drop_caches()
    with pytest.raises(OSError) as e:
        read_file(archive.m("e", "f"))
    assert e.value.errno == errno.EIO
    # Nothing new is sealed with it either: the file waits in the staging cache.
    write_file(archive.m("e", "g"), b"written while the key file is wrong\n")
    r = cairn("persist", archive.arch, check=False, timeout=60)
    refusal = "key k1 version 1: its file gave another key than the one it gave when the version was added"
    assert r.returncode != 0 and refusal in r.stderr, r
    assert refusal in log_text(archive) and HEX2 not in log_text(archive)
    assert os.getxattr(archive.m("e", "g"), "user.cairn.state") != b"persisted"
    write_file(key_file, HEX1.encode())  # put right: both files read and persist
    archive.persist()
    archive.evict()
    drop_caches()
    assert read_file(archive.m("e", "f")) == data
    assert read_file(archive.m("e", "g")) == b"written while the key file is wrong\n"


def test_a_key_kept_in_the_keystore_whose_digits_were_damaged_is_refused_for_writing(archive):
    cairn("key", "create", archive.arch, "k1")
    keystore = os.path.join(archive.arch, "keystore")
    with open(keystore) as f:
        good = f.read()
    assert re.search(r"^check k1 1 [0-9a-f]{32}$", good, re.M), good
    encrypt_dir(archive, archive.m("e"))
    archive.umount()
    damaged = re.sub(r"hex:(.)", lambda m: "hex:" + ("1" if m.group(1) == "0" else "0"), good, count=1)
    write_file(keystore, damaged.encode(), mode=0o600)  # bit rot, or a slip of the hand
    archive.mount()
    # Nothing is sealed with the damaged key: the file waits in the staging cache.
    write_file(archive.m("e", "g"), b"written while the keystore is damaged\n")
    r = cairn("persist", archive.arch, check=False, timeout=60)
    refusal = "key k1 version 1: its digits in the keystore are not those when the version was added"
    assert r.returncode != 0 and refusal in r.stderr, r
    assert os.getxattr(archive.m("e", "g"), "user.cairn.state") != b"persisted"
    r = cairn("umount", archive.mnt, check=False, timeout=300)
    assert "not all of its data is on the disks" in r.stderr and not archive.is_mounted(), r
    write_file(keystore, good.encode(), mode=0o600)  # restored from its backup: the file persists with it
    archive.mount()
    archive.persist()
    archive.evict()
    drop_caches()
    assert read_file(archive.m("e", "g")) == b"written while the keystore is damaged\n"


def test_fsck_notes_a_crypto_erased_file_unlinked_while_open_instead_of_failing(archive):
    """A file unlinked while open stays in the catalog until the next mount frees it: when its
    key was erased, fsck says so in a note, not as a problem of the archive."""
    cairn("key", "create", archive.arch, "k1")
    encrypt_dir(archive, archive.m("e"))
    write_file(archive.m("e", "f"), random_bytes(2 * MiB, 5))
    archive.persist()
    archive.umount()
    cairn("key", "delete", archive.arch, "k1", "--erase")
    archive.mount()
    held = os.open(archive.m("e", "f"), os.O_RDONLY)
    try:
        os.remove(archive.m("e", "f"))
        d = os.open(archive.m("e"), os.O_RDONLY)
        try:
            os.fsync(d)  # the unlink committed
        finally:
            os.close(d)
        archive.kill9()  # the handle is never released: the file stays an orphan
    finally:
        try:
            os.close(held)
        except OSError as e:  # the daemon is gone
            assert e.errno == errno.ENOTCONN, e
    r = cairn("fsck", archive.arch, check=False, timeout=300)
    assert r.returncode == 0 and "clean" in r.stdout, r.stdout + r.stderr
    assert "unlinked while open" in r.stdout and "crypto-erased" in r.stdout, r.stdout
    archive.mount()  # frees it
    archive.umount()
    r = cairn("fsck", archive.arch, check=False, timeout=300)
    assert r.returncode == 0 and "crypto-erased" not in r.stdout, r.stdout + r.stderr
    archive.mount()
