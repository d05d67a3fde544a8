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

// Makes the transform at `version` (1..its current version), or NotSupported naming the
// version when it cannot read that one.
using TransformFactory = std::function<Result<std::shared_ptr<const Transform>>(uint32_t version)>;

// Registers transform `name` ([a-z0-9-], 1..32 characters, starting with a letter) whose
// newest output is `current_version` (>= 1). InvalidArgument for a bad name or version,
// Exists when the name is taken.
Status RegisterTransform(std::string_view name, uint32_t current_version, TransformFactory factory);
bool IsTransformRegistered(std::string_view name);

// The transform `name` at its current version, for writing. NotSupported when no transform
// of that name is installed.
Result<std::shared_ptr<const Transform>> TransformForWriting(std::string_view name);
// The transform `name` at `version`, for reading what it once wrote. NotSupported naming it
// when it is not installed or does not read that version.
Result<std::shared_ptr<const Transform>> TransformForReading(std::string_view name, uint32_t version);

}  // namespace cairn
