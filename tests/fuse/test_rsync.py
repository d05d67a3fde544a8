"""2. rsync -aHAX into the mount and back: a second (dry) run must have nothing to do."""
import os

from conftest import assert_trees_equal, make_rich_tree, run

RSYNC = ["rsync", "-aHAX", "--numeric-ids"]


def itemize(src, dst):
    r = run(RSYNC + ["-n", "--itemize-changes", f"{src}/", f"{dst}/"])
    return r.stdout.strip()


def test_rsync_aHAX(archive):
    src = make_rich_tree(archive.s("src"))
    dst = archive.m("dst")
    run(RSYNC + [f"{src}/", f"{dst}/"])

    assert itemize(src, dst) == "", "rsync src -> mount still finds differences"
    assert itemize(dst, src) == "", "rsync mount -> src finds differences"
    assert_trees_equal(src, dst)

    # and back out of the mount into a fresh directory
    back = archive.s("back")
    run(RSYNC + [f"{dst}/", f"{back}/"])
    assert_trees_equal(src, back)
    assert itemize(back, dst) == ""

    # the ACLs made it as ACLs, not just as opaque xattrs
    acl = run(["getfacl", "-cn", os.path.join(dst, "acl_file")]).stdout
    assert "user:65534:rw-" in acl and "group:100:r--" in acl, acl
    dacl = run(["getfacl", "-cn", os.path.join(dst, "acl_dir")]).stdout
    assert "default:user:1234:r-x" in dacl, dacl
