#include "util/cairn_mounts.h"

#include <sys/stat.h>

#include <charconv>
#include <fstream>
#include <sstream>

namespace cairn {
namespace {

// A field of /proc/mounts as it was given: the kernel writes a space, tab, newline or
// backslash in it as a backslash and three octal digits.
std::string UnescapeMountField(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); i++) {
    auto octal = [&](size_t at) { return at < field.size() && field[at] >= '0' && field[at] <= '7'; };
    if (field[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// Whether a FUSE mount with these options was made by root or by the owner of `archive`.
bool MadeByRootOrOwner(std::string_view options, const std::string& archive) {
  std::string_view uid_text;
  for (size_t start = 0; start <= options.size();) {
    size_t end = std::min(options.find(',', start), options.size());
    std::string_view option = options.substr(start, end - start);
    if (option.starts_with("user_id=")) uid_text = option.substr(8);
    start = end + 1;
  }
  uid_t uid;
  auto [rest, error] = std::from_chars(uid_text.data(), uid_text.data() + uid_text.size(), uid);
  if (uid_text.empty() || error != std::errc() || rest != uid_text.data() + uid_text.size()) return false;
  struct stat st;
  return uid == 0 || (::stat(archive.c_str(), &st) == 0 && st.st_uid == uid);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ParseCairnMounts(std::string_view table) {
  std::istringstream lines{std::string(table)};
  std::vector<std::pair<std::string, std::string>> found;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string source, target, type, options;
    if (!(fields >> source >> target >> type >> options) || type != "fuse.cairn") continue;
    std::string archive = UnescapeMountField(source);
    if (MadeByRootOrOwner(options, archive)) found.emplace_back(std::move(archive), UnescapeMountField(target));
  }
  return found;
}

std::vector<std::pair<std::string, std::string>> CairnMounts() {
  std::ifstream mounts("/proc/mounts");
  std::stringstream text;
  text << mounts.rdbuf();
  return ParseCairnMounts(text.str());
}

std::optional<std::string> MountpointOf(const std::string& archive) {
  for (const auto& [source, target] : CairnMounts()) {
    if (source == archive) return target;
  }
  return std::nullopt;
}

std::optional<std::string> CairnMountDevice(std::string_view mountinfo, std::string_view mountpoint) {
  // ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [TAG...] - TYPE SOURCE SUPER-OPTIONS
  std::istringstream lines{std::string(mountinfo)};
  std::optional<std::string> device;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string id, parent, numbers, root, target, options, tag, type;
    if (!(fields >> id >> parent >> numbers >> root >> target >> options)) continue;
    while (fields >> tag && tag != "-") {
    }
    if (tag == "-" && fields >> type && type == "fuse.cairn" && UnescapeMountField(target) == mountpoint) {
      device = numbers;  // a later line is a mount on top of it
    }
  }
  return device;
}

}  // namespace cairn
