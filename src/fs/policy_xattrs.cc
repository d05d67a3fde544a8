#include "fs/policy_xattrs.h"

#include <sys/stat.h>

#include <cerrno>

#include <fmt/format.h>

#include "fs/catalog_lookups.h"
#include "policy/resolver.h"
#include "policy/vocabulary.h"
#include "util/log.h"
#include "util/printable.h"

namespace cairn {

Result<std::string> PolicyXattrs::Check(uint64_t ino, const std::string& name, std::span<const uint8_t> value) {
  bool trusted = name.starts_with(kTrustedPolicyPrefix);
  std::string_view suffix = std::string_view(name).substr(trusted ? kTrustedPolicyPrefix.size() : kPolicyPrefix.size());
  std::string text(value.begin(), value.end());
  auto refuse = [&](int error, const std::string& why) {
    LogWarning("setxattr {} refused: {}", name, Abbreviated(why, 400));  // why names the value
    return Status::Posix(error, why);
  };
  if (!trusted && IsComputedPolicyKey(suffix)) return refuse(EPERM, fmt::format("{} is computed by cairn", name));
  if (trusted && suffix == "lock") {
    auto keys = CanonicalLockValue(text);
    if (!keys.ok()) return refuse(EINVAL, keys.status().message());
    return keys;
  }
  auto key = ParsePolicyKey(suffix);
  Result<std::string> canonical = key.ok() ? CanonicalPolicyValue(*key, text) : Result<std::string>(key.status());
  if (!canonical.ok()) return refuse(EINVAL, canonical.status().message());
  if (*key == PolicyKey::kPlacement) {
    Status fits = archive_.CheckPlacementFits(*canonical);
    if (!fits.ok()) return refuse(EINVAL, fits.message());
  }
  Catalog& catalog = archive_.catalog();
  if (*key == PolicyKey::kRaid || *key == PolicyKey::kPlacement) {  // the two must agree for this file
    auto policy = ResolvePolicy(catalog, ino, archive_.policy_context());
    if (!policy.ok()) return policy.status();
    const ResolvedField& raid = policy->Get(PolicyKey::kRaid);
    bool raid_defaults = *key == PolicyKey::kPlacement && raid.source.starts_with("default");  // follows the group
    Status fits = raid_defaults ? Status::OK()
                                : archive_.CheckRaidInGroup(*key == PolicyKey::kRaid ? *canonical : raid.value,
                                                            *key == PolicyKey::kPlacement
                                                                ? *canonical
                                                                : policy->Get(PolicyKey::kPlacement).value);
    if (!fits.ok()) return refuse(EINVAL, fits.message());
  }
  if (*key == PolicyKey::kPolicy) {
    PolicyContext context = archive_.policy_context();
    const NamedPolicy* policy = context.rules->FindPolicy(*canonical);
    if (!policy) {
      std::string menu;
      for (const auto& p : context.rules->policies()) menu += fmt::format("{}{}", menu.empty() ? "" : ", ", p.name);
      return refuse(EINVAL, fmt::format("no policy named '{}' in {} (defined: {})", *canonical,
                                        archive_.rules_path(), menu.empty() ? "none" : menu));
    }
    if (!trusted && !policy->selectable) {
      return refuse(EPERM, fmt::format("policy '{}' is not selectable by users; an admin can pin it with "
                                       "trusted.cairn.policy",
                                       *canonical));
    }
    // Its raid= and placement=, each or the file's own where it sets none, must agree.
    const std::string* raid = FindSetting(policy->settings, PolicyKey::kRaid);
    const std::string* placement = FindSetting(policy->settings, PolicyKey::kPlacement);
    if (raid || placement) {
      auto resolved = ResolvePolicy(catalog, ino, context);
      if (!resolved.ok()) return resolved.status();
      const ResolvedField& now = resolved->Get(PolicyKey::kRaid);
      if (raid || !now.source.starts_with("default")) {  // a raid that defaults follows the group
        Status fits = archive_.CheckRaidInGroup(raid ? *raid : now.value,
                                                placement ? *placement : resolved->Get(PolicyKey::kPlacement).value);
        if (!fits.ok()) return refuse(EINVAL, fmt::format("policy '{}': {}", *canonical, fits.message()));
      }
    }
  }
  if (!trusted) {
    auto lock = LockCovering(catalog, ino, *key);
    if (!lock.ok()) return lock.status();
    if (!lock->empty()) return refuse(EPERM, fmt::format("{} is locked by the admin at {}", name, *lock));
  }
  return canonical;
}

Result<std::string> PolicyXattrs::Computed(uint64_t ino, const std::string& suffix) {
  Catalog& catalog = archive_.catalog();
  auto inode = GetInodeOrENOENT(catalog, ino);
  if (!inode.ok()) return inode.status();
  auto policy = ResolvePolicy(catalog, ino, archive_.policy_context());
  if (!policy.ok()) return policy.status();
  if (suffix == "effective") return policy->Effective();
  if (suffix == "effective.source") return policy->Sources();
  if (suffix == "state") {
    if (!S_ISREG(inode->mode)) return std::string("persisted");
    auto dirty = state_.dirty.find(ino);
    if (dirty != state_.dirty.end() || inode->dirty) {
      auto live = state_.live.find(ino);
      bool writing = live != state_.live.end() && live->second.nwriters > 0;
      return std::string(writing ? "cached" : "queued");
    }
    if (state_.migrating == ino) return std::string("migrating");
    if (inode->layout_id != 0) {
      auto stamp = catalog.LayoutStamp(inode->layout_id);
      if (!stamp.ok()) return stamp.status();
      if (!LayoutMatches(*stamp, *policy)) return std::string("out-of-policy");
    }
    return std::string("persisted");
  }
  if (suffix == "location") {
    std::string out;
    auto segments = catalog.GetSegments(ino);
    if (!segments.ok()) return segments.status();
    // An attribute value ends at 64 KiB (XATTR_SIZE_MAX): past that, the count of the rest.
    constexpr size_t kLongest = 65536 - 64;
    for (size_t i = 0; i < segments->size(); i++) {
      const SegmentRecord& segment = (*segments)[i];
      if (out.size() > kLongest - 512) {  // an entry takes far less (a mirror of 64 copies aside)
        out += fmt::format(" +{} more", segments->size() - i);
        break;
      }
      std::string where = "hole";
      if (segment.extent_id != kHoleExtent) {
        auto extent = catalog.GetExtent(segment.extent_id);
        if (!extent.ok()) return extent.status();
        // Every chunk as its store describes it (diskN@OFFSET), after GROUP.bBUCKET@rROWcCOL: on
        // a lonestar group, joined by '/', then +LENGTH of the segment. The segment's own bytes
        // are pointed at when they are stored as they are, in one chunk.
        where.clear();
        bool direct = extent->chunks.size() == 1 && extent->chain_stamp.empty();
        for (const ChunkPlacement& chunk : extent->chunks) {
          uint64_t at = direct ? segment.extent_offset : 0;
          std::string place = archive_.store(chunk.disk).Describe(chunk.locator(), at);
          if (auto [array, position] = archive_.array_of(chunk.disk); array) {
            const GridGeometry& g = array->geometry();
            place = fmt::format("{}.b{}@r{}c{}:{}", array->name(), g.bucket(position).value_or(0), g.row(position),
                                g.column(position), place);
          }
          where += fmt::format("{}{}", where.empty() ? "" : "/", place);
        }
        where += fmt::format("+{}", segment.length);
      }
      out += fmt::format("{}{}={}{}", out.empty() ? "" : " ", segment.index, where, segment.cached ? ",cached" : "");
    }
    if (out.size() > kLongest) out = fmt::format("{} segments, too many to list here", segments->size());
    return out.empty() ? std::string(S_ISREG(inode->mode) && inode->size > 0 ? "cache" : "none") : out;
  }
  // digest and scrubbed come with whole-file digests and scrubbing.
  return Status::Posix(ENODATA, fmt::format("user.cairn.{} is not computed by this build", suffix));
}

}  // namespace cairn
