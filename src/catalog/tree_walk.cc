#include "catalog/tree_walk.h"

#include <sys/stat.h>

#include <algorithm>

namespace cairn {

Result<bool> TreeWalk::Step(Catalog& catalog, size_t limit, const std::function<bool(const InodeRecord&)>& visit) {
  constexpr size_t kListChunk = 1024;
  for (size_t budget = std::max<size_t>(limit, 1); budget > 0;) {
    if (!pending_.empty()) {
      uint64_t at = pending_.back();
      pending_.pop_back();
      if (!seen_.insert(at).second) continue;
      budget--;
      auto inode = catalog.GetInode(at);
      if (!inode.ok() && inode.status().IsNotFound()) continue;  // a dangling name: fsck's business
      if (!inode.ok()) return inode.status();
      if (!visit(*inode)) return false;
      if (S_ISDIR(inode->mode)) listings_.push_back({at, 0});
      continue;
    }
    if (listings_.empty()) return false;
    Listing& listing = listings_.back();
    size_t want = std::min(budget, kListChunk);
    auto entries = catalog.ListEntries(listing.dir, listing.after, want);
    if (!entries.ok()) return entries.status();
    budget -= std::min(budget, entries->size());
    if (entries->size() < want) {
      listings_.pop_back();
    } else {
      listing.after = entries->back().cookie;
    }
    for (auto it = entries->rbegin(); it != entries->rend(); ++it) pending_.push_back(it->ino);  // in name order
  }
  return true;
}

}  // namespace cairn
