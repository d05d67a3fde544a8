#include <catch2/catch.hpp>

#include <functional>
#include <optional>

#include <fmt/format.h>

#include "cairn/disk.h"
#include "fault_disk.h"
#include "group/disk_group.h"
#include "redundancy/striping.h"
#include "store/block_chunk_store.h"
#include "test_util.h"
#include "util/coding.h"

using namespace cairn;

namespace {

constexpr uint64_t kDiskBytes = 64 * kBlockSize;

// A store over a fresh image file of 64 blocks whose chunks may use blocks 1..63.
std::unique_ptr<BlockChunkStore> MakeStore(const test::TempDir& dir, uint32_t index) {
  auto disk = CreateImageDisk(dir / ("disk-" + std::to_string(index) + ".img"), kDiskBytes);
  REQUIRE(disk.ok());
  return std::make_unique<BlockChunkStore>(index, std::move(*disk), kBlockSize, kDiskBytes);
}

Redundancy Idr(const char* idr) {
  auto r = ParseRedundancy("none", idr);
  REQUIRE(r.ok());
  return *r;
}

ExtentHeader HeaderFor(uint64_t extent_id, std::span<const uint8_t> payload, const Redundancy& redundancy) {
  ExtentHeader h;
  h.archive_id = ArchiveId{1, 2, 3};
  h.extent_id = extent_id;
  h.inode = 7;
  h.payload_length = payload.size();
  h.payload_crc = Crc32c(payload);
  h.redundancy = redundancy;
  h.extent_payload_length = payload.size();
  h.extent_payload_crc = h.payload_crc;
  h.logical_length = payload.size();  // no transform chain
  return h;
}

ExtentExpectation ExpectationFor(const ExtentHeader& h) {
  return ExtentExpectation{h.archive_id,  h.extent_id, h.payload_length, h.payload_crc, 0, h.redundancy.idr_scramble,
                           ChecksumType::kCrc32c, {}};
}

}  // namespace

TEST_CASE("BlockChunkStore: a chunk written to its locator reads back verified", "[store]") {
  test::TempDir dir;
  auto store = MakeStore(dir, 3);
  CHECK(store->name() == "disk 3");
  CHECK(store->capacity() == kDiskBytes - kBlockSize);
  auto payload = test::RandomBytes(10000, 1);
  auto at = store->Reserve(payload.size(), 0);
  REQUIRE(at);
  CHECK(at->address == kBlockSize);                     // first fit after the superblock
  CHECK(at->length == ExtentAllocation(payload.size()));  // header block + 3 payload blocks
  CHECK(store->free_bytes() == store->capacity() - at->length);
  ExtentHeader header = HeaderFor(42, payload, {});
  REQUIRE(store->Write(*at, header, payload).ok());
  REQUIRE(store->Sync().ok());
  ExtentHeader read_header;
  auto bytes = store->Read(*at, ExpectationFor(header), nullptr, &read_header);
  REQUIRE(bytes.ok());
  CHECK(*bytes == payload);
  CHECK(read_header.extent_id == 42);
  auto alone = store->ReadHeader(*at);
  REQUIRE(alone.ok());
  CHECK(alone->inode == 7);
  CHECK(store->Describe(*at, 100) == "disk3@" + std::to_string(kBlockSize + kExtentHeaderSize + 100));

  ExtentExpectation wrong = ExpectationFor(header);
  wrong.extent_id = 43;  // the catalog expects another extent there
  auto refused = store->Read(*at, wrong, nullptr, nullptr);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().IsCorruption());
  CHECK(refused.status().message().find("holds extent 42 chunk 0 (catalog expects 43 chunk 0)") != std::string::npos);
}

TEST_CASE("BlockChunkStore: a scan for chunks reads around a bad sector, not past a whole window", "[store]") {
  test::TempDir dir;
  auto image = CreateImageDisk(dir / "disk.img", kDiskBytes);
  REQUIRE(image.ok());
  std::vector<std::pair<uint64_t, uint64_t>> bad;  // none while the chunks are written
  auto bad_blocks = std::make_unique<test::BadBlocksDisk>(std::move(*image), bad);
  const test::BadBlocksDisk& disk = *bad_blocks;
  BlockChunkStore store(0, std::move(bad_blocks), kBlockSize, kDiskBytes);
  std::vector<uint64_t> addresses;
  for (uint64_t id = 1; id <= 3; id++) {
    auto payload = test::RandomBytes(5000, static_cast<uint32_t>(id));
    auto at = store.Reserve(payload.size(), 0);
    REQUIRE(at);
    REQUIRE(store.Write(*at, HeaderFor(id, payload, {}), payload).ok());
    addresses.push_back(at->address);
  }
  REQUIRE(store.Sync().ok());
  // Bad sectors in the first chunk's payload (a scan does not need it), in the second chunk's
  // header, and in the last block of the disk.
  bad = {{addresses[0] + kExtentHeaderSize + 512, 512}, {addresses[1] + 1024, 512}, {kDiskBytes - kBlockSize, 512}};
  std::vector<uint64_t> found;
  std::vector<std::string> problems;
  store.ScanChunks([&](const ChunkLocator&, ExtentHeader h) { return found.push_back(h.extent_id), true; },
                   [&](const std::string& p) { problems.push_back(p); }, {});
  CHECK(found == std::vector<uint64_t>{1, 3});
  CHECK(problems == std::vector<std::string>{
                        fmt::format("disk 0 offset {}: unreadable ({}: injected read error); skipped 4096 bytes",
                                    addresses[1], dir / "disk.img"),
                        fmt::format("disk 0 offset {}: unreadable ({}: injected read error); skipped 4096 bytes",
                                    kDiskBytes - kBlockSize, dir / "disk.img")});
  // Each bad sector fails a window once, then the one block on it: not a window per block.
  CHECK(disk.failed_reads() <= 2 * 3);
}

TEST_CASE("BlockChunkStore: a chunk larger than its reservation is refused, not written", "[store]") {
  test::TempDir dir;
  auto store = MakeStore(dir, 0);
  auto small = store->Reserve(100, 0);
  auto next = store->Reserve(100, 0);
  REQUIRE(small);
  REQUIRE(next);
  auto neighbour = test::RandomBytes(100, 2);
  ExtentHeader neighbour_header = HeaderFor(2, neighbour, {});
  REQUIRE(store->Write(*next, neighbour_header, neighbour).ok());
  auto big = test::RandomBytes(3 * kBlockSize, 3);
  Status st = store->Write(*small, HeaderFor(1, big, {}), big);
  CHECK(st.code() == Status::Code::kInvalidArgument);
  CHECK(st.message().find("does not fit the 8192 bytes reserved") != std::string::npos);
  auto still = store->Read(*next, ExpectationFor(neighbour_header), nullptr, nullptr);
  REQUIRE(still.ok());
  CHECK(*still == neighbour);
}

TEST_CASE("BlockChunkStore: room is reserved, released, freed and rebuilt from the catalog", "[store]") {
  test::TempDir dir;
  auto store = MakeStore(dir, 0);
  const uint64_t capacity = store->capacity();
  std::vector<ChunkLocator> taken;
  while (auto at = store->Reserve(30000, 0)) taken.push_back(*at);  // 9 blocks each
  CHECK(taken.size() == 7);
  CHECK(store->free_bytes() == capacity - 7 * 9 * kBlockSize);
  CHECK_FALSE(store->Reserve(30000, 0));
  REQUIRE(store->Release(taken[2]).ok());
  CHECK(store->Release(taken[2]).IsCorruption());  // a double free is refused
  auto again = store->Reserve(30000, 0);
  REQUIRE(again);
  CHECK(*again == taken[2]);  // the released room is reused
  REQUIRE(store->Free(taken[0]).ok());
  CHECK(store->free_bytes() == capacity - 6 * 9 * kBlockSize);

  // At open, the space map is rebuilt from the catalog's chunks; an overlap is corruption.
  auto reopened = MakeStore(dir, 1);
  for (size_t i = 1; i < taken.size(); i++) REQUIRE(reopened->MarkUsed(taken[i]).ok());
  CHECK(reopened->free_bytes() == capacity - 6 * 9 * kBlockSize);
  Status overlap = reopened->MarkUsed(ChunkLocator{taken[1].address + kBlockSize, kBlockSize});
  CHECK(overlap.IsCorruption());
  CHECK(reopened->MarkUsed(ChunkLocator{kDiskBytes, kBlockSize}).IsCorruption());  // outside the disk
}

// A disk whose discards run a test's step first.
class DiscardHookDisk : public DiskWrapper {
 public:
  DiscardHookDisk(std::unique_ptr<Disk> target, std::function<void()> hook)
      : DiskWrapper(std::move(target)), hook_(std::move(hook)) {}
  Status Discard(uint64_t offset, uint64_t length) override {
    hook_();
    return DiskWrapper::Discard(offset, length);
  }

 private:
  std::function<void()> hook_;
};

TEST_CASE("BlockChunkStore: a freed chunk is discarded before its room can be reserved again", "[store]") {
  test::TempDir dir;
  auto image = CreateImageDisk(dir / "disk.img", kDiskBytes);
  REQUIRE(image.ok());
  BlockChunkStore* store = nullptr;
  int discards = 0;
  std::optional<ChunkLocator> reserved_meanwhile;
  auto disk = std::make_unique<DiscardHookDisk>(std::move(*image), [&] {
    discards++;
    reserved_meanwhile = store->Reserve(30000, 0);  // what a writer on another thread would get
  });
  BlockChunkStore owned(0, std::move(disk), kBlockSize, kDiskBytes);
  store = &owned;
  std::vector<ChunkLocator> taken;
  while (auto at = store->Reserve(30000, 0)) taken.push_back(*at);
  REQUIRE(store->Free(taken[3]).ok());
  CHECK(discards == 1);
  CHECK_FALSE(reserved_meanwhile);  // the discard would have wiped a chunk written there
  CHECK(store->Free(taken[3]).IsCorruption());  // a double free is refused, and discards nothing
  CHECK(discards == 1);
  CHECK(store->Reserve(30000, 0) == taken[3]);
}

TEST_CASE("BlockChunkStore: intra-disk parity rebuilds a damaged block and says which", "[store]") {
  test::TempDir dir;
  auto store = MakeStore(dir, 0);
  Redundancy r = Idr("spc-16-1-s2");
  auto payload = test::RandomBytes(20 * kBlockSize, 4);
  auto at = store->Reserve(payload.size(), r.idr_scramble);
  REQUIRE(at);
  CHECK(at->length == ExtentAllocation(payload.size(), r.idr_scramble));
  ExtentHeader header = HeaderFor(9, payload, r);
  REQUIRE(store->Write(*at, header, payload).ok());
  std::vector<uint8_t> garbage(kBlockSize, 0xa5);
  REQUIRE(store->disk().WriteAt(at->address + kExtentHeaderSize + 5 * kBlockSize, garbage).ok());
  std::vector<uint64_t> repaired;
  auto bytes = store->Read(*at, ExpectationFor(header), &repaired, nullptr);
  REQUIRE(bytes.ok());
  CHECK(*bytes == payload);
  CHECK(repaired == std::vector<uint64_t>{5});
}

TEST_CASE("DiskGroup: reserves each chunk in its own domain on disks in service, or nothing", "[store]") {
  test::TempDir dir;
  std::vector<std::unique_ptr<BlockChunkStore>> stores;
  for (uint32_t i = 0; i < 4; i++) stores.push_back(MakeStore(dir, i));
  // Disk 1 has the most room left once the others hold a chunk each.
  for (uint32_t i : {0, 2, 3}) REQUIRE(stores[i]->Reserve(kBlockSize, 0));
  std::vector<DiskGroup::Member> members;
  for (uint32_t i = 0; i < 4; i++) {
    members.push_back({i, stores[i].get(), i < 2 ? "shelf-a" : "shelf-" + std::to_string(i)});
  }
  DiskGroup group("fast", GroupType::kPool, std::move(members), std::make_unique<FillBalancedPlacer>());
  CHECK(group.Contains(3));
  CHECK_FALSE(group.Contains(4));
  auto all = [](uint32_t) { return true; };

  auto two = group.Reserve(PlacementRequest{2}, 100, 0, all);
  REQUIRE(two.ok());
  REQUIRE(two->size() == 2);
  CHECK((*two)[0].disk == 1);  // most free space
  CHECK((*two)[1].disk == 2);  // disk 0 shares shelf-a with disk 1; then the lowest index of a tie
  // Disk 2 out of service, shelf-3 avoided (it holds another chunk): shelf-a is left, where
  // disk 0 (one block taken) now has more room than disk 1 (two).
  auto one = group.Reserve(PlacementRequest{1, {"shelf-3"}}, 100, 0, [](uint32_t d) { return d != 2; });
  REQUIRE(one.ok());
  CHECK((*one)[0].disk == 0);

  uint64_t before = group.free_bytes();
  auto too_many = group.Reserve(PlacementRequest{4}, 100, 0, all);  // three domains only
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().code() == Status::Code::kNoSpace);
  CHECK(too_many.status().message() ==
        "4 chunk(s) of 100 bytes need as many disks with room, in distinct failure domains; only 3 found among the 4 "
        "disks of group fast");
  CHECK(group.free_bytes() == before);  // the three it did find went back
}

TEST_CASE("BlockChunkStore: a scan looks inside another archive's header instead of skipping what it claims",
          "[store]") {
  test::TempDir dir;
  auto store = MakeStore(dir, 0);
  // Chunk 1's payload holds, at a block boundary, the header of a chunk of another archive
  // (a disk image stored in this one) that claims the rest of the disk.
  std::vector<uint8_t> payload = test::RandomBytes(8 * kBlockSize, 1);
  ExtentHeader foreign = HeaderFor(99, std::vector<uint8_t>(40 * kBlockSize), {});
  foreign.archive_id = ArchiveId{9, 9, 9};
  auto encoded = EncodeExtentHeader(foreign);
  std::copy(encoded.begin(), encoded.end(), payload.begin() + 2 * kBlockSize);
  auto first = store->Reserve(payload.size(), 0);
  REQUIRE(first);
  REQUIRE(store->Write(*first, HeaderFor(1, payload, {}), payload).ok());
  auto tail = test::RandomBytes(5000, 2);
  auto second = store->Reserve(tail.size(), 0);
  REQUIRE(second);
  REQUIRE(store->Write(*second, HeaderFor(2, tail, {}), tail).ok());
  // Chunk 1's own header damaged: the scan walks its payload block by block.
  std::vector<uint8_t> zeros(kBlockSize);
  REQUIRE(store->disk().WriteAt(first->address, zeros).ok());
  REQUIRE(store->Sync().ok());
  std::vector<uint64_t> found;
  store->ScanChunks(
      [&](const ChunkLocator&, ExtentHeader h) {
        found.push_back(h.extent_id);
        return h.archive_id == ArchiveId{1, 2, 3};
      },
      [](const std::string&) {}, {});
  CHECK(found == std::vector<uint64_t>{99, 2});
}
