#include "fs/posix_acl.h"

#include "util/coding.h"

namespace cairn {
namespace {

constexpr uint32_t kAclVersion = 2;
constexpr size_t kHeaderSize = 4;
constexpr size_t kEntrySize = 8;
enum Tag : uint16_t { kUserObj = 0x01, kUser = 0x02, kGroupObj = 0x04, kGroup = 0x08, kMask = 0x10, kOther = 0x20 };

bool WellFormed(const std::vector<uint8_t>& acl) {
  return acl.size() >= kHeaderSize && (acl.size() - kHeaderSize) % kEntrySize == 0 &&
         GetFixed32(acl.data()) == kAclVersion;
}

// Calls fn(tag, perm_pointer) for each entry; perm is stored little-endian u16 at +2.
template <typename Fn>
void ForEachEntry(std::vector<uint8_t>& acl, Fn fn) {
  for (size_t off = kHeaderSize; off + kEntrySize <= acl.size(); off += kEntrySize) {
    fn(GetFixed16(&acl[off]), &acl[off + 2]);
  }
}

uint16_t Perm(const uint8_t* p) { return GetFixed16(p); }
void SetPerm(uint8_t* p, uint32_t perm) { PutFixed16(p, static_cast<uint16_t>(perm & 7)); }

}  // namespace

bool AclApplyCreateMode(std::vector<uint8_t>& acl, uint32_t* mode_inout) {
  if (!WellFormed(acl)) return false;
  uint32_t mode = *mode_inout;
  uint8_t* group_obj = nullptr;
  uint8_t* mask = nullptr;
  ForEachEntry(acl, [&](uint16_t tag, uint8_t* perm) {
    switch (tag) {
      case kUserObj:
        SetPerm(perm, Perm(perm) & (mode >> 6));
        mode &= (static_cast<uint32_t>(Perm(perm)) << 6) | ~0700u;
        break;
      case kGroupObj: group_obj = perm; break;
      case kMask: mask = perm; break;
      case kOther:
        SetPerm(perm, Perm(perm) & mode);
        mode &= Perm(perm) | ~07u;
        break;
      default: break;
    }
  });
  uint8_t* group_class = mask ? mask : group_obj;
  if (group_class) {
    SetPerm(group_class, Perm(group_class) & (mode >> 3));
    mode &= (static_cast<uint32_t>(Perm(group_class)) << 3) | ~070u;
  }
  *mode_inout = mode;
  return true;
}

bool AclApplyChmod(std::vector<uint8_t>& acl, uint32_t mode) {
  if (!WellFormed(acl)) return false;
  bool has_mask = false;
  ForEachEntry(acl, [&](uint16_t tag, uint8_t*) { has_mask |= tag == kMask; });
  ForEachEntry(acl, [&](uint16_t tag, uint8_t* perm) {
    if (tag == kUserObj) SetPerm(perm, mode >> 6);
    if (tag == (has_mask ? kMask : kGroupObj)) SetPerm(perm, mode >> 3);
    if (tag == kOther) SetPerm(perm, mode);
  });
  return true;
}

int AclPermissionBits(const std::vector<uint8_t>& acl) {
  if (!WellFormed(acl)) return -1;
  int user = 0, group = 0, mask = -1, other = 0;
  auto copy = acl;
  ForEachEntry(copy, [&](uint16_t tag, uint8_t* perm) {
    if (tag == kUserObj) user = Perm(perm) & 7;
    if (tag == kGroupObj) group = Perm(perm) & 7;
    if (tag == kMask) mask = Perm(perm) & 7;
    if (tag == kOther) other = Perm(perm) & 7;
  });
  return (user << 6) | ((mask >= 0 ? mask : group) << 3) | other;
}

}  // namespace cairn

namespace cairn {

bool AclIsMinimal(const std::vector<uint8_t>& acl) {
  if (!WellFormed(acl)) return false;
  bool minimal = true;
  auto copy = acl;
  ForEachEntry(copy, [&](uint16_t tag, uint8_t*) { minimal &= tag == kUserObj || tag == kGroupObj || tag == kOther; });
  return minimal;
}

}  // namespace cairn
