"""The daemon's control socket (ARCHIVE/control.sock): private from the start whatever the
umask, answers only root and the archive's owner, opens no path for a client, parses
strictly, and no client (idle, slow or too many) can hold up the daemon or its unmount."""
import json
import os
import socket
import stat
import subprocess
import time

from conftest import CAIRN, NOBODY, cairn, is_mounted, pid_alive, run, run_as_nobody, wait_pid_gone, write_file


def sock_path(a):
    return os.path.join(a.arch, "control.sock")


def request(a, message, timeout=30):
    """Sends raw bytes to the control socket as root; returns the whole reply."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(sock_path(a))
        s.sendall(message)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
        return reply.decode(errors="replace")


# Connects to the socket as fast as it can until STOP exists; prints what got in as JSON.
CONNECT_LOOP = r"""
import json, os, socket, sys
path, stop = sys.argv[1], sys.argv[2]
attempts, got_in = 0, []
while not os.path.exists(stop):
    attempts += 1
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
    except OSError:
        s.close()
        continue
    try:
        s.settimeout(5)
        s.sendall(b"status\n")
        got_in.append(s.recv(4096).decode(errors="replace"))
    except OSError as e:
        got_in.append(repr(e))
    s.close()
print(json.dumps({"attempts": attempts, "got_in": got_in}))
"""


def test_socket_is_never_reachable_by_others_under_umask_000(archive):
    a = archive
    a.umount()
    stop = a.s("stop")
    loop = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                             "/usr/bin/python3", "-c", CONNECT_LOOP, sock_path(a), stop],
                            stdout=subprocess.PIPE, text=True, cwd="/")
    # Every chmod of the daemon is held up for 1 s, so that a socket set up in the open
    # (bound, listening, then chmod'ed) would be reachable meanwhile.
    old_umask = os.umask(0)
    try:
        traced = subprocess.Popen(["strace", "-f", "-qq", "--seccomp-bpf", "-o", "/dev/null",
                                   "-e", "trace=chmod,fchmodat", "-e", "inject=chmod,fchmodat:delay_enter=1000000",
                                   CAIRN, "mount", a.arch, a.mnt])
    finally:
        os.umask(old_umask)
    try:
        deadline = time.monotonic() + 60
        while not (is_mounted(a.mnt) and os.path.exists(sock_path(a))) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert is_mounted(a.mnt), "the traced mount did not come up"
        a.pids.add(a.daemon_pid())
        st = os.lstat(sock_path(a))
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o600, f"control.sock is {oct(st.st_mode)} right after mount"
        assert st.st_uid == os.stat(a.arch).st_uid, "control.sock is not owned by the archive's owner"
        assert stat.S_IMODE(os.stat(a.arch).st_mode) == 0o755  # the socket alone guards the daemon
    finally:
        write_file(stop, b"")
        out, _ = loop.communicate(timeout=60)
        a.umount()
        traced.wait(timeout=60)
    result = json.loads(out)
    assert result["attempts"] > 100, f"the connect loop hardly ran: {result}"
    assert result["got_in"] == [], f"uid {NOBODY} reached the control socket: {result['got_in'][:5]}"
    a.mount()


def test_request_from_another_user_is_refused(archive):
    a = archive
    r = run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", CAIRN, "persist", a.arch],
            check=False, cwd="/")
    assert r.returncode == 1
    assert "permission denied" in r.stderr and "private to root and its owner" in r.stderr, r.stderr
    # Even with the socket opened up (by mistake), the daemon checks who is calling.
    os.chmod(sock_path(a), 0o666)
    reply = run_as_nobody(r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
s.sendall(b"status\n")
reply = b""
while chunk := s.recv(4096):
    reply += chunk
print(json.dumps(reply.decode()))
""", sock_path(a))
    assert reply.startswith("error: permission denied:"), reply
    assert f"not from uid {NOBODY}" in reply and "pid" not in reply, reply
    assert "pid" in request(a, b"status\n")  # root still gets in


def test_dry_run_reads_the_rules_file_with_the_callers_rights(archive):
    a = archive
    secret = a.s("secret.rules")
    write_file(secret, b"SECRET-FIRST-LINE hunter2\n", mode=0o600)  # root's; nobody cannot read it
    os.chown(a.arch, NOBODY, NOBODY)  # nobody owns the archive: it may use the control socket
    a.remount()
    owner_cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", CAIRN]
    r = run(owner_cmd + ["rules", "dry-run", secret, "--path", a.mnt], check=False, cwd="/")
    assert r.returncode == 1
    assert "Permission denied" in r.stderr and secret in r.stderr, r.stderr
    assert "SECRET" not in r.stdout + r.stderr
    # The owner may use the socket, but a request naming a file gets no file opened for it.
    allowed = run(owner_cmd + ["persist", a.arch], check=False, cwd="/")
    assert allowed.returncode == 0, allowed.stderr
    reply = run_as_nobody(r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
s.sendall(("dry-run\t" + sys.argv[2] + "\t/\n").encode())
reply = b""
while chunk := s.recv(4096):
    reply += chunk
print(json.dumps(reply.decode()))
""", sock_path(a), secret)
    assert reply.startswith("error: control request:") and "SECRET" not in reply, reply
    # What the owner can read, the daemon checks as before.
    rules = a.s("mine.rules")
    write_file(rules, b"default\n  set raid=none\n", mode=0o644)
    ok = run(owner_cmd + ["rules", "dry-run", rules, "--path", a.mnt], check=False, cwd="/")
    assert ok.returncode == 0 and "would change" in ok.stdout, ok.stdout + ok.stderr


def test_malformed_requests_are_refused(archive):
    a = archive
    for message, why in [(b"disk-fail\t 1\n", 'disk " 1"'), (b"disk-fail\t1 \n", 'disk "1 "'),
                         (b"disk-fail\t01\n", 'disk "01"'), (b"disk-fail\t1\t\n", "takes 1 argument"),
                         (b"apply\t../etc\n", "canonical absolute path"), (b"persist\\x\n", "escape"),
                         (b"nonsense\n", "unknown command")]:
        reply = request(a, message)
        assert reply.startswith("error: control request:") and why in reply, (message, reply)
    listing = cairn("disk", "list", a.arch).stdout
    assert "failed" not in listing, listing  # disk 1 was not taken out of service


def idle_client(a):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock_path(a))
    return s


def test_too_many_clients_are_turned_away_at_once(archive):
    a = archive
    idle = [idle_client(a) for _ in range(8)]  # as many as the daemon answers at once, silent
    try:
        time.sleep(0.5)  # not synchronisation: the daemon must have taken them in before the next
        with idle_client(a) as extra:
            extra.settimeout(5)
            reply = extra.recv(4096).decode()
        assert reply.startswith("error: the daemon is answering 8 control requests already"), reply
    finally:
        for s in idle:
            s.close()


def test_a_silent_client_is_dropped_after_10_s(archive):
    with idle_client(archive) as s:
        t0 = time.monotonic()
        reply = s.recv(4096).decode()
        took = time.monotonic() - t0
    assert reply.startswith("error: no complete request within 10 s"), reply
    assert 8 < took < 20, took


def test_an_idle_client_does_not_hold_up_the_unmount(archive):
    a = archive
    pid = a.daemon_pid()
    with idle_client(a), idle_client(a):
        t0 = time.monotonic()
        r = cairn("umount", a.mnt, check=False, timeout=60)
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        assert wait_pid_gone(pid, 10), f"daemon {pid} still running after cairn umount"
    assert took < 8, f"cairn umount took {took:.1f} s: it waited for the idle clients"
    assert not os.path.exists(sock_path(a))
    a.mount()


# As the archive's owner: swaps each .ctl.* setup directory of the daemon for one of its own
# holding a symlink `s` to TARGET, until STOP exists; prints how many swaps it made.
SWAP_LOOP = r"""
import os, sys
arch, target, stop = sys.argv[1], sys.argv[2], sys.argv[3]
swaps, mine = 0, set()
while not os.path.exists(stop):
    for name in os.listdir(arch):
        if name.startswith(".ctl.") and name not in mine:
            try:
                os.rename(os.path.join(arch, name), os.path.join(arch, f".gone{swaps}"))
                os.mkdir(os.path.join(arch, name))
                os.symlink(target, os.path.join(arch, name, "s"))
                mine.add(name)
                swaps += 1
            except OSError:
                pass
print(swaps)
"""


def test_the_archive_owner_cannot_redirect_the_sockets_setup_to_another_file(archive):
    # The owner of the archive directory may rename what the root daemon makes in it; the
    # socket's chmod and chown must never land on a file the owner points them at.
    a = archive
    a.umount()
    os.chown(a.arch, NOBODY, NOBODY)
    victim = a.s("victim")
    write_file(victim, b"root's\n", mode=0o644)
    stop = a.s("stop")
    loop = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                             "/usr/bin/python3", "-c", SWAP_LOOP, a.arch, victim, stop],
                            stdout=subprocess.PIPE, text=True, cwd="/")
    traced = subprocess.Popen(["strace", "-f", "-qq", "--seccomp-bpf", "-o", "/dev/null",
                               "-e", "trace=chmod,fchmodat", "-e", "inject=chmod,fchmodat:delay_enter=1000000",
                               CAIRN, "mount", a.arch, a.mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while traced.poll() is None and not (is_mounted(a.mnt) and os.path.exists(sock_path(a))) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        write_file(stop, b"")
        swaps = int(loop.communicate(timeout=60)[0])
        if is_mounted(a.mnt):
            a.pids.add(a.daemon_pid())
            a.umount()
        traced.wait(timeout=60)
    assert swaps >= 1, "the swap loop never saw the setup directory"
    st = os.stat(victim)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644), \
        f"the daemon changed {victim}: uid {st.st_uid}, mode {oct(st.st_mode)}"
