// cairn: the archive filesystem's single command-line entry point.
#include <malloc.h>
#include <sys/stat.h>

#include <cstring>
#include <map>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"

namespace {

const char* kUsage = R"(usage: cairn COMMAND [ARGS]

commands:
  mkfs ARCHIVE [--disks N] [--group NAME:pool:N|NAME:lonestar:XxY:HN+1[:MODE] [--devices DEV,...]]...
       --disk-size SIZE [--segment-size SIZE] [--cache-size SIZE] [--pack-threshold SIZE]
  mount ARCHIVE MOUNTPOINT [-f] [-d] [-s] [--wait SECONDS] [-o OPTIONS]
  umount MOUNTPOINT
  status ARCHIVE [--json]
  persist ARCHIVE|MOUNTPOINT persist every dirty file now (mounted archive)
  evict ARCHIVE|MOUNTPOINT   persist, then drop persisted data from the staging cache
  fsck ARCHIVE               check an unmounted archive
  policy explain PATH        the effective policy of a file, field by field, and where each came from
  policy apply PATH [--progress]   re-encode the out-of-policy files at or below PATH now
  rules check FILE [--archive ARCHIVE]   check an admin rules file (errors as FILE:LINE:COLUMN),
                             with --archive also that its raid= fit that archive's disks
  rules dry-run FILE --path DIR    which existing files below DIR the rules would change, and how
  rules reload ARCHIVE|MOUNTPOINT  make the daemon re-read ARCHIVE/rules (as SIGHUP does)
  group add ARCHIVE NAME:pool:N|NAME:lonestar:XxY:HN+1[:MODE] [--disk-size SIZE] [--devices DEV,...]
  group show ARCHIVE NAME    a lonestar group's grid: each disk's role, state and fill; what is pending
  group list ARCHIVE         the disk groups and their disks
  disk list ARCHIVE          each disk's path, use and state (ok, missing, failed, needs rebuild)
  disk fail ARCHIVE DISK     mark a disk failed (drills); mount with -o degraded
  disk replace ARCHIVE DISK NEWPATH   a new disk (an image, or a block device) in its place; then rebuild
  rebuild ARCHIVE|MOUNTPOINT [--progress] [--rate SIZE]   recreate the chunks of replaced and missing disks
  scrub ARCHIVE|MOUNTPOINT [--progress] [--budget DURATION] [--rate SIZE]   verify every chunk, rewrite bad ones
  inspect ARCHIVE --disk N --offset BYTES
  recover ARCHIVE [--force] [--progress] [--report FILE]   rebuild a lost catalog from the disks
  plugins [ARCHIVE]          the transform plugins cairn loads (compress=, encrypt=, plugins=), with versions
  key create|list|rotate|allow|delete ARCHIVE [NAME ...]
                             master keys of encrypted files (encrypt=aes-256-gcm key=NAME)

See cairn(8).
)";

bool IsArchive(const std::string& path) {
  struct stat st;
  return ::stat((path + "/cairn.conf").c_str(), &st) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cairn;
  Args args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    fmt::print(args.empty() ? stderr : stdout, "{}", kUsage);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    fmt::print("cairn 0.1.0\n");
    return 0;
  }
  // Segment buffers (MiBs each) come and go all the time. Served from freed heap memory
  // instead of fresh mappings they skip a page fault and the zeroing of every page: persisting
  // to disks on tmpfs goes 3-4x faster, for up to 32 MiB kept per malloc arena.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 32 << 20);
  static const std::map<std::string, int (*)(const Args&)> kCommands = {
      {"mkfs", CmdMkfs},       {"mount", CmdMount},     {"umount", CmdUmount}, {"status", CmdStatus},
      {"persist", CmdPersist}, {"evict", CmdEvict},     {"fsck", CmdFsck},     {"inspect", CmdInspect},
      {"policy", CmdPolicy},   {"rules", CmdRules},     {"disk", CmdDisk},     {"rebuild", CmdRebuild},
      {"scrub", CmdScrub},     {"recover", CmdRecover}, {"group", CmdGroup},  {"plugins", CmdPlugins},
      {"key", CmdKey},
  };
  auto command = kCommands.find(args[0]);
  if (command != kCommands.end()) return command->second(Args(args.begin() + 1, args.end()));
  // mount.fuse3 runs "cairn ARCHIVE MOUNTPOINT -o OPTIONS" for fstab type fuse.cairn.
  if (args.size() >= 2 && IsArchive(args[0])) return CmdMount(args);
  fmt::print(stderr, "cairn: unknown command '{}'\n{}", args[0], kUsage);
  return 2;
}
