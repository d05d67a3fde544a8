"""Transform plugins through the mount: compress=zstd/lz4/auto on a real tree, read back from the
disks byte for byte; a plugin module removed from the plugin directory makes its files EIO with a
log line naming it; `cairn plugins` lists what is loaded."""
import errno
import os
import shutil
import subprocess

import pytest

from conftest import CAIRN, assert_trees_equal, cairn, random_bytes, read_file, run, write_file

BUILD_PLUGINS = os.path.join(os.path.dirname(CAIRN), "plugins")


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def log_text(archive):
    with open(os.path.join(archive.arch, "cairn.log"), errors="replace") as f:
        return f.read()


def test_cairn_plugins_lists_the_built_in_modules(archive):
    out = cairn("plugins", archive.arch).stdout
    assert f"plugin directory {BUILD_PLUGINS}: 2 module(s)" in out
    for name in ("zstd", "lz4"):
        assert any(line.split()[:4] == [name, "version", "1", "compress"] for line in out.splitlines()), out
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
    noise = random_bytes(8 << 20, 11)
    text = open("/usr/include/stdlib.h", "rb").read() * 300
    write_file(archive.m("auto", "noise"), noise)
    archive.persist()
    st = archive.status()
    # raw frames: one byte per extent more than the data (and its member table)
    assert st["payload_stored_bytes"] - st["payload_logical_bytes"] <= st["extents"], st
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
