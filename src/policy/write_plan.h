// WritePlan: what policy resolution decides for the data of a file, typed, for the write
// path: segment size, transform chain, redundancy (with its checksum and intra-disk parity),
// disk group, placement hints, and the policy stamp its extents record. The write path reads
// these fields and never parses the stamp back.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cairn/status.h"
#include "codec/transform_chain.h"
#include "group/placer.h"
#include "policy/resolver.h"
#include "redundancy/redundancy.h"

namespace cairn {

struct WritePlan {
  uint64_t segment_size = 0;
  TransformChain chain;    // compress=, encrypt= and plugins=: the logical payload to the stored one
  // compress=auto: the chain without its compress stage, for a payload that looks
  // incompressible (codec/incompressible.h); nullopt otherwise.
  std::optional<TransformChain> chain_if_incompressible;
  std::string key_name;    // key=: the master key that wraps the file's data key, when encrypted
  Redundancy redundancy;   // raid=, idr= and checksum=
  std::string group;       // placement=group=NAME; "" for the archive's disks
  PlacementHints placement;
  // The resolved policy as ResolvedPolicy::Effective() spells it: interned in the catalog's
  // layouts and recorded in each extent header. One stamp, one plan.
  std::string policy_stamp;
};

// The group and hints a placement= value (canonical) names; "" and none for "balanced".
Status ParsePlacement(const std::string& value, std::string& group, PlacementHints& hints);

// The plan of a freshly resolved policy. NotSupported when it asks for a transform that is
// not installed; InvalidArgument for a value the vocabulary would have refused.
Result<std::shared_ptr<const WritePlan>> PlanWrite(const ResolvedPolicy& policy);

// The plan of a file persisted before with the policy `stamp` (its layout, kept until the
// reconciler changes it) and `segment_size`; its stamp stays as it is. Keys an old stamp
// lacks take their defaults.
Result<std::shared_ptr<const WritePlan>> PlanOfLayout(const std::string& stamp, uint64_t segment_size);

}  // namespace cairn
