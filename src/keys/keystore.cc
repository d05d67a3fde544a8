#include "keys/keystore.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <regex>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util/sync_directory.h"

namespace cairn {
namespace {

constexpr size_t kMaxKeystoreBytes = 4 << 20;
constexpr size_t kMaxSourceOutput = 4096;  // what a key file or command may give
constexpr size_t kCheckValueBytes = 16;
constexpr int kCommandTimeoutMs = 30000;

// Why a root-only file at `path` is refused, with the command that mends it; "" when it is not.
std::string ModeProblem(const struct stat& st, const std::string& path) {
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return fmt::format("it is owned by uid {} (chown {} {})", st.st_uid, ::geteuid(), path);
  }
  if (st.st_mode & 077) {
    return fmt::format("its mode is {:04o}: only its owner may read or write it (chmod 600 {})", st.st_mode & 07777,
                       path);
  }
  return "";
}

// The contents of the root-only file `path` (at most `limit` bytes) in secret memory, with
// its length; `what` names it in messages.
Result<std::pair<SecretBytes, size_t>> ReadPrivateFile(const std::string& path, size_t limit, std::string_view what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("{} {} does not exist", what, path));
    return Status::IOError(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
  }
  struct stat st;
  Status st_status;
  if (::fstat(fd, &st) != 0) {
    st_status = Status::IOError(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    st_status = Status::InvalidArgument(fmt::format("{} {} is not a regular file", what, path));
  } else if (std::string why = ModeProblem(st, path); !why.empty()) {
    st_status = Status::InvalidArgument(fmt::format("{} {} is refused: {}", what, path, why));
  } else if (static_cast<size_t>(st.st_size) > limit) {
    st_status = Status::InvalidArgument(fmt::format("{} {} is larger than {} bytes", what, path, limit));
  }
  if (!st_status.ok()) {
    ::close(fd);
    return st_status;
  }
  // As large as the file, not as the limit: it is locked memory, of which an unprivileged
  // daemon may have little. One byte more notices a file that grew since the fstat.
  const size_t capacity = static_cast<size_t>(st.st_size) + 1;
  SecretBytes buffer(capacity);
  size_t length = 0;
  while (length < capacity) {
    ssize_t n = ::read(fd, buffer.data() + length, capacity - length);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st_status = Status::IOError(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
      break;
    }
    if (n == 0) break;
    length += static_cast<size_t>(n);
  }
  ::close(fd);
  if (!st_status.ok()) return st_status;
  if (length == capacity) return Status::IOError(fmt::format("{} {} grew while it was read; try again", what, path));
  return std::make_pair(std::move(buffer), length);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A master key from 64 hex digits (surrounding whitespace allowed), or null.
std::shared_ptr<SecretBytes> FromHex(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  if (text.size() != 2 * kMasterKeyBytes) return nullptr;
  auto key = std::make_shared<SecretBytes>(kMasterKeyBytes);
  for (size_t i = 0; i < kMasterKeyBytes; i++) {
    int hi = HexDigit(text[2 * i]), lo = HexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return nullptr;
    key->data()[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return key;
}

const char* KindPrefix(MasterKeySource::Kind kind) {
  switch (kind) {
    case MasterKeySource::Kind::kInline: return "hex:";
    case MasterKeySource::Kind::kFile: return "file:";
    case MasterKeySource::Kind::kCommand: return "command:";
  }
  return "?";
}

// "*", or uid:N / gid:N written as an id is matched against (no leading zeros, 32 bits):
// "uid:01000" would never match uid 1000.
bool IsGrant(const std::string& who) {
  static const std::regex kWho("\\*|(uid|gid):(0|[1-9][0-9]{0,9})");
  return std::regex_match(who, kWho) && (who == "*" || std::stoull(who.substr(4)) <= UINT32_MAX);
}

// Runs `source`'s command; its standard output (at most kMaxSourceOutput bytes) in secret
// memory. The command has kCommandTimeoutMs in all, then it is killed.
Result<std::pair<SecretBytes, size_t>> RunKeyCommand(const MasterKeySource& source) {
  // Not the command itself: it may hold a token, and this goes into errors and logs.
  std::string what = fmt::format("key {} version {}: its command", source.name, source.version);
  // Everything the child needs is made before fork: a threaded parent's child may only exec.
  std::vector<std::string> env_strings{"CAIRN_KEY_NAME=" + source.name,
                                       "CAIRN_KEY_VERSION=" + std::to_string(source.version)};
  for (char** e = environ; *e; e++) {
    if (!std::string_view(*e).starts_with("CAIRN_KEY_")) env_strings.emplace_back(*e);
  }
  std::vector<char*> env;
  for (std::string& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  std::string shell = "/bin/sh", dash_c = "-c", command = source.location;
  char* argv[] = {shell.data(), dash_c.data(), command.data(), nullptr};
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::IOError(fmt::format("{}: pipe: {}", what, std::strerror(errno)));
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return Status::IOError(fmt::format("{}: fork: {}", what, std::strerror(errno)));
  }
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    // As a shell started anew has them: the daemon ignores some while it stops.
    for (int signal : {SIGHUP, SIGINT, SIGTERM, SIGPIPE}) ::signal(signal, SIG_DFL);
    ::execve(argv[0], argv, env.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kCommandTimeoutMs);
  auto left_ms = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  };
  SecretBytes out(kMaxSourceOutput + 1);
  size_t length = 0;
  bool timed_out = false;
  while (length <= kMaxSourceOutput) {
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    int ready = ::poll(&pfd, 1, left_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      timed_out = true;
      break;
    }
    ssize_t n = ::read(pipe_fds[0], out.data() + length, kMaxSourceOutput + 1 - length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    length += static_cast<size_t>(n);
  }
  ::close(pipe_fds[0]);
  int wstatus = 0;
  bool exited = false;  // by itself (else killed when its time ran out)
  for (;;) {  // it closed its output, or ran out of time: it gets what is left to exit
    pid_t done = ::waitpid(pid, &wstatus, WNOHANG);
    if (done == pid) exited = true;
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (timed_out || left_ms() == 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);  // our own child
      while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    ::usleep(10000);
  }
  if (timed_out && exited) {  // what it started and left running held its output open
    return Status::IOError(fmt::format("{}: it exited, but a process it left running kept its output open for {} s; "
                                       "give a command that waits for what it starts",
                                       what, kCommandTimeoutMs / 1000));
  }
  if (timed_out) return Status::IOError(fmt::format("{}: gave no key within {} s", what, kCommandTimeoutMs / 1000));
  // Killed by SIGPIPE when cairn stopped reading what it printed: that is what went wrong.
  if (length > kMaxSourceOutput && (WIFEXITED(wstatus) || WTERMSIG(wstatus) == SIGPIPE)) {
    return Status::InvalidArgument(fmt::format("{}: printed too much", what));
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Status::IOError(fmt::format("{}: it failed (status {})", what,
                                       WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus)));
  }
  return std::make_pair(std::move(out), length);
}

}  // namespace

Status CheckKeyName(const std::string& name) {
  static const std::regex kName("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  if (std::regex_match(name, kName)) return Status::OK();
  return Status::InvalidArgument(
      fmt::format("'{}' is not a key name (1..64 letters, digits, '.', '_' or '-')", name.substr(0, 80)));
}

Result<Keystore> Keystore::Load(const std::string& path) {
  auto file = ReadPrivateFile(path, kMaxKeystoreBytes, "keystore");
  if (!file.ok()) return file.status();
  Keystore store(path);
  std::vector<std::tuple<size_t, MasterKeySource, std::string>> checks;  // line, whose, value
  std::string_view text(reinterpret_cast<const char*>(file->first.data()), file->second);
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    line_number++;
    auto bad = [&](std::string_view why) {
      return Status::InvalidArgument(fmt::format("keystore {} line {}: {}", path, line_number, why));
    };
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    line.remove_prefix(first);
    // Words up to the source, which runs to the end of the line (a command has spaces).
    auto next_word = [&]() {
      size_t stop = std::min(line.find_first_of(" \t"), line.size());
      std::string_view word = line.substr(0, stop);
      line.remove_prefix(stop);
      size_t skip = line.find_first_not_of(" \t");
      line.remove_prefix(skip == std::string_view::npos ? line.size() : skip);
      return word;
    };
    std::string_view verb = next_word();
    std::string name(next_word());
    if (!CheckKeyName(name).ok()) return bad("the key name is not 1..64 letters, digits, '.', '_' or '-'");
    if (verb == "allow") {
      std::vector<std::string> who;
      while (!line.empty()) who.emplace_back(next_word());
      if (Status st = store.SetGrants(name, who); !st.ok()) return bad(st.message());
      continue;
    }
    if (verb != "key" && verb != "check") return bad("it starts with neither 'key', 'check' nor 'allow'");
    std::string_view number = next_word();
    MasterKeySource source;
    source.name = name;
    auto [rest, error] = std::from_chars(number.data(), number.data() + number.size(), source.version);
    if (error != std::errc() || rest != number.data() + number.size() || source.version == 0) {
      return bad(fmt::format("key {}: the version is not a number (1, 2, ...)", name));
    }
    if (verb == "check") {
      std::string value(next_word());
      if (value.size() != 2 * kCheckValueBytes || !line.empty() ||
          !std::all_of(value.begin(), value.end(), [](char c) { return HexDigit(c) >= 0; })) {
        return bad(fmt::format("key {} version {}: a check value is {} hex digits", name, source.version,
                               2 * kCheckValueBytes));
      }
      std::transform(value.begin(), value.end(), value.begin(), [](char c) { return std::tolower(c); });
      checks.emplace_back(line_number, std::move(source), std::move(value));
      continue;
    }
    if (store.find(name, source.version)) return bad(fmt::format("key {} version {} is listed twice", name, source.version));
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
    if (line.starts_with("hex:")) {
      source.kind = MasterKeySource::Kind::kInline;
      source.bytes = FromHex(line.substr(4));
      if (!source.bytes) return bad(fmt::format("key {} version {}: hex: needs 64 hex digits", name, source.version));
    } else if (line.starts_with("file:") && line.size() > 6 && line[5] == '/') {
      source.kind = MasterKeySource::Kind::kFile;
      source.location = line.substr(5);
    } else if (line.starts_with("command:") && line.size() > 8) {
      source.kind = MasterKeySource::Kind::kCommand;
      source.location = line.substr(8);
    } else {
      return bad(fmt::format("key {} version {}: the source is not hex:DIGITS, file:/PATH or command:COMMAND", name,
                             source.version));
    }
    store.keys_.push_back(std::move(source));
  }
  std::sort(store.keys_.begin(), store.keys_.end(), [](const MasterKeySource& a, const MasterKeySource& b) {
    return std::tie(a.name, a.version) < std::tie(b.name, b.version);
  });
  for (auto& [line, of, value] : checks) {
    auto key = std::find_if(store.keys_.begin(), store.keys_.end(), [&, &of = of](const MasterKeySource& k) {
      return k.name == of.name && k.version == of.version;
    });
    std::string problem = key == store.keys_.end() ? "there is no such key"
                          : !key->check.empty()        ? "it has one already"
                                                       : "";
    if (!problem.empty()) {
      return Status::InvalidArgument(fmt::format("keystore {} line {}: key {} version {}: a check value, but {}", path,
                                                 line, of.name, of.version, problem));
    }
    key->check = std::move(value);
  }
  return store;
}

Status Keystore::Save() const {
  // The text is made in secret memory: it holds the inline keys' digits.
  std::vector<std::string> lines{"# cairn keystore: master keys and who may use them (cairn(8), KEYS). Keep it mode 0600.\n"};
  size_t size = lines.front().size();
  for (const MasterKeySource& key : keys_) {
    lines.push_back(fmt::format("key {} {} {}", key.name, key.version, KindPrefix(key.kind)));
    size += lines.back().size() + (key.kind == MasterKeySource::Kind::kInline ? 2 * kMasterKeyBytes : key.location.size()) + 1;
  }
  for (const auto& [name, who] : grants_) {
    lines.push_back(fmt::format("allow {}", name));
    for (const std::string& w : who) lines.back() += " " + w;
    lines.back() += '\n';
    size += lines.back().size();
  }
  for (const MasterKeySource& key : keys_) {
    if (key.check.empty()) continue;
    lines.push_back(fmt::format("check {} {} {}\n", key.name, key.version, key.check));
    size += lines.back().size();
  }
  SecretBytes text(size);
  char* at = reinterpret_cast<char*>(text.data());
  auto append = [&](std::string_view s) { at = std::copy(s.begin(), s.end(), at); };
  append(lines[0]);
  for (size_t k = 0; k < keys_.size(); k++) {
    const MasterKeySource& key = keys_[k];
    append(lines[1 + k]);
    if (key.kind == MasterKeySource::Kind::kInline) {
      constexpr char kDigits[] = "0123456789abcdef";
      for (size_t i = 0; i < kMasterKeyBytes; i++) {
        *at++ = kDigits[key.bytes->data()[i] >> 4];
        *at++ = kDigits[key.bytes->data()[i] & 15];
      }
    } else {
      append(key.location);
    }
    *at++ = '\n';
  }
  for (size_t g = 1 + keys_.size(); g < lines.size(); g++) append(lines[g]);  // grants, then check values
  std::string temp = path_ + ".new";
  Status status;
  // A fresh file of ours: not one someone left there (or linked) beforehand.
  if (::unlink(temp.c_str()) != 0 && errno != ENOENT) {
    return Status::IOError(fmt::format("keystore {}: {}", temp, std::strerror(errno)));
  }
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    status = Status::IOError(fmt::format("keystore {}: {}", temp, std::strerror(errno)));
  } else {
    size_t done = 0;
    while (done < text.size() && status.ok()) {
      ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno != EINTR) status = Status::IOError(fmt::format("keystore {}: {}", temp, std::strerror(errno)));
      if (n > 0) done += static_cast<size_t>(n);
    }
    if (status.ok() && ::fchmod(fd, 0600) != 0) {
      status = Status::IOError(fmt::format("keystore {}: chmod: {}", temp, std::strerror(errno)));
    }
    if (status.ok() && ::fsync(fd) != 0) {
      status = Status::IOError(fmt::format("keystore {}: fsync: {}", temp, std::strerror(errno)));
    }
    ::close(fd);
  }
  if (status.ok() && ::rename(temp.c_str(), path_.c_str()) != 0) {
    status = Status::IOError(fmt::format("keystore {}: rename: {}", path_, std::strerror(errno)));
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  return SyncDirectoryOf(path_);
}

std::vector<std::string> Keystore::names() const {
  std::vector<std::string> out;
  for (const MasterKeySource& key : keys_) {
    if (out.empty() || out.back() != key.name) out.push_back(key.name);
  }
  return out;
}

std::vector<const MasterKeySource*> Keystore::versions(const std::string& name) const {
  std::vector<const MasterKeySource*> out;
  for (const MasterKeySource& key : keys_) {
    if (key.name == name) out.push_back(&key);
  }
  return out;
}

const MasterKeySource* Keystore::current(const std::string& name) const {
  auto all = versions(name);
  return all.empty() ? nullptr : all.back();
}

const MasterKeySource* Keystore::find(const std::string& name, uint32_t version) const {
  for (const MasterKeySource& key : keys_) {
    if (key.name == name && key.version == version) return &key;
  }
  return nullptr;
}

const std::vector<std::string>& Keystore::grants(const std::string& name) const {
  static const std::vector<std::string> kNone;
  for (const auto& [granted, who] : grants_) {
    if (granted == name) return who;
  }
  return kNone;
}

bool Keystore::Allows(const std::string& name, uid_t uid, std::span<const gid_t> gids) const {
  if (uid == 0) return true;
  for (const std::string& who : grants(name)) {
    if (who == "*" || who == fmt::format("uid:{}", uid)) return true;
    for (gid_t gid : gids) {
      if (who == fmt::format("gid:{}", gid)) return true;
    }
  }
  return false;
}

Status Keystore::AddVersion(MasterKeySource source) {
  CAIRN_RETURN_IF_ERROR(CheckKeyName(source.name));
  // The keystore is line by line: a line break in a path or command would end the entry.
  if (source.location.find_first_of(std::string_view("\n\r\0", 3)) != std::string::npos) {
    return Status::InvalidArgument(fmt::format("key {}: a key file path or command must be one line", source.name));
  }
  const MasterKeySource* newest = current(source.name);
  source.version = newest ? newest->version + 1 : 1;
  auto at = std::find_if(keys_.begin(), keys_.end(), [&](const MasterKeySource& k) { return k.name > source.name; });
  keys_.insert(at, std::move(source));
  return Status::OK();
}

void Keystore::DropVersionsBefore(const std::string& name, uint32_t version) {
  std::erase_if(keys_, [&](const MasterKeySource& k) { return k.name == name && k.version < version; });
}

void Keystore::Drop(const std::string& name) {
  std::erase_if(keys_, [&](const MasterKeySource& k) { return k.name == name; });
  std::erase_if(grants_, [&](const auto& g) { return g.first == name; });
}

Status Keystore::SetGrants(const std::string& name, std::vector<std::string> who) {
  CAIRN_RETURN_IF_ERROR(CheckKeyName(name));
  for (const std::string& w : who) {
    if (!IsGrant(w)) {
      return Status::InvalidArgument(fmt::format(
          "key {}: '{}' is not uid:N, gid:N (N a 32-bit id without leading zeros) or *", name, w.substr(0, 40)));
    }
  }
  std::erase_if(grants_, [&](const auto& g) { return g.first == name; });
  if (!who.empty()) grants_.emplace_back(name, std::move(who));
  return Status::OK();
}

namespace {

// The key a file or command source gives: 64 hex digits, or (a file) the raw bytes.
Result<SecretBytes> ExternalMasterKey(const MasterKeySource& source, const std::string& what) {
  auto output = source.kind == MasterKeySource::Kind::kFile
                    ? ReadPrivateFile(source.location, kMaxSourceOutput, fmt::format("{}: key file", what))
                    : RunKeyCommand(source);
  if (!output.ok()) return output.status();
  auto [bytes, length] = std::move(*output);
  const char* from = source.kind == MasterKeySource::Kind::kFile ? "file" : "command";
  SecretBytes key;
  if (source.kind == MasterKeySource::Kind::kFile && length == kMasterKeyBytes) {
    key = SecretBytes::CopyOf(bytes.bytes().first(length));
  } else if (auto hex = FromHex(std::string_view(reinterpret_cast<const char*>(bytes.data()), length))) {
    key = std::move(*hex);
  } else {
    return Status::InvalidArgument(fmt::format("{}: its {} gave neither {} raw bytes nor {} hex digits", what, from,
                                               kMasterKeyBytes, 2 * kMasterKeyBytes));
  }
  return key;
}

}  // namespace

Result<SecretBytes> MasterKeyOf(const MasterKeySource& source) {
  std::string what = fmt::format("key {} version {}", source.name, source.version);
  auto key = source.kind == MasterKeySource::Kind::kInline ? Result<SecretBytes>(SecretBytes::CopyOf(source.bytes->bytes()))
                                                           : ExternalMasterKey(source, what);
  if (!key.ok() || source.check.empty()) return key;
  auto check = MasterKeyCheckValue(*key);
  if (!check.ok()) return check.status();
  if (*check != source.check) {
    std::string_view gave = source.kind == MasterKeySource::Kind::kInline ? "its digits in the keystore are not those"
                            : source.kind == MasterKeySource::Kind::kFile ? "its file gave another key than the one it gave"
                                                                          : "its command gave another key than the one it gave";
    return Status::InvalidArgument(fmt::format("{}: {} when the version was added (the check value in the keystore "
                                               "differs); nothing is read or written with it",
                                               what, gave));
  }
  return key;
}

Result<std::string> MasterKeyCheckValue(const SecretBytes& key) {
  static constexpr char kLabel[] = "cairn master key check value";
  uint8_t mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const uint8_t*>(kLabel),
            sizeof kLabel - 1, mac, &length) ||
      length < kCheckValueBytes) {
    return Status::IOError("OpenSSL could not compute a master key's check value");
  }
  return fmt::format("{:02x}", fmt::join(std::span<const uint8_t>(mac, kCheckValueBytes), ""));
}

Result<MasterKeySource> NewInlineMasterKey(const std::string& name) {
  CAIRN_RETURN_IF_ERROR(CheckKeyName(name));
  auto bytes = SecretBytes::Random(kMasterKeyBytes);
  if (!bytes.ok()) return bytes.status();
  MasterKeySource source;
  source.name = name;
  source.kind = MasterKeySource::Kind::kInline;
  auto check = MasterKeyCheckValue(*bytes);  // a digit changed in the keystore is refused, not used
  if (!check.ok()) return check.status();
  source.check = std::move(*check);
  source.bytes = std::make_shared<const SecretBytes>(std::move(*bytes));
  return source;
}

}  // namespace cairn
