"""Issue #9 review: fsync of a file asks the staging cache descriptor its data was written
through, so a write-back error of the cache filesystem reaches the caller; fsync of a file
with nothing staged creates no cache file."""
import contextlib
import errno
import os
import subprocess

import pytest

from conftest import KiB, MiB, random_bytes, run, write_file

# More than the daemon keeps open (StagingCache::kMaxOpenFiles) without pins.
CHURN_FILES = 600


def cache_file(archive, path):
    return os.path.join(archive.arch, "cache", str(os.stat(path).st_ino))


def test_fsync_of_a_clean_persisted_file_creates_nothing_in_the_cache(archive):
    path = archive.m("persisted")
    data = random_bytes(3 * MiB, 1)
    write_file(path, data)
    assert os.path.exists(cache_file(archive, path))  # where the staging cache keeps its data
    archive.evict()  # persists, then drops it from the cache
    assert not os.path.exists(cache_file(archive, path))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert os.read(fd, 100) == data[:100]
        os.fsync(fd)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    assert not os.path.exists(cache_file(archive, path)), "fsync of a clean file made a staging cache file"


@contextlib.contextmanager
def failing_cache_filesystem(archive):
    """Mounts a small ext4 on ARCHIVE/cache, on a loop device whose sparse image lives on a
    tmpfs: once `fill()` has filled the tmpfs, writing back new data blocks of the ext4 fails
    with EIO (the loop device cannot allocate the image's holes). Yields fill."""
    lower = os.path.join(archive.base, "lower")
    os.mkdir(lower)
    cache = os.path.join(archive.arch, "cache")
    image = os.path.join(lower, "cache.img")
    loop = None
    mounted = []
    try:
        run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", lower])
        mounted.append(lower)
        with open(image, "wb") as f:
            f.truncate(64 * MiB)
        # Every metadata block written now (no journal, inode tables initialized): later, only
        # new data blocks need room in the image.
        run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E", "lazy_itable_init=0", "-b", "4096", image])
        r = subprocess.run(["losetup", "--find", "--show", image], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"no loop device: {r.stderr.strip()}")
        loop = r.stdout.strip()
        run(["mount", "-t", "ext4", "-o", "errors=continue", loop, cache])
        mounted.append(cache)
        os.chmod(cache, 0o700)

        def fill():
            with open(os.path.join(lower, "filler"), "wb") as f:
                with contextlib.suppress(OSError):
                    while True:
                        f.write(b"\xff" * MiB)
                        f.flush()
            with contextlib.suppress(OSError):  # the last partial page
                with open(os.path.join(lower, "filler2"), "wb") as f:
                    while True:
                        f.write(b"\xff" * 4096)
                        f.flush()

        yield fill
    finally:
        for name in ("filler", "filler2"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(lower, name))
        if archive.is_mounted():
            archive.evict()  # nothing of the archive stays on the ext4
            archive.umount()
        if cache in mounted:
            run(["umount", cache], check=False)
        if loop:
            run(["losetup", "-d", loop], check=False)
        if lower in mounted:
            run(["umount", lower], check=False)


def test_fsync_reports_a_write_back_error_of_the_cache_after_its_descriptor_was_pushed_out(archive):
    archive.umount()
    with failing_cache_filesystem(archive) as fill:
        archive.mount()
        path = archive.m("victim")
        others = [archive.m(f"other{i}") for i in range(CHURN_FILES)]
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for other in others:  # their cache files and directory blocks exist before the tmpfs fills
                os.close(os.open(other, os.O_RDWR | os.O_CREAT, 0o644))
            run(["sync", "-f", os.path.join(archive.arch, "cache")])
            os.pwrite(fd, random_bytes(256 * KiB, 2), 0)
            # The kernel caches writes (FUSE writeback cache): a close of another descriptor of
            # the file sends them to the daemon, which writes them to its cache file.
            os.close(os.open(path, os.O_RDONLY))
            for other in others:  # pushes every unpinned descriptor out of the daemon's cache
                os.close(os.open(other, os.O_RDWR))
            fill()
            # Written back now, by nobody's fsync (syncfs fails): the error waits in the cache
            # file's inode.
            run(["sync", "-f", os.path.join(archive.arch, "cache")], check=False)
            # An inode that no descriptor holds may leave memory with its error: drop its
            # (clean) pages, then unused inodes.
            for what in ("1", "2"):
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write(what)
            with pytest.raises(OSError) as failure:
                os.fsync(fd)
            assert failure.value.errno in (errno.EIO, errno.ENOSPC)  # as the loop device reported it
        finally:
            os.close(fd)
