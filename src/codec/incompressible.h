// A cheap guess, before any compressor runs, that a payload will not compress: the byte
// entropy of samples spread over it is close to 8 bits (random, encrypted or already
// compressed data). compress=auto stores such payloads without its compress stage.
#pragma once

#include <cstdint>
#include <span>

namespace cairn {

// Whether `data` looks incompressible: the order-0 entropy of up to 16 samples of 4 KiB
// spread evenly over it is at least 7.95 bits per byte. False for less than 16 KiB (too
// little to tell: the compressor decides).
bool LooksIncompressible(std::span<const uint8_t> data);

}  // namespace cairn
