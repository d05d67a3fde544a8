// cairn rules check FILE [--archive ARCHIVE] | dry-run FILE --path DIR | reload
// ARCHIVE-OR-MOUNTPOINT: checks an admin rules file (against an archive's disks too), shows
// which existing files it would change, and makes a running daemon re-read ARCHIVE/rules
// (like SIGHUP). See cairn.rules(5).
#include <unistd.h>

#include <fmt/format.h>

#include "archive/config.h"
#include "archive/rules_fit.h"
#include "cli/commands.h"
#include "policy/rules.h"

namespace cairn {
namespace {

constexpr const char* kUsage =
    "usage: cairn rules check FILE [--archive ARCHIVE|MOUNTPOINT]\n"
    "       cairn rules dry-run FILE --path DIR   (DIR inside a mounted archive)\n"
    "       cairn rules reload ARCHIVE|MOUNTPOINT";

int Check(const std::string& file, const std::string& archive) {
  auto dir = archive.empty() ? Result<std::string>(std::string()) : ArchiveDir(archive);
  if (!dir.ok()) return Fail(1, dir.status().message());
  if (Status st = LoadPluginsOf(*dir); !st.ok()) return Fail(1, st.message());
  auto rules = RuleSet::Load(file);
  if (!rules.ok()) return Fail(1, rules.status().message());
  std::string fits_note;
  if (!archive.empty()) {
    auto options = LoadConfig(*dir + "/cairn.conf");
    if (!options.ok()) return Fail(1, options.status().message());
    Status fits = CheckRulesFit(*rules, *options, file);
    if (fits.ok()) fits = CheckRulesKeys(*rules, KeyInKeystore(KeystorePath(*dir, *options)), file);
    if (!fits.ok()) return Fail(1, fits.message());
    fits_note = fmt::format("; fits the {} disks of {}", options->disks.size(), *dir);
  }
  size_t selectable = 0;
  for (const auto& p : rules->policies()) selectable += p.selectable;
  fmt::print("{}: ok: {} named policies ({} selectable by users), {} rules and a default{}\n", file,
             rules->policies().size(), selectable, rules->rules().size(), fits_note);
  return 0;
}

int DryRun(const std::string& file, const std::string& dir) {
  // Read here, with the caller's rights, and checked (errors as file:line:column) before the
  // daemon gets the text.
  auto where = LocateInMount(dir);
  if (!where.ok()) return Fail(1, where.status().message());
  if (Status st = LoadPluginsOf(where->archive); !st.ok()) return Fail(1, st.message());
  auto text = RuleSet::ReadText(file);
  if (!text.ok()) return Fail(1, text.status().message());
  auto rules = RuleSet::Parse(*text, file);
  if (!rules.ok()) return Fail(1, rules.status().message());
  size_t changes = 0;
  ControlRequest request{.verb = ControlVerb::kDryRun, .path = where->inside, .rules_name = file, .rules_text = *text};
  int rc = SendControl(where->archive, request, nullptr,
                       [&](const std::string& line) {
                         if (!line.starts_with("change ")) return;
                         changes++;
                         std::string change = line.substr(7);
                         // Paths inside the archive, shown as paths on the mount.
                         fmt::print("{}{}\n", where->mountpoint == "/" ? "" : where->mountpoint, change);
                       });
  if (rc == 0) fmt::print("{} file(s) would change\n", changes);
  return rc;
}

int Reload(const std::string& target) {
  auto archive = ArchiveDir(target);
  if (!archive.ok()) return Fail(1, archive.status().message());
  int rc = SendControl(*archive, ControlRequest{.verb = ControlVerb::kRulesReload});
  if (rc != 0) return rc;
  std::string file = *archive + "/rules";
  if (::access(file.c_str(), F_OK) == 0) fmt::print("rules reloaded from {}\n", file);
  else fmt::print("rules reloaded: there is no {}, so only the built-in rules apply\n", file);
  return 0;
}

}  // namespace

int CmdRules(const Args& args) {
  if (args.size() == 2 && args[0] == "check") return Check(args[1], "");
  if (args.size() == 4 && args[0] == "check" && args[2] == "--archive") return Check(args[1], args[3]);
  if (args.size() == 4 && args[0] == "dry-run" && args[2] == "--path") return DryRun(args[1], args[3]);
  if (args.size() == 2 && args[0] == "reload") return Reload(args[1]);
  return Fail(2, kUsage);
}

}  // namespace cairn
