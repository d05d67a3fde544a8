// The persister and the staging cache when something goes wrong around them: a power loss
// that could take a cache file's name, a first persist that fails before a policy change, a
// file Recover leaves unpersisted because its rows are damaged, a cache directory that cannot
// be listed. None may end with data lost or a file that reads as EIO for good.
#include <catch2/catch.hpp>

#include <linux/magic.h>
#include <sqlite3.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <string>

#include <fmt/format.h>

#include "archive/archive.h"
#include "archive_fixture.h"
#include "fs/filesystem.h"
#include "fault_disk.h"
#include "test_util.h"

using namespace cairn;

namespace {

using test::kSegment;

// The pages of the staging cache file of `ino` dirty or under write-back in the page cache
// (cachestat(2)); nothing when the kernel cannot tell.
std::optional<uint64_t> DirtyPages(test::ArchiveFixture& a, uint64_t ino) {
#ifndef __NR_cachestat
  constexpr long __NR_cachestat = 451;  // the same on every architecture but alpha
#endif
  struct {
    uint64_t offset, length;  // 0, 0: the whole file
  } range{0, 0};
  struct {
    uint64_t cache, dirty, writeback, evicted, recently_evicted;
  } stat{};
  auto file = a.archive->cache().OpenExisting(ino);
  REQUIRE(file.ok());
  long rc = ::syscall(__NR_cachestat, (*file)->fd(), &range, &stat, 0);
  if (rc != 0 && errno == ENOSYS) return std::nullopt;
  REQUIRE(rc == 0);
  return stat.dirty + stat.writeback;
}

std::span<const uint8_t> Bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

// A file of two segments persisted, its first 100 bytes rewritten and fsync'd (in the staging
// cache only), then the daemon killed. Its inode and the rewritten bytes.
std::pair<uint64_t, std::vector<uint8_t>> RewrittenThenCrashed(test::ArchiveFixture& a, uint32_t seed) {
  uint64_t ino = a.WriteFile("f", test::RandomBytes(2 * kSegment, seed));
  REQUIRE(a.fs->PersistAll().ok());
  auto fh = a.fs->Open(ino, O_RDWR, Caller{});
  REQUIRE(fh.ok());
  auto rewrite = test::RandomBytes(100, seed + 1);
  REQUIRE(a.fs->Write(*fh, 0, rewrite).ok());
  REQUIRE(a.fs->Fsync(*fh).ok());
  a.fs->Release(*fh);
  a.Crash();
  return {ino, rewrite};
}

}  // namespace

TEST_CASE("Persist: the staging cache file names are durable before the rows say a segment is in the cache") {
  test::ArchiveFixture a;
  // Not fsync'd: only the persist makes its segment rows say "cached" (with the extents).
  const auto data = test::RandomBytes(2 * kSegment, 80);
  uint64_t ino = a.WriteFile("f", data);
  REQUIRE(a.archive->cache().NamesUnsynced());
  REQUIRE(a.fs->PersistAll().ok());
  for (const SegmentRecord& segment : a.Segments(ino)) CHECK(segment.cached);
  // Else a power loss could take the name: the rows, saying the cache holds the segments,
  // would find nothing there, and a truncate committed since would leave the file unreadable.
  CHECK_FALSE(a.archive->cache().NamesUnsynced());
}

TEST_CASE("Persist: the staging cache file's bytes are durable before the rows say a segment is in the cache") {
  test::ArchiveFixture a;
  struct statfs fs;
  REQUIRE(::statfs(a.dir.c_str(), &fs) == 0);
  if (fs.f_type == TMPFS_MAGIC) {
    WARN("skipped: the test archive is on tmpfs, whose pages are never written back");
    return;
  }
  const auto data = test::RandomBytes(2 * kSegment, 81);
  uint64_t ino = a.WriteFile("f", data);  // not fsync'd
  auto dirty = DirtyPages(a, ino);
  if (!dirty) {
    WARN("skipped: this kernel has no cachestat(2) (Linux 6.5)");
    return;
  }
  REQUIRE(*dirty > 0);  // else nothing here tells a synced cache file from another
  REQUIRE(a.fs->PersistAll().ok());
  for (const SegmentRecord& segment : a.Segments(ino)) CHECK(segment.cached);
  // Else a power loss could take them: reads, trusting the cache's copy, would find zeros
  // where the disks hold the data, and a recovery would persist those zeros over it.
  CHECK(DirtyPages(a, ino) == 0u);
  CHECK(a.ReadFile(ino, data.size()) == data);
}

TEST_CASE("Persist: a first persist that fails is redone whole after a change of the segment size") {
  constexpr uint64_t kLarge = 4 * kSegment;  // the archive's segment size
  test::ArchiveFixture a([](MkfsOptions& mkfs) { mkfs.options.segment_size = kLarge; });
  test::FaultPlan faults;
  a.Close();
  a.Open(&faults);
  const auto data = test::RandomBytes(4 * kLarge, 81);
  uint64_t ino = a.WriteFile("f", data);
  faults.fail_at = faults.operations + 1;  // every disk write from now on fails
  CHECK_FALSE(a.fs->PersistAll().ok());
  faults.fail_at = 0;
  // Before the retry, the file's policy asks for smaller segments: the four dirty segments
  // counted in the first policy's size are a quarter of the file in the new one.
  Status set = a.fs->SetXattr(ino, "user.cairn.segment_size", Bytes(std::to_string(kSegment)), 0, Caller{});
  INFO(set.ToString());
  REQUIRE(set.ok());
  REQUIRE(a.fs->PersistAll().ok());
  CHECK(a.Segments(ino).size() == 16);
  REQUIRE(a.fs->EvictAll().ok());
  CHECK(a.ReadFile(ino, data.size()) == data);  // from the disks; before, open said EIO
}

TEST_CASE("Persist: the staging cache keeps the copy of a dirty file Recover leaves unpersisted") {
  test::ArchiveFixture a;
  const auto [ino, rewrite] = RewrittenThenCrashed(a, 82);
  {  // a damaged row: Recover leaves the file unpersisted for cairn fsck to look at
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((a.dir + "/catalog.db").c_str(), &db) == SQLITE_OK);
    auto sql = fmt::format("UPDATE segments SET length = {} WHERE ino = {} AND idx = 1", 2 * kSegment, ino);
    CHECK(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  a.Open();
  const std::string cache_file = a.dir + "/cache/" + std::to_string(ino);
  REQUIRE(std::filesystem::exists(cache_file));
  REQUIRE(a.fs->EvictAll().ok());
  CHECK(std::filesystem::exists(cache_file));  // before, evicted: the fsync'd bytes were gone
  std::vector<uint8_t> head(rewrite.size());
  auto file = a.archive->cache().OpenExisting(ino);
  REQUIRE(file.ok());
  REQUIRE(StagingCache::ReadAt((*file)->fd(), 0, head).ok());
  CHECK(head == rewrite);
}

TEST_CASE("Persist: a staging cache that cannot be listed stops the mount instead of losing what it holds") {
  test::ArchiveFixture a;
  const auto [ino, rewrite] = RewrittenThenCrashed(a, 84);
  // The cache directory replaced by a link to it, which the cache does not follow.
  const std::string cache = a.dir + "/cache";
  std::filesystem::rename(cache, cache + ".real");
  std::filesystem::create_directory_symlink("cache.real", cache);
  {
    auto archive = Archive::Open(a.dir, {});
    REQUIRE(archive.ok());
    Filesystem fs(**archive);
    Status recovered = fs.Recover();
    INFO(recovered.ToString());
    CHECK_FALSE(recovered.ok());  // before, every file counted as without a cache copy
    CHECK(recovered.message().find("staging cache") != std::string::npos);
  }
  std::filesystem::remove(cache);
  std::filesystem::rename(cache + ".real", cache);
  a.Open();
  auto head = a.ReadFile(ino, rewrite.size());
  head.resize(rewrite.size());
  CHECK(head == rewrite);
}

TEST_CASE("Persist: a closed file is persisted within persist_idle while readers keep opening and closing it") {
  using namespace std::chrono_literals;
  test::ArchiveFixture a([](MkfsOptions& mkfs) { mkfs.options.persist_idle_seconds = 1; });
  const auto data = test::RandomBytes(kSegment, 86);
  uint64_t ino = a.WriteFile("f", data);  // closed: queued now
  REQUIRE(a.fs->StartBackground().ok());
  // Reads of it more often than persist_idle, and writes elsewhere: never a quiet moment.
  bool persisted = false;
  for (int i = 0; i < 40 && !persisted; i++) {
    a.WriteFile(fmt::format("other{}", i), test::RandomBytes(100, 100 + i));
    CHECK(a.ReadFile(ino, data.size()) == data);
    std::this_thread::sleep_for(100ms);
    persisted = a.Segments(ino).size() == 1;
  }
  CHECK(persisted);  // within 4 s; before, each close put it off again
}
