// The transforms this process can write and read, by name: plugins register theirs once at
// start (tests register test-only ones). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "cairn/status.h"
#include "codec/transform.h"

namespace cairn {

// Makes the transform at `version` (1..its current version) with `params`, NotSupported naming
// the version when it cannot read that one, InvalidArgument naming a parameter it refuses.
using TransformFactory =
    std::function<Result<std::shared_ptr<const Transform>>(uint32_t version, std::string_view params)>;

// Registers transform `name` ([a-z0-9-], 1..32 characters, starting with a letter) whose
// newest output is `current_version` (>= 1). InvalidArgument for a bad name or version,
// Exists when the name is taken.
Status RegisterTransform(std::string_view name, uint32_t current_version, TransformFactory factory,
                         TransformStage stage = TransformStage::kCustom);
// The stage transform `name` runs in; NotSupported when it is not installed.
Result<TransformStage> StageOfTransform(std::string_view name);

// The transform `name` at its current version with `params`, for writing. NotSupported when
// no transform of that name is installed.
Result<std::shared_ptr<const Transform>> TransformForWriting(std::string_view name, std::string_view params = {});
// The transform `name` at `version` with `params`, for reading what it once wrote.
// NotSupported naming it when it is not installed or does not read that version.
Result<std::shared_ptr<const Transform>> TransformForReading(std::string_view name, uint32_t version,
                                                             std::string_view params = {});

}  // namespace cairn
