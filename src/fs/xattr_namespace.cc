#include "fs/xattr_namespace.h"

#include <cerrno>

#include <fmt/format.h>

#include "fs/posix_acl.h"

namespace cairn {
namespace {

constexpr std::string_view kTrustedPrefix = "trusted.";
constexpr std::string_view kStoredPrefixes[] = {"user.", kTrustedPrefix, "security."};

bool Accepted(std::string_view name) {
  for (std::string_view prefix : kStoredPrefixes) {
    if (name.size() > prefix.size() && name.starts_with(prefix)) return true;
  }
  return name == kAclAccessXattr || name == kAclDefaultXattr;
}

}  // namespace

Status CheckXattrNamespace(std::string_view name) {
  if (Accepted(name)) return Status::OK();
  for (std::string_view prefix : kStoredPrefixes) {
    if (name == prefix) return Status::Posix(EINVAL, fmt::format("extended attribute '{}' has no name", name));
  }
  return Status::Posix(EOPNOTSUPP, fmt::format("extended attribute '{}' is outside the namespaces cairn stores "
                                               "(user., trusted., security., system.posix_acl_*)",
                                               name));
}

bool XattrListed(std::string_view name, bool privileged) {
  return Accepted(name) && (privileged || !name.starts_with(kTrustedPrefix));
}

}  // namespace cairn
