"""3. cp -a of a tree: contents, modes, owners, mtimes (ns), symlinks, hard links, xattrs."""
import os

from conftest import assert_trees_equal, make_rich_tree, run


def test_cp_a(archive):
    src = make_rich_tree(archive.s("src"), devices=True)
    dst = archive.m("copy")
    run(["cp", "-a", src, dst])
    assert_trees_equal(src, dst)
    assert os.readlink(os.path.join(dst, "sym_long")) == "t" * 200 + "/long"

    # cp -a back out of the mount gives the same tree again
    back = archive.s("back")
    run(["cp", "-a", dst, back])
    assert_trees_equal(src, back)
