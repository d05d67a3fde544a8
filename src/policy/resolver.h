// Resolves the effective policy of an inode: its own user.cairn.* value, else the
// nearest ancestor directory's, else the archive default; and says where each came from.
// Admin rules and trusted.cairn.* locks slot in between once they exist.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "policy/vocabulary.h"

namespace cairn {

struct ResolvedField {
  PolicyKey key;
  std::string value;
  std::string source;  // "file", "dir:/path/of/dir" or "default"
};

struct ResolvedPolicy {
  std::vector<ResolvedField> fields;  // one per PolicyKey, in kAllPolicyKeys order
  const ResolvedField& Get(PolicyKey key) const { return fields[static_cast<size_t>(key)]; }
  uint64_t segment_size() const;
  std::string Effective() const;  // "raid=none idr=none ... segment_size=4194304 ..."
  std::string Sources() const;    // "raid=default ... segment_size=dir:/logs ..."
};

// REQUIRES: the caller serializes catalog access.
Result<ResolvedPolicy> ResolvePolicy(Catalog& catalog, uint64_t ino, uint64_t default_segment_size);

}  // namespace cairn
