#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "array/promise_journal.h"
#include "array/range_set.h"
#include "test_util.h"
#include "util/coding.h"

using namespace cairn;

namespace {

constexpr std::array<uint32_t, kPromiseRoles> kDisks{3, 7, 12, 14};

std::unique_ptr<PromiseJournal> Fresh(const std::string& path) {
  auto journal = PromiseJournal::Create(path, "archive-1/cold");
  INFO(journal.status().ToString());
  REQUIRE(journal.ok());
  return std::move(*journal);
}

std::unique_ptr<PromiseJournal> Reopen(const std::string& path) {
  auto journal = PromiseJournal::Open(path, "archive-1/cold");
  INFO(journal.status().ToString());
  REQUIRE(journal.ok());
  return std::move(*journal);
}

void AppendGarbage(const std::string& path, std::span<const uint8_t> bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

}  // namespace

TEST_CASE("RangeSet: adds merge, removes split", "[array]") {
  RangeSet s;
  s.Add({100, 50});
  s.Add({200, 50});
  s.Add({150, 50});  // touches both: one range
  CHECK(s.First(1000) == ByteRange{100, 150});
  s.Remove({120, 10});
  std::vector<ByteRange> got;
  s.ForEach([&](ByteRange r) { got.push_back(r); });
  CHECK(got == std::vector<ByteRange>{{100, 20}, {130, 120}});
  CHECK(s.Overlaps({119, 1}));
  CHECK_FALSE(s.Overlaps({120, 10}));
  CHECK_FALSE(s.Overlaps({250, 10}));
  CHECK(s.bytes() == 140);
  s.Remove({0, 1000});
  CHECK(s.empty());
  CHECK(s.First(10) == std::nullopt);
  s.Add({0, 100});
  CHECK(s.First(64) == ByteRange{0, 64});
}

TEST_CASE("PromiseJournal: promises, marks, deltas and defects survive a reopen; done ones do not", "[array]") {
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  std::vector<uint8_t> delta = test::RandomBytes(70000, 1);
  uint64_t kept = 0;
  {
    auto journal = Fresh(path);
    auto& j = *journal;
    auto a = j.Begin(ArrayWriteMode::kSerialized, kDisks, 4096, 69632);
    REQUIRE(a.ok());
    std::vector<uint64_t> txns{a->txn};
    REQUIRE(j.Mark(txns, kDataRole, false).ok());
    REQUIRE(j.Mark(txns, kDataRole, true).ok());
    REQUIRE(j.Mark(txns, kHorizontalRole, false).ok());
    auto b = j.Begin(ArrayWriteMode::kDelayed, kDisks, 1 << 20, delta.size());
    REQUIRE(b.ok());
    CHECK(b->txn == a->txn + 1);
    CHECK(j.LoadDelta(b->txn).status().IsNotFound());
    const std::span<const uint8_t> whole[] = {delta};
    const std::span<const uint8_t> short_one[] = {std::span(delta).first(4096)};
    // in pieces, as a write in fresh space keeps it: zeros, the data where it is, zeros
    const std::span<const uint8_t> pieces[] = {std::span(delta).first(1000), std::span(delta).subspan(1000, 60000),
                                               {}, std::span(delta).subspan(61000)};
    CHECK(j.KeepDelta(b->txn, short_one).code() == Status::Code::kInvalidArgument);
    REQUIRE(j.KeepDelta(b->txn, pieces).ok());
    CHECK(j.KeepDelta(b->txn, whole).code() == Status::Code::kInvalidArgument);      // one per promise
    CHECK(j.KeepDelta(b->txn + 1, whole).code() == Status::Code::kInvalidArgument);  // no such promise
    CHECK(*j.LoadDelta(b->txn) == delta);
    auto c = j.Begin(ArrayWriteMode::kDirect, kDisks, 0, 4096);
    REQUIRE(c.ok());
    REQUIRE(j.Done(std::vector<uint64_t>{c->txn}).ok());
    REQUIRE(j.Begin(ArrayWriteMode::kDelayed, kDisks, 2 << 20, 4096).ok());  // its delta never came (a crash)
    REQUIRE(j.AddDefect(5, {0, 1 << 30}).ok());
    REQUIRE(j.RemoveDefect(5, {0, 64 << 20}).ok());
    kept = a->txn;
    CHECK(PromiseJournal::Create(path, "archive-1/cold").status().code() == Status::Code::kExists);
  }
  auto j = Reopen(path);
  auto state = j->state();
  REQUIRE(state.open.size() == 3);
  const Promise& a = state.open.at(kept);
  CHECK(a.mode == ArrayWriteMode::kSerialized);
  CHECK(a.disks == kDisks);
  CHECK(a.offset == 4096);
  CHECK(a.length == 69632);
  CHECK(a.started == std::array<bool, 4>{true, true, false, false});
  CHECK(a.finished == std::array<bool, 4>{true, false, false, false});
  CHECK(state.open.at(kept + 1).has_delta);
  CHECK(*j->LoadDelta(kept + 1) == delta);
  CHECK_FALSE(state.open.at(kept + 3).has_delta);
  CHECK(j->LoadDelta(kept + 3).status().IsNotFound());
  REQUIRE(state.defects.size() == 1);
  CHECK(state.defects.at(5).First(UINT64_MAX) == ByteRange{64 << 20, (1 << 30) - (64 << 20)});
  auto d = j->Begin(ArrayWriteMode::kSerialized, kDisks, 0, 4096);  // txns are never handed out twice
  REQUIRE(d.ok());
  CHECK(d->txn == kept + 4);
}

TEST_CASE("PromiseJournal: a delta damaged after it was kept loads as Corruption, compacted or not", "[array]") {
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  auto journal = Fresh(path);
  auto& j = *journal;
  std::vector<uint8_t> delta = test::RandomBytes(8192, 3);
  auto p = j.Begin(ArrayWriteMode::kDelayed, kDisks, 0, delta.size());
  REQUIRE(p.ok());
  const std::span<const uint8_t> whole[] = {delta};
  REQUIRE(j.KeepDelta(p->txn, whole).ok());
  test::Damage(path, j.file_bytes() - 100);
  CHECK(j.LoadDelta(p->txn).status().IsCorruption());
  REQUIRE(j.Compact().ok());  // copied as it was, not re-sealed
  CHECK(j.LoadDelta(p->txn).status().IsCorruption());
}

TEST_CASE("PromiseJournal: a delta's damaged length is refused at load and not carried into a compaction",
          "[array]") {
  // The CRC does not cover the length: copied as it was, it would cut the journal there at the
  // next open, every later record with it.
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  auto journal = Fresh(path);
  auto& j = *journal;
  std::vector<std::vector<uint8_t>> deltas;
  std::vector<uint64_t> txns;
  uint64_t first_at = 0;
  for (int i = 0; i < 2; i++) {
    deltas.push_back(test::RandomBytes(8192, 20 + i));
    auto p = j.Begin(ArrayWriteMode::kDelayed, kDisks, i * 8192, 8192);
    REQUIRE(p.ok());
    if (i == 0) first_at = j.file_bytes();
    const std::span<const uint8_t> whole[] = {deltas.back()};
    REQUIRE(j.KeepDelta(p->txn, whole).ok());
    txns.push_back(p->txn);
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(first_at + 4));
    f.write("\xff\xff\xff\x7f", 4);
  }
  CHECK(j.LoadDelta(txns[0]).status().IsCorruption());
  CHECK(*j.LoadDelta(txns[1]) == deltas[1]);
  REQUIRE(j.Compact().ok());
  auto again = Reopen(path);
  CHECK(again->state().open.size() == 2);
  CHECK(*again->LoadDelta(txns[0]) == deltas[0]);  // the bytes the CRC covers are intact
  CHECK(*again->LoadDelta(txns[1]) == deltas[1]);
}

TEST_CASE("PromiseJournal: compaction keeps exactly what is open, deltas too", "[array]") {
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  auto journal = Fresh(path);
  auto& j = *journal;
  std::vector<uint8_t> delta = test::RandomBytes(8192, 2);
  uint64_t open_txn = 0;
  for (int i = 0; i < 100; i++) {
    auto p = j.Begin(ArrayWriteMode::kDelayed, kDisks, i * 8192, 8192);
    REQUIRE(p.ok());
    const std::span<const uint8_t> whole[] = {delta};
    REQUIRE(j.KeepDelta(p->txn, whole).ok());
    std::vector<uint64_t> txns{p->txn};
    if (i == 50) {
      open_txn = p->txn;
      REQUIRE(j.Mark(txns, kVerticalRole, true).ok());
      continue;
    }
    REQUIRE(j.Done(txns).ok());
  }
  REQUIRE(j.AddDefect(9, {4096, 4096}).ok());
  uint64_t before = j.file_bytes();
  REQUIRE(j.Compact().ok());
  CHECK(j.file_bytes() < before / 50);
  CHECK(*j.LoadDelta(open_txn) == delta);  // read from the new file
  auto again = Reopen(path);
  auto state = again->state();
  REQUIRE(state.open.size() == 1);
  CHECK(state.open.at(open_txn).finished[kVerticalRole]);
  CHECK(*again->LoadDelta(open_txn) == delta);
  CHECK(state.defects.at(9).bytes() == 4096);
  CHECK_FALSE(std::filesystem::exists(path + ".new"));
}

TEST_CASE("PromiseJournal: high-water marks only go up, one sync for those that move, and survive compaction",
          "[array]") {
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  auto journal = Fresh(path);
  auto& j = *journal;
  CHECK(j.state().high_water.empty());  // not known: a disk is read whole
  std::vector<uint32_t> disks{3, 7};
  REQUIRE(j.RaiseHighWater(disks, 0).ok());
  REQUIRE(j.RaiseHighWater(std::vector<uint32_t>{3}, 1 << 20).ok());
  uint64_t size = j.file_bytes();
  REQUIRE(j.RaiseHighWater(disks, 4096).ok());  // 3 is past it, 7 moves
  REQUIRE(j.RaiseHighWater(std::vector<uint32_t>{3}, 8192).ok());  // no record at all
  CHECK(j.file_bytes() == size + 21 + 17);  // one record (head 9, disk 4, end 8) and the append's end (9 + 8)
  CHECK(j.state().high_water == std::map<uint32_t, uint64_t>{{3, 1 << 20}, {7, 4096}});
  CHECK(Reopen(path)->state().high_water == std::map<uint32_t, uint64_t>{{3, 1 << 20}, {7, 4096}});
  REQUIRE(j.Compact().ok());
  CHECK(Reopen(path)->state().high_water == std::map<uint32_t, uint64_t>{{3, 1 << 20}, {7, 4096}});
}

TEST_CASE("PromiseJournal: the epoch only goes up, with one record of 8 bytes, and survives compaction", "[array]") {
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  auto journal = Fresh(path);
  auto& j = *journal;
  CHECK(j.epoch() == 0);
  uint64_t size = j.file_bytes();
  REQUIRE(j.RaiseEpoch(3).ok());
  CHECK(j.file_bytes() == size + 17 + 17);  // the record (head 9, epoch 8) and the append's end (9 + 8)
  size = j.file_bytes();
  REQUIRE(j.RaiseEpoch(2).ok());  // never lowered, and nothing written
  REQUIRE(j.RaiseEpoch(3).ok());
  CHECK(j.file_bytes() == size);
  CHECK(j.epoch() == 3);
  CHECK(Reopen(path)->epoch() == 3);
  CHECK(Reopen(path)->state().epoch == 3);
  REQUIRE(j.RaiseEpoch(4).ok());
  REQUIRE(j.Compact().ok());
  CHECK(Reopen(path)->epoch() == 4);
}

TEST_CASE("PromiseJournal: a torn last record is cut off, damage anywhere else is Corruption", "[array]") {
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  uint64_t size_with_one = 0;
  {
    auto created = PromiseJournal::Create(path, "archive-1/cold");
    REQUIRE(created.ok());
    REQUIRE((*created)->Begin(ArrayWriteMode::kSerialized, kDisks, 0, 4096).ok());
    size_with_one = (*created)->file_bytes();
  }
  SECTION("a torn append") {
    std::vector<uint8_t> half{0x11, 0x22, 0x33, 0x44, 0x40, 0, 0, 0, 2, 1, 2, 3};  // says 64 bytes follow
    AppendGarbage(path, half);
    auto j = Reopen(path);
    CHECK(j->state().open.size() == 1);
    CHECK(std::filesystem::file_size(path) == size_with_one);
    REQUIRE(j->Begin(ArrayWriteMode::kSerialized, kDisks, 4096, 4096).ok());  // appends after the cut
    CHECK(Reopen(path)->state().open.size() == 2);
  }
  SECTION("a damaged record in the middle") {
    {
      auto j = Reopen(path);
      REQUIRE(j->Begin(ArrayWriteMode::kSerialized, kDisks, 4096, 4096).ok());
    }
    int fd = ::open(path.c_str(), O_WRONLY);
    uint8_t flip = 0xFF;
    REQUIRE(::pwrite(fd, &flip, 1, size_with_one - 17 - 3) == 1);  // inside the first promise (17: its end)
    ::close(fd);
    auto j = PromiseJournal::Open(path, "archive-1/cold");
    CHECK(j.status().IsCorruption());
    CHECK_THAT(j.status().message(), Catch::Contains("damaged (appends follow"));
  }
  SECTION("a damaged record in the last whole append, then a torn one") {
    std::vector<uint8_t> half{0x11, 0x22, 0x33, 0x44, 0x40, 0, 0, 0, 2, 1, 2, 3};
    AppendGarbage(path, half);
    int fd = ::open(path.c_str(), O_WRONLY);
    uint8_t flip = 0xFF;
    REQUIRE(::pwrite(fd, &flip, 1, size_with_one - 17 - 3) == 1);  // acknowledged: an append began after it
    ::close(fd);
    auto j = PromiseJournal::Open(path, "archive-1/cold");
    CHECK(j.status().IsCorruption());
    CHECK_THAT(j.status().message(), Catch::Contains("damaged (appends follow"));
    CHECK(std::filesystem::file_size(path) == size_with_one + half.size());  // nothing cut
  }
  SECTION("a header whose append is not whole") {
    REQUIRE(::truncate(path.c_str(), 20) == 0);
    auto j = PromiseJournal::Open(path, "archive-1/cold");
    CHECK(j.status().IsCorruption());
  }
  SECTION("a torn append, inspected: left out, not cut") {
    {
      auto j = Reopen(path);
      REQUIRE(j->Begin(ArrayWriteMode::kSerialized, kDisks, 4096, 4096).ok());
    }
    const uint64_t full = std::filesystem::file_size(path);
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(full - 1)) == 0);
    auto state = PromiseJournal::Inspect(path, "archive-1/cold");
    REQUIRE(state.ok());
    CHECK(state->open.size() == 1);
    CHECK(std::filesystem::file_size(path) == full - 1);
  }
  SECTION("a damaged length in the middle, which looks like a torn record") {
    {
      auto j = Reopen(path);
      REQUIRE(j->Begin(ArrayWriteMode::kSerialized, kDisks, 4096, 4096).ok());
      REQUIRE(j->Mark(std::vector<uint64_t>{2}, kDataRole, false).ok());
    }
    const uint64_t full = std::filesystem::file_size(path);
    // The first promise's record: 9 bytes of head (its length at 4), 41 of payload, then the
    // append's end record (17 bytes).
    const uint64_t first = size_with_one - 17 - 9 - 41;
    uint32_t length = GENERATE(0x7FFFFFFFu, 100000u);  // past the largest record; past the end
    int fd = ::open(path.c_str(), O_WRONLY);
    uint8_t bytes[4] = {uint8_t(length), uint8_t(length >> 8), uint8_t(length >> 16), uint8_t(length >> 24)};
    REQUIRE(::pwrite(fd, bytes, 4, static_cast<off_t>(first + 4)) == 4);
    ::close(fd);
    auto j = PromiseJournal::Open(path, "archive-1/cold");
    CHECK(j.status().IsCorruption());
    CHECK_THAT(j.status().message(), Catch::Contains("damaged (appends follow"));
    CHECK(std::filesystem::file_size(path) == full);  // nothing cut
  }
  SECTION("a torn append of several records: any of its bytes may be missing, the rest landed") {
    uint64_t before = 0, after = 0;
    {
      auto j = Reopen(path);
      REQUIRE(j->Begin(ArrayWriteMode::kSerialized, kDisks, 4096, 4096).ok());
      REQUIRE(j->Begin(ArrayWriteMode::kSerialized, kDisks, 8192, 4096).ok());
      before = j->file_bytes();
      REQUIRE(j->Mark(std::vector<uint64_t>{1, 2, 3}, kDataRole, false).ok());  // one append: 3 marks, an end
      after = j->file_bytes();
    }
    REQUIRE(after == before + 3 * (9 + 10) + 17);
    // A power loss: the file grew, but a block of the append never reached the disk (zeros).
    auto [lost_at, lost_length] = GENERATE(table<uint64_t, uint64_t>({
        {0, 12},            // its first record's head
        {19 + 4, 8},        // the second record's length and type
        {3 * 19, 17},       // its end record
    }));
    std::vector<uint8_t> zeros(lost_length, 0);
    int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(::pwrite(fd, zeros.data(), zeros.size(), static_cast<off_t>(before + lost_at)) ==
            static_cast<ssize_t>(zeros.size()));
    ::close(fd);
    auto j = Reopen(path);
    CHECK(std::filesystem::file_size(path) == before);  // the whole append is cut, the marks that landed too
    auto state = j->state();
    REQUIRE(state.open.size() == 3);
    for (const auto& [txn, p] : state.open) CHECK_FALSE(p.started[kDataRole]);
    REQUIRE(j->Mark(std::vector<uint64_t>{3}, kDataRole, false).ok());  // appends after the cut
    CHECK(Reopen(path)->state().open.at(3).started[kDataRole]);
  }
  SECTION("a torn append that only lost its last bytes") {
    uint64_t before = 0;
    {
      auto j = Reopen(path);
      before = j->file_bytes();
      REQUIRE(j->Begin(ArrayWriteMode::kSerialized, kDisks, 4096, 4096).ok());
    }
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(std::filesystem::file_size(path) - 5)) == 0);
    auto j = Reopen(path);
    CHECK(j->state().open.size() == 1);
    CHECK(std::filesystem::file_size(path) == before);
  }
  SECTION("another group's journal") {
    auto j = PromiseJournal::Open(path, "archive-1/warm");
    CHECK(j.status().IsCorruption());
    CHECK_THAT(j.status().message(), Catch::Contains("belongs to"));
  }
  SECTION("a missing journal") {
    CHECK(PromiseJournal::Open(tmp / "none.journal", "archive-1/cold").status().IsNotFound());
  }
}

TEST_CASE("PromiseJournal: a compaction that fails leaves the promises recorded, and is tried again later",
          "[array]") {
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  auto journal = Fresh(path);
  auto& j = *journal;
  std::filesystem::create_directory(path + ".new");  // where the compacted file would go
  std::vector<uint8_t> delta = test::RandomBytes(4 << 20, 3);
  const std::span<const uint8_t> whole[] = {delta};
  auto promise_done = [&](uint64_t offset) {
    auto p = j.Begin(ArrayWriteMode::kDelayed, kDisks, offset, delta.size());
    REQUIRE(p.ok());
    REQUIRE(j.KeepDelta(p->txn, whole).ok());
    std::vector<uint64_t> txns{p->txn};
    REQUIRE(j.Mark(txns, kDataRole, true).ok());
    Status done = j.Done(txns);
    INFO(done.ToString());
    REQUIRE(done.ok());  // recorded: the failed compaction is not its failure
  };
  uint64_t offset = 0;
  while (j.file_bytes() <= (64u << 20)) promise_done(offset += delta.size());
  promise_done(offset += delta.size());  // past the size: the compaction fails
  CHECK(j.file_bytes() > (64u << 20));
  auto p = j.Begin(ArrayWriteMode::kSerialized, kDisks, 0, 4096);  // the journal goes on
  REQUIRE(p.ok());
  std::filesystem::remove(path + ".new");
  while (j.file_bytes() > (64u << 20)) promise_done(offset += delta.size());  // compacted once it grew some more
  CHECK(j.file_bytes() < (1u << 20));
  auto state = Reopen(path)->state();
  REQUIRE(state.open.size() == 1);
  CHECK(state.open.contains(p->txn));
}

TEST_CASE("PromiseJournal: an append that fails part way leaves none of its records behind", "[array]") {
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  auto journal = Fresh(path);
  std::vector<uint64_t> txns;
  for (int i = 0; i < 40; i++) {
    auto p = journal->Begin(ArrayWriteMode::kSerialized, kDisks, 4096 * i, 4096);
    REQUIRE(p.ok());
    txns.push_back(p->txn);
  }
  const uint64_t size = std::filesystem::file_size(path);
  {
    // The file may grow by three and a half done records (17 bytes each): the append of the
    // 40 lands that much, then fails (EFBIG, as a full or failing disk would fail it).
    struct sigaction ignore {}, saved {};
    ignore.sa_handler = SIG_IGN;
    REQUIRE(::sigaction(SIGXFSZ, &ignore, &saved) == 0);
    rlimit limit{}, before{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
    limit = before;
    limit.rlim_cur = size + 3 * 17 + 8;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
    Status done = journal->Done(txns);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &before) == 0);
    REQUIRE(::sigaction(SIGXFSZ, &saved, nullptr) == 0);
    CHECK_FALSE(done.ok());
  }
  CHECK(std::filesystem::file_size(path) == size);
  // A shorter append goes where the failed one began, and nothing of that one follows it.
  REQUIRE(journal->Mark(std::span(txns).first(1), kDataRole, true).ok());
  journal.reset();
  auto state = Reopen(path)->state();
  CHECK(state.open.size() == 40);  // none of them done
  CHECK(state.open.at(txns[0]).finished[kDataRole]);
}

TEST_CASE("PromiseJournal: a journal of an older cairn, whose records stand alone, opens and is rewritten framed",
          "[array]") {
  test::TempDir tmp;
  std::string path = tmp / "cold.journal";
  // Its records as cairn wrote them before appends had end records: a header without the
  // framing byte, then a promise, each record an append of its own.
  auto record = [](uint8_t type, std::vector<uint8_t> payload) {
    std::vector<uint8_t> r(9);
    r[8] = type;
    r.insert(r.end(), payload.begin(), payload.end());
    PutFixed32(&r[4], static_cast<uint32_t>(payload.size()));
    PutFixed32(&r[0], MaskCrc(Crc32c(std::span(r).subspan(8))));
    return r;
  };
  auto le = [](std::vector<uint8_t>* out, uint64_t v, int n) {
    for (int i = 0; i < n; i++) out->push_back(uint8_t(v >> (8 * i)));
  };
  std::string identity = "archive-1/cold";
  std::vector<uint8_t> header;
  le(&header, identity.size(), 2);
  header.insert(header.end(), identity.begin(), identity.end());
  le(&header, 2, 8);  // next txn
  std::vector<uint8_t> begin;
  le(&begin, 1, 8);  // txn
  begin.push_back(1);  // serialized
  for (uint32_t d : kDisks) le(&begin, d, 4);
  le(&begin, 4096, 8);
  le(&begin, 4096, 8);
  std::vector<uint8_t> file = record(1, header);
  for (uint8_t b : record(2, begin)) file.push_back(b);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), std::ssize(file));
  SECTION("whole") {
    auto j = Reopen(path);
    CHECK(j->state().open.size() == 1);
    CHECK(j->state().open.at(1).offset == 4096);
    CHECK(std::filesystem::file_size(path) != file.size());  // rewritten
    REQUIRE(j->Begin(ArrayWriteMode::kDirect, kDisks, 8192, 4096).ok());
    auto state = Reopen(path)->state();
    CHECK(state.open.size() == 2);
    CHECK(state.open.at(2).mode == ArrayWriteMode::kDirect);
  }
  SECTION("with a torn last record") {
    std::vector<uint8_t> half{0x11, 0x22, 0x33, 0x44, 0x40, 0, 0, 0, 2, 1, 2, 3};
    AppendGarbage(path, half);
    CHECK(Reopen(path)->state().open.size() == 1);
  }
  SECTION("with a damaged record in the middle") {
    std::vector<uint8_t> done;
    le(&done, 1, 8);
    AppendGarbage(path, record(5, done));
    int fd = ::open(path.c_str(), O_WRONLY);
    uint8_t flip = 0xFF;
    REQUIRE(::pwrite(fd, &flip, 1, static_cast<off_t>(file.size() - 3)) == 1);  // inside the promise
    ::close(fd);
    auto j = PromiseJournal::Open(path, "archive-1/cold");
    CHECK(j.status().IsCorruption());
    CHECK_THAT(j.status().message(), Catch::Contains("checksum mismatch"));
  }
}
