#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <set>

#include "catalog/tree_walk.h"
#include "test_util.h"

using namespace cairn;

namespace {

// A tree of `dirs` directories under the root, each with `files` files, and one file
// hard-linked into every directory.
struct Tree {
  test::TempDir tmp;
  std::unique_ptr<Catalog> catalog;
  std::set<uint64_t> inodes{kRootInode};

  Tree(int dirs, int files) {
    auto created = Catalog::Create(tmp / "catalog.db", 0, 0, 1);
    REQUIRE(created.ok());
    catalog = std::move(*created);
    REQUIRE(catalog->Begin().ok());
    InodeRecord shared{.mode = S_IFREG | 0644, .nlink = 0};
    uint64_t linked = *catalog->InsertInode(shared);
    inodes.insert(linked);
    for (int d = 0; d < dirs; d++) {
      uint64_t dir = *catalog->InsertInode(InodeRecord{.mode = S_IFDIR | 0755, .nlink = 2});
      REQUIRE(catalog->InsertEntry(kRootInode, "d" + std::to_string(d), dir).ok());
      inodes.insert(dir);
      REQUIRE(catalog->InsertEntry(dir, "linked", linked).ok());
      for (int i = 0; i < files; i++) {
        uint64_t file = *catalog->InsertInode(InodeRecord{.mode = S_IFREG | 0644, .nlink = 1});
        REQUIRE(catalog->InsertEntry(dir, "f" + std::to_string(i), file).ok());
        inodes.insert(file);
      }
    }
    REQUIRE(catalog->Commit().ok());
  }
};

}  // namespace

TEST_CASE("TreeWalk: visits every inode once, hard links too, in steps of the size asked") {
  Tree tree(5, 700);  // directories longer than one listing page
  size_t limit = GENERATE(1, 7, 256, 100000);
  TreeWalk walk(kRootInode);
  std::multiset<uint64_t> visited;
  size_t steps = 0;
  for (bool more = true; more; steps++) {
    size_t before = visited.size();
    auto stepped = walk.Step(*tree.catalog, limit, [&](const InodeRecord& inode) {
      visited.insert(inode.ino);
      return true;
    });
    REQUIRE(stepped.ok());
    more = *stepped;
    CHECK(visited.size() - before <= limit);
  }
  CHECK(std::set<uint64_t>(visited.begin(), visited.end()) == tree.inodes);
  CHECK(visited.size() == tree.inodes.size());
  CHECK(steps >= tree.inodes.size() / limit);
}

TEST_CASE("TreeWalk: stops when the visitor says so, and starts at any directory") {
  Tree tree(3, 10);
  auto dir = tree.catalog->Lookup(kRootInode, "d1");
  REQUIRE(dir.ok());
  TreeWalk walk(*dir);
  size_t seen = 0;
  auto stepped = walk.Step(*tree.catalog, 1000, [&](const InodeRecord&) { return ++seen < 4; });
  REQUIRE(stepped.ok());
  CHECK_FALSE(*stepped);
  CHECK(seen == 4);
  TreeWalk whole(*dir);
  seen = 0;
  REQUIRE(whole.Step(*tree.catalog, 1000, [&](const InodeRecord&) { return ++seen > 0; }).ok());
  CHECK(seen == 12);  // the directory, its 10 files and the shared one
}
