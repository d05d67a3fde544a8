#include "pipeline/member_metadata.h"

#include <sys/stat.h>

#include <algorithm>
#include <functional>

#include <fmt/format.h>

namespace cairn {
namespace {

constexpr size_t kMaxNames = 1024;   // names of one file recorded (hard links)
constexpr size_t kMaxDepth = 4096;   // a deeper chain of directories is a catalog loop

Result<MemberNode> NodeOf(Catalog& catalog, const InodeRecord& inode) {
  MemberNode node;
  node.ino = inode.ino;
  node.mode = inode.mode;
  node.uid = inode.uid;
  node.gid = inode.gid;
  node.size = inode.size;
  node.rdev = inode.rdev;
  node.symlink = inode.symlink;
  node.atime_ns = inode.atime_ns;
  node.mtime_ns = inode.mtime_ns;
  node.ctime_ns = inode.ctime_ns;
  node.generation = inode.generation;
  node.segment_size = inode.segment_size;
  auto xattrs = catalog.XattrsWithPrefix(inode.ino, {""});
  if (!xattrs.ok()) return xattrs.status();
  node.xattrs = std::move(*xattrs);
  return node;
}

// Adds the entries of described directory `dir` that have no data, once; with `nested`,
// also those of its subdirectories, depth first, while the limit allows.
Status ListEntriesWithoutData(Catalog& catalog, uint64_t dir, DescribedInodes& out, bool nested) {
  if (out.children.contains(dir)) return Status::OK();
  size_t room = nested ? kMaxEntriesWithoutData - out.nested_entries : kMaxEntriesWithoutData;
  auto entries = catalog.EntriesWithoutData(dir, room + 1);
  if (!entries.ok()) return entries.status();
  if (entries->size() > room) {
    entries->pop_back();
    out.nodes.at(dir).entries_truncated = true;
  }
  if (nested) out.nested_entries += entries->size();
  std::string above = out.nodes.at(dir).paths.at(0);
  std::vector<uint64_t> subdirs;
  for (const auto& [name, inode] : *entries) {
    std::string path = above.empty() ? name : above + "/" + name;
    auto [node, fresh] = out.nodes.try_emplace(inode.ino);
    if (fresh) {
      auto described = NodeOf(catalog, inode);
      if (!described.ok()) return described.status();
      node->second = std::move(*described);
    }
    if (fresh && S_ISDIR(inode.mode)) {
      out.parents[inode.ino] = dir;
      node->second.paths = {path};
      subdirs.push_back(inode.ino);
    }
    std::vector<std::string>& paths = node->second.paths;
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
    out.children[dir].push_back(inode.ino);
  }
  out.children.try_emplace(dir);
  for (uint64_t subdir : subdirs) {
    if (out.nested_entries >= kMaxEntriesWithoutData) break;
    CAIRN_RETURN_IF_ERROR(ListEntriesWithoutData(catalog, subdir, out, true));
  }
  return Status::OK();
}

// Describes directory `dir` and those above it (once each), adds them to `chain` and
// returns the path of `dir`.
Result<std::string> DescribeDirectory(Catalog& catalog, uint64_t dir, DescribedInodes& out,
                                      std::set<uint64_t>& chain) {
  std::vector<std::pair<uint64_t, std::string>> fresh;  // from `dir` up to one described before
  for (uint64_t at = dir; !out.nodes.contains(at);) {
    auto inode = catalog.GetInode(at);
    if (!inode.ok()) return inode.status();
    auto node = NodeOf(catalog, *inode);
    if (!node.ok()) return node.status();
    out.nodes[at] = std::move(*node);
    if (at == kRootInode) {
      out.nodes[at].paths = {""};
      break;
    }
    auto name = catalog.NameOf(at);
    if (!name.ok()) return name.status();
    if (fresh.size() > kMaxDepth) return Status::Corruption(fmt::format("catalog: directory {} is in a loop", dir));
    fresh.emplace_back(at, name->second);
    out.parents[at] = name->first;
    at = name->first;
  }
  for (auto it = fresh.rbegin(); it != fresh.rend(); ++it) {  // top down: each parent's path is known
    const std::string& above = out.nodes.at(out.parents.at(it->first)).paths.at(0);
    out.nodes[it->first].paths = {above.empty() ? it->second : above + "/" + it->second};
  }
  for (uint64_t at = dir; chain.insert(at).second && at != kRootInode;) {
    CAIRN_RETURN_IF_ERROR(ListEntriesWithoutData(catalog, at, out, false));
    at = out.parents.at(at);
  }
  CAIRN_RETURN_IF_ERROR(ListEntriesWithoutData(catalog, kRootInode, out, false));
  return out.nodes.at(dir).paths.at(0);
}

}  // namespace

Result<DescribedInodes> DescribeInodes(Catalog& catalog, const std::set<uint64_t>& inos) {
  DescribedInodes out;
  for (uint64_t ino : inos) {
    auto inode = catalog.GetInode(ino);
    if (!inode.ok()) {
      if (inode.status().IsNotFound()) continue;  // deleted meanwhile
      return inode.status();
    }
    auto names = catalog.NamesOf(ino, kMaxNames);
    if (!names.ok()) return names.status();
    auto described = NodeOf(catalog, *inode);
    if (!described.ok()) return described.status();
    MemberNode node = std::move(*described);
    std::set<uint64_t> above;
    for (const auto& [parent, name] : *names) {
      auto path = DescribeDirectory(catalog, parent, out, above);
      if (!path.ok()) return path.status();
      node.paths.push_back(path->empty() ? name : *path + "/" + name);
    }
    out.ancestors[ino].assign(above.begin(), above.end());
    out.nodes[ino] = std::move(node);
  }
  return out;
}

MemberTable MemberTableOf(const DescribedInodes& described,
                          const std::vector<std::pair<uint64_t, MemberSegment>>& segments,
                          const std::vector<std::pair<uint64_t, uint64_t>>& holes, std::set<uint64_t>& listed) {
  std::map<uint64_t, MemberNode> nodes;
  // Adds `ino` and, the first time in the batch, the entries without data below it.
  std::function<void(uint64_t)> add_directory = [&](uint64_t ino) {
    nodes.try_emplace(ino, described.nodes.at(ino));
    auto children = described.children.find(ino);
    if (children == described.children.end() || !listed.insert(ino).second) return;
    for (uint64_t child : children->second) {
      if (S_ISDIR(described.nodes.at(child).mode)) {
        add_directory(child);
      } else {
        nodes.try_emplace(child, described.nodes.at(child));
      }
    }
  };
  // The node of file `ino` with its directories, null when it was deleted before it was described.
  auto add_file = [&](uint64_t ino) -> MemberNode* {
    auto it = described.nodes.find(ino);
    if (it == described.nodes.end()) return nullptr;
    auto [node, fresh] = nodes.try_emplace(ino, it->second);
    if (fresh) {
      for (uint64_t dir : described.ancestors.at(ino)) add_directory(dir);
    }
    return &node->second;
  };
  for (const auto& [ino, segment] : segments) {
    if (MemberNode* node = add_file(ino)) node->segments.push_back(segment);
  }
  std::vector<std::pair<uint64_t, uint64_t>> sorted_holes = holes;
  std::sort(sorted_holes.begin(), sorted_holes.end());
  for (const auto& [ino, index] : sorted_holes) {
    MemberNode* node = add_file(ino);
    if (node == nullptr) continue;
    std::vector<MemberHoleRun>& runs = node->holes;
    if (!runs.empty() && runs.back().first + runs.back().count == index) {
      runs.back().count++;
    } else if (runs.empty() || runs.back().first + runs.back().count < index) {  // once each
      runs.push_back({index, 1});
    }
  }
  MemberTable table;
  for (auto& [ino, node] : nodes) table.nodes.push_back(std::move(node));
  return table;
}

}  // namespace cairn
