// Keystore: the archive's named master keys, kept in one root-only text file outside the
// disks, and who may use each. A master key's bytes are in the file, in another root-only
// file, or printed by a command (an external KMS); versions of a name come from rotation.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cairn/status.h"
#include "keys/secret_bytes.h"

namespace cairn {

constexpr size_t kMasterKeyBytes = 32;  // AES-256

// One version of a named master key and where its bytes come from.
struct MasterKeySource {
  enum class Kind { kInline, kFile, kCommand };
  std::string name;
  uint32_t version = 0;
  Kind kind = Kind::kInline;
  std::string location;                      // kFile: the path; kCommand: the shell command
  std::shared_ptr<const SecretBytes> bytes;  // kInline: the key itself
  // The key's MasterKeyCheckValue, recorded when the version was added, so that another key
  // given back later (or inline digits since damaged) is refused; "" in keystores from before
  // it was.
  std::string check;
};

// A check value of master key `key`: the first 16 bytes of an HMAC-SHA256 of a fixed label
// under it, in hex. It tells the key from another without revealing it.
Result<std::string> MasterKeyCheckValue(const SecretBytes& key);

// The file, parsed. Lines (see cairn(8), KEYS):
//   key NAME VERSION hex:<64 hex digits> | file:/PATH | command:SHELL COMMAND
//   check NAME VERSION <32 hex digits>   (a key's check value)
//   allow NAME WHO...      (WHO: uid:N, gid:N or *; root may always use every key)
// '#' starts a comment line.
class Keystore {
 public:
  // The keystore at `path`. NotFound when there is none; InvalidArgument naming the file
  // when someone other than its owner may read or write it, its owner is neither root nor
  // this user, or a line is malformed (with its number).
  static Result<Keystore> Load(const std::string& path);
  // An empty keystore to be saved at `path`.
  explicit Keystore(std::string path) : path_(std::move(path)) {}

  // Writes it in place (a new file of mode 0600, synced, renamed over the old one).
  Status Save() const;

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;
  // Every version of `name`, oldest first.
  std::vector<const MasterKeySource*> versions(const std::string& name) const;
  // The newest version of `name`, or null.
  const MasterKeySource* current(const std::string& name) const;
  const MasterKeySource* find(const std::string& name, uint32_t version) const;
  // WHO terms of `name`'s allow line, empty when it has none (root only).
  const std::vector<std::string>& grants(const std::string& name) const;
  // Whether a caller of `uid` in groups `gids` (primary and supplementary) may select or
  // read through key `name`.
  bool Allows(const std::string& name, uid_t uid, std::span<const gid_t> gids) const;

  // Adds the next version of `name` (1 for a new name); InvalidArgument for a bad name.
  Status AddVersion(MasterKeySource source);
  // Drops every version of `name` older than `version`.
  void DropVersionsBefore(const std::string& name, uint32_t version);
  // Drops `name`: its versions and its allow line.
  void Drop(const std::string& name);
  // Replaces `name`'s WHO terms; InvalidArgument naming one that is not uid:N, gid:N or *.
  Status SetGrants(const std::string& name, std::vector<std::string> who);

 private:
  std::string path_;
  std::vector<MasterKeySource> keys_;  // by name, then version
  std::vector<std::pair<std::string, std::vector<std::string>>> grants_;
};

// A master key of kMasterKeyBytes: read from the file or the command's output (64 hex digits,
// or the raw bytes for a file), or the inline one. InvalidArgument naming the key (never its
// bytes) when the source fails, gives something else, or gives a key whose check value is not
// the one recorded: nothing is then wrapped or unwrapped with a wrong key.
Result<SecretBytes> MasterKeyOf(const MasterKeySource& source);

// A fresh random inline master key for `name`.
Result<MasterKeySource> NewInlineMasterKey(const std::string& name);

// InvalidArgument unless `name` is a key name ([A-Za-z0-9][A-Za-z0-9._-]{0,63}).
Status CheckKeyName(const std::string& name);

}  // namespace cairn
