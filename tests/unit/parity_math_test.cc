#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>
#include <vector>

#include "array/grid_geometry.h"
#include "redundancy/parity_math.h"
#include "array/peeling_decoder.h"
#include "grid_test_geometries.h"
#include "test_util.h"

using namespace cairn;
using cairn::test::RandomBytes;
using cairn::test::TestGrid;

namespace {

using Bytes = std::vector<uint8_t>;

// Buffers placed at a chosen distance from a 64-byte boundary, to steer the aligned and the
// unaligned paths.
class Buffers {
 public:
  // `count` buffers of `len` bytes, buffer i starting `offsets(i)` bytes past a 64-byte boundary.
  template <typename Offset>
  Buffers(size_t count, size_t len, Offset offsets) : storage_(count) {
    for (size_t i = 0; i < count; i++) {
      storage_[i].resize(len + 128);
      uintptr_t base = reinterpret_cast<uintptr_t>(storage_[i].data());
      size_t skip = (64 - base % 64) % 64 + offsets(i);
      spans_.emplace_back(storage_[i].data() + skip, len);
      Bytes fill = RandomBytes(len, static_cast<uint32_t>(1000 * count + 10 * i + len));
      std::memcpy(spans_.back().data(), fill.data(), len);
    }
  }
  std::span<uint8_t> operator[](size_t i) { return spans_[i]; }
  std::vector<std::span<const uint8_t>> Sources(size_t from) const {
    return std::vector<std::span<const uint8_t>>(spans_.begin() + from, spans_.end());
  }

 private:
  std::vector<Bytes> storage_;
  std::vector<std::span<uint8_t>> spans_;
};

// The byte-at-a-time reference.
Bytes ReferenceXor(const std::vector<std::span<const uint8_t>>& sources, size_t len) {
  Bytes out(len, 0);
  for (auto s : sources) {
    for (size_t i = 0; i < len; i++) out[i] ^= s[i];
  }
  return out;
}

Bytes Copy(std::span<const uint8_t> s) { return Bytes(s.begin(), s.end()); }

}  // namespace

TEST_CASE("ParityMath: known vectors", "[array]") {
  Bytes dst = {0x00, 0xff, 0x0f, 0xaa};
  const Bytes src = {0xff, 0xff, 0xf0, 0x55};
  XorInto(dst, src);
  CHECK(dst == Bytes{0xff, 0x00, 0xff, 0xff});
  XorInto(dst, src);
  CHECK(dst == Bytes{0x00, 0xff, 0x0f, 0xaa});  // XOR twice is the identity

  const Bytes a = {0x01, 0x02, 0x03, 0x04}, b = {0x10, 0x20, 0x30, 0x40}, c = {0xff, 0x00, 0xff, 0x00};
  Bytes parity(4, 0x5a);
  const std::span<const uint8_t> abc[] = {a, b, c};
  XorAll(parity, abc);
  CHECK(parity == Bytes{0xee, 0x22, 0xcc, 0x44});
  // A lost member is the XOR of the rest of its group.
  Bytes rebuilt(4);
  const std::span<const uint8_t> rest[] = {a, c, parity};
  XorAll(rebuilt, rest);
  CHECK(rebuilt == b);
  XorAll(rebuilt, std::span<const std::span<const uint8_t>>());
  CHECK(rebuilt == Bytes(4, 0));
  const std::span<const uint8_t> only_a[] = {a};
  XorAll(rebuilt, only_a);
  CHECK(rebuilt == a);

  // Delta rule: b's last byte goes 0x40 -> 0x41.
  const Bytes b2 = {0x10, 0x20, 0x30, 0x41};
  Bytes delta(4);
  ParityDelta(b, b2, delta);
  CHECK(delta == Bytes{0x00, 0x00, 0x00, 0x01});
  UpdateParity(parity, b, b2);
  CHECK(parity == Bytes{0xee, 0x22, 0xcc, 0x45});
  const std::span<const uint8_t> abc2[] = {a, b2, c};
  XorAll(rebuilt, abc2);
  CHECK(rebuilt == parity);

  Bytes empty;
  XorInto(empty, Bytes{});  // zero length is fine
  UpdateParity(empty, Bytes{}, Bytes{});
  CHECK(empty.empty());
}

TEST_CASE("ParityMath: ParityBuffers are aligned for the fast path and XOR like any buffer", "[array]") {
  for (size_t len : {size_t{1}, size_t{4096 + 17}, size_t{68 * 1024}, size_t{4 << 20}}) {
    INFO("len " << len);
    std::vector<ParityBuffer> buffers(3);
    for (size_t i = 0; i < buffers.size(); i++) {
      buffers[i].resize(len);  // left as it is: filled here
      CHECK(reinterpret_cast<uintptr_t>(buffers[i].data()) % kParityAlignment == 0);
      Bytes fill = RandomBytes(len, static_cast<uint32_t>(len + i));
      std::copy(fill.begin(), fill.end(), buffers[i].begin());
    }
    std::vector<std::span<const uint8_t>> sources{buffers[0], buffers[1], buffers[2]};
    Bytes expected = ReferenceXor(sources, len);
    XorAll(buffers[0], sources);  // in place
    CHECK(Copy(buffers[0]) == expected);
    ParityBuffer zeros(len, 0);  // a value given is still a value set
    CHECK(std::all_of(zeros.begin(), zeros.end(), [](uint8_t b) { return b == 0; }));
  }
}

TEST_CASE("ParityMath: every length, alignment and source count matches the reference", "[array]") {
  for (size_t len : {size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{95}, size_t{128}, size_t{4096},
                     size_t{4096 + 17}, size_t{68 * 1024 + 5}}) {
    for (size_t count : {size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{70}}) {  // 70: more than one xor_gen call
      for (int layout = 0; layout < 4; layout++) {
        // 0: all 32-aligned; 1: all 5 past; 2: 3 past, one buffer 4 past; 3: 31 past.
        auto offsets = [&](size_t i) -> size_t {
          switch (layout) {
            case 0: return 0;
            case 1: return 5;
            case 2: return i == 1 ? 4 : 3;
            default: return 31;
          }
        };
        INFO("len " << len << ", sources " << count << ", layout " << layout);
        Buffers buffers(count + 1, len, offsets);  // buffer 0 is the destination
        std::vector<std::span<const uint8_t>> sources = buffers.Sources(1);
        Bytes expected = ReferenceXor(sources, len);
        XorAll(buffers[0], sources);
        CHECK(Copy(buffers[0]) == expected);

        // XorInto, and XorAll with dst as its first source (in place).
        Bytes before = Copy(buffers[1]);
        XorInto(buffers[1], buffers[2 % (count + 1)]);
        CHECK(Copy(buffers[1]) == ReferenceXor({before, buffers[2 % (count + 1)]}, len));
        std::span<const uint8_t> in_place[] = {buffers[0], buffers[1]};
        Bytes expected_in_place = ReferenceXor({buffers[0], buffers[1]}, len);
        XorAll(buffers[0], in_place);
        CHECK(Copy(buffers[0]) == expected_in_place);

        // UpdateParity equals XorInto(parity, ParityDelta(old, new)).
        Bytes parity = Copy(buffers[0]);
        Bytes delta(len);
        ParityDelta(buffers[1], buffers[count], delta);
        XorInto(parity, delta);
        UpdateParity(buffers[0], buffers[1], buffers[count]);
        CHECK(Copy(buffers[0]) == parity);
      }
    }
  }
}

TEST_CASE("ParityMath: delta updates keep every parity relation, and a plan rebuilds lost disks", "[array]") {
  GridGeometry g = TestGrid("4x4:2+1");
  const size_t kLen = 4096 + 13;
  std::vector<Bytes> disks(g.disk_count(), Bytes(kLen));
  for (uint32_t d : g.data_disks()) disks[d] = RandomBytes(kLen, d + 1);
  auto group_of = [&](std::span<const uint32_t> members, uint32_t except) {
    std::vector<std::span<const uint8_t>> out;
    for (uint32_t m : members) {
      if (m != except) out.emplace_back(disks[m]);
    }
    return out;
  };
  // hP first (vP covers the hP disks of its column), then vP.
  for (uint32_t h = 0; h < g.hpg_count(); h++) {
    uint32_t hp = g.HpgMembers(h).back();
    XorAll(disks[hp], group_of(g.HpgMembers(h), hp));
  }
  for (uint32_t c = 0; c < g.vpg_count(); c++) {
    uint32_t vp = g.VpgMembers(c).back();
    XorAll(disks[vp], group_of(g.VpgMembers(c), vp));
  }
  auto relations_hold = [&]() {
    Bytes sum(kLen);
    for (uint32_t h = 0; h < g.hpg_count(); h++) {
      XorAll(sum, group_of(g.HpgMembers(h), UINT32_MAX));
      if (sum != Bytes(kLen, 0)) return false;
    }
    for (uint32_t c = 0; c < g.vpg_count(); c++) {
      XorAll(sum, group_of(g.VpgMembers(c), UINT32_MAX));
      if (sum != Bytes(kLen, 0)) return false;
    }
    return true;
  };
  REQUIRE(relations_hold());

  // Rewrite part of every data disk: the same delta goes to hP, vP and vhP.
  for (uint32_t d : g.data_disks()) {
    Bytes updated = disks[d];
    Bytes fresh = RandomBytes(1000, 100 + d);
    std::copy(fresh.begin(), fresh.end(), updated.begin() + 40 * d);
    Bytes delta(kLen);
    ParityDelta(disks[d], updated, delta);
    std::array<uint32_t, 4> writes = g.WriteSet(d);
    for (size_t i = 1; i < writes.size(); i++) XorInto(disks[writes[i]], delta);
    disks[d] = updated;
    REQUIRE(relations_hold());
  }

  // Lose three disks (a bucket, an hP and a vP) and rebuild them by the plan.
  const std::vector<Bytes> original = disks;
  std::set<uint32_t> failed = {0, 5, 12};
  for (uint32_t d : failed) disks[d].assign(kLen, 0xee);
  Result<RecoveryPlan> plan = PlanRecovery(g, failed);
  REQUIRE(plan.ok());
  REQUIRE(plan->recoverable());
  for (const RecoveryStep& step : plan->steps()) {
    std::vector<std::span<const uint8_t>> reads;
    for (uint32_t r : plan->reads(step)) reads.emplace_back(disks[r]);
    XorAll(disks[step.disk], reads);
  }
  CHECK(disks == original);
}
