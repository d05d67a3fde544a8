// journal_bench: what the catalog's batch journal costs per write. Creates N files (inode,
// name, xattr, segment, extent: the rows a persisted file writes) through Catalog, either
// in one batch as `cairn recover` does or flushed every 100 operations as the daemon does,
// and prints the time per file and the growth of the peak RSS (the journal is held in memory
// until the batch commits). Build against a meson build dir:
//   g++ -std=c++20 -O2 -Iinclude -Isrc tests/bench/journal_bench.cc build/libcairn_core.a \
//       build/libblake3.a -lsqlite3 -lfmt -lisal -lcrypto -lxxhash -o /tmp/journal_bench
//   /tmp/journal_bench 200000 batch; /tmp/journal_bench 200000 flush
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "catalog/catalog.h"

namespace {

long PeakRssKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmHWM:")) return std::atol(line.c_str() + 6);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cairn;
  const long files = argc > 1 ? std::atol(argv[1]) : 200000;
  const bool one_batch = argc > 2 && std::string(argv[2]) == "batch";
  std::string dir = (std::filesystem::temp_directory_path() / "cairn-journal-bench").string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto created = Catalog::Create(dir + "/c.db", 0, 0, 0);
  if (!created.ok()) return std::fprintf(stderr, "%s\n", created.status().ToString().c_str()), 1;
  Catalog& c = **created;
  long rss_before = PeakRssKiB();
  std::string value(64, 'v');
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < files; i++) {
    Status st = InTransaction(c, [&]() -> Status {
      InodeRecord r;
      r.mode = 0100644;
      r.nlink = 1;
      r.size = 5000;
      auto ino = c.InsertInode(r);
      if (!ino.ok()) return ino.status();
      CAIRN_RETURN_IF_ERROR(c.InsertEntry(kRootInode, fmt::format("file-{:08}", i), *ino));
      CAIRN_RETURN_IF_ERROR(
          c.SetXattr(*ino, "user.note", {reinterpret_cast<const uint8_t*>(value.data()), value.size()}));
      ExtentRecord e{static_cast<uint64_t>(i + 1), 5000, 0x1234, 1, 1, {}, {{0, 4096u * static_cast<uint64_t>(i), 8192, 0x55}}};
      CAIRN_RETURN_IF_ERROR(c.InsertExtent(e));
      return c.PutSegment({*ino, 0, e.id, 0, 5000, false});
    });
    if (st.ok() && !one_batch && i % 100 == 99) st = c.Flush();
    if (!st.ok()) return std::fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
  }
  auto wrote = std::chrono::steady_clock::now();
  Status st = c.Flush();
  auto flushed = std::chrono::steady_clock::now();
  if (!st.ok()) return std::fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
  auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count(); };
  std::printf("%ld files, %s: %.2f us/file writing, final flush %.0f ms, peak RSS +%ld KiB\n", files,
              one_batch ? "one batch" : "flush every 100", us(wrote - start) / files, us(flushed - wrote) / 1000,
              PeakRssKiB() - rss_before);
  std::filesystem::remove_all(dir);
  return 0;
}
