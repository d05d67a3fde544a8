#include "archive/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/extent_format.h"
#include "catalog/record_checks.h"
#include "array/grid_geometry.h"
#include "array/promise_journal.h"
#include "group/disk_group.h"
#include "util/size.h"

namespace cairn {
namespace {

constexpr uint64_t kMaxReadAhead = 64ull << 20;

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// A whole number from `minimum` to `maximum` (by default what a 32-bit field holds). Text
// from the file is quoted and escaped ({:?}) in messages: it may hold control characters.
Result<uint64_t> ParseCount(const std::string& key, const std::string& value, uint64_t minimum = 0,
                            uint64_t maximum = UINT32_MAX) {
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if ((ec != std::errc() && ec != std::errc::result_out_of_range) || ptr != value.data() + value.size() ||
      value.empty()) {
    return Status::InvalidArgument(fmt::format("{:?} = {:?} is not a whole number", key, value));
  }
  if (ec == std::errc::result_out_of_range || n < minimum || n > maximum) {
    return Status::InvalidArgument(
        fmt::format("{:?} = {:?} is out of range ({}..{})", key, value, minimum, maximum));
  }
  return n;
}

Status SetCount(uint32_t& field, const std::string& key, const std::string& value, uint64_t minimum = 0) {
  auto n = ParseCount(key, value, minimum);
  if (!n.ok()) return n.status();
  field = static_cast<uint32_t>(*n);  // ParseCount kept it within 32 bits
  return Status::OK();
}

Status SetSize(uint64_t& field, const std::string& key, const std::string& value, uint64_t minimum,
               uint64_t maximum = UINT64_MAX) {
  auto size = ParseSize(value);
  if (!size.ok()) {
    return Status::InvalidArgument(fmt::format("{} = {:?} is not a size (e.g. 4096, 64K, 4M, 1G)", key, value));
  }
  if (*size < minimum || *size > maximum) {
    return Status::InvalidArgument(
        fmt::format("{} = {:?} is out of range ({}..{} bytes)", key, value, minimum, maximum));
  }
  field = *size;
  return Status::OK();
}

// SetSize of a size the data path cuts or reads in whole 4 KiB blocks; `note` ends the refusal.
Status SetBlockSize(uint64_t& field, const std::string& key, const std::string& value, uint64_t minimum,
                    uint64_t maximum, std::string_view note = "") {
  uint64_t bytes = 0;
  CAIRN_RETURN_IF_ERROR(SetSize(bytes, key, value, minimum, maximum));
  if (bytes % 4096 != 0) {
    return Status::InvalidArgument(fmt::format("{} = {:?}: a multiple of 4K{}", key, value, note));
  }
  field = bytes;
  return Status::OK();
}

// "0,2,4-7": disk indices, each once.
Result<std::vector<uint32_t>> ParseDiskList(const std::string& key, const std::string& value) {
  std::vector<uint32_t> disks;
  std::istringstream list(value);
  for (std::string item; std::getline(list, item, ',');) {
    item = Trim(item);
    size_t dash = item.find('-');
    auto first = ParseCount(key, Trim(item.substr(0, dash)));
    if (!first.ok()) return first.status();
    auto last = dash == std::string::npos ? first : ParseCount(key, Trim(item.substr(dash + 1)));
    if (!last.ok()) return last.status();
    if (*last < *first) {
      return Status::InvalidArgument(fmt::format("{} = {:?}: range {:?} runs backwards", key, value, item));
    }
    if (*last >= kMaxDisks) {
      return Status::InvalidArgument(
          fmt::format("{} = {:?}: disk {} is past the last an archive can have ({})", key, value, *last, kMaxDisks - 1));
    }
    for (uint64_t d = *first; d <= *last; d++) {
      if (std::find(disks.begin(), disks.end(), d) != disks.end()) {
        return Status::InvalidArgument(fmt::format("{} = {:?} lists disk {} twice", key, value, d));
      }
      disks.push_back(static_cast<uint32_t>(d));
    }
  }
  if (disks.empty()) return Status::InvalidArgument(fmt::format("{} needs at least one disk (e.g. 0,1,4-7)", key));
  return disks;
}

// group.NAME.type or group.NAME.disks.
Status SetGroupField(ArchiveOptions& o, const std::string& key, const std::string& value) {
  std::string rest = key.substr(6);
  size_t dot = rest.rfind('.');
  if (dot == std::string::npos) {
    return Status::InvalidArgument(fmt::format("{:?}: expected group.NAME.FIELD (type, disks, geometry, write_mode)", key));
  }
  std::string name = rest.substr(0, dot);
  std::string field = rest.substr(dot + 1);
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      })) {
    return Status::InvalidArgument(fmt::format("{:?}: a group name is letters, digits, '-' and '_'", key));
  }
  if (field != "type" && field != "disks" && field != "geometry" && field != "write_mode" && field != "delta_cache") {
    return Status::InvalidArgument(fmt::format(
        "{:?}: unknown group setting {:?} (known: type, disks, geometry, write_mode, delta_cache)", key, field));
  }
  auto group = std::find_if(o.groups.begin(), o.groups.end(), [&](const auto& g) { return g.name == name; });
  if (group == o.groups.end()) group = o.groups.insert(o.groups.end(), ArchiveOptions::Group{name});
  if (field == "type") {
    if (!GroupTypeNamed(value)) {
      return Status::InvalidArgument(fmt::format("{} = {:?}: unknown group type (known: pool, lonestar)", key, value));
    }
    group->type = value;
    return Status::OK();
  }
  if (field == "geometry") {
    auto geometry = GridGeometry::Parse(value);
    if (!geometry.ok()) return Status::InvalidArgument(fmt::format("{}: {}", key, geometry.status().message()));
    group->geometry = geometry->ToString();
    return Status::OK();
  }
  if (field == "delta_cache") {
    auto size = ParseSize(value);
    if (!size.ok()) return Status::InvalidArgument(fmt::format("{}: {}", key, size.status().message()));
    if (*size < (64ull << 10) || *size > (64ull << 30)) {
      return Status::InvalidArgument(fmt::format("{} = {}: out of range (64K to 64G)", key, value));
    }
    group->delta_cache = *size;
    return Status::OK();
  }
  if (field == "write_mode") {
    if (!ArrayWriteModeNamed(value)) {
      return Status::InvalidArgument(
          fmt::format("{} = {:?}: unknown write mode (known: serialized, direct, delayed)", key, value));
    }
    group->write_mode = value;
    return Status::OK();
  }
  auto disks = ParseDiskList(key, value);
  if (!disks.ok()) return disks.status();
  group->disks = std::move(*disks);
  return Status::OK();
}

// Every group has disks the archive has, and every disk is in exactly one group.
Status CheckGroups(const ArchiveOptions& o, const std::string& where) {
  if (o.groups.empty()) return Status::OK();
  std::map<uint32_t, std::string> group_of;
  for (const auto& group : o.groups) {
    if (group.disks.empty()) {
      return Status::InvalidArgument(
          fmt::format("{}: group {} has no disks (add group.{}.disks = 0,1,...)", where, group.name, group.name));
    }
    bool lonestar = *GroupTypeNamed(group.type) == GroupType::kLoneStar;
    if (lonestar && group.geometry.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}: lonestar group {} has no geometry (add group.{}.geometry = XxY:HN+1, e.g. 8x5:3+1)", where, group.name,
          group.name));
    }
    if (!lonestar && (!group.geometry.empty() || group.write_mode != "serialized" ||
                      group.delta_cache != ArchiveOptions::Group{}.delta_cache)) {
      return Status::InvalidArgument(fmt::format(
          "{}: group {} is of type {}: geometry, write_mode and delta_cache are for lonestar groups", where,
          group.name, group.type));
    }
    if (lonestar) {
      auto geometry = GridGeometry::Parse(group.geometry);  // parsed when it was read
      if (geometry->disk_count() != group.disks.size()) {
        return Status::InvalidArgument(fmt::format("{}: lonestar group {} of geometry {} needs {} disks; group.{}.disks "
                                                   "lists {}",
                                                   where, group.name, group.geometry, geometry->disk_count(),
                                                   group.name, group.disks.size()));
      }
    }
    for (uint32_t d : group.disks) {
      if (d >= o.disks.size()) {
        return Status::InvalidArgument(fmt::format("{}: group {} lists disk {}; the archive has disks 0..{}", where,
                                                   group.name, d, o.disks.size() - 1));
      }
      auto [it, fresh] = group_of.emplace(d, group.name);
      if (!fresh) {
        return Status::InvalidArgument(fmt::format("{}: disk {} is in groups {} and {}; a disk belongs to one group",
                                                   where, d, it->second, group.name));
      }
    }
  }
  for (uint32_t d = 0; d < o.disks.size(); d++) {
    if (!group_of.contains(d)) {
      return Status::InvalidArgument(fmt::format(
          "{}: disk {} is in no group; once groups are named, every disk belongs to one (group.NAME.disks)", where, d));
    }
  }
  return Status::OK();
}

}  // namespace

std::vector<ArchiveOptions::Group> EffectiveGroups(const ArchiveOptions& options) {
  if (!options.groups.empty()) return options.groups;
  ArchiveOptions::Group all{kDefaultGroupName, "pool", {}};
  for (uint32_t d = 0; d < options.disks.size(); d++) all.disks.push_back(d);
  return {all};
}

Status ApplyOption(ArchiveOptions& o, const std::string& key, const std::string& value) {
  if (key == "segment_size") return SetBlockSize(o.segment_size, key, value, kMinSegmentSize, kMaxSegmentSize);
  if (key == "compressed_segment_size") {
    return SetBlockSize(o.compressed_segment_size, key, value, kMinSegmentSize, kMaxSegmentSize);
  }
  if (key == "pack_threshold") return SetSize(o.pack_threshold, key, value, 0);
  if (key == "cache_size") return SetSize(o.cache_size, key, value, 1 << 20);
  if (key == "persist_idle") return SetCount(o.persist_idle_seconds, key, value);
  if (key == "read_buffer_segments") return SetCount(o.read_buffer_segments, key, value, 1);
  if (key == "read_ahead") return SetBlockSize(o.read_ahead, key, value, 0, kMaxReadAhead, " (0: the kernel's default)");
  if (key == "log_max_size") return SetSize(o.log_max_size, key, value, 64 << 10);
  if (key == "reconcile_rate") return SetSize(o.reconcile_rate, key, value, 0);
  if (key == "reconcile_idle") return SetCount(o.reconcile_idle_seconds, key, value);
  if (key == "transform_workers") {
    CAIRN_RETURN_IF_ERROR(SetCount(o.transform_workers, key, value));
    if (o.transform_workers > 64) {
      return Status::InvalidArgument(fmt::format("transform_workers = {}: at most 64 (0: one per core)", value));
    }
    return Status::OK();
  }
  if (key == "plugin_dir") {
    if (value.empty() || value[0] != '/') {
      return Status::InvalidArgument(fmt::format("plugin_dir = {:?}: an absolute path", value));
    }
    o.plugin_dir = value;
    return Status::OK();
  }
  if (key == "keystore") {
    if (value.empty() || value[0] != '/') {
      return Status::InvalidArgument(fmt::format("keystore = {:?}: an absolute path", value));
    }
    o.keystore = value;
    return Status::OK();
  }
  return Status::InvalidArgument(fmt::format(
      "unknown option {:?} (known: segment_size, compressed_segment_size, pack_threshold, cache_size, "
      "persist_idle, read_buffer_segments, read_ahead, reconcile_rate, reconcile_idle, log_max_size, plugin_dir, "
      "transform_workers, keystore)",
      key));
}

Result<ArchiveOptions> ParseConfig(const std::string& text, const std::string& where) {
  ArchiveOptions o;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    line_no++;
    std::string content = Trim(line.substr(0, line.find('#')));
    if (content.empty()) continue;
    size_t eq = content.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument(fmt::format("{}:{}: expected 'key = value', got {:?}", where, line_no, content));
    }
    std::string key = Trim(content.substr(0, eq));
    std::string value = Trim(content.substr(eq + 1));
    Status st;
    if (key == "archive_id") {
      o.archive_id = value;
    } else if (key.starts_with("disk.")) {
      auto index = ParseCount(key, key.substr(5));
      if (!index.ok() || *index != o.disks.size()) {
        return Status::InvalidArgument(
            fmt::format("{}:{}: expected disk.{} next (disks are numbered from 0 without gaps), got {:?}", where,
                        line_no, o.disks.size(), key));
      }
      o.disks.push_back(value);
    } else if (key.starts_with("domain.")) {
      auto index = ParseCount(key, key.substr(7));
      if (!index.ok()) return Status::InvalidArgument(fmt::format("{}:{}: {}", where, line_no, index.status().message()));
      if (value.empty()) return Status::InvalidArgument(fmt::format("{}:{}: {:?} needs a name", where, line_no, key));
      o.disk_domains[static_cast<uint32_t>(*index)] = value;
    } else if (key.starts_with("group.")) {
      st = SetGroupField(o, key, value);
    } else if (key == "failed_disks" || key == "rebuild_disks") {
      auto& set = key == "failed_disks" ? o.failed_disks : o.rebuild_disks;
      if (value.empty() || value.back() == ',') {
        return Status::InvalidArgument(fmt::format("{}:{}: {} needs disk numbers, as 1,4", where, line_no, key));
      }
      std::istringstream list(value);
      for (std::string item; std::getline(list, item, ',');) {
        auto index = ParseCount(key, Trim(item));
        if (!index.ok()) return Status::InvalidArgument(fmt::format("{}:{}: {}", where, line_no, index.status().message()));
        set.insert(static_cast<uint32_t>(*index));
      }
    } else {
      st = ApplyOption(o, key, value);
    }
    if (!st.ok()) return Status::InvalidArgument(fmt::format("{}:{}: {}", where, line_no, st.message()));
  }
  if (o.archive_id.size() != 32) return Status::InvalidArgument(fmt::format("{}: archive_id missing or malformed", where));
  if (o.disks.empty()) return Status::InvalidArgument(fmt::format("{}: no disk.0 line: an archive needs disks", where));
  if (!o.disk_domains.empty() && o.disk_domains.rbegin()->first >= o.disks.size()) {
    return Status::InvalidArgument(
        fmt::format("{}: domain.{} names a disk the archive does not have", where, o.disk_domains.rbegin()->first));
  }
  for (const auto* set : {&o.failed_disks, &o.rebuild_disks}) {
    if (!set->empty() && *set->rbegin() >= o.disks.size()) {
      return Status::InvalidArgument(fmt::format("{}: {} lists disk {}; the archive has disks 0..{}", where,
                                                 set == &o.failed_disks ? "failed_disks" : "rebuild_disks",
                                                 *set->rbegin(), o.disks.size() - 1));
    }
  }
  CAIRN_RETURN_IF_ERROR(CheckGroups(o, where));
  return o;
}

Result<ArchiveOptions> LoadConfig(const std::string& path) {
  std::ifstream in(path);
  struct stat st;
  if (!in || ::stat(path.c_str(), &st) != 0) {
    return Status::NotFound(fmt::format("cannot read {} (is this a cairn archive?)", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IOError(fmt::format("cannot read {}: a read failed part way", path));
  auto options = ParseConfig(text.str(), path);
  // Whoever may edit the file must not aim our key commands (as root: at another archive's
  // keystore, or any file) by it.
  if (options.ok() && !options->keystore.empty() && st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return Status::Permission(fmt::format("{}: keystore = {}: the file is owned by uid {}, and a keystore elsewhere is "
                                          "taken only from a cairn.conf of root's or of whoever runs cairn (without "
                                          "the line the archive's own keystore is used)",
                                          path, options->keystore, st.st_uid));
  }
  return options;
}

std::string FormatConfig(const ArchiveOptions& o) {
  std::string out = "# cairn archive configuration; see cairn(8). Unknown keys are an error.\n";
  out += fmt::format("archive_id = {}\n", o.archive_id);
  out += fmt::format("segment_size = {}\n", o.segment_size);
  // Only when set: a cairn from before the key must still read the file.
  if (o.compressed_segment_size) out += fmt::format("compressed_segment_size = {}\n", o.compressed_segment_size);
  out += fmt::format("pack_threshold = {}\n", o.pack_threshold);
  out += fmt::format("cache_size = {}\n", o.cache_size);
  out += fmt::format("persist_idle = {}\n", o.persist_idle_seconds);
  out += fmt::format("read_buffer_segments = {}\n", o.read_buffer_segments);
  // Only when set: a cairn from before the key must still read the file.
  if (o.read_ahead != ArchiveOptions{}.read_ahead) out += fmt::format("read_ahead = {}\n", o.read_ahead);
  out += fmt::format("reconcile_rate = {}\n", o.reconcile_rate);
  out += fmt::format("reconcile_idle = {}\n", o.reconcile_idle_seconds);
  out += fmt::format("log_max_size = {}\n", o.log_max_size);
  if (!o.plugin_dir.empty()) out += fmt::format("plugin_dir = {}\n", o.plugin_dir);
  if (!o.keystore.empty()) out += fmt::format("keystore = {}\n", o.keystore);
  if (o.transform_workers) out += fmt::format("transform_workers = {}\n", o.transform_workers);
  for (size_t i = 0; i < o.disks.size(); i++) out += fmt::format("disk.{} = {}\n", i, o.disks[i]);
  for (const auto& [disk, domain] : o.disk_domains) out += fmt::format("domain.{} = {}\n", disk, domain);
  for (const auto& group : o.groups) {
    out += fmt::format("group.{}.type = {}\ngroup.{}.disks = {}\n", group.name, group.type, group.name,
                       fmt::join(group.disks, ","));
    if (!group.geometry.empty()) {
      out += fmt::format("group.{}.geometry = {}\ngroup.{}.write_mode = {}\ngroup.{}.delta_cache = {}\n", group.name,
                         group.geometry, group.name, group.write_mode, group.name, group.delta_cache);
    }
  }
  if (!o.failed_disks.empty()) out += fmt::format("failed_disks = {}\n", fmt::join(o.failed_disks, ","));
  if (!o.rebuild_disks.empty()) out += fmt::format("rebuild_disks = {}\n", fmt::join(o.rebuild_disks, ","));
  return out;
}

std::string KeystorePath(const std::string& dir, const ArchiveOptions& options) {
  return options.keystore.empty() ? dir + "/keystore" : options.keystore;
}

}  // namespace cairn
