"""Shared fixtures and helpers for the cairn FUSE integration suite.

Run from the repository root:
    CAIRN_BIN=$PWD/build/cairn /usr/bin/python3 -m pytest -q tests/fuse

Every test gets a fresh archive (4 sparse 2 GiB disks) mounted in a private temp dir.
Teardown always unmounts (cairn umount, falling back to fusermount3 -uz), kills any
daemon the test started that is still alive (by pid), runs `cairn fsck` (unless the test
is marked no_fsck) and removes the temp dir.

Environment:
    CAIRN_BIN            cairn binary (default: build/cairn next to this tree)
    CAIRN_TEST_TMPDIR    where temp dirs go (default /dev/shm if writable, else /tmp)
    CAIRN_TEST_TIMEOUT   per-test watchdog in seconds (default 300): when it fires, the
                         daemon is killed and the mount detached so a hung test fails
                         instead of hanging the whole run.
    CAIRN_SANITIZER_LOGS directory where a sanitized cairn writes its ASan/UBSan reports
                         (tests/run --asan points ASAN_OPTIONS/UBSAN_OPTIONS log_path there):
                         a test during which any cairn process, the detached daemon
                         included, wrote a report fails with it.
"""
import ctypes
import errno
import hashlib
import json
import os
import random
import re
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CAIRN = os.environ.get("CAIRN_BIN") or os.path.join(HERE, "..", "..", "build", "cairn")
CAIRN = os.path.abspath(CAIRN)
FUSERMOUNT = shutil.which("fusermount3") or "fusermount3"
TIMEOUT = float(os.environ.get("CAIRN_TEST_TIMEOUT", "300"))

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

NOBODY = 65534


def _pick_tmp_base():
    env = os.environ.get("CAIRN_TEST_TMPDIR")
    if env:
        return env
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return "/dev/shm"
    return "/tmp"


TMP_BASE = _pick_tmp_base()
SANITIZER_LOGS = os.environ.get("CAIRN_SANITIZER_LOGS")


# ---------------------------------------------------------------------------------------
# pytest hooks
# ---------------------------------------------------------------------------------------

def pytest_configure(config):
    config.addinivalue_line("markers", "no_fsck: do not run `cairn fsck` (expecting clean) at teardown")


def _skip_reason():
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if os.geteuid() != 0:
        return "the FUSE suite needs root (chown, mknod, setpriv, allow_other)"
    if not os.access(CAIRN, os.X_OK):
        return f"cairn binary not found at {CAIRN} (set CAIRN_BIN)"
    if not shutil.which("fusermount3"):
        return "fusermount3 is not installed"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _skip_reason()
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))


# ---------------------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------------------

def interruptible():
    """preexec_fn for a command the test stops with Ctrl-C (SIGINT): SIGINT at its default, as in
    a terminal, even when the test suite itself runs as a background job that ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run(cmd, *, check=True, timeout=TIMEOUT, input=None, cwd=None, env=None):
    """Runs cmd (list), captures text output. check=True asserts exit 0 with a useful message."""
    try:
        r = subprocess.run(cmd, input=input, cwd=cwd, env=env, capture_output=True, timeout=timeout,
                           encoding="utf-8", errors="surrogateescape")
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"timed out after {timeout}s: {cmd!r}\nstdout: {e.stdout}\nstderr: {e.stderr}")
    if check:
        assert r.returncode == 0, (f"command failed (exit {r.returncode}): {' '.join(map(str, cmd))}\n"
                                   f"stdout: {r.stdout[-4000:]}\nstderr: {r.stderr[-4000:]}")
    return r


def sh(script, **kw):
    """Runs a bash script (set -euo pipefail)."""
    return run(["bash", "-c", "set -euo pipefail\n" + script], **kw)


def cairn(*args, **kw):
    return run([CAIRN, *map(str, args)], **kw)


def _proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def pid_alive(pid):
    """True while pid runs (a zombie has exited and counts as gone)."""
    return _proc_state(pid) not in (None, "Z", "X")


def pid_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def wait_pid_gone(pid, timeout):
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(_unescape_mountinfo(line.split()[4]) == path for line in f)


def run_as_nobody(python_code, *args):
    """Runs python_code as uid/gid 65534 with no supplementary groups; returns its stdout parsed
    as JSON. The code gets its arguments in sys.argv[1:]."""
    r = run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/usr/bin/python3", "-c",
             python_code, *map(str, args)], cwd="/")
    return json.loads(r.stdout)


# ---------------------------------------------------------------------------------------
# data helpers
# ---------------------------------------------------------------------------------------

def random_bytes(n, seed):
    return random.Random(seed).randbytes(n)


def write_file(path, data, mode=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(path, mode)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(4 * MiB)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def assert_file_equals(path, expected):
    """Compares a file against expected bytes; reports size and first differing offset."""
    got = read_file(path)
    if got == expected:
        return
    first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    raise AssertionError(f"{path}: content differs: size {len(got)} (expected {len(expected)}), "
                         f"first difference at offset {first}")


def assert_files_identical(a, b):
    sa, sb = os.stat(a), os.stat(b)
    assert sa.st_size == sb.st_size, f"{b}: size {sb.st_size}, expected {sa.st_size} (as {a})"
    assert sha256_file(a) == sha256_file(b), f"{b}: content differs from {a}"


def libc_renameat2(old, new, flags):
    """renameat2(AT_FDCWD, old, AT_FDCWD, new, flags) via ctypes; raises OSError on failure."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.renameat2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    AT_FDCWD = -100
    if fn(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old, None, new)


RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


# ---------------------------------------------------------------------------------------
# tree snapshots and comparisons
# ---------------------------------------------------------------------------------------

ACL_ACCESS = "system.posix_acl_access"


def acl_entries(value):
    """Decodes a Linux POSIX ACL xattr into [(tag, perm, id)]."""
    assert len(value) >= 4 and (len(value) - 4) % 8 == 0, f"malformed ACL xattr {value!r}"
    (version,) = struct.unpack_from("<I", value)
    assert version == 2, f"ACL xattr version {version}"
    return [struct.unpack_from("<HHI", value, off) for off in range(4, len(value), 8)]


def acl_is_trivial_for(value, mode):
    """True when an access ACL only restates the mode's permission bits (owner/group/other),
    i.e. it is equivalent to having no ACL at all."""
    entries = acl_entries(value)
    perms = {tag: perm for tag, perm, _ in entries}
    return (len(entries) == 3 and set(perms) == {0x01, 0x04, 0x20}
            and (perms[0x01] << 6 | perms[0x04] << 3 | perms[0x20]) == stat.S_IMODE(mode) & 0o777)


def _xattrs(path, mode):
    """All xattrs of path. A trivial access ACL (one that only restates the mode) is left
    out: it means the same as no ACL (test_xattr checks separately that none is stored)."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EPERM):
            return {}
        raise
    out = {}
    for n in sorted(names):
        try:
            out[n] = os.getxattr(path, n, follow_symlinks=False)
        except OSError as e:
            out[n] = f"<{errno.errorcode.get(e.errno, e.errno)}>"
    if isinstance(out.get(ACL_ACCESS), bytes) and acl_is_trivial_for(out[ACL_ACCESS], mode):
        del out[ACL_ACCESS]
    return out


def snapshot(root, *, data=True, xattrs=True, times=True, owners=True, symlink_times=True):
    """Everything POSIX-visible about a tree, keyed by relative path ('.' is root):
    type, permission bits, owner, size, mtime (ns), nlink (non-dirs), rdev (devices),
    symlink target, content sha256, xattrs (incl. POSIX ACLs), and hard-link grouping
    (each entry names the smallest path sharing its inode)."""
    raw = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            raw["."] = os.lstat(root)
        for name in dirnames + filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            raw[rel] = os.lstat(os.path.join(root, rel))
    inode_first = {}
    for rel in sorted(raw):
        st = raw[rel]
        if not stat.S_ISDIR(st.st_mode):
            inode_first.setdefault((st.st_dev, st.st_ino), rel)
    snap = {}
    for rel in sorted(raw):
        st = raw[rel]
        path = os.path.join(root, rel)
        fmt = stat.S_IFMT(st.st_mode)
        e = {"type": stat.filemode(st.st_mode)[0], "mode": oct(stat.S_IMODE(st.st_mode))}
        if owners:
            e["uid"], e["gid"] = st.st_uid, st.st_gid
        if times and (fmt != stat.S_IFLNK or symlink_times):
            e["mtime_ns"] = st.st_mtime_ns
        if fmt != stat.S_IFDIR:
            e["nlink"] = st.st_nlink
            e["link_group"] = inode_first[(st.st_dev, st.st_ino)]
        if fmt in (stat.S_IFREG, stat.S_IFLNK):
            e["size"] = st.st_size
        if fmt in (stat.S_IFCHR, stat.S_IFBLK):
            e["rdev"] = (os.major(st.st_rdev), os.minor(st.st_rdev))
        if fmt == stat.S_IFLNK:
            e["target"] = os.readlink(path)
        if fmt == stat.S_IFREG and data:
            e["sha256"] = sha256_file(path)
        if xattrs:
            e["xattrs"] = _xattrs(path, st.st_mode)
        snap[rel] = e
    return snap


def diff_snapshots(expected, got, limit=30):
    problems = []
    for rel in sorted(set(expected) | set(got)):
        if rel not in got:
            problems.append(f"missing: {rel!r}")
        elif rel not in expected:
            problems.append(f"unexpected: {rel!r}")
        else:
            a, b = expected[rel], got[rel]
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    problems.append(f"{rel!r}: {k}: expected {a.get(k)!r}, got {b.get(k)!r}")
    if len(problems) > limit:
        problems = problems[:limit] + [f"... and {len(problems) - limit} more"]
    return problems


def assert_snapshots_equal(expected, got, what=""):
    problems = diff_snapshots(expected, got)
    assert not problems, f"trees differ{(' (' + what + ')') if what else ''}:\n" + "\n".join(problems)


def assert_trees_equal(expected_root, got_root, **kw):
    assert_snapshots_equal(snapshot(expected_root, **kw), snapshot(got_root, **kw),
                           f"{expected_root} vs {got_root}")


def diff_r(a, b):
    r = run(["diff", "-r", "--no-dereference", a, b], check=False)
    assert r.returncode == 0, f"diff -r {a} {b} (exit {r.returncode}):\n{r.stdout[-4000:]}{r.stderr[-2000:]}"


def tar_copy(src, dst, *extra):
    """tar -c of src's contents piped into tar -x in dst (created if needed), POSIX format so
    nanosecond mtimes survive; as root, tar -x keeps owners and modes."""
    os.makedirs(dst, exist_ok=True)
    opts = " ".join(extra)
    sh(f'tar -C "{src}" --format=posix {opts} -cf - . | tar -C "{dst}" -xpf -')


PAST_NS = 1_000_000_000 * 1_000_000_000  # 2001-09-09T01:46:40Z


def set_past_times(root):
    """Sets atime/mtime of everything under root (including root and symlinks) to distinct
    past times with nanosecond parts, deepest first so directory times stick."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            entries.append(os.path.join(dirpath, name))
    entries.sort(key=lambda p: (-p.count(os.sep), p))
    entries.append(root)
    for i, p in enumerate(entries):
        t = PAST_NS + i * 86_400_000_000_123 + 7 * i + 1
        os.utime(p, ns=(t - 3_600_000_000_000, t), follow_symlinks=False)


def make_rich_tree(root, *, acl=True, fifo=True, devices=False, owners=True, times=True):
    """A tree exercising most POSIX metadata: files of sizes around the pack threshold and
    segment boundaries, hard links across directories, relative/absolute/dangling/directory
    symlinks, user.* xattrs (text, binary), POSIX ACLs (access + default), a FIFO, optional
    device nodes, odd permission bits (setuid/setgid/sticky/0000), foreign owners and past
    mtimes with nanoseconds. Returns root."""
    os.makedirs(root, exist_ok=True)
    files = {
        "empty": b"",
        "one": b"\x01",
        "small.txt": b"hello cairn\n",
        "f4095": random_bytes(4095, 1),
        "f4096": random_bytes(4096, 2),
        "f4097": random_bytes(4097, 3),
        "sub/threshold": random_bytes(256 * KiB, 4),
        "sub/threshold+1": random_bytes(256 * KiB + 1, 5),
        "sub/deeper/five_mib_plus": random_bytes(5 * MiB + 17, 6),
        "sub/deeper/text": b"line\n" * 1000,
        "hl/a": random_bytes(70000, 7),
        "hl/x": b"pair of links\n",
        "perm_0000": b"nobody may read me\n",
        "perm_0444": b"read only\n",
        "perm_4755": b"#!/bin/sh\necho setuid\n",
        "perm_2750": b"setgid\n",
        "perm_0604": b"odd\n",
        "owned/by_1234": b"owned by 1234:5678\n",
        "owned/by_nobody": b"owned by nobody\n",
        "xattr_file": b"has xattrs\n",
        "acl_file": b"has an acl\n",
    }
    for rel, content in files.items():
        write_file(os.path.join(root, rel), content)
    for d in ("empty_dir", "sticky", "dir_0700", "dir_0555/inner", "acl_dir"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    p = lambda rel: os.path.join(root, rel)  # noqa: E731
    # hard links: a three-way link across directories and a pair
    os.link(p("hl/a"), p("hl/b"))
    os.link(p("hl/a"), p("sub/hl_c"))
    os.link(p("hl/x"), p("hl/y"))
    # symlinks
    os.symlink("small.txt", p("sym_rel"))
    os.symlink("../small.txt", p("sub/sym_up"))
    os.symlink("/etc/hostname", p("sym_abs"))
    os.symlink("does/not/exist", p("sym_dangling"))
    os.symlink("sub", p("sym_dir"))
    os.symlink("t" * 200 + "/long", p("sym_long"))
    if fifo:
        os.mkfifo(p("fifo"), 0o640)
    if devices:
        os.mknod(p("dev_null_like"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mknod(p("dev_block"), stat.S_IFBLK | 0o600, os.makedev(7, 42))
    if owners:
        os.chown(p("owned/by_1234"), 1234, 5678)
        os.chown(p("owned/by_nobody"), NOBODY, NOBODY)
        os.chown(p("owned"), 1234, 5678)
        os.lchown(p("sym_rel"), 4321, 4321)
    # xattrs
    os.setxattr(p("xattr_file"), "user.comment", b"hello")
    os.setxattr(p("xattr_file"), "user.binary", bytes(range(256)))
    os.setxattr(p("sub"), "user.dirattr", "directory value \u00e9".encode())
    os.setxattr(p("hl/a"), "user.linked", b"shared by all links")
    if acl:
        run(["setfacl", "-m", f"u:{NOBODY}:rw,g:100:r", p("acl_file")])
        run(["setfacl", "-m", f"u:{NOBODY}:rwx", "-d", "-m", "u:1234:r-x", p("acl_dir")])
        write_file(p("acl_dir/inherited"), b"inherits acl_dir's default ACL\n")
        os.mkdir(p("acl_dir/subdir"))
    # permissions last (chown clears setuid/setgid)
    modes = {"perm_0000": 0o000, "perm_0444": 0o444, "perm_4755": 0o4755, "perm_2750": 0o2750,
             "perm_0604": 0o604, "sticky": 0o1777, "dir_0700": 0o700, "dir_0555": 0o555}
    for rel, mode in modes.items():
        os.chmod(p(rel), mode)
    if times:
        set_past_times(root)
    return root


# ---------------------------------------------------------------------------------------
# the archive fixture
# ---------------------------------------------------------------------------------------

class Archive:
    """A cairn archive in a private temp dir: .arch (archive dir), .mnt (mount point),
    .scratch (a work dir on a regular filesystem for sources and references)."""

    def __init__(self, base):
        self.base = base
        self.arch = os.path.join(base, "arch")
        self.mnt = os.path.join(base, "mnt")
        self.scratch = os.path.join(base, "scratch")
        os.makedirs(self.mnt)
        os.makedirs(self.scratch)
        self.pids = set()        # every daemon pid this archive ever had
        self.watchdog_fired = False
        self.late_exits = []     # (pid, state, seconds) when cairn umount returned before the daemon exited
        self._watchdog = None

    # paths --------------------------------------------------------------------------
    def m(self, *parts):
        """Path inside the mount."""
        return os.path.join(self.mnt, *parts)

    def s(self, *parts):
        """Path inside the scratch dir."""
        return os.path.join(self.scratch, *parts)

    # lifecycle ----------------------------------------------------------------------
    def mkfs(self, *extra):
        return cairn("mkfs", self.arch, "--disks", "4", "--disk-size", "2G", *extra)

    def daemon_pid(self):
        with open(os.path.join(self.arch, "lock")) as f:
            text = f.read().strip()
        assert text.isdigit(), f"{self.arch}/lock holds {text!r}, expected the daemon pid"
        return int(text)

    def mount(self, opts=None, mnt=None, env=None):
        """Mounts (the daemon inherits `env`, default this process's environment)."""
        mnt = mnt or self.mnt
        cmd = ["mount", self.arch, mnt] + (["-o", opts] if opts else [])
        r = cairn(*cmd, check=False, timeout=120, env=env)
        if r.returncode == 0:
            pid = self.daemon_pid()
            self.pids.add(pid)
        assert r.returncode == 0, f"cairn {' '.join(cmd)} failed (exit {r.returncode}): {r.stdout}{r.stderr}"
        assert is_mounted(mnt), f"cairn mount exited 0 but {mnt} is not mounted"
        assert pid_alive(pid), f"daemon pid {pid} from {self.arch}/lock is not running"
        return r

    def umount(self):
        pid = self.daemon_pid() if self.is_mounted() else None
        r = cairn("umount", self.mnt, check=False, timeout=300)
        assert r.returncode == 0, f"cairn umount {self.mnt} failed (exit {r.returncode}): {r.stdout}{r.stderr}"
        assert not self.is_mounted(), f"{self.mnt} still mounted after cairn umount"
        if pid is not None and pid_alive(pid):
            # cairn umount should return only once the daemon has exited; note when it did not
            state = _proc_state(pid)
            t0 = time.monotonic()
            gone = wait_pid_gone(pid, 10)
            self.late_exits.append((pid, state, round(time.monotonic() - t0, 3)))
            assert gone, f"daemon {pid} still running 10 s after cairn umount returned (state {state})"
        return r

    def remount(self, opts=None):
        self.umount()
        return self.mount(opts)

    def kill9(self):
        """kill -9 the daemon, detach the mount, wait until the daemon is gone."""
        pid = self.daemon_pid()
        os.kill(pid, signal.SIGKILL)
        run([FUSERMOUNT, "-u", "-z", self.mnt], check=False, timeout=60)
        assert wait_pid_gone(pid, 30), f"daemon {pid} survived kill -9"
        assert not self.is_mounted(), f"{self.mnt} still mounted after fusermount3 -uz"

    def fsck(self):
        r = cairn("fsck", self.arch, check=False, timeout=300)
        assert r.returncode == 0 and "clean" in r.stdout, \
            f"cairn fsck {self.arch} not clean (exit {r.returncode}):\n{r.stdout}{r.stderr}"
        return r

    def is_mounted(self):
        return is_mounted(self.mnt)

    # control commands -----------------------------------------------------------------
    def persist(self):
        return cairn("persist", self.arch)

    def evict(self):
        return cairn("evict", self.arch)

    def status(self):
        return json.loads(cairn("status", self.arch, "--json").stdout)

    # watchdog ---------------------------------------------------------------------------
    def start_watchdog(self, seconds):
        self._watchdog = threading.Timer(seconds, self._fire_watchdog)
        self._watchdog.daemon = True
        self._watchdog.start()

    def stop_watchdog(self):
        if self._watchdog:
            self._watchdog.cancel()

    def _fire_watchdog(self):
        self.watchdog_fired = True
        self._kill_own_daemons()
        subprocess.run([FUSERMOUNT, "-u", "-z", self.mnt], capture_output=True, timeout=60)

    def _own_daemon(self, pid):
        return pid_alive(pid) and self.arch in pid_cmdline(pid)

    def own_daemons(self):
        """Pids of live cairn daemons serving this archive: the ones seen in ARCH/lock plus any
        `cairn mount` process whose command line names this test's private archive path."""
        pids = set(self.pids)
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                argv = pid_cmdline(int(entry))
                if (len(argv) > 2 and os.path.basename(argv[0]) == "cairn" and argv[1] in ("mount", self.arch)
                        and self.arch in argv):
                    pids.add(int(entry))
        return sorted(p for p in pids if self._own_daemon(p))

    def _kill_own_daemons(self):
        killed = []
        for pid in self.own_daemons():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        for pid in killed:
            wait_pid_gone(pid, 30)
        return killed

    def mounts_under_base(self):
        return mounts_under(self.base)

    def cleanup(self):
        """Leaves nothing behind: no mount, no daemon. Never raises; returns the problems seen."""
        problems = []
        if self.watchdog_fired:
            problems.append(f"watchdog fired after {TIMEOUT:.0f}s: the test hung; daemon killed, mount detached")
        if is_mounted(self.mnt):
            try:
                r = subprocess.run([CAIRN, "umount", self.mnt], capture_output=True, text=True, timeout=300)
                if r.returncode != 0:
                    problems.append(f"cairn umount {self.mnt} at teardown failed (exit {r.returncode}): "
                                    f"{r.stdout}{r.stderr}")
            except Exception as e:  # noqa: BLE001 - teardown must go on
                problems.append(f"cairn umount {self.mnt} at teardown: {e!r}")
        for mp in reversed(self.mounts_under_base()):
            if mp != os.path.realpath(self.mnt):
                problems.append(f"unexpected mount left at {mp}")
            try:
                subprocess.run([FUSERMOUNT, "-u", "-z", mp], capture_output=True, timeout=60)
            except Exception as e:  # noqa: BLE001
                problems.append(f"fusermount3 -uz {mp}: {e!r}")
        for pid in self.own_daemons():
            if not wait_pid_gone(pid, 20):
                problems.append(f"daemon {pid} still running 20 s after unmount; killed")
        self._kill_own_daemons()
        return problems


def _unescape_mountinfo(field):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts_under(base):
    """Mount points at or below base, outermost first."""
    prefix = os.path.realpath(base)
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = _unescape_mountinfo(line.split()[4])
            if mp == prefix or mp.startswith(prefix + os.sep):
                out.append(mp)
    return out


@pytest.fixture(autouse=True)
def no_sanitizer_reports():
    """Fails the test when a cairn process wrote a sanitizer report into CAIRN_SANITIZER_LOGS while
    it ran. Set up before and torn down after the archive fixture, so the daemon has exited (and
    LeakSanitizer has run) by the time the reports are read."""
    if not SANITIZER_LOGS:
        yield
        return
    before = set(os.listdir(SANITIZER_LOGS))
    yield
    reports = []
    for name in sorted(set(os.listdir(SANITIZER_LOGS)) - before):
        path = os.path.join(SANITIZER_LOGS, name)
        with open(path, errors="replace") as f:
            text = f.read()
        if text:
            reports.append(f"{path}:\n{text[:6000]}")
    if reports:
        pytest.fail("sanitizer reports from cairn:\n" + "\n".join(reports), pytrace=False)


@pytest.fixture
def archive(request):
    """A freshly made and mounted cairn archive; see Archive."""
    base = tempfile.mkdtemp(prefix="cairn-fuse-", dir=TMP_BASE)
    os.chmod(base, 0o755)  # the non-root tests must be able to reach the mount point
    a = Archive(base)
    os.chmod(a.scratch, 0o755)
    problems = []
    try:
        a.mkfs()
        a.mount()
        a.start_watchdog(TIMEOUT)
        yield a
    finally:
        a.stop_watchdog()
        try:
            problems = a.cleanup()
            if (not problems and os.path.exists(os.path.join(a.arch, "cairn.conf"))
                    and request.node.get_closest_marker("no_fsck") is None):
                r = cairn("fsck", a.arch, check=False, timeout=300)
                if r.returncode != 0 or "clean" not in r.stdout:
                    problems.append(f"cairn fsck at teardown not clean (exit {r.returncode}):\n{r.stdout}{r.stderr}")
        except Exception as e:  # noqa: BLE001
            problems.append(f"teardown: {e!r}")
        finally:
            left = mounts_under(base)
            if left:  # never delete through a live mount
                problems.append(f"could not detach {left}; {base} left in place")
            else:
                shutil.rmtree(base, ignore_errors=True)
    if problems:
        pytest.fail("teardown: " + "\n".join(problems), pytrace=False)
