"""cairn.log under a flood: an unprivileged user's refused setxattrs cannot forge lines,
fill the disk, or hide how many there were."""
import os
import re

from conftest import NOBODY, run_as_nobody, write_file

# Runs as nobody: setxattr of a 243-byte value with a forged log line in it, for `seconds`,
# on a file nobody owns (the kernel lets it through, cairn refuses the value).
FLOOD = r"""
import errno, json, os, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
forged = "\n2026-01-01 00:00:00.000 cairn error: FORGED by nobody\n"
value = ("mirror-2" + forged + "x" * 180).encode()  # under the 256-byte cap, so the value is quoted
attempts, other = 0, []
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        os.setxattr(path, "user.cairn.raid", value)
        other.append("accepted")
    except OSError as e:
        if e.errno != errno.EINVAL:
            other.append(errno.errorcode[e.errno])
    attempts += 1
print(json.dumps({"attempts": attempts, "other": other[:5]}))
"""

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} cairn (debug|info|warning|error): ")


def test_a_setxattr_flood_leaves_a_small_log_without_forged_lines(archive):
    log = os.path.join(archive.arch, "cairn.log")
    write_file(archive.m("mine"), b"nobody's\n")
    os.chown(archive.m("mine"), NOBODY, NOBODY)
    before = os.path.getsize(log)

    got = run_as_nobody(FLOOD, archive.m("mine"), 3)
    assert got["other"] == [] and got["attempts"] > 200, got
    archive.umount()  # reports what is still suppressed

    with open(log, "rb") as f:
        lines = f.read().decode().splitlines()
    grown = os.path.getsize(log) - before
    assert grown < 64 * 1024, f"cairn.log grew by {grown} bytes for {got['attempts']} refused setxattrs"
    bad = [line for line in lines if not LINE.match(line)]
    assert bad == [], f"lines not written by cairn: {bad[:3]}"
    refused = [line for line in lines if "setxattr user.cairn.raid refused" in line]
    assert refused, lines[-20:]
    for line in refused:
        assert "\\n2026-01-01 00:00:00.000 cairn error: FORGED" in line, line  # escaped, on the same line
        assert len(line) < 1000 and line.count("FORGED") == 1 and "…(24" in line, line  # cut short, once
    suppressed = [int(m.group(1)) for line in lines
                  if (m := re.search(r'cairn warning: (\d+) more message\(s\) like "setxattr \{\} refused', line))]
    assert suppressed, lines[-20:]
    assert len(refused) + sum(suppressed) == got["attempts"], (len(refused), suppressed, got)
