#include "policy/vocabulary.h"

#include <charconv>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "codec/transform_registry.h"
#include "util/printable.h"
#include "util/size.h"

namespace cairn {
namespace {

constexpr uint64_t kMinSegment = 64 << 10;
constexpr uint64_t kMaxSegment = 1ull << 30;

bool ParseUint(std::string_view text, uint64_t* out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

Status NotYet(PolicyKey key, std::string_view value, std::string_view today) {
  return Status::NotSupported(fmt::format("user.cairn.{}={} is valid but not available in this build ({})",
                                          PolicyKeyName(key), Abbreviated(value), today));
}

Status Bad(PolicyKey key, std::string_view value, std::string_view allowed) {
  return Status::InvalidArgument(
      fmt::format("user.cairn.{}: '{}' is not a valid value (allowed: {})", PolicyKeyName(key), Abbreviated(value),
                  allowed));
}

// raid: none | mirror-N | rs-K-M | 2d
Result<std::string> CheckRaid(std::string_view v) {
  constexpr const char* kAllowed = "none, mirror-N (2..8), rs-K-M (K 1..128, M 1..32), 2d";
  if (v == "none") return std::string(v);
  std::string text(v);
  std::smatch m;
  if (std::regex_match(text, m, std::regex("mirror-([0-9]+)"))) {
    uint64_t n = 0;
    if (!ParseUint(m[1].str(), &n) || n < 2 || n > 8) return Bad(PolicyKey::kRaid, v, kAllowed);
    return fmt::format("mirror-{}", n);
  }
  if (std::regex_match(text, m, std::regex("rs-([0-9]+)-([0-9]+)"))) {
    uint64_t k = 0, parity = 0;
    if (!ParseUint(m[1].str(), &k) || !ParseUint(m[2].str(), &parity) || k < 1 || k > 128 || parity < 1 ||
        parity > 32) {
      return Bad(PolicyKey::kRaid, v, kAllowed);
    }
    return fmt::format("rs-{}-{}", k, parity);
  }
  if (v == "2d") return std::string(v);
  return Bad(PolicyKey::kRaid, v, kAllowed);
}

Result<std::string> CheckIdr(std::string_view v) {
  if (v == "none") return std::string(v);
  std::string text(v);
  std::smatch m;
  if (v == "spc-16-1") return std::string(v);
  if (std::regex_match(text, m, std::regex("spc-16-1-s([0-9]+)"))) {
    uint64_t s = 0;
    if (ParseUint(m[1].str(), &s) && s >= 1 && s <= 64) return s == 1 ? std::string("spc-16-1") : fmt::format("spc-16-1-s{}", s);
  }
  return Bad(PolicyKey::kIdr, v, "none, spc-16-1, spc-16-1-sS (S 1..64)");
}

Result<std::string> CheckCompress(std::string_view v) {
  if (v == "off") return std::string(v);
  auto stage = CompressionStage(std::string(v));
  if (stage.status().code() == Status::Code::kInvalidArgument) {
    return Bad(PolicyKey::kCompress, v, "off, lz4, zstd, zstd-N (1..19), auto");
  }
  if (!stage.ok()) return NotYet(PolicyKey::kCompress, v, stage.status().message());
  if (v == "lz4" || v == "auto") return std::string(v);
  std::string level = stage->params.substr(stage->params.find('=') + 1);
  return level == "3" ? std::string("zstd") : "zstd-" + level;  // zstd is zstd-3
}

// A policy or key name: 1..64 letters, digits, '.', '_' or '-'.
Result<std::string> CheckName(PolicyKey key, std::string_view v) {
  static const std::regex kName("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  if (!std::regex_match(std::string(v), kName)) {
    return Bad(key, v, "a name of 1..64 letters, digits, '.', '_' or '-'");
  }
  return std::string(v);
}

// group=NAME (a disk group of cairn.conf; whether the archive has it is the archive's
// check) is honoured; tier= and pack= are valid but not yet available.
Result<std::string> CheckPlacement(std::string_view v) {
  static const std::regex kTerm("(group|tier|pack)=[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  constexpr std::string_view kAllowed = "balanced, or group=NAME, tier=NAME and/or pack=TAG, separated by commas";
  if (v == "balanced") return std::string(v);
  std::string text(v);
  std::vector<std::string> terms;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(", ", start);
    std::string term = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!term.empty()) {
      if (!std::regex_match(term, kTerm)) {
        return Bad(PolicyKey::kPlacement, v, kAllowed);
      }
      terms.push_back(term);
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (terms.size() != 1) {
    return terms.empty() ? Bad(PolicyKey::kPlacement, v, kAllowed) : NotYet(PolicyKey::kPlacement, v, "one group=NAME");
  }
  if (!terms[0].starts_with("group=")) return NotYet(PolicyKey::kPlacement, v, "only group=NAME");
  return terms[0];
}

// plugins: none, or transform names separated by commas, each installed (codec/).
Result<std::string> CheckPlugins(std::string_view v) {
  if (v.empty() || v == "none") return std::string("none");
  static const std::regex kName("[a-z][a-z0-9-]{0,31}");
  std::string canonical;
  for (size_t start = 0; start <= v.size();) {
    size_t end = std::min(v.find(',', start), v.size());
    std::string name(v.substr(start, end - start));
    if (!std::regex_match(name, kName)) {
      return Bad(PolicyKey::kPlugins, v, "none, or transform names (a-z, 0-9, '-') separated by commas");
    }
    auto stage = StageOfTransform(name);
    if (!stage.ok()) {
      return NotYet(PolicyKey::kPlugins, v, fmt::format("no transform plugin '{}' is installed", name));
    }
    if (*stage != TransformStage::kCustom) {  // the write plan would refuse it at every persist
      return Bad(PolicyKey::kPlugins, v,
                 fmt::format("custom plugins only: '{}' is a compress or encrypt plugin, chosen by those keys", name));
    }
    if (("," + canonical + ",").find("," + name + ",") != std::string::npos) {
      return Bad(PolicyKey::kPlugins, v, fmt::format("'{}' is named twice", name));
    }
    canonical += (canonical.empty() ? "" : ",") + name;
    start = end + 1;
  }
  return canonical;
}

Result<std::string> CheckSegmentSize(std::string_view v) {
  auto size = ParseSize(v);
  if (!size.ok()) return Bad(PolicyKey::kSegmentSize, v, "a size from 64K to 1G in multiples of 4K, e.g. 4M");
  if (*size < kMinSegment || *size > kMaxSegment || *size % 4096 != 0) {
    return Bad(PolicyKey::kSegmentSize, v, "a size from 64K to 1G in multiples of 4K, e.g. 4M");
  }
  return std::to_string(*size);
}

}  // namespace

Result<TransformChain::Stage> CompressionStage(const std::string& value) {
  TransformChain::Stage stage;
  uint64_t level = 0;
  if (value == "lz4") {
    stage = {"lz4", ""};
  } else if (value == "zstd" || value == "auto") {
    stage = {"zstd", value == "auto" ? "level=3,probe" : "level=3"};
  } else if (value.starts_with("zstd-") && ParseUint(value.substr(5), &level) && level >= 1 && level <= 19) {
    stage = {"zstd", fmt::format("level={}", level)};
  } else {
    return Status::InvalidArgument(fmt::format("compress={}: not off, lz4, zstd, zstd-N or auto", value));
  }
  auto installed = StageOfTransform(stage.name);
  if (!installed.ok() || *installed != TransformStage::kCompress) {
    return Status::NotSupported(fmt::format("no compress plugin '{}' is installed", stage.name));
  }
  return stage;
}

bool IsComputedPolicyKey(std::string_view suffix) {
  return suffix == "effective" || suffix == "effective.source" || suffix == "state" || suffix == "location" ||
         suffix == "digest" || suffix == "scrubbed";
}

bool DecidesEncryption(std::string_view name) {
  bool trusted = name.starts_with(kTrustedPolicyPrefix);
  if (!trusted && !name.starts_with(kPolicyPrefix)) return false;
  std::string_view suffix = name.substr(trusted ? kTrustedPolicyPrefix.size() : kPolicyPrefix.size());
  return suffix == "encrypt" || suffix == "key" || suffix == "policy" || (trusted && suffix == "lock");
}

std::string_view PolicyKeyName(PolicyKey key) {
  switch (key) {
    case PolicyKey::kRaid: return "raid";
    case PolicyKey::kIdr: return "idr";
    case PolicyKey::kCompress: return "compress";
    case PolicyKey::kEncrypt: return "encrypt";
    case PolicyKey::kKey: return "key";
    case PolicyKey::kChecksum: return "checksum";
    case PolicyKey::kPlacement: return "placement";
    case PolicyKey::kSegmentSize: return "segment_size";
    case PolicyKey::kPlugins: return "plugins";
    case PolicyKey::kPolicy: return "policy";
  }
  return "?";
}

Result<PolicyKey> ParsePolicyKey(std::string_view suffix) {
  for (PolicyKey key : kAllPolicyKeys) {
    if (PolicyKeyName(key) == suffix) return key;
  }
  return Status::InvalidArgument(fmt::format(
      "user.cairn.{} is not a cairn policy key (keys: raid, idr, compress, encrypt, key, checksum, placement, "
      "segment_size, plugins, policy)",
      suffix));
}

Result<std::string> CanonicalPolicyValue(PolicyKey key, std::string_view value) {
  // Before any regex sees it: std::regex recurses per character, and a 64 KiB value
  // (setfattr allows that much) overflowed the stack of the daemon's thread.
  if (value.size() > kMaxPolicyValue) {
    return Status::InvalidArgument(fmt::format("user.cairn.{}: a value of {} bytes is too long (at most {})",
                                               PolicyKeyName(key), value.size(), kMaxPolicyValue));
  }
  switch (key) {
    case PolicyKey::kRaid: return CheckRaid(value);
    case PolicyKey::kIdr: return CheckIdr(value);
    case PolicyKey::kCompress: return CheckCompress(value);
    case PolicyKey::kEncrypt: {
      if (value == "off") return std::string(value);
      if (value != "aes-256-gcm") return Bad(key, value, "off, aes-256-gcm");
      auto stage = StageOfTransform(value);  // its plugin must be installed
      if (!stage.ok()) return NotYet(key, value, stage.status().message());
      return std::string(value);
    }
    case PolicyKey::kKey: return CheckName(key, value);  // none, or a master key (the keystore's check)
    case PolicyKey::kChecksum:
      if (value == "crc32c" || value == "xxh3" || value == "sha256" || value == "blake3") return std::string(value);
      return Bad(key, value, "crc32c, xxh3, blake3, sha256");
    case PolicyKey::kPlacement: return CheckPlacement(value);
    case PolicyKey::kSegmentSize: return CheckSegmentSize(value);
    case PolicyKey::kPlugins: return CheckPlugins(value);
    case PolicyKey::kPolicy: return CheckName(key, value);  // whether it is defined is the rules' business
  }
  return Bad(key, value, "?");
}

Result<std::string> CanonicalLockValue(std::string_view value) {
  constexpr const char* kAllowed = "allowed: all, or keys such as raid,policy";
  std::set<PolicyKey> keys;
  bool all = false;
  std::string text(value);
  for (char& c : text) c = c == ',' ? ' ' : c;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    if (word == "all") {
      all = true;
      continue;
    }
    auto key = ParsePolicyKey(word);
    if (!key.ok()) {
      return Status::InvalidArgument(
          fmt::format("trusted.cairn.lock: '{}' is not a policy key ({})", Abbreviated(word), kAllowed));
    }
    keys.insert(*key);
  }
  if (all) return std::string("all");
  if (keys.empty()) return Status::InvalidArgument(fmt::format("trusted.cairn.lock: empty ({})", kAllowed));
  std::string out;
  for (PolicyKey key : keys) out += fmt::format("{}{}", out.empty() ? "" : ",", PolicyKeyName(key));
  return out;
}

std::string DefaultPolicyValue(PolicyKey key, uint64_t default_segment_size) {
  switch (key) {
    case PolicyKey::kRaid: return "none";
    case PolicyKey::kIdr: return "none";
    case PolicyKey::kCompress: return "off";
    case PolicyKey::kEncrypt: return "off";
    case PolicyKey::kKey: return "none";
    case PolicyKey::kChecksum: return "crc32c";
    case PolicyKey::kPlacement: return "balanced";
    case PolicyKey::kSegmentSize: return std::to_string(default_segment_size);
    case PolicyKey::kPlugins: return "none";
    case PolicyKey::kPolicy: return "none";
  }
  return "";
}

}  // namespace cairn
