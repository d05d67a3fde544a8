// The user.cairn.* extended-attribute vocabulary (DESIGN.md, "Policy surface"): which
// keys exist, which values each accepts, and which of those this build can honour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/status.h"
#include "codec/transform_chain.h"

namespace cairn {

inline constexpr std::string_view kPolicyPrefix = "user.cairn.";
// Admin pins (trusted.cairn.KEY) and locks (trusted.cairn.lock); the kernel lets only
// CAP_SYS_ADMIN set them.
inline constexpr std::string_view kTrustedPolicyPrefix = "trusted.cairn.";
inline bool IsPolicyXattr(std::string_view name) {
  return name.starts_with(kPolicyPrefix) || name.starts_with(kTrustedPolicyPrefix);
}
// Whether setting or removing attribute `name` can change whether, and under which master
// key, the data of the inode it is on (or, on a directory, of what inherits from it) is
// encrypted: encrypt, key and policy (a named policy may set both) as user.cairn. settings
// and trusted.cairn. pins, and trusted.cairn.lock (it decides whether users' settings count).
// No other key can: plugins= refuses encrypt plugins.
bool DecidesEncryption(std::string_view name);

// Settable keys, in the order `user.cairn.effective` prints them.
enum class PolicyKey { kRaid, kIdr, kCompress, kEncrypt, kKey, kChecksum, kPlacement, kSegmentSize, kPlugins, kPolicy };
inline constexpr PolicyKey kAllPolicyKeys[] = {PolicyKey::kRaid,      PolicyKey::kIdr,       PolicyKey::kCompress,
                                               PolicyKey::kEncrypt,   PolicyKey::kKey,       PolicyKey::kChecksum,
                                               PolicyKey::kPlacement, PolicyKey::kSegmentSize, PolicyKey::kPlugins,
                                               PolicyKey::kPolicy};

// Read-only keys answered by exact name and never listed: effective, effective.source,
// state, location, digest, scrubbed.
bool IsComputedPolicyKey(std::string_view suffix);

std::string_view PolicyKeyName(PolicyKey key);  // "raid", "segment_size", ...
// `suffix` is the part after "user.cairn.". Unknown keys are InvalidArgument.
Result<PolicyKey> ParsePolicyKey(std::string_view suffix);

// The longest value any key accepts; valid ones are far shorter (names are at most 64).
constexpr size_t kMaxPolicyValue = 256;

// Checks `value` for `key` and returns its canonical spelling (sizes in bytes).
// A well-formed value this build cannot honour yet is NotSupported, saying so; a
// malformed one is InvalidArgument naming the key, the value and what is allowed.
Result<std::string> CanonicalPolicyValue(PolicyKey key, std::string_view value);

// Checks a trusted.cairn.lock value: "all" or keys separated by commas ("raid,policy").
// Returns it canonical: "all", or the keys in vocabulary order joined by commas.
Result<std::string> CanonicalLockValue(std::string_view value);

// The archive default of each key, as printed by user.cairn.effective.
std::string DefaultPolicyValue(PolicyKey key, uint64_t default_segment_size);

// The compress plugin and its parameters for a compress= value other than off (lz4, zstd,
// zstd-N, auto); InvalidArgument for another value, NotSupported when that plugin is not
// installed.
Result<TransformChain::Stage> CompressionStage(const std::string& value);

}  // namespace cairn
