#include "keys/secret_bytes.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "util/log.h"

namespace cairn {

SecretBytes::SecretBytes(size_t size) {
  if (size == 0) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  mapped_ = (size + page - 1) / page * page;
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  // Each failure is logged once per process: every key would report it again.
  if (::madvise(p, mapped_, MADV_DONTDUMP) != 0) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) LogWarning("cannot keep key memory out of core dumps ({})", std::strerror(errno));
  }
  if (::mlock(p, mapped_) != 0) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) LogWarning("cannot lock key memory into RAM ({}); it may be swapped", std::strerror(errno));
  }
}

SecretBytes::~SecretBytes() { Release(); }

SecretBytes::SecretBytes(SecretBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

SecretBytes& SecretBytes::operator=(SecretBytes&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void SecretBytes::Release() {
  if (!data_) return;
  OPENSSL_cleanse(data_, mapped_);
  ::munlock(data_, mapped_);
  ::munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

SecretBytes SecretBytes::CopyOf(std::span<const uint8_t> bytes) {
  SecretBytes out(bytes.size());
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

Result<SecretBytes> SecretBytes::Random(size_t size) {
  SecretBytes out(size);
  if (size && RAND_bytes(out.data(), static_cast<int>(size)) != 1) {
    return Status::IOError("the random number generator failed");
  }
  return out;
}

}  // namespace cairn
