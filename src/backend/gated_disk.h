// A Disk decorator that holds every operation while a gate file exists: a disk that takes
// as long to answer as a test wants, like one spinning up. The daemon wraps its disks with
// it when CAIRN_TEST_DISK_GATE names such a file (the FUSE tests of slow disks).
#pragma once

#include <memory>
#include <string>

#include "cairn/disk.h"

namespace cairn {

// While `gate` exists, reads, writes, syncs and discards of the returned disk wait (and
// `gate`.held exists, so a test knows one is waiting).
std::unique_ptr<Disk> GateDiskOnFile(std::unique_ptr<Disk> disk, std::string gate);

}  // namespace cairn
