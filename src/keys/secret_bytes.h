// SecretBytes: a small buffer for key material that never leaves memory the way it came:
// locked into RAM (mlock: never swapped out), left out of core dumps (MADV_DONTDUMP), and
// overwritten with zeros when released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "cairn/status.h"

namespace cairn {

// Move-only. An empty SecretBytes holds nothing.
class SecretBytes {
 public:
  SecretBytes() = default;
  // `size` zero bytes; throws std::bad_alloc when no memory can be mapped. Locking the
  // memory is attempted, and a failure is logged once per process (not fatal: an
  // unprivileged tool may not lock memory).
  explicit SecretBytes(size_t size);
  ~SecretBytes();
  SecretBytes(SecretBytes&& other) noexcept;
  SecretBytes& operator=(SecretBytes&& other) noexcept;
  SecretBytes(const SecretBytes&) = delete;
  SecretBytes& operator=(const SecretBytes&) = delete;

  // A copy of `bytes` in fresh secret memory.
  static SecretBytes CopyOf(std::span<const uint8_t> bytes);
  // `size` bytes from OpenSSL's CSPRNG; IOError when it fails.
  static Result<SecretBytes> Random(size_t size);

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  void Release();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // whole pages
};

}  // namespace cairn
