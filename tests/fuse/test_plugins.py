"""Transform plugins through the mount: compress=zstd/lz4/auto on a real tree, read back from the
disks byte for byte; a plugin module removed from the plugin directory makes its files EIO with a
log line naming it; `cairn plugins` lists what is loaded."""
import contextlib
import errno
import os
import shutil
import sqlite3
import subprocess

import pytest

from conftest import CAIRN, assert_trees_equal, cairn, random_bytes, read_file, run, write_file

BUILD_PLUGINS = os.path.join(os.path.dirname(CAIRN), "plugins")


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def image_contains(path, needle):
    """Whether a (sparse) disk image holds `needle` in its data, read region by region."""
    chunk = 16 << 20
    with open(path, "rb") as f:
        fd = f.fileno()
        end = os.fstat(fd).st_size
        at = 0
        while at < end:
            try:
                at = os.lseek(fd, at, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:  # nothing but a hole from here
                    return False
                raise
            stop = os.lseek(fd, at, os.SEEK_HOLE)
            for pos in range(at, stop, chunk):
                f.seek(max(0, pos - len(needle)))
                if needle in f.read(min(chunk, stop - pos) + len(needle)):
                    return True
            at = stop
    return False


def log_text(archive):
    with open(os.path.join(archive.arch, "cairn.log"), errors="replace") as f:
        return f.read()


def test_cairn_plugins_lists_the_built_in_modules(archive):
    out = cairn("plugins", archive.arch).stdout
    assert f"plugin directory {BUILD_PLUGINS}: 3 module(s)" in out
    for name, stage in (("zstd", "compress"), ("lz4", "compress"), ("aes-256-gcm", "encrypt")):
        assert any(line.split()[:4] == [name, "version", "1", stage] for line in out.splitlines()), out
    assert cairn("plugins", "--bogus", check=False).returncode == 2


@pytest.mark.parametrize("compress", ["zstd", "lz4", "zstd-9"])
def test_a_compressed_tree_reads_back_from_the_disks(archive, compress):
    src = archive.s("src")
    shutil.copytree("/usr/include/linux", src, symlinks=True)
    os.makedirs(archive.m("packed"))
    run(["setfattr", "-n", "user.cairn.compress", "-v", compress, archive.m("packed")])
    run(["cp", "-a", src, archive.m("packed", "tree")])
    big = random_bytes(3 << 20, 7) + open("/usr/include/stdio.h", "rb").read() * 200
    write_file(archive.m("packed", "mixed.bin"), big)
    archive.persist()
    archive.evict()
    drop_caches()
    assert_trees_equal(src, archive.m("packed", "tree"))
    assert read_file(archive.m("packed", "mixed.bin")) == big
    st = archive.status()
    assert st["payload_stored_bytes"] < st["payload_logical_bytes"] * 0.6, st
    archive.umount()
    archive.fsck()  # decodes every extent through the plugin
    archive.mount()
    assert_trees_equal(src, archive.m("packed", "tree"))


def test_auto_stores_random_data_raw_and_text_compressed(archive):
    os.makedirs(archive.m("auto"))
    run(["setfattr", "-n", "user.cairn.compress", "-v", "auto", archive.m("auto")])
    run(["setfattr", "-n", "user.cairn.segment_size", "-v", "4194304", archive.m("auto")])  # noise: two segments
    noise = random_bytes(8 << 20, 11)
    text = open("/usr/include/stdlib.h", "rb").read() * 300
    write_file(archive.m("auto", "noise"), noise)
    archive.persist()
    st = archive.status()
    # it looks incompressible: stored as it is, without the compressor (not even its framing)
    assert st["payload_stored_bytes"] == st["payload_logical_bytes"], st
    write_file(archive.m("auto", "text"), text)
    archive.persist()
    archive.evict()
    drop_caches()
    assert read_file(archive.m("auto", "noise")) == noise
    assert read_file(archive.m("auto", "text")) == text
    st = archive.status()
    assert st["payload_stored_bytes"] < st["payload_logical_bytes"] - len(text) // 2, st


def test_a_file_whose_plugin_is_gone_reads_eio_with_a_log_line(archive):
    plugins = archive.s("plugins")
    os.makedirs(plugins)
    for name in ("zstd", "lz4"):
        shutil.copy(os.path.join(BUILD_PLUGINS, name, f"cairn-{name}.so"), plugins)
    archive.umount()
    with open(os.path.join(archive.arch, "cairn.conf"), "a") as f:
        f.write(f"plugin_dir = {plugins}\n")
    archive.mount()
    out = cairn("plugins", archive.arch).stdout
    assert f"plugin directory {plugins}: 2 module(s)" in out
    os.makedirs(archive.m("l"))
    run(["setfattr", "-n", "user.cairn.compress", "-v", "lz4", archive.m("l")])
    data = open("/usr/include/unistd.h", "rb").read() * 100
    write_file(archive.m("l", "f"), data)
    write_file(archive.m("plain"), b"no plugin here")
    archive.persist()
    archive.evict()
    archive.umount()
    os.remove(os.path.join(plugins, "cairn-lz4.so"))
    archive.mount()
    drop_caches()
    with pytest.raises(OSError) as e:
        read_file(archive.m("l", "f"))
    assert e.value.errno == errno.EIO
    assert read_file(archive.m("plain")) == b"no plugin here"
    assert "transform 'lz4' is not installed" in log_text(archive)
    # a new file cannot pick it either: the value is refused, naming the plugin
    r = run(["setfattr", "-n", "user.cairn.compress", "-v", "lz4", archive.m("plain")], check=False)
    assert r.returncode != 0
    assert "no compress plugin 'lz4' is installed" in log_text(archive) + r.stderr
    # with the module back the file reads again
    archive.umount()
    shutil.copy(os.path.join(BUILD_PLUGINS, "lz4", "cairn-lz4.so"), plugins)
    archive.mount()
    assert read_file(archive.m("l", "f")) == data


def test_a_missing_plugin_dir_is_refused_at_mount(archive):
    archive.umount()
    with open(os.path.join(archive.arch, "cairn.conf"), "a") as f:
        f.write("plugin_dir = /nonexistent/cairn-plugins\n")
    r = cairn("mount", archive.arch, archive.mnt, check=False, timeout=120)
    assert r.returncode != 0
    assert "plugin directory /nonexistent/cairn-plugins does not exist" in r.stdout + r.stderr
    conf = os.path.join(archive.arch, "cairn.conf")
    with open(conf) as f:
        lines = [line for line in f if not line.startswith("plugin_dir")]
    with open(conf, "w") as f:
        f.writelines(lines)
    archive.mount()


def test_the_out_of_tree_example_plugin_builds_and_serves_a_directory(archive):
    example = os.path.join(os.path.dirname(CAIRN), "..", "examples", "plugin-xor-whiten")
    if not os.path.isdir(example):  # CAIRN_BIN outside a build tree of this checkout
        example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "plugin-xor-whiten")
    include = os.path.join(os.path.dirname(__file__), "..", "..", "include")
    plugins = archive.s("plugins")
    build = archive.s("example-build")
    run(["meson", "setup", build, example, f"-Dcairn_include={os.path.abspath(include)}",
         f"-Dplugin_dir={plugins}"], timeout=300)
    run(["ninja", "-C", build, "install"], timeout=300)
    assert os.path.exists(os.path.join(plugins, "xor-whiten.so"))
    archive.umount()
    with open(os.path.join(archive.arch, "cairn.conf"), "a") as f:
        f.write(f"plugin_dir = {plugins}\n")
    archive.mount()
    out = cairn("plugins", archive.arch).stdout
    assert "xor-whiten" in out and "NOT security" in out, out
    os.makedirs(archive.m("w"))
    run(["setfattr", "-n", "user.cairn.plugins", "-v", "xor-whiten", archive.m("w")])
    marker = b"cairn-example-marker-" * 4000
    write_file(archive.m("w", "f"), marker)
    archive.persist()
    archive.evict()
    drop_caches()
    assert read_file(archive.m("w", "f")) == marker
    for image in sorted(os.listdir(os.path.join(archive.arch, "disks"))):
        assert not image_contains(os.path.join(archive.arch, "disks", image), b"cairn-example-marker-"), image


def test_recover_stops_at_an_extent_whose_plugin_is_missing(archive):
    plugins = archive.s("plugins")
    os.makedirs(plugins)
    shutil.copy(os.path.join(BUILD_PLUGINS, "zstd", "cairn-zstd.so"), plugins)
    archive.umount()
    with open(os.path.join(archive.arch, "cairn.conf"), "a") as f:
        f.write(f"plugin_dir = {plugins}\n")
    archive.mount()
    os.makedirs(archive.m("z"))
    run(["setfattr", "-n", "user.cairn.compress", "-v", "zstd", archive.m("z")])
    data = open("/usr/include/stdio.h", "rb").read() * 50
    write_file(archive.m("z", "f"), data)
    archive.persist()
    archive.umount()
    for path in os.listdir(archive.arch):
        if path.startswith("catalog.db"):
            os.remove(os.path.join(archive.arch, path))
    os.remove(os.path.join(plugins, "cairn-zstd.so"))
    r = cairn("recover", archive.arch, check=False, timeout=300)
    assert r.returncode != 0
    assert "transform 'zstd' is not installed" in r.stderr + r.stdout
    assert "run cairn recover --force again" in r.stderr + r.stdout
    shutil.copy(os.path.join(BUILD_PLUGINS, "zstd", "cairn-zstd.so"), plugins)
    r = cairn("recover", archive.arch, "--force", check=False, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    archive.mount()
    assert read_file(archive.m("z", "f")) == data


def test_a_compressed_file_takes_the_archives_compressed_segment_size(archive):
    """cairn mkfs writes compressed_segment_size = 8M: a compressed file is cut into 8 MiB segments
    (each compressed on its own, a larger one compresses better), a file in clear into 4 MiB ones;
    an archive without the key (made before it) cuts both into segment_size."""
    os.makedirs(archive.m("z"))
    run(["setfattr", "-n", "user.cairn.compress", "-v", "zstd", archive.m("z")])
    text = (open("/usr/include/stdio.h", "rb").read() * 1000)[:17 << 20]
    write_file(archive.m("z", "f"), text)
    write_file(archive.m("plain"), text)
    archive.persist()
    source = os.getxattr(archive.m("z", "f"), "user.cairn.effective.source").decode()
    assert "segment_size=default:compress" in source, source
    assert "segment_size=8388608" in os.getxattr(archive.m("z", "f"), "user.cairn.effective").decode()
    explained = cairn("policy", "explain", archive.m("z", "f")).stdout
    assert "archive default for compressed files (compressed_segment_size)" in explained, explained
    archive.evict()
    drop_caches()
    assert read_file(archive.m("z", "f")) == text

    def segments_of(*names):
        inos = [os.stat(archive.m(*name.split("/"))).st_ino for name in names]
        archive.umount()
        with contextlib.closing(sqlite3.connect(os.path.join(archive.arch, "catalog.db"))) as db:
            rows = [db.execute("SELECT i.segment_size, COUNT(s.idx) FROM inodes i JOIN segments s ON s.ino = i.ino "
                               "WHERE i.ino = ?", (ino,)).fetchone() for ino in inos]
        archive.mount()
        return rows

    assert segments_of("z/f", "plain") == [(8 << 20, 3), (4 << 20, 5)]

    conf = os.path.join(archive.arch, "cairn.conf")
    archive.umount()
    with open(conf) as f:
        lines = f.read().splitlines(keepends=True)
    assert "compressed_segment_size = 8388608\n" in lines
    with open(conf, "w") as f:
        f.writelines(line for line in lines if not line.startswith("compressed_segment_size"))
    archive.mount()
    write_file(archive.m("z", "g"), text)
    archive.persist()
    assert "segment_size=default " in os.getxattr(archive.m("z", "g"), "user.cairn.effective.source").decode()
    assert segments_of("z/g") == [(4 << 20, 5)]
    assert read_file(archive.m("z", "f")) == text
