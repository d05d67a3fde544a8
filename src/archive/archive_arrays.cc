// Archive's lonestar groups: opening each group's array over its disks, giving every disk its
// chunk store through the array, and finding the array of a disk.
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "archive/archive.h"
#include "archive/config.h"
#include "util/log.h"

namespace cairn {
namespace {

// For tests: with CAIRN_TEST_CRASH_AT=STEP[:N] the process dies (as kill -9 would) the N-th
// time (default 1) any lonestar group reaches step boundary STEP ("begin", "data", "hP", ...,
// see LoneStarArray::Options::crash_point).
std::function<bool(std::string_view)> CrashPointFromEnvironment() {
  const char* spec = std::getenv("CAIRN_TEST_CRASH_AT");
  if (!spec || !*spec) return {};
  std::string text(spec);
  size_t colon = text.find(':');
  std::string step = text.substr(0, colon);
  long nth = colon == std::string::npos ? 1 : std::strtol(text.c_str() + colon + 1, nullptr, 10);
  auto seen = std::make_shared<std::atomic<long>>(0);
  return [step, nth, seen](std::string_view at) {
    if (at == step && ++*seen == nth) ::_exit(137);
    return false;
  };
}

// The catalog's meta key for the journal epoch of `group` (LoneStarArray::SealEpoch).
std::string EpochKey(const std::string& group) { return "lonestar_epoch." + group; }

}  // namespace

std::string LoneStarJournalPath(const std::string& dir, const std::string& group) {
  return fmt::format("{}/lonestar-{}.journal", dir, group);
}

std::string LoneStarIdentity(const std::string& archive_id, const std::string& group) {
  return fmt::format("{}/{}", archive_id, group);
}

Status Archive::OpenArray(const ArchiveOptions::Group& group, std::vector<OpenedDisk>& opened,
                          std::vector<std::unique_ptr<BlockChunkStore>>* stores) {
  auto geometry = GridGeometry::Parse(group.geometry);  // ParseConfig checked it
  if (!geometry.ok()) return geometry.status();
  // Parity covers the same range of every member: the one their superblocks say.
  const Superblock* model = nullptr;
  uint32_t model_disk = 0;
  for (uint32_t d : group.disks) {
    if (opened[d].missing) continue;
    const Superblock& sb = opened[d].sb;
    if (!model) {
      model = &sb;
      model_disk = d;
    } else if (sb.data_start != model->data_start || sb.disk_size != model->disk_size) {
      return Status::Corruption(fmt::format("lonestar group {}: disk {} has data from byte {} to {}, disk {} from {} to "
                                            "{}; the disks of a group are alike",
                                            group.name, d, sb.data_start, sb.disk_size, model_disk, model->data_start,
                                            model->disk_size));
    }
  }
  if (!model) return Status::IOError(fmt::format("lonestar group {}: none of its disks can be opened", group.name));
  uint64_t data_start = model->data_start;
  uint64_t data_end = model->disk_size / kBlockSize * kBlockSize;
  std::vector<LoneStarArray::Member> members;
  for (uint32_t d : group.disks) {
    members.push_back({d, std::move(opened[d].disk), opened[d].missing, options_.rebuild_disks.contains(d)});
  }
  LoneStarArray::Options o(*geometry);
  o.name = group.name;
  o.mode = *ArrayWriteModeNamed(group.write_mode);  // ParseConfig checked it
  o.data_start = data_start;
  o.data_end = data_end;
  o.journal_path = LoneStarJournalPath(dir_, group.name);
  o.identity = LoneStarIdentity(options_.archive_id, group.name);
  o.delta_cache_bytes = group.delta_cache;
  o.crash_point = CrashPointFromEnvironment();
  auto epoch = catalog_->GetMeta(EpochKey(group.name));
  if (!epoch.ok() && !epoch.status().IsNotFound()) return epoch.status();
  if (epoch.ok()) {
    auto [end, error] = std::from_chars(epoch->data(), epoch->data() + epoch->size(), o.catalog_epoch);
    if (error != std::errc() || end != epoch->data() + epoch->size()) {
      return Status::Corruption(fmt::format("catalog: meta {} is {:?}, not a number", EpochKey(group.name), *epoch));
    }
  }
  auto array = LoneStarArray::Open(std::move(o), std::move(members));
  if (!array.ok()) return array.status();
  for (uint32_t p = 0; p < group.disks.size(); p++) {
    uint32_t d = group.disks[p];
    bool bucket = geometry->role(p) == DiskRole::kData;
    (*stores)[d] = std::make_unique<BlockChunkStore>(d, (*array)->View(p), data_start, bucket ? data_end : data_start);
  }
  arrays_.push_back(std::move(*array));
  return Status::OK();
}

std::pair<LoneStarArray*, uint32_t> Archive::array_of(size_t disk) const {
  for (const auto& array : arrays_) {
    for (uint32_t p = 0; p < array->geometry().disk_count(); p++) {
      if (array->disk_of(p) == disk) return {array.get(), p};
    }
  }
  return {nullptr, 0};
}

void Archive::SealArrayEpochs() {
  for (const auto& array : arrays_) {
    auto epoch = array->SealEpoch();
    Status st = epoch.status();
    if (st.ok()) {
      std::lock_guard lock(catalog_mutex_);
      st = InTransaction(*catalog_, [&] { return catalog_->SetMeta(EpochKey(array->name()), std::to_string(*epoch)); });
    }
    if (!st.ok()) LogError("lonestar group {}: the journal's epoch is not recorded: {}", array->name(), st.message());
  }
}

}  // namespace cairn
