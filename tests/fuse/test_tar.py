"""1. tar create/extract round trip through the mount."""
import os

from conftest import MiB, assert_trees_equal, diff_r, random_bytes, set_past_times, tar_copy, write_file

UNICODE_NAMES = [
    "na\u00efve",                 # naïve (NFC)
    "nai\u0308ve",                # naïve (NFD) -- a different name
    "\u65e5\u672c\u8a9e",         # 日本語
    "emoji \U0001F600\U0001F680",  # 😀🚀
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",  # Ελληνικά
    "\u00e9" * 127,              # 254 bytes of UTF-8
    "x" * 255,                   # NAME_MAX
]


def build_source(src):
    write_file(f"{src}/zero", b"")
    write_file(f"{src}/one", b"1")
    write_file(f"{src}/f4095", random_bytes(4095, 10))
    write_file(f"{src}/big", random_bytes(64 * MiB, 11))
    # sparse: 100 MiB with a few written blocks, one unaligned and one ending at EOF
    with open(f"{src}/sparse", "wb") as f:
        f.truncate(100 * MiB)
        for off, seed in ((0, 1), (4096 * 1000 + 17, 2), (50 * MiB, 3), (100 * MiB - 10, 4)):
            f.seek(off)
            f.write(random_bytes(10 if off == 100 * MiB - 10 else 8192, seed))
    deep = src
    for level in range(30):
        deep = os.path.join(deep, f"level{level:02d}")
    write_file(f"{deep}/bottom", b"thirty levels down\n")
    for name in UNICODE_NAMES:
        write_file(os.path.join(src, "unicode", name), name.encode() + b"\n")
    os.makedirs(os.path.join(src, "unicode", "\u65e5\u672c\u8a9e dir"))
    for i in range(10_000):
        content = b"" if i % 97 == 0 else (f"file {i}\n" * (1 + i % 40)).encode()
        write_file(os.path.join(src, "many", f"d{i % 100:02d}", f"f{i:05d}"), content)
    set_past_times(src)


def test_tar_round_trip(archive):
    src = archive.s("src")
    build_source(src)
    dst = archive.m("t")
    tar_copy(src, dst, "--sparse")
    diff_r(src, dst)
    assert_trees_equal(src, dst)

    back = archive.s("back")
    tar_copy(dst, back)
    diff_r(src, back)
    assert_trees_equal(src, back)

    archive.umount()
    archive.fsck()
    archive.mount()
    assert_trees_equal(src, dst)
