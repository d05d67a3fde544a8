// ArchiveOptions: the settings of one archive, read from ARCHIVE/cairn.conf and
// adjustable per mount with -o. Defaults are inline; every field says what it changes.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace cairn {

// An archive has at most this many disks (mkfs --disks; disk numbers in cairn.conf).
constexpr uint32_t kMaxDisks = 4096;

// The compressed_segment_size cairn mkfs writes (unless segment_size is larger).
constexpr uint64_t kNewArchiveCompressedSegmentSize = 8ull << 20;

struct ArchiveOptions {
  // --- Parameters that affect behaviour

  // Files are cut into segments of this many bytes; each segment is one extent on a disk.
  // Fixed for a file when it is first persisted. Default: 4 MiB.
  uint64_t segment_size = 4ull << 20;
  // The segment size of files whose policy compresses them and sets no segment_size: each
  // extent is compressed on its own, and a larger one compresses better. 0: segment_size
  // (archives made before the key); cairn mkfs writes 8 MiB, or segment_size if larger.
  uint64_t compressed_segment_size = 0;
  // Segments of at most this many bytes are packed with others into a shared extent
  // instead of taking an extent each. Default: 256 KiB.
  uint64_t pack_threshold = 256ull << 10;
  // A file open for writing but untouched for this many seconds is persisted while still
  // open. Closed files are persisted at once. Default: 5.
  uint32_t persist_idle_seconds = 5;

  // ARCHIVE/cairn.log moves to cairn.log.1 (replacing it) when it would grow past this
  // many bytes, so the log takes at most twice this on the archive's filesystem. Default: 64 MiB.
  uint64_t log_max_size = 64ull << 20;
  // Where transform plugins are loaded from; "" for the default (cairn-plugins(7)).
  std::string plugin_dir;
  // Threads that transform (compress, encrypt) the extents of one batch ahead of the one
  // being written; 0: one per core.
  uint32_t transform_workers = 0;
  // The keystore of master keys (cairn(8), KEYS); "" for ARCHIVE/keystore.
  std::string keystore;

  // --- Parameters that affect performance

  // Once persisted data in the staging cache passes this many bytes, whole files are
  // evicted, least recently used first, down to 90 % of it. Default: 1 GiB.
  uint64_t cache_size = 1ull << 30;
  // Decoded segments kept in memory to serve reads of evicted files. Default: 8.
  uint32_t read_buffer_segments = 8;
  // How far the kernel reads ahead of a sequential reader of the mount (its read_ahead_kb;
  // the kernel's own default for FUSE is 128 KiB); 0 leaves the kernel's. Default: 1 MiB.
  uint64_t read_ahead = 1ull << 20;
  // Bytes per second the background reconciler may re-encode (out-of-policy files);
  // 0 = unlimited. `cairn policy apply` is never throttled. Default: 64 MiB.
  uint64_t reconcile_rate = 64ull << 20;
  // The background reconciler starts only after this many seconds without writes,
  // creates or closes. Default: 2.
  uint32_t reconcile_idle_seconds = 2;

  // --- Identity and layout (written by mkfs)

  std::string archive_id;          // 32 hex digits
  std::vector<std::string> disks;  // disk.N = path (relative to the archive or absolute)
  // domain.N = NAME: the failure domain (enclosure, controller, host) of disk N. Chunks of
  // one extent go to distinct domains; a disk without one is a domain of its own.
  std::map<uint32_t, std::string> disk_domains;
  // group.NAME.type / .disks / .geometry / .write_mode: the disk groups, in the order
  // cairn.conf lists them. Every disk belongs to one group; new data goes to the first. None
  // listed: one group "default" of type pool holding every disk.
  struct Group {
    std::string name;
    std::string type = "pool";    // pool (plain disks) or lonestar (a 2-D parity grid)
    std::vector<uint32_t> disks;  // indices into `disks`; a lonestar group's in grid order
    std::string geometry;         // lonestar: XxY:HN+1, e.g. 8x5:3+1
    std::string write_mode = "serialized";  // lonestar: serialized, direct or delayed
    // lonestar, delayed mode: bytes of deltas kept on fast storage before the parity disks
    // are brought up to date (they are anyway when the group closes). Default: 256 MiB.
    uint64_t delta_cache = 256ull << 20;
  };
  std::vector<Group> groups;
  // --- Disk lifecycle (cairn disk fail / replace, cairn rebuild)
  std::set<uint32_t> failed_disks;   // treated as missing: their chunks are rebuilt from the others
  std::set<uint32_t> rebuild_disks;  // replaced and still empty: cairn rebuild fills them
};

}  // namespace cairn
