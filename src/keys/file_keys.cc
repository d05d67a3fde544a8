#include "keys/file_keys.h"

#include <sys/stat.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "util/coding.h"

namespace cairn {
namespace {

constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr size_t kWrappedBytes = kNonceBytes + kDataKeyBytes + kTagBytes;
constexpr size_t kMaxCachedDataKeys = 1024;

// What a wrapped data key is bound to: this archive, this file, this master key version.
std::vector<uint8_t> WrapAad(const std::array<uint8_t, 16>& archive_id, uint64_t ino, const std::string& name,
                             uint32_t version) {
  constexpr std::string_view kLabel = "cairn-file-key";
  std::vector<uint8_t> aad(kLabel.size() + archive_id.size() + 12 + name.size());
  uint8_t* at = std::copy(kLabel.begin(), kLabel.end(), aad.data());
  at = std::copy(archive_id.begin(), archive_id.end(), at);
  PutFixed64(at, ino);
  PutFixed32(at + 8, version);
  std::copy(name.begin(), name.end(), at + 12);
  return aad;
}

// AES-256-GCM of `in` (kDataKeyBytes) into `out` (encrypting) or back; false when OpenSSL
// fails or, decrypting, the tag does not match.
bool Seal(bool encrypting, const SecretBytes& key, const uint8_t* nonce, const std::vector<uint8_t>& aad,
          const uint8_t* in, uint8_t* out, uint8_t* tag) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int n = 0;
  bool ok = ctx && EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr, encrypting) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) == 1 &&
            EVP_CipherInit_ex(ctx, nullptr, nullptr, key.data(), nonce, encrypting) == 1 &&
            EVP_CipherUpdate(ctx, nullptr, &n, aad.data(), static_cast<int>(aad.size())) == 1 &&
            EVP_CipherUpdate(ctx, out, &n, in, kDataKeyBytes) == 1 && n == static_cast<int>(kDataKeyBytes) &&
            (encrypting || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kTagBytes, tag) == 1) &&
            EVP_CipherFinal_ex(ctx, out + kDataKeyBytes, &n) == 1 &&
            (!encrypting || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) == 1);
  EVP_CIPHER_CTX_free(ctx);
  return ok;
}

}  // namespace

Result<std::shared_ptr<const Keystore>> FileKeys::CurrentKeystore() {
  struct stat st;
  if (::stat(keystore_path_.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return Status::NotFound(
          fmt::format("keystore {} does not exist (make a key with cairn key create)", keystore_path_));
    }
    return Status::IOError(fmt::format("keystore {}: {}", keystore_path_, std::strerror(errno)));
  }
  {
    std::lock_guard lock(mutex_);
    if (keystore_ && st.st_ino == keystore_ino_ && st.st_size == keystore_size_ &&
        st.st_ctim.tv_sec == keystore_ctime_.tv_sec && st.st_ctim.tv_nsec == keystore_ctime_.tv_nsec) {
      return keystore_;
    }
  }
  auto loaded = Keystore::Load(keystore_path_);  // without the lock: file I/O
  if (!loaded.ok()) return loaded.status();
  auto keystore = std::make_shared<const Keystore>(std::move(*loaded));
  std::lock_guard lock(mutex_);
  // Master keys are loaded again from the keystore as it is now: one deleted, or deleted and
  // made again under the same name and version, does not live on in the daemon's memory.
  masters_.clear();
  keystore_ = keystore;
  keystore_ino_ = st.st_ino;
  keystore_size_ = st.st_size;
  keystore_ctime_ = st.st_ctim;
  return keystore;
}

Result<FileKeys::DataKey> FileKeys::Master(const std::string& name, uint32_t version) {
  constexpr int kAttempts = 3;
  for (int attempt = 1;; attempt++) {
    auto keystore = CurrentKeystore();  // first: a change of the file drops the cached keys
    if (!keystore.ok()) return keystore.status();
    {
      std::lock_guard lock(mutex_);
      if (auto it = masters_.find({name, version}); it != masters_.end()) return it->second;
    }
    const MasterKeySource* source = (*keystore)->find(name, version);
    if (!source) {
      return Status::NotFound(fmt::format("keystore {} has no key {} version {}", keystore_path_, name, version));
    }
    auto bytes = MasterKeyOf(*source);  // without the lock: may read a file or run a command
    if (!bytes.ok()) return bytes.status();
    // The keystore as it is now: a key deleted meanwhile (and perhaps made again under the same
    // name and version) must be neither used nor kept.
    auto now = CurrentKeystore();  // notices a change of the file
    if (!now.ok()) return now.status();
    {
      std::lock_guard lock(mutex_);  // a reload since clears masters_ under it
      if (keystore_ == *keystore) {
        auto key = std::make_shared<const SecretBytes>(std::move(*bytes));
        return masters_.emplace(std::make_pair(name, version), key).first->second;
      }
    }
    if (attempt == kAttempts) {
      return Status::IOError(fmt::format("keystore {} changed each time key {} version {} was being loaded; try again",
                                         keystore_path_, name, version));
    }
  }
}

Result<std::vector<uint8_t>> FileKeys::Wrap(const SecretBytes& data_key, uint64_t ino, const std::string& name,
                                            uint32_t version) {
  auto master = Master(name, version);
  if (!master.ok()) return master.status();
  std::vector<uint8_t> wrapped(kWrappedBytes);
  if (RAND_bytes(wrapped.data(), kNonceBytes) != 1) return Status::IOError("the random number generator failed");
  if (!Seal(true, **master, wrapped.data(), WrapAad(archive_id_, ino, name, version), data_key.data(),
            wrapped.data() + kNonceBytes, wrapped.data() + kNonceBytes + kDataKeyBytes)) {
    return Status::IOError(fmt::format("inode {}: OpenSSL could not wrap its data key with key {}", ino, name));
  }
  return wrapped;
}

Result<FileKeys::DataKey> FileKeys::Unwrap(const FileKeyRecord& record) {
  if (record.wrapped.size() != kWrappedBytes) {
    return Status::Corruption(fmt::format("inode {}: its wrapped data key is {} bytes, {} expected", record.ino,
                                          record.wrapped.size(), kWrappedBytes));
  }
  auto master = Master(record.key_name, record.master_version);
  if (!master.ok()) {  // not this file's fault: NotFound is kept for a file without a data key
    return Status::NotSupported(fmt::format("inode {}: {}", record.ino, master.status().message()));
  }
  SecretBytes key(kDataKeyBytes + kTagBytes);  // the cipher may write a block past the key
  std::vector<uint8_t> tag(record.wrapped.end() - kTagBytes, record.wrapped.end());
  if (!Seal(false, **master, record.wrapped.data(),
            WrapAad(archive_id_, record.ino, record.key_name, record.master_version),
            record.wrapped.data() + kNonceBytes, key.data(), tag.data())) {
    return Status::Corruption(fmt::format("inode {}: its data key does not unwrap with key {} version {}", record.ino,
                                          record.key_name, record.master_version));
  }
  return std::make_shared<const SecretBytes>(SecretBytes::CopyOf(key.bytes().first(kDataKeyBytes)));
}

Result<FileKeys::DataKey> FileKeys::ForWriting(uint64_t ino, const std::string& key_name) {
  std::lock_guard writing(writing_mutex_);  // one key per file even when two batches race
  // A file keeps the master key its data key was first wrapped by, whatever key= says now:
  // who may read it does not change behind the back of that key's allow line.
  auto existing = ForReading(ino);
  if (existing.ok() || !existing.status().IsNotFound()) return existing;
  uint64_t generation;
  {
    std::lock_guard lock(mutex_);
    generation = generation_;
  }
  auto keystore = CurrentKeystore();
  if (!keystore.ok()) return keystore.status();
  const MasterKeySource* master = (*keystore)->current(key_name);
  if (!master) {
    return Status::NotFound(fmt::format("keystore {} has no key {} (cairn key create)", keystore_path_, key_name));
  }
  auto fresh = SecretBytes::Random(kDataKeyBytes);
  if (!fresh.ok()) return fresh.status();
  DataKey data_key = std::make_shared<const SecretBytes>(std::move(*fresh));
  auto wrapped = Wrap(*data_key, ino, key_name, master->version);
  if (!wrapped.ok()) return wrapped.status();
  {
    std::lock_guard lock(catalog_mutex_);
    CAIRN_RETURN_IF_ERROR(InTransaction(catalog_, [&]() -> Status {
      auto inode = catalog_.GetInode(ino);  // deleted meanwhile: no key may outlive it
      if (!inode.ok()) return inode.status();
      return catalog_.PutFileKey({ino, key_name, master->version, std::move(*wrapped)});
    }));
  }
  Remember(ino, key_name, data_key, generation);
  return data_key;
}

Result<FileKeys::DataKey> FileKeys::ForReading(uint64_t ino) {
  uint64_t generation;
  {
    std::lock_guard lock(mutex_);
    if (auto it = data_keys_.find(ino); it != data_keys_.end()) return it->second.second;
    generation = generation_;
  }
  Result<FileKeyRecord> row = Status::NotFound("");
  {
    std::lock_guard lock(catalog_mutex_);
    row = catalog_.GetFileKey(ino);
  }
  if (!row.ok()) return row.status();
  auto data_key = Unwrap(*row);
  if (!data_key.ok()) return data_key.status();
  Remember(ino, row->key_name, *data_key, generation);
  return *data_key;
}

void FileKeys::Remember(uint64_t ino, const std::string& key_name, const DataKey& key, uint64_t generation) {
  std::lock_guard lock(mutex_);
  if (generation != generation_) return;  // an erase or a delete came between: do not bring it back
  if (data_keys_.size() >= kMaxCachedDataKeys) data_keys_.clear();
  data_keys_[ino] = {key_name, key};
}

Result<std::optional<std::string>> FileKeys::KeyNameOf(uint64_t ino) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = data_keys_.find(ino); it != data_keys_.end()) return std::optional(it->second.first);
  }
  std::lock_guard lock(catalog_mutex_);
  auto row = catalog_.GetFileKey(ino);
  if (row.status().IsNotFound()) return std::optional<std::string>();
  if (!row.ok()) return row.status();
  return std::optional(row->key_name);
}

Status FileKeys::Authorize(const std::string& key_name, uid_t uid, std::span<const gid_t> gids) {
  if (uid == 0) return Status::OK();
  auto keystore = CurrentKeystore();
  if (!keystore.ok() && !keystore.status().IsNotFound()) return keystore.status();
  return Authorize(keystore.ok() ? keystore->get() : nullptr, key_name, uid, gids);
}

Status FileKeys::Authorize(const Keystore* keystore, const std::string& key_name, uid_t uid,
                           std::span<const gid_t> gids) const {
  if (uid == 0 || (keystore && keystore->Allows(key_name, uid, gids))) return Status::OK();
  return Status::Posix(EACCES, fmt::format("key {}: uid {} (gid {}) is not allowed to use it (see the 'allow {}' "
                                           "line of {}{})", key_name, uid, fmt::join(gids, ","), key_name,
                                           keystore_path_, keystore ? "" : ", which does not exist"));
}

Status FileKeys::CheckSelectable(const std::string& key_name, uid_t uid, std::span<const gid_t> gids) {
  auto keystore = CurrentKeystore();
  if (keystore.status().IsNotFound()) return Status::Posix(EINVAL, keystore.status().message());
  if (!keystore.ok()) return keystore.status();
  if (!(*keystore)->current(key_name)) {
    return Status::Posix(EINVAL, fmt::format("keystore {} has no key {} (cairn key list)", keystore_path_, key_name));
  }
  return Authorize(key_name, uid, gids);
}

Result<uint64_t> FileKeys::Rewrap(const std::string& key_name) {
  std::lock_guard writing(writing_mutex_);
  auto keystore = CurrentKeystore();
  if (!keystore.ok()) return keystore.status();
  const MasterKeySource* newest = (*keystore)->current(key_name);
  if (!newest) return Status::NotFound(fmt::format("keystore {} has no key {}", keystore_path_, key_name));
  const uint32_t version = newest->version;
  Result<std::vector<FileKeyRecord>> rows = Status::NotFound("");
  {
    std::lock_guard lock(catalog_mutex_);
    rows = catalog_.FileKeysUnder(key_name);
  }
  if (!rows.ok()) return rows.status();
  uint64_t rewrapped = 0;
  for (const FileKeyRecord& row : *rows) {
    if (row.master_version == version) continue;
    auto data_key = Unwrap(row);
    if (!data_key.ok()) return data_key.status();
    auto wrapped = Wrap(**data_key, row.ino, key_name, version);
    if (!wrapped.ok()) return wrapped.status();
    std::lock_guard lock(catalog_mutex_);
    bool still = false;
    CAIRN_RETURN_IF_ERROR(InTransaction(catalog_, [&]() -> Status {
      // The file may have been deleted (its key erased with it) or rewritten meanwhile: that stays so.
      auto now = catalog_.GetFileKey(row.ino);
      if (now.status().IsNotFound()) return Status::OK();
      if (!now.ok()) return now.status();
      if (now->key_name != row.key_name || now->master_version != row.master_version || now->wrapped != row.wrapped) {
        return Status::OK();
      }
      still = true;
      return catalog_.PutFileKey({row.ino, key_name, version, std::move(*wrapped)});
    }));
    rewrapped += still ? 1 : 0;
  }
  return rewrapped;
}

Result<uint64_t> FileKeys::CountUnder(const std::string& key_name) {
  // After a data key being wrapped now (ForWriting) is in the catalog: cairn key delete counts
  // again once the key has left the keystore, and a wrap that read the keystore before that
  // must not come in after the count.
  std::lock_guard writing(writing_mutex_);
  std::lock_guard lock(catalog_mutex_);
  auto rows = catalog_.FileKeysUnder(key_name);
  if (!rows.ok()) return rows.status();
  return rows->size();
}

Result<std::vector<uint64_t>> FileKeys::EraseUnder(const std::string& key_name) {
  std::lock_guard writing(writing_mutex_);
  std::vector<uint64_t> erased;
  {
    std::lock_guard lock(catalog_mutex_);
    auto rows = catalog_.FileKeysUnder(key_name);
    if (!rows.ok()) return rows.status();
    for (const FileKeyRecord& row : *rows) erased.push_back(row.ino);
    CAIRN_RETURN_IF_ERROR(InTransaction(catalog_, [&] { return catalog_.DeleteFileKeysUnder(key_name); }));
  }
  std::lock_guard lock(mutex_);
  generation_++;
  std::erase_if(data_keys_, [&](const auto& entry) { return entry.second.first == key_name; });
  std::erase_if(masters_, [&](const auto& entry) { return entry.first.first == key_name; });
  return erased;
}

void FileKeys::Forget(uint64_t ino) {
  std::lock_guard lock(mutex_);
  generation_++;
  data_keys_.erase(ino);
}

}  // namespace cairn
