// AdminWalks are the admin's commands over a subtree of a mounted archive: cairn rules
// dry-run and cairn policy apply. They walk the catalog a step at a time, letting the
// catalog mutex go between steps, so the mount stays responsive. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "archive/archive.h"
#include "fs/namespace.h"
#include "pipeline/reconciler.h"
#include "policy/rules.h"

namespace cairn {

class AdminWalks {
 public:
  AdminWalks(Archive& archive, Namespace& names, Reconciler& reconciler)
      : archive_(archive), names_(names), reconciler_(reconciler) {}

  // cairn policy apply: re-encodes the out-of-policy files at or below `path` now.
  Status ApplyPolicy(const std::string& path, const Reconciler::ProgressFn& report);
  // cairn rules dry-run: one line per regular file at or below `path` whose effective
  // policy `candidate` would change ("/a/f: segment_size=4194304->65536 (rule:x) ...");
  // `report` returns false to stop. The lines go out without the catalog mutex.
  Status DryRunRules(std::shared_ptr<const RuleSet> candidate, const std::string& path,
                     const std::function<bool(const std::string&)>& report);

 private:
  Archive& archive_;
  Namespace& names_;
  Reconciler& reconciler_;
};

}  // namespace cairn
