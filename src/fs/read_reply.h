// ReadReply is what a read hands back: its bytes in order, as pieces that are either the
// reply's own memory (filled from the staging cache, or zeros) or views into decoded extents
// that it keeps alive, so that persisted bytes reach the kernel without another copy.
#pragma once

#include <sys/uio.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace cairn {

class ReadReply {
 public:
  // At most `capacity` bytes of the reply's own memory (the size asked for), allocated when
  // first needed: a read served from decoded extents alone needs none.
  explicit ReadReply(size_t capacity) : room_(capacity) {}

  // The next n bytes of the reply, in its own memory, for the caller to fill.
  std::span<uint8_t> Own(size_t n);
  // The next bytes of the reply are `bytes`, which live in `keeper` (held until the reply goes).
  void View(std::span<const uint8_t> bytes, std::shared_ptr<const void> keeper);

  size_t size() const { return size_; }
  // The pieces, for writev-like calls; valid while the reply lives.
  const std::vector<iovec>& pieces() const { return pieces_; }

 private:
  void Append(const uint8_t* data, size_t n);

  std::unique_ptr<uint8_t[]> own_;
  size_t room_;
  size_t own_used_ = 0;
  size_t size_ = 0;
  std::vector<iovec> pieces_;
  std::vector<std::shared_ptr<const void>> keepers_;
};

inline std::span<uint8_t> ReadReply::Own(size_t n) {
  assert(own_used_ + n <= room_);  // a read never returns more than was asked for
  if (n == 0) return {};
  if (!own_) own_ = std::make_unique_for_overwrite<uint8_t[]>(room_);
  std::span<uint8_t> room(own_.get() + own_used_, n);
  own_used_ += n;
  Append(room.data(), n);
  return room;
}

inline void ReadReply::View(std::span<const uint8_t> bytes, std::shared_ptr<const void> keeper) {
  if (bytes.empty()) return;
  Append(bytes.data(), bytes.size());
  keepers_.push_back(std::move(keeper));
}

inline void ReadReply::Append(const uint8_t* data, size_t n) {
  if (n == 0) return;
  size_ += n;
  if (!pieces_.empty()) {  // contiguous with the last piece: one piece
    iovec& last = pieces_.back();
    if (static_cast<const uint8_t*>(last.iov_base) + last.iov_len == data) {
      last.iov_len += n;
      return;
    }
  }
  pieces_.push_back({const_cast<uint8_t*>(data), n});
}

}  // namespace cairn
