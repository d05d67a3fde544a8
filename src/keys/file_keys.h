// FileKeys: the data keys of encrypted files. Each file gets its own random key, kept in the
// catalog only wrapped (AES-256-GCM) by a version of the master key the file's policy names
// (keys/keystore.h): rotation re-wraps it, deleting the file or the master key erases it.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cairn/status.h"
#include "catalog/catalog.h"
#include "keys/keystore.h"
#include "keys/secret_bytes.h"

namespace cairn {

constexpr size_t kDataKeyBytes = 32;

// Thread-safe. Takes the catalog mutex only around catalog rows, never while reading the
// keystore or running a key command; callers must not hold it.
class FileKeys {
 public:
  using DataKey = std::shared_ptr<const SecretBytes>;

  FileKeys(Catalog& catalog, std::mutex& catalog_mutex, const std::array<uint8_t, 16>& archive_id,
           std::string keystore_path)
      : catalog_(catalog),
        catalog_mutex_(catalog_mutex),
        archive_id_(archive_id),
        keystore_path_(std::move(keystore_path)) {}

  const std::string& keystore_path() const { return keystore_path_; }

  // The data key to write `ino` with: its own (wrapped by whichever master key it was first
  // wrapped by), or a new one wrapped by master key `key_name` and recorded in the catalog's
  // batch, committed with the segments it seals. NotFound naming the key when the keystore
  // has no such name, or when the inode is gone.
  Result<DataKey> ForWriting(uint64_t ino, const std::string& key_name);
  // The data key `ino`'s extents were sealed with. NotFound when the file has none (never
  // encrypted, or erased); Corruption when it does not unwrap.
  Result<DataKey> ForReading(uint64_t ino);
  // The master key name `ino`'s data key is wrapped by; nullopt when it has none.
  Result<std::optional<std::string>> KeyNameOf(uint64_t ino);
  // OK when a caller of `uid` in groups `gids` (primary, then supplementary) may use master
  // key `key_name` (select it in a policy, read through it); Permission (EACCES) naming the
  // key and the caller otherwise, also when there is no keystore.
  Status Authorize(const std::string& key_name, uid_t uid, std::span<const gid_t> gids);
  // The keystore as the file is now (read again when it changed); NotFound when there is none.
  Result<std::shared_ptr<const Keystore>> CurrentKeystore();
  // Authorize() by `keystore`, read before by CurrentKeystore() (null: there is none). Reads
  // no file, so the caller may hold the catalog mutex.
  Status Authorize(const Keystore* keystore, const std::string& key_name, uid_t uid,
                   std::span<const gid_t> gids) const;
  // Authorize(), and InvalidArgument when the keystore has no key `key_name`: whether a
  // policy may name it (key=).
  Status CheckSelectable(const std::string& key_name, uid_t uid, std::span<const gid_t> gids);

  // Rotation: every data key wrapped by an older version of `key_name` is re-wrapped by
  // its newest, in the catalog's batch; the number re-wrapped.
  Result<uint64_t> Rewrap(const std::string& key_name);
  // How many files' data keys `key_name` wraps, a data key being wrapped now included.
  Result<uint64_t> CountUnder(const std::string& key_name);
  // Crypto-erase: drops every data key `key_name` wraps (their files read EIO from now on);
  // the inodes whose keys were dropped.
  Result<std::vector<uint64_t>> EraseUnder(const std::string& key_name);
  // Drops `ino`'s key from memory (the catalog row goes with the inode). May be called
  // with the catalog mutex held.
  void Forget(uint64_t ino);

 private:
  Result<DataKey> Master(const std::string& name, uint32_t version);
  Result<std::vector<uint8_t>> Wrap(const SecretBytes& data_key, uint64_t ino, const std::string& name,
                                    uint32_t version);
  Result<DataKey> Unwrap(const FileKeyRecord& record);
  // Caches `key` unless Forget or EraseUnder ran since `generation` was read.
  void Remember(uint64_t ino, const std::string& key_name, const DataKey& key, uint64_t generation);

  Catalog& catalog_;
  std::mutex& catalog_mutex_;
  const std::array<uint8_t, 16> archive_id_;
  const std::string keystore_path_;

  // Serialises making, re-wrapping and erasing data keys (so a file never gets two); held
  // while a master key is loaded, which only writers and CountUnder wait for.
  std::mutex writing_mutex_;
  std::mutex mutex_;  // guards the members below; a leaf: held for no I/O and no other lock
  std::shared_ptr<const Keystore> keystore_;
  struct timespec keystore_ctime_ {};  // with ino and size: the file as read (ctime: a chmod too)
  ino_t keystore_ino_ = 0;
  off_t keystore_size_ = 0;
  std::map<std::pair<std::string, uint32_t>, DataKey> masters_;
  // Unwrapped data keys by inode, with the name they are wrapped by; bounded.
  std::map<uint64_t, std::pair<std::string, DataKey>> data_keys_;
  uint64_t generation_ = 0;  // counts Forget and EraseUnder calls
};

}  // namespace cairn
