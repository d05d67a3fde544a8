// cairn key create|list|rotate|allow|delete ARCHIVE ...: the archive's master keys in its
// keystore (keys/keystore.h), and the file data keys they wrap in its catalog, through the
// daemon when the archive is mounted. See cairn(8), KEYS.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "archive/config.h"
#include "archive/rules_fit.h"
#include "cli/commands.h"
#include "daemon/control_server.h"
#include "fs/filesystem.h"
#include "fs/key_guards.h"
#include "keys/keystore.h"
#include "policy/rules.h"

namespace cairn {
namespace {

constexpr const char* kKeyUsage =
    "usage: cairn key create ARCHIVE NAME [--allow WHO,...] [--from-file PATH | --from-command COMMAND]\n"
    "       cairn key list ARCHIVE\n"
    "       cairn key rotate ARCHIVE NAME [--from-file PATH | --from-command COMMAND]\n"
    "       cairn key allow ARCHIVE NAME WHO,...   (WHO: user:NAME, group:NAME, uid:N, gid:N, *; none: root only)\n"
    "       cairn key delete ARCHIVE NAME [--erase]";

int Usage() { return Fail(2, kKeyUsage); }

Result<std::string> KeystorePath(const std::string& archive) {
  auto options = LoadConfig(archive + "/cairn.conf");
  if (!options.ok()) return options.status();
  return cairn::KeystorePath(archive, *options);
}

// Holds KEYSTORE.lock until the process ends, so two cairn key commands never save over each
// other's changes (each reads the keystore after taking it).
Status LockKeystore(const std::string& path) {
  std::string lock = path + ".lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::FromErrno(fmt::format("keystore lock {}", lock), errno);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) return Status::FromErrno(fmt::format("keystore lock {}", lock), errno);
  }
  return Status::OK();  // the descriptor stays open: the lock is released when cairn exits
}

Result<Keystore> LoadOrNew(const std::string& path) {
  auto store = Keystore::Load(path);
  if (store.status().IsNotFound()) return Keystore(path);
  return store;
}

// "user:alice,gid:100,*" as keystore WHO terms; "none" as none.
Result<std::vector<std::string>> Grants(const std::string& text) {
  std::vector<std::string> out;
  if (text == "none") return out;
  for (const std::string& who : SplitList(text)) {
    size_t colon = who.find(':');
    std::string kind = who.substr(0, colon), name = colon == std::string::npos ? "" : who.substr(colon + 1);
    if (kind == "user") {
      const passwd* pw = ::getpwnam(name.c_str());
      if (!pw) return Status::InvalidArgument(fmt::format("--allow {}: no such user", who));
      out.push_back(fmt::format("uid:{}", pw->pw_uid));
    } else if (kind == "group") {
      const group* gr = ::getgrnam(name.c_str());
      if (!gr) return Status::InvalidArgument(fmt::format("--allow {}: no such group", who));
      out.push_back(fmt::format("gid:{}", gr->gr_gid));
    } else {
      out.push_back(who);  // uid:N, gid:N or *: the keystore checks them
    }
  }
  return out;
}

// The source of version `version` of key `name` from --from-file / --from-command, or a
// random inline key. The source is tried now, as that version (a command is told it), so a
// key that cannot be read is never recorded.
Result<MasterKeySource> NewSource(const std::string& name, uint32_t version, const Args& options) {
  MasterKeySource source;
  source.name = name;
  for (size_t i = 0; i + 1 < options.size(); i += 2) {
    if (options[i] == "--from-file") {
      source.kind = MasterKeySource::Kind::kFile;
      source.location = options[i + 1];
      if (!source.location.starts_with('/')) return Status::InvalidArgument("--from-file needs an absolute path");
    } else if (options[i] == "--from-command") {
      source.kind = MasterKeySource::Kind::kCommand;
      source.location = options[i + 1];
    }
  }
  if (source.location.empty()) return NewInlineMasterKey(name);
  CAIRN_RETURN_IF_ERROR(CheckKeyName(name));
  source.version = version;
  auto bytes = MasterKeyOf(source);
  if (!bytes.ok()) return bytes.status();
  auto check = MasterKeyCheckValue(*bytes);  // recorded: a source that later gives another key is refused
  if (!check.ok()) return check.status();
  source.check = std::move(*check);
  return source;
}

// Busy, naming the line, when the rules of `archive` (if it has any) encrypt
// under key `name`.
Status RulesDoNotName(const std::string& archive, const std::string& name) {
  std::string path = archive + "/rules";
  if (::access(path.c_str(), F_OK) != 0) return Status::OK();
  CAIRN_RETURN_IF_ERROR(LoadPluginsOf(archive));  // the values its plugins make valid
  auto rules = RuleSet::Load(path);
  if (!rules.ok()) return rules.status();
  Status named = CheckRulesKeys(
      *rules,
      [&](const std::string& key) {
        return key == name ? Status::InvalidArgument(fmt::format("it encrypts under key={}", key)) : Status::OK();
      },
      path);
  if (named.ok()) return named;
  return Status::Busy(fmt::format("key {} is named by the rules ({}); change them first", name,
                                                named.message()));
}

// Runs `action` (count, rewrap, erase) on the data keys `name` wraps: by the daemon when
// the archive is mounted, else here. The number of files.
Result<uint64_t> FileKeyAction(const std::string& archive, const std::string& action, const std::string& name) {
  if (Archive::LockHolder(archive) != 0) {
    std::string reply;
    ControlRequest request{.verb = ControlVerb::kKeys};
    request.key_action = action;
    request.key_name = name;
    CAIRN_RETURN_IF_ERROR(ExchangeControl(archive, request, &reply));
    uint64_t files = 0;
    if (!reply.starts_with("files ") ||
        std::from_chars(reply.data() + 6, reply.data() + reply.size(), files).ec != std::errc()) {
      return Status::IOError(fmt::format("unexpected reply from the daemon: {}", reply));
    }
    return files;
  }
  Archive::OpenOptions open;
  open.degraded = true;
  open.repair_on_read = false;
  open.read_only = action == "count";
  open.lock = action != "count";
  auto opened = Archive::Open(archive, open);
  if (!opened.ok()) return opened.status();
  if (action != "erase") return (*opened)->ChangeFileKeys(action, name);
  // As the daemon does: the staging cache's copies of what the key decrypted go too, or
  // the next mount would serve them.
  Filesystem fs(**opened);
  CAIRN_RETURN_IF_ERROR(fs.Recover());
  auto erased = fs.ChangeFileKeys(action, name);
  Status durable = (*opened)->CommitDurably();
  if (erased.ok() && !durable.ok()) return durable;
  return erased;
}

int List(const std::string& archive, const Keystore& store) {
  fmt::print("keystore {}\n", store.path());
  for (const std::string& name : store.names()) {
    std::string versions;
    for (const MasterKeySource* v : store.versions(name)) {
      const char* kind = v->kind == MasterKeySource::Kind::kInline ? "in the keystore"
                         : v->kind == MasterKeySource::Kind::kFile ? "file"
                                                                   : "command";
      bool unchecked = v->check.empty();  // added before checks were
      versions += fmt::format("{}v{} ({}{}{}{})", versions.empty() ? "" : ", ", v->version, kind,
                              v->location.empty() ? "" : " ", v->location, unchecked ? ", no check value" : "");
    }
    std::string who;
    for (const std::string& w : store.grants(name)) who += (who.empty() ? "" : ",") + w;
    auto files = FileKeyAction(archive, "count", name);
    fmt::print("  {:<16} {}; allowed: root{}{}; files: {}\n", name, versions, who.empty() ? "" : ",", who,
               files.ok() ? std::to_string(*files) : "? (" + files.status().message() + ")");
  }
  return 0;
}

// After a key is deleted: the files and directories whose key= attributes still name it, where
// what is written cannot be persisted (it waits in the staging cache), asked of the daemon when
// mounted (its catalog has what was set last). A failing lookup is said, not an error: the key
// is gone already.
void WarnOfAttributesNaming(const std::string& archive, const std::string& name) {
  Result<std::vector<std::string>> named = std::vector<std::string>();
  if (Archive::LockHolder(archive) != 0) {
    ControlRequest request{.verb = ControlVerb::kKeys};
    request.key_action = "attributes";
    request.key_name = name;
    std::string reply;
    Status asked = ExchangeControl(archive, request, &reply);
    if (asked.ok()) {
      std::istringstream lines(reply);
      for (std::string line; std::getline(lines, line);) {
        if (line.starts_with("named ")) named->push_back(line.substr(6));
      }
    } else {
      named = asked;
    }
  } else if (auto opened = OpenToLook(archive); opened.ok()) {
    std::lock_guard lock((*opened)->catalog_mutex());
    named = AttributesNamingKey(**opened, name, kNamedKeyAttributesShown + 1);
  } else {
    named = opened.status();
  }
  if (!named.ok()) {
    Tell(fmt::format("warning: cannot tell which files and directories still name key {}: {}", name,
                     named.status().message()));
    return;
  }
  if (named->empty()) return;
  bool more = named->size() > kNamedKeyAttributesShown;
  named->resize(std::min(named->size(), kNamedKeyAttributesShown));
  Tell(fmt::format("warning: {}{} still name key {}: what is written there cannot be persisted (it waits in the "
                   "staging cache) until that attribute changes or a key {} is created again",
                   fmt::join(*named, ", "), more ? " and more" : "", name, name));
}

}  // namespace

int CmdKey(const Args& args) {
  if (args.size() < 2) return Usage();
  const std::string& action = args[0];
  const std::string& archive = args[1];
  auto path = KeystorePath(archive);
  if (!path.ok()) return Fail(1, path.status().message());
  if (action != "list") {
    if (Status st = LockKeystore(*path); !st.ok()) return Fail(1, st.message());
  }
  auto store = LoadOrNew(*path);
  if (!store.ok()) return Fail(1, store.status().message());
  if (action == "list") return args.size() == 2 ? List(archive, *store) : Usage();
  if (args.size() < 3) return Usage();
  const std::string& name = args[2];
  Args options(args.begin() + 3, args.end());

  if (action == "create" || action == "rotate") {
    bool has = store->current(name) != nullptr;
    if (action == "create" && has) {
      return Fail(1, fmt::format("key {} exists (cairn key rotate makes a new version of it)", name));
    }
    if (action == "rotate" && !has) return Fail(1, fmt::format("keystore {} has no key {}", *path, name));
    std::set<std::string> seen;
    for (size_t i = 0; i < options.size(); i += 2) {
      bool known = options[i] == "--from-file" || options[i] == "--from-command" ||
                   (action == "create" && options[i] == "--allow");
      if (!known || i + 1 >= options.size()) return Usage();
      if (!FirstTime(seen, options[i])) {
        return Fail(2, GivenTwice(options[i]) + (options[i] == "--allow" ? " (list several as WHO,WHO)" : ""));
      }
    }
    auto source = NewSource(name, has ? store->current(name)->version + 1 : 1, options);
    if (!source.ok()) return Fail(1, source.status().message());
    if (Status st = store->AddVersion(std::move(*source)); !st.ok()) return Fail(1, st.message());
    if (auto allow = std::find(options.begin(), options.end(), "--allow"); allow != options.end()) {
      auto who = Grants(*(allow + 1));
      if (!who.ok()) return Fail(1, who.status().message());
      if (Status st = store->SetGrants(name, *who); !st.ok()) return Fail(1, st.message());
    }
    if (Status st = store->Save(); !st.ok()) return Fail(1, st.message());
    uint32_t version = store->current(name)->version;
    if (action == "create") {
      fmt::print("key {} created in {}\n", name, *path);
      return 0;
    }
    // Every file key moves to the new version before the older ones leave the keystore.
    auto rewrapped = FileKeyAction(archive, "rewrap", name);
    if (!rewrapped.ok()) {
      return Fail(1, fmt::format("key {} version {} added, but re-wrapping the file keys failed: {}; the older "
                                 "versions stay until cairn key rotate succeeds",
                                 name, version, rewrapped.status().message()));
    }
    store->DropVersionsBefore(name, version);
    if (Status st = store->Save(); !st.ok()) return Fail(1, st.message());
    fmt::print("key {}: version {}; {} file key(s) re-wrapped, older versions removed\n", name, version, *rewrapped);
    return 0;
  }
  if (action == "allow") {
    if (options.size() != 1) return Usage();
    if (!store->current(name)) return Fail(1, fmt::format("keystore {} has no key {}", *path, name));
    auto who = Grants(options[0]);
    if (!who.ok()) return Fail(1, who.status().message());
    if (Status st = store->SetGrants(name, *who); !st.ok()) return Fail(1, st.message());
    if (Status st = store->Save(); !st.ok()) return Fail(1, st.message());
    fmt::print("key {}: allowed to root{}{}\n", name, who->empty() ? "" : " and ", fmt::join(*who, ", "));
    return 0;
  }
  if (action == "delete") {
    bool erase = options.size() == 1 && options[0] == "--erase";
    if (!options.empty() && !erase) return Usage();
    if (!store->current(name)) return Fail(1, fmt::format("keystore {} has no key {}", *path, name));
    // Files the rules would encrypt under it could not be persisted any more.
    if (Status st = RulesDoNotName(archive, name); !st.ok()) return Fail(1, st.message());
    auto files = FileKeyAction(archive, erase ? "erase" : "count", name);
    if (!files.ok()) return Fail(1, files.status().message());
    if (*files > 0 && !erase) {
      return Fail(1, fmt::format("the data of {} file(s) is encrypted under key {}; cairn key delete --erase "
                                 "destroys their keys and makes that data unreadable for good",
                                 *files, name));
    }
    const Keystore before = *store;
    store->Drop(name);
    if (Status st = store->Save(); !st.ok()) return Fail(1, st.message());
    // A file persisted between the count and the save wrapped its data key with this master
    // key: count again now that the daemon cannot use it any more, and put it back if so.
    auto after = FileKeyAction(archive, "count", name);
    if (!after.ok() || *after > 0) {
      Status restored = before.Save();
      return Fail(1, fmt::format("key {} is in use after all ({}); it stays in the keystore{}", name,
                                 after.ok() ? fmt::format("{} file(s)", *after) : after.status().message(),
                                 restored.ok() ? "" : fmt::format(", but putting it back failed: {}", restored.message())));
    }
    fmt::print("key {} deleted{}\n", name, erase ? fmt::format("; {} file(s) crypto-erased", *files) : "");
    WarnOfAttributesNaming(archive, name);
    return 0;
  }
  return Usage();
}

}  // namespace cairn
