// ec_bench: encode and decode throughput per core of ErasureCode against isa-l called directly with
// tables prepared once (the best case), on the same buffers. Prints MB/s of data and PASS at >= 0.9x.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <isa-l/erasure_code.h>

#include "redundancy/erasure_code.h"

namespace {

constexpr double kPassRatio = 0.9;
// Short alternating rounds, of which the best counts, each timed in thread CPU time: other processes
// on the machine slow down some rounds, never speed one up. About 0.5 s per variant.
constexpr int kRounds = 10;
constexpr double kRoundSeconds = 0.05;
constexpr int kCallsPerClockRead = 8;

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Runs `op` for one round and returns MB/s, counting `bytes_per_op` per call.
template <typename Op>
double MeasureRound(double bytes_per_op, Op&& op) {
  op();  // warm the caches and, for ErasureCode, the decode plan
  int64_t calls = 0;
  const double start = ThreadCpuSeconds();
  double elapsed = 0;
  do {
    for (int i = 0; i < kCallsPerClockRead; i++) op();
    calls += kCallsPerClockRead;
    elapsed = ThreadCpuSeconds() - start;
  } while (elapsed < kRoundSeconds);
  return bytes_per_op * double(calls) / elapsed / 1e6;
}

struct Comparison {
  double ours = 0;
  double direct = 0;
};

template <typename Ours, typename Direct>
Comparison Compare(double bytes_per_op, Ours&& ours, Direct&& direct) {
  Comparison result;
  for (int round = 0; round < kRounds; round++) {
    result.ours = std::max(result.ours, MeasureRound(bytes_per_op, ours));
    result.direct = std::max(result.direct, MeasureRound(bytes_per_op, direct));
  }
  return result;
}

// isa-l decode tables for losing data chunks 0..lost-1, built the textbook way, once.
std::vector<uint8_t> DirectDecodeTables(int k, int m, int lost, std::vector<int>* sources) {
  std::vector<uint8_t> matrix(size_t(k + m) * k);
  gf_gen_cauchy1_matrix(matrix.data(), k + m, k);
  std::vector<uint8_t> b(size_t(k) * k);
  std::vector<uint8_t> inverse(size_t(k) * k);
  sources->clear();
  for (int i = lost; int(sources->size()) < k; i++) {
    std::memcpy(&b[sources->size() * k], &matrix[size_t(i) * k], k);
    sources->push_back(i);
  }
  gf_invert_matrix(b.data(), inverse.data(), k);  // lost data rows are the first `lost` rows of the inverse
  std::vector<uint8_t> tables(32 * size_t(k) * lost);
  ec_init_tables(k, lost, inverse.data(), tables.data());
  return tables;
}

int failures = 0;
int misses = 0;

void Report(const char* code, size_t len, const std::string& op, const Comparison& c) {
  double ratio = c.ours / c.direct;
  bool pass = ratio >= kPassRatio;
  if (!pass) misses++;
  fmt::print("{:<9} {:>5} KiB  {:<14} {:>10.0f} {:>12.0f} {:>7.3f}  {}\n", code, len >> 10, op, c.ours, c.direct,
             ratio, pass ? "PASS" : "MISS");
  std::fflush(stdout);
}

void Bench(int k, int m, size_t len) {
  auto created = cairn::ErasureCode::Create(k, m);
  const cairn::ErasureCode& code = **created;
  const std::string name = fmt::format("rs-{}-{}", k, m);

  std::vector<uint8_t> stripe(size_t(k + m) * len);
  std::mt19937_64 rng(k * 1000 + m);
  for (auto& byte : stripe) byte = uint8_t(rng());
  std::vector<uint8_t*> chunks;
  for (int i = 0; i < k + m; i++) chunks.push_back(&stripe[i * len]);
  const double data_bytes = double(k) * double(len);

  std::vector<uint8_t> encode_tables(32 * size_t(k) * m);
  {
    std::vector<uint8_t> matrix(size_t(k + m) * k);
    gf_gen_cauchy1_matrix(matrix.data(), k + m, k);
    ec_init_tables(k, m, &matrix[size_t(k) * k], encode_tables.data());
  }
  auto ours_encode = [&] { code.Encode(len, chunks.data(), chunks.data() + k); };
  auto direct_encode = [&] {
    ec_encode_data(int(len), k, m, encode_tables.data(), chunks.data(), chunks.data() + k);
  };
  direct_encode();
  const std::vector<uint8_t> original = stripe;
  // Checks that `op` rewrites the first `count` chunks starting at `first` with their original bytes.
  auto rebuilds = [&](auto&& op, int first, int count, const std::string& what) {
    for (int i = first; i < first + count; i++) std::memset(chunks[i], 0, len);
    op();
    if (stripe != original) {
      fmt::print("{}: {} produced wrong bytes\n", name, what);
      failures++;
    }
  };
  rebuilds(ours_encode, k, m, "ErasureCode::Encode");
  Report(name.c_str(), len, "encode", Compare(data_bytes, ours_encode, direct_encode));

  for (int lost : {1, m}) {
    std::vector<int> erased(lost);
    for (int i = 0; i < lost; i++) erased[i] = i;
    std::vector<int> source_indexes;
    std::vector<uint8_t> tables = DirectDecodeTables(k, m, lost, &source_indexes);
    std::vector<uint8_t*> sources;
    for (int i : source_indexes) sources.push_back(chunks[i]);
    auto ours_decode = [&] {
      if (!code.Reconstruct(len, chunks.data(), erased).ok()) failures++;
    };
    auto direct_decode = [&] { ec_encode_data(int(len), k, lost, tables.data(), sources.data(), chunks.data()); };
    rebuilds(ours_decode, 0, lost, "ErasureCode::Reconstruct");
    rebuilds(direct_decode, 0, lost, "direct decode");
    Report(name.c_str(), len, fmt::format("decode {} lost", lost), Compare(data_bytes, ours_decode, direct_decode));
  }
}

}  // namespace

int main() {
  fmt::print("one thread; MB/s of data (k x chunk per call) per CPU second; ratio = ours / direct isa-l, "
             "PASS at >= {}\n", kPassRatio);
  fmt::print("{:<9} {:>9}  {:<14} {:>10} {:>12} {:>7}\n", "code", "chunk", "op", "ours", "direct", "ratio");
  for (auto [k, m] : {std::pair{4, 2}, {10, 4}, {20, 4}}) {
    for (size_t len : {size_t(64) << 10, size_t(1) << 20}) Bench(k, m, len);
  }
  fmt::print("{} MISS, {} verification failures\n", misses, failures);
  return failures == 0 ? 0 : 1;
}
