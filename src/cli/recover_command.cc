// cairn recover: rebuilds a lost catalog from the disks (maintenance/recover.h). See cairn(8).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "maintenance/recover.h"
#include "util/size.h"

namespace cairn {

int CmdRecover(const Args& args) {
  const char* usage = "usage: cairn recover ARCHIVE [--force] [--progress] [--report FILE]";
  RecoverOptions options;
  std::string dir, report_path;
  for (size_t i = 0; i < args.size(); i++) {
    if (args[i] == "--force") {
      options.force = true;
    } else if (args[i] == "--progress") {
      options.progress = [](const std::string& line) { fmt::print(stderr, "{}\n", line); };
    } else if (args[i] == "--report" && i + 1 < args.size()) {
      report_path = args[++i];
    } else if (dir.empty() && !args[i].starts_with("-")) {
      dir = args[i];
    } else {
      return Fail(2, usage);
    }
  }
  if (dir.empty()) return Fail(2, usage);
  // The report's file is opened before anything changes: a path it cannot write, or one of
  // the archive's own files, is refused while the archive is as it was.
  auto close = [](std::FILE* f) { std::fclose(f); };
  std::unique_ptr<std::FILE, decltype(close)> report_file(nullptr, close);
  bool report_is_new = false;  // made here: removed again when the recovery fails
  if (!report_path.empty()) {
    std::error_code dir_error, report_error;
    auto archive_dir = std::filesystem::weakly_canonical(dir, dir_error);
    auto report_at = std::filesystem::weakly_canonical(report_path, report_error);
    if (!dir_error && !report_error && report_at.string().starts_with(archive_dir.string() + "/")) {
      return Fail(2, fmt::format("--report {}: that is inside the archive {}; name a file outside it", report_path,
                                 dir));
    }
    report_is_new = ::access(report_path.c_str(), F_OK) != 0;
    report_file.reset(std::fopen(report_path.c_str(), "ae"));
    if (!report_file) {
      return Fail(1, fmt::format("--report {}: cannot write it: {}; nothing was changed", report_path,
                                 std::strerror(errno)));
    }
  }
  auto report = RecoverCatalog(dir, options);
  if (!report.ok()) {
    if (report_is_new) ::unlink(report_path.c_str());
    return Fail(1, report.status().message());
  }
  if (!report->catalog_backup.empty()) fmt::print("old catalog kept as {}\n", report->catalog_backup);
  if (!report->cache_backup.empty()) {
    fmt::print("old staging cache kept as {} (files not yet persisted are there, named by inode)\n",
               report->cache_backup);
  }
  fmt::print("found {} chunks of {} complete extents; {} hold the newest data\n", report->chunks_found,
             report->extents_found, report->extents_used);
  fmt::print("recovered {} files ({}) and {} directories ({} without recorded metadata: mode 0755, owner 0:0)\n",
             report->files, FormatSize(report->bytes), report->directories, report->directories_guessed);
  for (const std::string& note : report->notes) fmt::print("note: {}\n", note);
  std::string lost;
  for (const std::string& line : report->lost) lost += "  " + line + "\n";
  fmt::print("not recovered: {}\n{}", report->lost.size(), lost);
  if (report_file) {
    // A regular file is written anew; a terminal, pipe or /dev/null takes the lines as they come.
    std::FILE* out = report_file.release();
    struct stat st;
    bool written = ::fstat(::fileno(out), &st) == 0 && (!S_ISREG(st.st_mode) || ::ftruncate(::fileno(out), 0) == 0) &&
                   std::fputs(lost.c_str(), out) >= 0;
    int error = errno;
    if (std::fclose(out) != 0 && written) {
      written = false;
      error = errno;
    }
    if (!written) return Fail(1, fmt::format("cannot write {}: {}", report_path, std::strerror(error)));
  }
  return report->lost.empty() ? 0 : 3;
}

}  // namespace cairn
