#include "backend/member_table.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "util/coding.h"

namespace cairn {
namespace {

// Appends little-endian fields to a growing buffer.
class TableWriter {
 public:
  void U16(uint16_t v) { Grow(2, [&](uint8_t* p) { PutFixed16(p, v); }); }
  void U32(uint32_t v) { Grow(4, [&](uint8_t* p) { PutFixed32(p, v); }); }
  void U64(uint64_t v) { Grow(8, [&](uint8_t* p) { PutFixed64(p, v); }); }
  void Bytes(std::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }
  std::vector<uint8_t>& out() { return out_; }

 private:
  template <typename Put>
  void Grow(size_t n, Put put) {
    out_.resize(out_.size() + n);
    put(out_.data() + out_.size() - n);
  }
  std::vector<uint8_t> out_;
};

// Reads fields back, failing (instead of reading past the end) once the bytes run out.
class TableReader {
 public:
  explicit TableReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  bool U16(uint16_t* v) { return Take(2, [&](const uint8_t* p) { *v = GetFixed16(p); }); }
  bool U32(uint32_t* v) { return Take(4, [&](const uint8_t* p) { *v = GetFixed32(p); }); }
  bool U64(uint64_t* v) { return Take(8, [&](const uint8_t* p) { *v = GetFixed64(p); }); }
  bool I64(int64_t* v) { return Take(8, [&](const uint8_t* p) { *v = static_cast<int64_t>(GetFixed64(p)); }); }
  bool Bytes(size_t n, std::string* s) {
    return Take(n, [&](const uint8_t* p) { s->assign(reinterpret_cast<const char*>(p), n); });
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  template <typename Get>
  bool Take(size_t n, Get get) {
    if (bytes_.size() - at_ < n) return false;
    get(bytes_.data() + at_);
    at_ += n;
    return true;
  }
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

// `with_holes`: the layout of format 4 and later (generation and hole runs); format 3
// tables have neither.
bool ReadNode(TableReader& in, bool with_holes, MemberNode* node) {
  uint16_t paths = 0, xattrs = 0;
  uint32_t segments = 0, hole_runs = 0;
  if (!in.U64(&node->ino) || !in.U32(&node->mode) || !in.U32(&node->uid) || !in.U32(&node->gid) ||
      !in.U64(&node->size) || !in.U64(&node->rdev) || !in.I64(&node->atime_ns) || !in.I64(&node->mtime_ns) ||
      !in.I64(&node->ctime_ns) || (with_holes && !in.U64(&node->generation)) || !in.U64(&node->segment_size) ||
      !in.U16(&paths) || !in.U16(&xattrs) || !in.U32(&segments) || (with_holes && !in.U32(&hole_runs))) {
    return false;
  }
  uint16_t symlink_length = 0;
  std::string flags;
  if (!in.U16(&symlink_length) || !in.Bytes(symlink_length, &node->symlink) || !in.Bytes(1, &flags)) return false;
  node->entries_truncated = flags[0] & 1;
  for (uint16_t i = 0; i < paths; i++) {
    uint16_t length = 0;
    std::string path;
    if (!in.U16(&length) || !in.Bytes(length, &path)) return false;
    node->paths.push_back(std::move(path));
  }
  for (uint16_t i = 0; i < xattrs; i++) {
    uint16_t name_length = 0;
    uint32_t value_length = 0;
    std::string name, value;
    if (!in.U16(&name_length) || !in.Bytes(name_length, &name) || !in.U32(&value_length) ||
        !in.Bytes(value_length, &value)) {
      return false;
    }
    node->xattrs.emplace_back(std::move(name), std::move(value));
  }
  for (uint32_t i = 0; i < segments; i++) {
    MemberSegment s;
    if (!in.U64(&s.index) || !in.U64(&s.offset) || !in.U64(&s.length)) return false;
    node->segments.push_back(s);
  }
  for (uint32_t i = 0; i < hole_runs; i++) {
    MemberHoleRun run;
    if (!in.U64(&run.first) || !in.U64(&run.count)) return false;
    node->holes.push_back(run);
  }
  return true;
}

}  // namespace

// Format 4 and later (format 3 lacks the generation and the hole runs):
// magic[8] | u32 node_count | nodes | u32 masked crc32c of every byte before it.
// A node: u64 ino | u32 mode | u32 uid | u32 gid | u64 size | u64 rdev | i64 atime_ns |
// i64 mtime_ns | i64 ctime_ns | u64 generation | u64 segment_size | u16 path_count | u16 xattr_count |
// u32 segment_count | u32 hole_run_count | u16 symlink length, symlink target | u8 flags
// (bit 0: entries truncated) | paths (u16 length, bytes) | xattrs (u16 name length, name,
// u32 value length, value) | segments (u64 index, u64 offset, u64 length) | hole runs (u64
// first index, u64 count).
std::vector<uint8_t> EncodeMemberTable(const MemberTable& table) {
  TableWriter out;
  out.Bytes({kMemberTableMagic, 8});
  out.U32(static_cast<uint32_t>(table.nodes.size()));
  for (const MemberNode& node : table.nodes) {
    out.U64(node.ino);
    out.U32(node.mode);
    out.U32(node.uid);
    out.U32(node.gid);
    out.U64(node.size);
    out.U64(node.rdev);
    out.U64(static_cast<uint64_t>(node.atime_ns));
    out.U64(static_cast<uint64_t>(node.mtime_ns));
    out.U64(static_cast<uint64_t>(node.ctime_ns));
    out.U64(node.generation);
    out.U64(node.segment_size);
    // A name too long for its u16 length (64 KiB: some 260 directories of 255-byte names deep)
    // is left out, and names past the 65535th: the table must decode, and recover finds the
    // file by its other names (with none, it reports it as lost).
    std::vector<std::string_view> paths;
    for (const std::string& path : node.paths) {
      if (path.size() <= UINT16_MAX && paths.size() < UINT16_MAX) paths.push_back(path);
    }
    size_t xattrs = std::min<size_t>(node.xattrs.size(), UINT16_MAX);  // the rest are left out too
    out.U16(static_cast<uint16_t>(paths.size()));
    out.U16(static_cast<uint16_t>(xattrs));
    out.U32(static_cast<uint32_t>(node.segments.size()));
    out.U32(static_cast<uint32_t>(node.holes.size()));
    out.U16(static_cast<uint16_t>(node.symlink.size()));
    out.Bytes(node.symlink);
    out.Bytes(node.entries_truncated ? std::string_view("\x01", 1) : std::string_view("\x00", 1));
    for (std::string_view path : paths) {
      out.U16(static_cast<uint16_t>(path.size()));
      out.Bytes(path);
    }
    for (const auto& [name, value] : std::span(node.xattrs).first(xattrs)) {
      out.U16(static_cast<uint16_t>(name.size()));
      out.Bytes(name);
      out.U32(static_cast<uint32_t>(value.size()));
      out.Bytes(value);
    }
    for (const MemberSegment& s : node.segments) {
      out.U64(s.index);
      out.U64(s.offset);
      out.U64(s.length);
    }
    for (const MemberHoleRun& run : node.holes) {
      out.U64(run.first);
      out.U64(run.count);
    }
  }
  out.U32(MaskCrc(Crc32c(out.out())));
  return std::move(out.out());
}

Result<MemberTable> DecodeMemberTable(std::span<const uint8_t> bytes, uint32_t format_version,
                                      const std::string& where) {
  if (bytes.size() < 16 || std::memcmp(bytes.data(), kMemberTableMagic, 8) != 0) {
    return Status::Corruption(fmt::format("{}: no member table (want CAIRNMBR magic)", where));
  }
  uint32_t stored = UnmaskCrc(GetFixed32(bytes.data() + bytes.size() - 4));
  uint32_t actual = Crc32c(bytes.first(bytes.size() - 4));
  if (stored != actual) {
    return Status::Corruption(
        fmt::format("{}: member table checksum mismatch (want={:08x} have={:08x})", where, stored, actual));
  }
  TableReader in(bytes.subspan(8, bytes.size() - 12));
  uint32_t count = 0;
  MemberTable table;
  bool ok = in.U32(&count);
  for (uint32_t i = 0; ok && i < count; i++) {
    MemberNode node;
    ok = ReadNode(in, format_version >= kFirstFormatWithHoleRuns, &node);
    table.nodes.push_back(std::move(node));
  }
  if (!ok || !in.done()) {
    return Status::Corruption(fmt::format("{}: member table lengths do not add up to its {} bytes", where, bytes.size()));
  }
  return table;
}

}  // namespace cairn
