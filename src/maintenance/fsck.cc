#include "maintenance/fsck.h"

#include <sys/stat.h>

#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "catalog/record_checks.h"
#include "pipeline/logical_payload.h"

namespace cairn {
namespace {

struct Checker {
  Archive& archive;
  Catalog& catalog;
  FsckReport report;

  template <typename... Args>
  void Problem(fmt::format_string<Args...> f, Args&&... args) {
    report.problems.push_back(fmt::format(f, std::forward<Args>(args)...));
  }
  // A failed catalog query is a problem: what it would have returned went unchecked.
  void Unread(const std::string& what, const Status& st) {
    if (!st.ok()) Problem("catalog: cannot read {}, not checked: {}", what, st.message());
  }

  void CheckSqlite() {
    Statement s(catalog.handle(), "PRAGMA integrity_check");
    s.Bind();
    while (s.Step()) {
      std::string line = s.Text(0);
      if (line != "ok") Problem("catalog: sqlite integrity: {}", line);
    }
    Unread("the integrity check", s.status());
  }

  std::map<uint64_t, InodeRecord> LoadInodes() {
    std::map<uint64_t, InodeRecord> inodes;
    Statement s(catalog.handle(), "SELECT ino FROM inodes");
    s.Bind();
    std::vector<uint64_t> inos;
    while (s.Step()) inos.push_back(s.UInt(0));
    Unread("the inodes", s.status());
    for (uint64_t ino : inos) {
      auto inode = catalog.GetInode(ino);
      if (!inode.ok()) {
        Unread(fmt::format("inode {}", ino), inode.status());
        continue;
      }
      Status valid = CheckInodeRecord(*inode);
      if (!valid.ok()) Problem("{}", valid.message());
      inodes[ino] = *inode;
    }
    return inodes;
  }

  void CheckNamespace(const std::map<uint64_t, InodeRecord>& inodes) {
    std::map<uint64_t, uint64_t> names;    // ino -> dentries naming it
    std::map<uint64_t, uint64_t> subdirs;  // dir -> child directories
    std::multimap<uint64_t, uint64_t> children;  // dir -> the inodes its entries name
    Statement s(catalog.handle(), "SELECT parent, name, ino FROM dentries");
    s.Bind();
    while (s.Step()) {
      uint64_t parent = s.UInt(0);
      std::string name = s.Text(1);
      uint64_t ino = s.UInt(2);
      auto dir = inodes.find(parent);
      if (dir == inodes.end() || !S_ISDIR(dir->second.mode)) {
        Problem("entry '{}' (inode {}) is in inode {}, which is not a directory", name, ino, parent);
      }
      auto child = inodes.find(ino);
      if (child == inodes.end()) {
        Problem("entry '{}' in directory {} points to missing inode {}", name, parent, ino);
        continue;
      }
      names[ino]++;
      children.emplace(parent, ino);
      if (S_ISDIR(child->second.mode)) subdirs[parent]++;
    }
    Unread("the directory entries", s.status());
    // Reachable from the root: a cycle of directories cut off from it keeps consistent link
    // counts, and its files no path can reach.
    std::set<uint64_t> reached{kRootInode};
    for (std::vector<uint64_t> todo{kRootInode}; !todo.empty();) {
      uint64_t dir = todo.back();
      todo.pop_back();
      for (auto [it, end] = children.equal_range(dir); it != end; ++it) {
        if (reached.insert(it->second).second) todo.push_back(it->second);
      }
    }
    uint64_t unreached_files = 0;
    for (const auto& [ino, n] : names) {
      if (reached.contains(ino)) continue;
      if (S_ISDIR(inodes.at(ino).mode)) {
        Problem("directory inode {} is not reachable from the root (its parents form a cycle)", ino);
      } else {
        unreached_files++;
      }
    }
    if (unreached_files > 0) Problem("{} file(s) are named only in directories not reachable from the root", unreached_files);
    if (!inodes.contains(kRootInode)) Problem("root directory (inode 1) is missing");
    for (const auto& [ino, inode] : inodes) {
      uint64_t n = names[ino];
      if (ino == kRootInode) n = 1;
      if (S_ISDIR(inode.mode)) {
        if (ino != kRootInode && n > 1) Problem("directory inode {} has {} names", ino, n);
        uint64_t want = n == 0 ? 0 : 2 + subdirs[ino];
        if (n > 0 && inode.nlink != want) Problem("directory inode {}: nlink {} but {} expected", ino, inode.nlink, want);
      } else if (n > 0 && inode.nlink != n) {
        Problem("inode {}: nlink {} but {} name(s) point to it", ino, inode.nlink, n);
      }
      if (n == 0) {
        if (inode.nlink == 0) {
          report.notes.push_back(fmt::format("inode {} was unlinked while open; it is freed at the next mount", ino));
          unlinked_while_open.insert(ino);
        } else {
          Problem("inode {} has nlink {} but no name points to it", ino, inode.nlink);
        }
      }
    }
  }

  // Extent rows that fail CheckExtentRecord: reported, kept for the reference and placement
  // checks, never read.
  std::set<uint64_t> damaged_extents;
  // Files no name points to any more, freed at the next mount (CheckNamespace).
  std::set<uint64_t> unlinked_while_open;

  void CheckExtentsAndSegments(const std::map<uint64_t, InodeRecord>& inodes) {
    std::map<uint64_t, ExtentRecord> extents;
    auto all_extents = catalog.AllExtents();
    Unread("the extents", all_extents.status());
    for (const ExtentRecord& e : all_extents.ok() ? *all_extents : std::vector<ExtentRecord>()) {
      Status valid = CheckExtentRecord(e);
      if (!valid.ok()) {
        Problem("{}", valid.message());
        damaged_extents.insert(e.id);
      }
      extents[e.id] = e;
    }
    std::map<uint64_t, uint64_t> refs;
    std::map<uint64_t, uint64_t> segment_count;
    auto segments = catalog.AllSegments();
    Unread("the segments", segments.status());
    for (const SegmentRecord& s : segments.ok() ? *segments : std::vector<SegmentRecord>()) {
      auto inode = inodes.find(s.ino);
      if (inode == inodes.end()) {
        Problem("segment {} of missing inode {} (extent {})", s.index, s.ino, s.extent_id);
        continue;
      }
      segment_count[s.ino]++;
      Status valid = CheckSegmentRecord(s, inode->second);
      if (!valid.ok()) {
        Problem("{}", valid.message());
        if (!S_ISREG(inode->second.mode) || inode->second.segment_size == 0) continue;
      }
      if (s.extent_id == kHoleExtent) {
        if (s.hole_record == 0) continue;
        if (!extents.contains(s.hole_record)) {
          Problem("inode {}: hole segment {} is recorded in missing extent {}", s.ino, s.index, s.hole_record);
        } else {
          refs[s.hole_record]++;
        }
        continue;
      }
      auto e = extents.find(s.extent_id);
      if (e == extents.end()) {
        Problem("inode {}: segment {} points to missing extent {}", s.ino, s.index, s.extent_id);
        continue;
      }
      refs[s.extent_id]++;
      if (s.extent_offset + s.length > e->second.logical_length && valid.ok()) {
        Problem("inode {}: segment {} reads past the end of extent {}", s.ino, s.index, s.extent_id);
      }
    }
    for (const auto& [ino, inode] : inodes) {
      if (!S_ISREG(inode.mode) || inode.dirty || inode.size == 0 || !CheckInodeRecord(inode).ok()) continue;
      uint64_t segment_size = inode.segment_size;
      uint64_t want = segment_size ? (inode.size + segment_size - 1) / segment_size : 1;
      if (segment_count[ino] != want) {
        Problem("inode {} is marked clean but has {} of {} segments persisted", ino, segment_count[ino], want);
      }
    }
    for (const auto& [ino, count] : segment_count) {
      auto inode = inodes.find(ino);
      if (inode == inodes.end() || count == 0) continue;
      if (inode->second.layout_id == 0) {
        Problem("inode {} has persisted segments but no policy stamp", ino);
      } else if (auto stamp = catalog.LayoutStamp(inode->second.layout_id); !stamp.ok()) {
        Problem("inode {}: policy stamp {}: {}", ino, inode->second.layout_id, stamp.status().message());
      }
    }
    for (const auto& [id, e] : extents) {
      if (e.refs != refs[id]) Problem("extent {}: reference count {} but {} segment(s) use it", id, e.refs, refs[id]);
      if (refs[id] == 0) Problem("extent {} is leaked (no segment uses it)", id);
    }
    CheckPlacement(extents);
  }

  void CheckPlacement(const std::map<uint64_t, ExtentRecord>& extents) {
    std::map<uint32_t, std::vector<PlacedChunk>> by_disk;
    for (const auto& [id, e] : extents) {
      std::set<std::string> domains;
      for (const ChunkPlacement& c : e.chunks) {
        if (c.disk >= archive.disk_count()) {
          Problem("extent {} has a chunk on disk {}, but the archive has {} disks", id, c.disk, archive.disk_count());
          continue;
        }
        if (!domains.insert(archive.DomainOf(c.disk)).second) {
          Problem("extent {} has two chunks in failure domain {} (disk {})", id, archive.DomainOf(c.disk), c.disk);
        }
        if (archive.missing_disks().contains(c.disk)) continue;
        by_disk[c.disk].push_back({id, c.locator()});
      }
    }
    for (const auto& [disk, chunks] : by_disk) {
      archive.store(disk).CheckLayout(chunks, [&](const std::string& problem) { Problem("{}", problem); });
    }
  }

  using RowsByExtent = std::multimap<uint64_t, const SegmentRecord*>;
  // Each row pointing into an extent must be a segment its member table records there.
  void CheckRowsAgainstMembers(const ExtentHeader& header, std::span<const uint8_t> logical,
                               std::pair<RowsByExtent::const_iterator, RowsByExtent::const_iterator> rows) {
    auto recorded = RecordedSegments::Of(header, logical);
    if (!recorded.ok()) {
      Problem("{}", recorded.status().message());
      return;
    }
    for (auto it = rows.first; it != rows.second; ++it) {
      if (Status st = recorded->Check(*it->second); !st.ok()) Problem("{}", st.message());
    }
  }

  // REQUIRES: the catalog mutex not held (it reads the disks, and decoding an encrypted
  // extent looks up its file's key).
  void VerifyExtentData(const std::function<void(uint64_t, uint64_t)>& progress) {
    Result<std::vector<ExtentRecord>> all_extents = Status::NotFound("");
    Result<std::vector<SegmentRecord>> segments = Status::NotFound("");
    {
      std::lock_guard lock(archive.catalog_mutex());
      all_extents = catalog.AllExtents();
      segments = catalog.AllSegments();
    }
    if (!all_extents.ok() || !segments.ok()) {  // a second read may fail where the first did not
      Unread("the extents to verify their data", all_extents.status());
      Unread("the segments to verify the extents' data", segments.status());
      return;
    }
    const std::vector<ExtentRecord>& extents = *all_extents;
    // The file each extent holds data of: an encrypted one decodes with that file's key. And
    // the rows pointing into it, which its member table must record.
    std::map<uint64_t, uint64_t> owner;
    RowsByExtent rows;
    for (const SegmentRecord& segment : *segments) {
      owner.emplace(segment.referenced_extent(), segment.ino);
      rows.emplace(segment.extent_id, &segment);
    }
    uint64_t done = 0;
    for (const ExtentRecord& e : extents) {
      if (damaged_extents.contains(e.id)) {  // reported with its row; reading it would trust damaged fields
        if (progress) progress(++done, extents.size());
        continue;
      }
      ChunkSet chunks;
      ExtentHeader header;
      auto checks = archive.extents().CheckChunks(e, &chunks, &header);
      size_t bad = 0;
      for (size_t i = 0; i < checks.size(); i++) {
        if (checks[i].ok()) continue;
        bad++;
        Problem("extent {} chunk {} (disk {}): {}", e.id, i, e.chunks[i].disk, checks[i].message());
      }
      auto stored = archive.extents().JoinVerified(e, chunks);  // from what was read: every chunk is read once
      uint64_t stored_length = stored.ok() ? stored->size() : 0;
      auto it = owner.find(e.id);
      auto logical = stored.ok() ? LogicalPayload(archive, e, it == owner.end() ? 0 : it->second, std::move(*stored))
                                 : stored;
      if (!stored.ok()) {
        Problem("extent {}: {}", e.id, stored.status().message());
      } else if (!logical.ok() && logical.status().IsNotFound() && it != owner.end() &&
                 unlinked_while_open.contains(it->second)) {
        report.notes.push_back(fmt::format("extent {} of inode {}, unlinked while open, is crypto-erased; it is freed "
                                           "at the next mount",
                                           e.id, it->second));
      } else if (!logical.ok() && logical.status().IsNotFound()) {
        Problem("{} (crypto-erased by cairn key delete --erase, or the key was lost with a catalog: the data cannot "
                "be read; delete the file)",
                logical.status().message());
      } else if (!logical.ok()) {
        Problem("{}", logical.status().message());  // names the extent
      } else {
        report.bytes_verified += stored_length;
        if (bad > 0) report.notes.push_back(fmt::format("extent {} is degraded but readable", e.id));
        CheckRowsAgainstMembers(header, *logical, std::as_const(rows).equal_range(e.id));
      }
      if (progress) progress(++done, extents.size());
    }
    report.extents = extents.size();
  }

  // Every parity relation of a lonestar group, and the ranges that wait to be rebuilt.
  void CheckArray(LoneStarArray& array) {
    for (const auto& [position, ranges] : array.defects()) {
      Problem("lonestar group {}: disk {}: {} bytes wait for cairn rebuild", array.name(), array.disk_of(position),
              ranges.bytes());
    }
    auto checked = array.CheckParity({array.data_start(), array.data_end() - array.data_start()}, /*repair=*/false);
    if (!checked.ok()) {
      Problem("lonestar group {}: parity not checked: {}", array.name(), checked.status().message());
      return;
    }
    // A range found wrong says what cairn scrub does with it.
    for (const std::string& mismatch : checked->mismatches) Problem("{}", mismatch);
    report.parity_bytes_checked += checked->bytes_checked;
  }

  void CheckCache(const std::map<uint64_t, InodeRecord>& inodes) {
    Status listed = archive.cache().ForEach([&](const StagingCache::FileInfo& file) {
      if (!inodes.contains(file.ino)) {
        report.notes.push_back(
            fmt::format("staging cache holds a file for deleted inode {}; removed at next mount", file.ino));
      }
    });
    if (!listed.ok()) Problem("{} (a mount refuses to start until it can be)", listed.message());
  }
};

}  // namespace

FsckReport CheckArchive(Archive& archive, const std::function<void(uint64_t, uint64_t)>& progress) {
  std::unique_lock lock(archive.catalog_mutex());
  Checker checker{archive, archive.catalog(), {}};
  checker.CheckSqlite();
  for (const auto& [disk, why] : archive.missing_disks()) checker.Problem("disk {} is missing: {}", disk, why);
  auto inodes = checker.LoadInodes();
  checker.report.inodes = inodes.size();
  checker.CheckNamespace(inodes);
  checker.CheckExtentsAndSegments(inodes);
  lock.unlock();
  checker.VerifyExtentData(progress);
  lock.lock();
  for (const auto& array : archive.arrays()) checker.CheckArray(*array);
  checker.CheckCache(inodes);
  return checker.report;
}

}  // namespace cairn
