#include "codec/transform_registry.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include <fmt/format.h>

namespace cairn {
namespace {

struct Entry {
  uint32_t current_version;
  TransformFactory factory;
  TransformStage stage;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, Entry, std::less<>> entries;  // guarded by mutex
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 32 || name[0] < 'a' || name[0] > 'z') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

// The entry of `name`, copied out so the factory runs without the lock.
Result<Entry> Find(std::string_view name) {
  Registry& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  auto it = registry.entries.find(name);
  if (it == registry.entries.end()) {
    return Status::NotSupported(fmt::format("transform '{}' is not installed", name));
  }
  return it->second;
}

// The factory's transform, checked to be what was asked for.
Result<std::shared_ptr<const Transform>> Make(const Entry& entry, std::string_view name, uint32_t version,
                                              std::string_view params) {
  auto made = entry.factory(version, params);
  if (!made.ok()) return made.status();
  if (!*made || (*made)->name() != name || (*made)->version() != version || (*made)->params() != params) {
    return Status::InvalidArgument(
        fmt::format("transform '{}': its factory did not make version {} with '{}'", name, version, params));
  }
  return made;
}

}  // namespace

Status RegisterTransform(std::string_view name, uint32_t current_version, TransformFactory factory,
                         TransformStage stage) {
  if (!ValidName(name)) {
    return Status::InvalidArgument(
        fmt::format("transform name '{}': 1..32 of a-z, 0-9 and '-', starting with a letter", name));
  }
  if (current_version == 0) return Status::InvalidArgument(fmt::format("transform '{}': version 0", name));
  Registry& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  if (!registry.entries.emplace(std::string(name), Entry{current_version, std::move(factory), stage}).second) {
    return Status::Exists(fmt::format("transform '{}' is registered already", name));
  }
  return Status::OK();
}


Result<TransformStage> StageOfTransform(std::string_view name) {
  auto entry = Find(name);
  if (!entry.ok()) return entry.status();
  return entry->stage;
}

Result<std::shared_ptr<const Transform>> TransformForWriting(std::string_view name, std::string_view params) {
  auto entry = Find(name);
  if (!entry.ok()) return entry.status();
  return Make(*entry, name, entry->current_version, params);
}

Result<std::shared_ptr<const Transform>> TransformForReading(std::string_view name, uint32_t version,
                                                             std::string_view params) {
  auto entry = Find(name);
  if (!entry.ok()) return entry.status();
  if (version == 0 || version > entry->current_version) {
    return Status::NotSupported(fmt::format("transform '{}' version {} is newer than this cairn's ({})", name,
                                            version, entry->current_version));
  }
  return Make(*entry, name, version, params);
}

}  // namespace cairn
