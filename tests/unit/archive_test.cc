// Drives Filesystem directly (no FUSE) on file-backed disks in a temporary directory:
// packing, copy-on-write, freeing and reuse, crash recovery, and fsck's detectors.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "archive/archive.h"
#include "archive_fixture.h"
#include "fault_disk.h"
#include "fs/filesystem.h"
#include "maintenance/fsck.h"
#include "sql_faults.h"
#include "test_util.h"

using namespace cairn;

namespace {

using test::kSegment;
using Fixture = test::ArchiveFixture;

}  // namespace

TEST_CASE("Filesystem: small files are packed into shared extents") {
  Fixture f;
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> files;
  for (int i = 0; i < 50; i++) {
    auto data = test::RandomBytes(100 + i * 37, i);
    files.emplace_back(f.WriteFile("f" + std::to_string(i), data), data);
  }
  REQUIRE(f.fs->PersistAll().ok());
  auto extents = f.Extents();
  REQUIRE(extents.size() == 1);  // ~50 KiB of small files fit one 64 KiB pack
  CHECK(extents[0].kind == static_cast<int>(ExtentKind::kPack));
  CHECK(extents[0].refs == 50);
  REQUIRE(f.fs->EvictAll().ok());
  for (auto& [ino, data] : files) {
    CHECK_FALSE(f.Segments(ino)[0].cached);
    CHECK(f.ReadFile(ino, data.size()) == data);
  }
}

TEST_CASE("Filesystem: modifying a persisted file rewrites only the touched segment") {
  Fixture f;
  auto data = test::RandomBytes(3 * kSegment, 7);
  uint64_t ino = f.WriteFile("big", data);
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());
  auto before = f.Segments(ino);
  REQUIRE(before.size() == 3);

  auto fh = f.fs->Open(ino, O_RDWR, Caller{});
  REQUIRE(fh.ok());
  std::vector<uint8_t> patch(100, 0xAB);
  REQUIRE(f.fs->Write(*fh, kSegment + 10, patch).ok());
  f.fs->Release(*fh);
  std::copy(patch.begin(), patch.end(), data.begin() + kSegment + 10);
  REQUIRE(f.fs->PersistAll().ok());

  auto after = f.Segments(ino);
  REQUIRE(after.size() == 3);
  CHECK(after[0].extent_id == before[0].extent_id);
  CHECK(after[1].extent_id != before[1].extent_id);
  CHECK(after[2].extent_id == before[2].extent_id);
  auto extents = f.Extents();
  CHECK(extents.size() == 3);  // the replaced extent is gone
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(ino, data.size()) == data);
  f.Close();
  f.Open();
  CHECK(f.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Filesystem: deleting frees extents and the space is reused") {
  Fixture f;
  uint64_t free_at_start = f.FreeBytes();
  f.WriteFile("a", test::RandomBytes(2 * kSegment, 1));
  REQUIRE(f.fs->PersistAll().ok());
  auto first = f.Extents();
  REQUIRE(first.size() == 2);
  CHECK(f.FreeBytes() < free_at_start);
  REQUIRE(f.fs->Unlink(kRootInode, "a", Caller{}).ok());
  f.fs->Forget(first[0].id, 0);  // no-op for an unknown inode
  REQUIRE(f.fs->PersistAll().ok());
  f.Close();  // frees become reusable once durable
  f.Open();
  CHECK(f.Extents().empty());
  CHECK(f.FreeBytes() == free_at_start);
  f.WriteFile("b", test::RandomBytes(kSegment, 2));
  REQUIRE(f.fs->PersistAll().ok());
  auto reused = f.Extents();
  REQUIRE(reused.size() == 1);
  bool same_place = false;
  for (const auto& e : first) {
    same_place |= e.chunks[0].disk == reused[0].chunks[0].disk && e.chunks[0].offset == reused[0].chunks[0].offset;
  }
  CHECK(same_place);
}

TEST_CASE("Filesystem: the unmount frees a file unlinked while looked up and persists one still open") {
  Fixture f;
  auto data = test::RandomBytes(2 * kSegment + 7, 4);
  InodeRecord doomed_attr, kept_attr;
  auto doomed = f.fs->Create(kRootInode, "doomed", 0644, O_RDWR, Caller{}, &doomed_attr);
  auto kept = f.fs->Create(kRootInode, "kept", 0644, O_RDWR, Caller{}, &kept_attr);
  REQUIRE((doomed.ok() && kept.ok()));
  REQUIRE(f.fs->Write(*doomed, 0, data).ok());
  REQUIRE(f.fs->Write(*kept, 0, data).ok());
  REQUIRE(f.fs->Unlink(kRootInode, "doomed", Caller{}).ok());
  f.fs->Release(*doomed);
  // The session ends with both still looked up, and kept open: the kernel sends no forget,
  // and no release after a lazy unmount.
  REQUIRE(f.fs->Stop().ok());
  delete *kept;
  f.fs.reset();
  {
    std::lock_guard lock(f.archive->catalog_mutex());
    CHECK(f.archive->catalog().GetInode(doomed_attr.ino).status().IsNotFound());
  }
  CHECK(f.Extents().size() == 3);  // kept's three segments, nothing of doomed
  CHECK(f.Segments(kept_attr.ino).size() == 3);
  f.archive.reset();
  f.Open();
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(kept_attr.ino, data.size()) == data);
}

TEST_CASE("Filesystem: fsync'd data survives a crash and is persisted on recovery") {
  Fixture f;
  auto data = test::RandomBytes(kSegment + 1234, 3);
  InodeRecord attr;
  auto fh = f.fs->Create(kRootInode, "synced", 0644, O_RDWR, Caller{}, &attr);
  REQUIRE(fh.ok());
  REQUIRE(f.fs->Write(*fh, 0, data).ok());
  REQUIRE(f.fs->Fsync(*fh).ok());
  f.Crash();  // the handle dies with the process; free it as exit would
  delete *fh;
  f.Open();
  REQUIRE(f.fs->PersistAll().ok());
  CHECK(f.Segments(attr.ino).size() == 2);
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(attr.ino, data.size()) == data);
  f.Close();
  auto archive = Archive::Open(f.dir, {});
  REQUIRE(archive.ok());
  FsckReport report = CheckArchive(**archive);
  INFO(report.problems.size());
  CHECK(report.clean());
}

TEST_CASE("Filesystem: truncate down and up keeps the right bytes") {
  Fixture f;
  auto data = test::RandomBytes(2 * kSegment + 500, 4);
  uint64_t ino = f.WriteFile("t", data);
  REQUIRE(f.fs->EvictAll().ok());
  SetAttrRequest shrink;
  shrink.size = kSegment + 77;
  REQUIRE(f.fs->SetAttr(ino, shrink, Caller{}).ok());
  SetAttrRequest grow;
  grow.size = 3 * kSegment;
  REQUIRE(f.fs->SetAttr(ino, grow, Caller{}).ok());
  data.resize(kSegment + 77);
  data.resize(3 * kSegment, 0);
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(ino, data.size()) == data);
  auto segments = f.Segments(ino);
  REQUIRE(segments.size() == 3);
  CHECK(segments[2].extent_id == kHoleExtent);  // an all-zero segment takes no space
}

TEST_CASE("Filesystem: a truncate the staging cache's file system refuses as too large leaves the size") {
  Fixture f;
  auto data = test::RandomBytes(5000, 9);
  uint64_t ino = f.WriteFile("t", data);  // its cache file holds it
  // A file system that ends files at 1 GiB, as ext4 ends them 4 KiB before 16 TiB (below
  // kMaxFileSize): RLIMIT_FSIZE makes ftruncate past it fail with EFBIG (SIGXFSZ ignored).
  struct rlimit before;
  REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = before;
  small.rlim_cur = 1ull << 30;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  SetAttrRequest grow;
  grow.size = 2ull << 30;
  Status st = f.fs->SetAttr(ino, grow, Caller{}).status();
  REQUIRE(setrlimit(RLIMIT_FSIZE, &before) == 0);
  std::signal(SIGXFSZ, old_handler);
  CHECK(st.sys_errno() == EFBIG);
  f.Close();
  f.Open();
  CHECK(f.fs->GetAttr(ino)->size == data.size());  // the catalog never took the size
  CHECK(f.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Filesystem: a write past the end of a persisted file records the segments it skips as holes") {
  Fixture f;
  auto data = test::RandomBytes(kSegment + 500, 8);
  uint64_t ino = f.WriteFile("sparse", data);
  REQUIRE(f.fs->PersistAll().ok());
  auto fh = f.fs->Open(ino, O_RDWR, Caller{});
  REQUIRE(fh.ok());
  auto tail = test::RandomBytes(100, 9);
  REQUIRE(f.fs->Write(*fh, 4 * kSegment, tail).ok());
  f.fs->Release(*fh);
  data.resize(4 * kSegment, 0);
  data.insert(data.end(), tail.begin(), tail.end());
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());  // a clean file with a segment row missing would not open
  CHECK(f.ReadFile(ino, data.size()) == data);
  auto segments = f.Segments(ino);
  REQUIRE(segments.size() == 5);
  CHECK(segments[2].extent_id == kHoleExtent);
  CHECK(segments[3].extent_id == kHoleExtent);
}

TEST_CASE("fsck: reports directories and files no path from the root reaches") {
  Fixture f;
  auto d = f.fs->MakeNode(kRootInode, "D", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(d.ok());
  auto sub = f.fs->MakeNode(d->ino, "S", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(sub.ok());
  f.WriteFile("x", test::RandomBytes(100, 6), sub->ino);
  f.Close();
  auto archive = std::move(*Archive::Open(f.dir, {}));
  CHECK(CheckArchive(*archive).clean());
  // D moved into S, its own child: a cycle cut off from the root, link counts consistent.
  auto exec = [&](const std::string& sql) {
    REQUIRE(sqlite3_exec(archive->catalog().handle(), sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  };
  exec(fmt::format("UPDATE dentries SET parent = {} WHERE ino = {}", sub->ino, d->ino));
  exec(fmt::format("UPDATE inodes SET nlink = 2 WHERE ino = {}", kRootInode));
  exec(fmt::format("UPDATE inodes SET nlink = 3 WHERE ino = {}", sub->ino));
  FsckReport report = CheckArchive(*archive);
  std::string problems = fmt::format("{}", fmt::join(report.problems, "\n"));
  INFO(problems);
  CHECK(problems.find(fmt::format("directory inode {} is not reachable from the root", d->ino)) != std::string::npos);
  CHECK(problems.find(fmt::format("directory inode {} is not reachable from the root", sub->ino)) != std::string::npos);
  CHECK(problems.find("1 file(s) are named only in directories not reachable from the root") != std::string::npos);
}

TEST_CASE("fsck: reports damaged, leaked and double-owned extents precisely") {
  Fixture f;
  f.WriteFile("x", test::RandomBytes(kSegment, 5));
  REQUIRE(f.fs->PersistAll().ok());
  f.Close();
  auto archive = std::move(*Archive::Open(f.dir, {}));
  ExtentRecord e = archive->catalog().AllExtents()->at(0);
  {
    FsckReport clean = CheckArchive(*archive);
    CHECK(clean.clean());
  }
  uint8_t byte = 0x5A;
  REQUIRE(archive->disk(e.chunks[0].disk).WriteAt(e.chunks[0].offset + kExtentHeaderSize + 100, {&byte, 1}).ok());
  ExtentRecord leaked = e;
  leaked.id = 999;
  leaked.refs = 0;
  leaked.chunks[0].offset = e.chunks[0].offset + 4096;  // overlaps e
  REQUIRE(archive->catalog().InsertExtent(leaked).ok());
  FsckReport report = CheckArchive(*archive);
  auto has = [&](const std::string& text) {
    for (const auto& p : report.problems) {
      if (p.find(text) != std::string::npos) return true;
    }
    return false;
  };
  CHECK(has("payload checksum mismatch"));
  CHECK(has("extent 999 is leaked"));
  CHECK(has("leaked"));
  CHECK(has("overlap"));
}

TEST_CASE("Archive: refuses a second opener, a missing disk and a foreign disk") {
  Fixture f;
  auto second = Archive::Open(f.dir, {});
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().message().find("in use") != std::string::npos);
  f.Close();
  std::rename((f.dir + "/disks/disk-001.img").c_str(), (f.dir + "/disk-001.img.away").c_str());
  auto missing = Archive::Open(f.dir, {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("disk 1") != std::string::npos);
  CHECK(missing.status().message().find("No such file") != std::string::npos);
  std::rename((f.dir + "/disk-001.img.away").c_str(), (f.dir + "/disks/disk-001.img").c_str());
  std::rename((f.dir + "/disks/disk-001.img").c_str(), (f.dir + "/tmp.img").c_str());
  std::rename((f.dir + "/disks/disk-002.img").c_str(), (f.dir + "/disks/disk-001.img").c_str());
  std::rename((f.dir + "/tmp.img").c_str(), (f.dir + "/disks/disk-002.img").c_str());
  auto swapped = Archive::Open(f.dir, {});
  REQUIRE_FALSE(swapped.ok());
  CHECK(swapped.status().message().find("is disk 2 of this archive but the config lists it as disk 1") !=
        std::string::npos);
}

// SQLite-style fault simulation: fail the N-th disk operation of a persist (and every one
// after it), for N = 1, 2, ... until a run completes without a fault. After each failure
// the daemon "dies"; a clean reopen must persist everything, read back every byte and
// leave fsck clean (no leaked or double-owned extent).
TEST_CASE("Persister: a disk failure at any point loses nothing") {
  auto big = test::RandomBytes(3 * kSegment + 999, 11);
  auto small = test::RandomBytes(3000, 12);
  for (int fail_at = 1;; fail_at++) {
    INFO("failing disk operation " << fail_at);
    Fixture f;
    uint64_t big_ino = f.WriteFile("big", big);
    uint64_t small_ino = f.WriteFile("small", small);
    REQUIRE(f.fs->PersistAll().ok());  // a first, healthy generation on disk
    auto patch = test::RandomBytes(kSegment, static_cast<uint32_t>(fail_at));
    f.Crash();

    test::FaultPlan plan;
    plan.fail_at = fail_at;
    f.Open(&plan);
    auto fh = f.fs->Open(big_ino, O_RDWR, Caller{});
    REQUIRE(fh.ok());
    REQUIRE(f.fs->Write(*fh, kSegment / 2, patch).ok());  // dirties segments 0 and 1
    REQUIRE(f.fs->Fsync(*fh).ok());
    f.fs->Release(*fh);
    Status persisted = f.fs->PersistAll();
    bool injected = plan.injected > 0;
    CHECK(persisted.ok() != injected);
    f.Crash();

    f.Open();
    auto expected = big;
    std::copy(patch.begin(), patch.end(), expected.begin() + kSegment / 2);
    REQUIRE(f.fs->EvictAll().ok());
    CHECK(f.ReadFile(big_ino, expected.size()) == expected);
    CHECK(f.ReadFile(small_ino, small.size()) == small);
    f.Close();
    auto archive = Archive::Open(f.dir, {});
    REQUIRE(archive.ok());
    FsckReport report = CheckArchive(**archive);
    for (const auto& p : report.problems) UNSCOPED_INFO(p);
    CHECK(report.clean());
    if (!injected) break;
    REQUIRE(fail_at < 100);
  }
}

TEST_CASE("Persister: the files a failed 'persist' did not reach are persisted by the background after all") {
  test::FaultPlan plan;
  Fixture f({}, [&plan](std::unique_ptr<Disk> disk, size_t) -> std::unique_ptr<Disk> {
    return std::make_unique<test::FaultDisk>(std::move(disk), plan);
  });
  f.WriteFile("first", test::RandomBytes(20 * kSegment, 41));  // more than one batch
  uint64_t second = f.WriteFile("second", test::RandomBytes(kSegment, 42));
  plan.transient = true;
  plan.fail_at = plan.operations + 1;  // the first batch's first disk write
  REQUIRE_FALSE(f.fs->PersistAll().ok());
  REQUIRE(plan.injected == 1);

  REQUIRE(f.fs->StartBackground().ok());
  auto dirty = [&] {
    std::lock_guard lock(f.archive->catalog_mutex());
    auto inode = f.archive->catalog().GetInode(second);
    REQUIRE(inode.ok());
    return inode->dirty;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // the retry comes after 5 s
  while (dirty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK_FALSE(dirty());
}

TEST_CASE("Filesystem: a full archive answers ENOSPC and keeps what it accepted") {
  Fixture f;  // three 16 MiB disks
  InodeRecord attr;
  auto fh = f.fs->Create(kRootInode, "filler", 0644, O_RDWR, Caller{}, &attr);
  REQUIRE(fh.ok());
  auto chunk = test::RandomBytes(1 << 20, 9);
  uint64_t written = 0;
  Status refused;
  for (int i = 0; i < 64; i++) {
    auto n = f.fs->Write(*fh, written, chunk);
    if (!n.ok()) {
      refused = n.status();
      break;
    }
    written += *n;
  }
  f.fs->Release(*fh);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.sys_errno() == ENOSPC);
  CHECK(written >= 40u << 20);
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());
  auto back = f.ReadFile(attr.ino, written);
  REQUIRE(back.size() == written);
  CHECK(std::equal(chunk.begin(), chunk.end(), back.end() - static_cast<long>(chunk.size())));
}

TEST_CASE("Archive: space freed by a rolled-back operation stays in use") {
  Fixture f;
  f.WriteFile("x", test::RandomBytes(kSegment, 21));
  REQUIRE(f.fs->PersistAll().ok());
  ExtentRecord extent = f.Extents().at(0);
  std::unique_lock lock(f.archive->catalog_mutex());
  Catalog& catalog = f.archive->catalog();
  REQUIRE(catalog.Begin().ok());
  REQUIRE(f.archive->UnrefExtent(extent.id).ok());
  catalog.Rollback();
  Archive::PendingSync pending;
  REQUIRE(f.archive->Commit(Archive::SyncWhen::kAlways, &pending).ok());
  CHECK(pending.freed.empty());
  CHECK(catalog.GetExtent(extent.id).ok());
  REQUIRE(catalog.Begin().ok());
  REQUIRE(f.archive->UnrefExtent(extent.id).ok());
  REQUIRE(catalog.Commit().ok());
  REQUIRE(f.archive->Commit(Archive::SyncWhen::kAlways, &pending).ok());
  REQUIRE(pending.freed.size() == 1);
  CHECK(pending.freed[0].id == extent.id);
  lock.unlock();
  uint64_t free_before = f.FreeBytes();
  REQUIRE(f.archive->MakeDurable(std::move(pending)).ok());
  CHECK(f.FreeBytes() > free_before);
}

TEST_CASE("Persister: a failing inode query fails the round and keeps the file dirty") {
  Fixture f;
  test::SqlFaults faults;
  faults.Watch(f.archive->catalog().handle());
  auto data = test::RandomBytes(3 * kSegment, 31);
  uint64_t ino = f.WriteFile("dirty", data);
  {
    std::lock_guard lock(f.archive->catalog_mutex());
    REQUIRE(f.archive->catalog().Begin().ok());
    f.archive->catalog().Rollback();  // empties the inode cache: the next GetInode queries
  }
  faults.Arm("FROM inodes WHERE ino = ?");
  Status failed = f.fs->PersistAll();
  faults.Disarm();
  CHECK(faults.injected() > 0);
  CHECK_FALSE(failed.ok());
  CHECK(f.Segments(ino).empty());
  REQUIRE(f.fs->PersistAll().ok());  // the file is still dirty: persisted now
  CHECK(f.Segments(ino).size() == 3);
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Filesystem: rmdir and rename refuse, and remove nothing, when the catalog cannot list a directory") {
  Fixture f;
  test::SqlFaults faults;
  faults.Watch(f.archive->catalog().handle());
  auto dir = f.fs->MakeNode(kRootInode, "full", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(dir.ok());
  auto empty = f.fs->MakeNode(kRootInode, "empty", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(empty.ok());
  InodeRecord attr;
  auto fh = f.fs->Create(dir->ino, "precious", 0644, O_RDWR, Caller{}, &attr);
  REQUIRE(fh.ok());
  f.fs->Release(*fh);
  faults.Arm("SELECT 1 FROM dentries WHERE parent = ?");
  Status rmdir = f.fs->Rmdir(kRootInode, "full");
  Status rename = f.fs->Rename(kRootInode, "empty", kRootInode, "full", 0, Caller{});  // would replace "full"
  faults.Disarm();
  CHECK(faults.injected() >= 2);
  CHECK_FALSE(rmdir.ok());
  CHECK(rmdir.sys_errno() != ENOTEMPTY);  // not a verdict on the directory: the query failed
  CHECK_FALSE(rename.ok());
  CHECK(f.fs->Lookup(kRootInode, "full").ok());
  CHECK(f.fs->Lookup(kRootInode, "empty").ok());
  CHECK(f.fs->Lookup(dir->ino, "precious").ok());
  CHECK(f.fs->Rmdir(kRootInode, "full").sys_errno() == ENOTEMPTY);  // and the catalog works again
}

TEST_CASE("Archive: open refuses, instead of marking live space free, when the extent scan fails") {
  Fixture f;
  auto data = test::RandomBytes(2 * kSegment, 41);
  uint64_t ino = f.WriteFile("kept", data);
  REQUIRE(f.fs->PersistAll().ok());
  f.Close();
  {
    test::SqlFaults faults;
    faults.Arm("FROM extents ORDER BY id");
    auto refused = Archive::Open(f.dir, {});
    CHECK(faults.injected() > 0);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find("extents") != std::string::npos);
  }
  f.Open();
  f.WriteFile("new", test::RandomBytes(2 * kSegment, 42));  // would take the live space if it were free
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Filesystem: mount keeps the staging cache's copy of a dirty file when the catalog cannot look it up") {
  Fixture f;
  auto data = test::RandomBytes(kSegment + 100, 43);
  uint64_t ino = f.WriteFile("unpersisted", data);
  f.Crash();  // the cache holds its only copy
  {
    test::SqlFaults faults;
    auto archive = Archive::Open(f.dir, {});
    REQUIRE(archive.ok());
    Filesystem fs(**archive);
    faults.Arm("FROM inodes WHERE ino = ?");
    Status recovered = fs.Recover();
    faults.Disarm();
    CHECK(faults.injected() > 0);
    CHECK_FALSE(recovered.ok());
  }
  f.Open();
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());
  CHECK(f.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Filesystem: create and chmod refuse when the catalog cannot read the ACLs that apply") {
  Fixture f;
  test::SqlFaults faults;
  faults.Watch(f.archive->catalog().handle());
  auto dir = f.fs->MakeNode(kRootInode, "d", S_IFDIR | 0755, 0, Caller{});
  REQUIRE(dir.ok());
  faults.Arm("SELECT value FROM xattrs WHERE ino = ? AND name = ?");
  auto made = f.fs->MakeNode(dir->ino, "f", S_IFREG | 0644, 0, Caller{});  // its default ACL is unknown
  SetAttrRequest chmod;
  chmod.mode = 0600;
  auto changed = f.fs->SetAttr(dir->ino, chmod, Caller{});  // its access ACL is unknown
  faults.Disarm();
  CHECK(faults.injected() >= 2);
  CHECK_FALSE(made.ok());
  CHECK_FALSE(changed.ok());
  CHECK(f.fs->Lookup(dir->ino, "f").status().sys_errno() == ENOENT);
  CHECK((f.fs->GetAttr(dir->ino)->mode & 07777) == 0755);
}

TEST_CASE("Filesystem: the cache descriptor a file is written through stays open until its last writer closes") {
  Fixture f;
  InodeRecord attr;
  auto fh = f.fs->Create(kRootInode, "written", 0644, O_RDWR, Caller{}, &attr);
  REQUIRE(fh.ok());
  auto data = test::RandomBytes(5000, 31);
  REQUIRE(*f.fs->Write(*fh, 0, data) == data.size());
  std::weak_ptr<const OpenFile> wrote = *f.archive->cache().Open(attr.ino);
  // Other files' descriptors push every unpinned one out of the cache.
  auto churn = [&](const std::string& prefix) {
    for (size_t i = 0; i < StagingCache::kMaxOpenFiles + 10; i++) {
      InodeRecord other;
      auto h = f.fs->Create(kRootInode, prefix + std::to_string(i), 0644, O_RDWR, Caller{}, &other);
      REQUIRE(h.ok());
      f.fs->Release(*h);
    }
  };
  churn("a");
  CHECK_FALSE(wrote.expired());
  CHECK(*f.archive->cache().Open(attr.ino) == wrote.lock());
  REQUIRE(f.fs->Fsync(*fh).ok());
  f.fs->Release(*fh);
  churn("b");
  CHECK(wrote.expired());  // unpinned with its last writer
  CHECK(f.ReadFile(attr.ino, data.size()) == data);
}

TEST_CASE("Filesystem: reading and fsyncing a file with nothing staged creates no cache file") {
  Fixture f;
  auto data = test::RandomBytes(3 * kSegment, 32);
  uint64_t ino = f.WriteFile("persisted", data);
  std::string cache_file = fmt::format("{}/cache/{}", f.dir, ino);
  REQUIRE(std::filesystem::exists(cache_file));  // where the staging cache keeps the file's data
  REQUIRE(f.fs->PersistAll().ok());
  REQUIRE(f.fs->EvictAll().ok());
  REQUIRE_FALSE(std::filesystem::exists(cache_file));
  auto fh = f.fs->Open(ino, O_RDONLY, Caller{});
  REQUIRE(fh.ok());
  auto back = test::ReadBytes(*f.fs, *fh, 0, data.size());
  REQUIRE(back.ok());
  CHECK(*back == data);
  REQUIRE(f.fs->Fsync(*fh).ok());
  f.fs->Release(*fh);
  CHECK_FALSE(std::filesystem::exists(cache_file));
}

TEST_CASE("Filesystem: a new inode's entry has the generation its lookups give later") {
  test::ArchiveFixture a;
  for (uint32_t mode : {S_IFREG | 0644u, S_IFDIR | 0755u}) {
    std::string name = S_ISDIR(mode) ? "d" : "f";
    auto made = a.fs->MakeNode(kRootInode, name, mode, 0, Caller{});
    REQUIRE(made.ok());
    auto looked_up = a.fs->Lookup(kRootInode, name);
    REQUIRE(looked_up.ok());
    CHECK(made->generation > 0);
    CHECK(made->generation == looked_up->generation);
  }
}

TEST_CASE("Filesystem: '.' of a file looks up the file (the kernel's way back from an NFS handle)") {
  test::ArchiveFixture a;
  uint64_t ino = a.WriteFile("f", test::RandomBytes(100, 1));
  auto found = a.fs->Lookup(ino, ".");
  REQUIRE(found.ok());
  CHECK(found->ino == ino);
  CHECK(a.fs->Lookup(ino, "x").status().sys_errno() == ENOTDIR);
}

TEST_CASE("Archive: a rules reload the catalog cannot record leaves the old rules in force") {
  test::ArchiveFixture f;
  test::SqlFaults faults;
  faults.Watch(f.archive->catalog().handle());
  std::ofstream(f.dir + "/rules") << "policy old selectable\n    set segment_size=128K\ndefault\n";
  REQUIRE(f.fs->ReloadRules().ok());
  std::ofstream(f.dir + "/rules") << "policy new selectable\n    set segment_size=256K\ndefault\n";
  faults.Arm("FROM meta WHERE key");  // the digest of the rules in force cannot be read
  CHECK_FALSE(f.fs->ReloadRules().ok());
  faults.Disarm();
  auto rules = f.archive->policy_context().rules;
  CHECK(rules->FindPolicy("old") != nullptr);
  CHECK(rules->FindPolicy("new") == nullptr);
  REQUIRE(f.fs->ReloadRules().ok());  // once it can, the new ones apply
  CHECK(f.archive->policy_context().rules->FindPolicy("new") != nullptr);
}
