#include "codec/plugin_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <regex>

#include <fmt/format.h>

#include "cairn/plugin.h"
#include "codec/transform_registry.h"
#include "util/buffer_pool.h"
#include "util/log.h"

#ifndef CAIRN_PLUGIN_DIR
#define CAIRN_PLUGIN_DIR "/usr/local/lib/cairn/plugins"
#endif

namespace cairn {
namespace {

constexpr size_t kErrorLength = 256;

// One instance of a plugin (its init() for one set of parameters) as a Transform.
class PluginTransform final : public Transform {
 public:
  PluginTransform(const cairn_plugin* plugin, uint32_t version, std::string params, void* instance)
      : plugin_(plugin), version_(version), params_(std::move(params)), instance_(instance) {}
  ~PluginTransform() override { plugin_->destroy(instance_); }

  std::string_view name() const override { return plugin_->name; }
  uint32_t version() const override { return version_; }
  std::string_view params() const override { return params_; }

  bool needs_key() const override { return plugin_->flags & CAIRN_PLUGIN_NEEDS_KEY; }

  Result<std::vector<uint8_t>> Encode(std::span<const uint8_t> input, const SealContext& seal) const override {
    auto call = CallFor(seal);
    if (!call.ok()) return call.status();
    // The output lands in scratch space first, left uninitialised: a compressor fills only a
    // small part of the room it may need, and zeroing all of it would cost more than the copy.
    size_t room = plugin_->max_encoded_size(instance_, input.size());
    auto scratch = std::make_unique_for_overwrite<uint8_t[]>(room);
    size_t length = 0;
    char err[kErrorLength] = "";
    if (plugin_->encode(instance_, &*call, input.data(), input.size(), scratch.get(), room, &length, err,
                        sizeof err) != CAIRN_PLUGIN_OK ||
        length > room) {
      return Status::IOError(fmt::format("plugin {}: encode failed: {}", plugin_->name, Message(err)));
    }
    return std::vector<uint8_t>(scratch.get(), scratch.get() + length);
  }

  Result<std::vector<uint8_t>> Decode(std::span<const uint8_t> encoded, uint64_t max_length,
                                      const SealContext& seal) const override {
    auto call = CallFor(seal);
    if (!call.ok()) return call.status();
    // The most it may decode to (its own output never grows); the plugin writes `length` bytes
    // of it, the rest is cut off.
    std::vector<uint8_t> out = BufferPool::Default().Take(max_length);
    size_t length = 0;
    char err[kErrorLength] = "";
    int rc = plugin_->decode(instance_, &*call, encoded.data(), encoded.size(), out.data(), out.size(), &length, err,
                             sizeof err);
    if (rc == CAIRN_PLUGIN_OK && length <= out.size()) {
      out.resize(length);
      return out;
    }
    if (rc == CAIRN_PLUGIN_SHORT_BUFFER) {
      return Status::Corruption(fmt::format("plugin {}@{}: it would decode {} bytes, at most {} expected",
                                            plugin_->name, version_, length, max_length));
    }
    return Status::Corruption(fmt::format("plugin {}@{}: {}", plugin_->name, version_, Message(err)));
  }

 private:
  // What a call is told: a plugin that needs a key gets it with the data's identity (and
  // there must be one); every other plugin gets neither, on encode and decode alike.
  Result<cairn_call> CallFor(const SealContext& seal) const {
    cairn_call call{};
    call.version = version_;
    if (!needs_key()) return call;
    if (seal.key.empty()) {
      return Status::NotSupported(fmt::format("plugin {} needs the file's data key, and none was given", plugin_->name));
    }
    call.archive_id = seal.archive_id.data();
    call.file_id = seal.file_id;
    call.segment_version = seal.version;
    call.key = seal.key.data();
    call.key_len = seal.key.size();
    return call;
  }

  static std::string Message(const char* err) { return err[0] ? std::string(err, strnlen(err, kErrorLength)) : "?"; }

  const cairn_plugin* const plugin_;
  const uint32_t version_;
  const std::string params_;
  void* const instance_;
};

// Checks a module's description; the reason it is refused, or "".
std::string Refusal(const cairn_plugin* p) {
  if (!p) return fmt::format("{}() returned nothing", CAIRN_PLUGIN_ENTRY);
  if (p->abi_version != CAIRN_PLUGIN_ABI_VERSION) {
    return fmt::format("it speaks plugin ABI version {}, this cairn speaks {}", p->abi_version,
                       CAIRN_PLUGIN_ABI_VERSION);
  }
  static const std::regex kName("[a-z][a-z0-9-]{0,31}");
  if (!p->name || !std::regex_match(p->name, kName)) return "its name is not [a-z][a-z0-9-]{0,31}";
  if (p->version == 0) return "its version is 0";
  if (p->stage < CAIRN_PLUGIN_STAGE_COMPRESS || p->stage > CAIRN_PLUGIN_STAGE_CUSTOM) {
    return fmt::format("stage {} is not compress (1), encrypt (2) or custom (3)", p->stage);
  }
  if (!p->init || !p->max_encoded_size || !p->encode || !p->decode || !p->destroy) return "a function is missing";
  if ((p->flags & CAIRN_PLUGIN_NEEDS_KEY) && p->stage != CAIRN_PLUGIN_STAGE_ENCRYPT) {
    return "only an encrypt-stage plugin may ask for a key";
  }
  return "";
}

// Registers a checked module's transform: one instance per (version, parameters), kept for
// the life of the process (decoding an extent must not set up a compressor each time).
Status Register(const cairn_plugin* plugin) {
  struct Instances {
    std::mutex mutex;
    std::map<std::pair<uint32_t, std::string>, std::shared_ptr<const Transform>> made;  // guarded by mutex
  };
  auto instances = std::make_shared<Instances>();
  auto factory = [plugin, instances](uint32_t version,
                                     std::string_view params) -> Result<std::shared_ptr<const Transform>> {
    std::lock_guard lock(instances->mutex);
    auto key = std::make_pair(version, std::string(params));
    if (auto it = instances->made.find(key); it != instances->made.end()) return it->second;
    char err[kErrorLength] = "";
    void* instance = plugin->init(key.second.c_str(), err, sizeof err);
    if (!instance) {
      return Status::InvalidArgument(fmt::format("plugin {}: parameters '{}': {}", plugin->name, params,
                                                 err[0] ? std::string(err, strnlen(err, sizeof err)) : "refused"));
    }
    auto made = std::make_shared<const PluginTransform>(plugin, version, key.second, instance);
    instances->made.emplace(std::move(key), made);
    return std::shared_ptr<const Transform>(made);
  };
  return RegisterTransform(plugin->name, plugin->version, factory, static_cast<TransformStage>(plugin->stage));
}

PluginModule LoadModule(const std::string& path) {
  PluginModule m;
  m.path = path;
  // Never closed: its transforms serve until the process ends.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    m.status = Status::InvalidArgument(fmt::format("plugin {}: cannot load it: {}", path, why ? why : "?"));
    return m;
  }
  auto entry = reinterpret_cast<cairn_plugin_entry_fn>(::dlsym(handle, CAIRN_PLUGIN_ENTRY));
  if (!entry) {
    m.status = Status::InvalidArgument(fmt::format("plugin {}: it has no {}()", path, CAIRN_PLUGIN_ENTRY));
    ::dlclose(handle);
    return m;
  }
  const cairn_plugin* plugin = entry();
  // Of another ABI version, its description may not even have a name where ours does.
  if (plugin && plugin->abi_version == CAIRN_PLUGIN_ABI_VERSION && plugin->name) m.name = plugin->name;
  if (std::string why = Refusal(plugin); !why.empty()) {
    m.status = Status::InvalidArgument(fmt::format("plugin {}: refused: {}", path, why));
    ::dlclose(handle);
    return m;
  }
  m.version = plugin->version;
  m.stage = plugin->stage;
  m.flags = plugin->flags;
  m.summary = plugin->summary ? plugin->summary : "";
  m.status = Register(plugin);
  if (m.status.code() == Status::Code::kExists) {
    m.status = Status::Exists(fmt::format("plugin {}: refused: a plugin named '{}' is loaded already", path, m.name));
  }
  if (!m.status.ok()) ::dlclose(handle);
  return m;
}

// Why `path` may not be trusted to run code in cairn, or "": its owner must be root or this
// process's user, and only the owner may write it (anyone else could put code there).
std::string Untrusted(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return fmt::format("cannot stat it: {}", std::strerror(errno));
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) return fmt::format("it is owned by uid {}", st.st_uid);
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return fmt::format("others may write it (mode {:04o})", st.st_mode & 07777);
  return "";
}

// The modules in `dir` and in its subdirectories one level down, sorted.
Result<std::vector<std::string>> ModulesIn(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> modules;
  std::vector<fs::path> dirs{dir};
  for (size_t i = 0; i < dirs.size(); i++) {
    std::error_code ec;
    fs::directory_iterator it(dirs[i], ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code type_ec;
      fs::file_status st = it->status(type_ec);
      if (type_ec) {
        LogWarning("plugin directory {}: {}: {} (skipped)", dir, it->path().string(), type_ec.message());
        continue;
      }
      if (fs::is_regular_file(st) && it->path().extension() == ".so") modules.push_back(it->path().string());
      if (i == 0 && fs::is_directory(st)) {
        // Modules in a directory others may write could be swapped for other code.
        if (std::string why = Untrusted(it->path().string()); !why.empty()) {
          LogWarning("plugin directory {}: {}: not loaded: {}", dir, it->path().string(), why);
        } else {
          dirs.push_back(it->path());
        }
      }
    }
    if (ec) return Status::IOError(fmt::format("plugin directory {}: {}", dirs[i].string(), ec.message()));
  }
  std::sort(modules.begin(), modules.end());  // the same order, so the same module wins a duplicate name
  return modules;
}

}  // namespace

Result<std::vector<PluginModule>> LoadPlugins(const std::string& dir) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<PluginModule>> loaded;  // by directory, guarded by mutex
  std::lock_guard lock(mutex);
  if (auto it = loaded.find(dir); it != loaded.end()) return it->second;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return Status::IOError(fmt::format("plugin directory {}: {}", dir, ec.message()));
    }
    return Status::NotFound(fmt::format("plugin directory {} does not exist", dir));
  }
  if (std::string why = Untrusted(dir); !why.empty()) {
    return Status::InvalidArgument(fmt::format("plugin directory {} is not loaded: {}", dir, why));
  }
  auto paths = ModulesIn(dir);
  if (!paths.ok()) return paths.status();
  std::vector<PluginModule> modules;
  for (const std::string& path : *paths) {
    if (std::string why = Untrusted(path); !why.empty()) {
      PluginModule m;
      m.path = path;
      m.status = Status::InvalidArgument(fmt::format("plugin {}: refused: {}", path, why));
      modules.push_back(m);
    } else {
      modules.push_back(LoadModule(path));
    }
    if (!modules.back().status.ok()) LogWarning("{}", modules.back().status.message());
  }
  loaded.emplace(dir, modules);
  return modules;
}

Status LoadArchivePlugins(const std::string& plugin_dir) {
  auto loaded = LoadPlugins(plugin_dir.empty() ? DefaultPluginDir() : plugin_dir);
  if (loaded.ok() || (plugin_dir.empty() && loaded.status().IsNotFound())) return Status::OK();
  return Status::InvalidArgument(fmt::format("plugin_dir: {}", loaded.status().message()));
}

std::string DefaultPluginDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = exe.parent_path() / "plugins";
    if (std::filesystem::is_directory(beside, ec)) return beside.string();
  }
  return CAIRN_PLUGIN_DIR;
}

const char* PluginStageName(uint32_t stage) {
  switch (stage) {
    case CAIRN_PLUGIN_STAGE_COMPRESS: return "compress";
    case CAIRN_PLUGIN_STAGE_ENCRYPT: return "encrypt";
    case CAIRN_PLUGIN_STAGE_CUSTOM: return "custom";
  }
  return "?";
}

}  // namespace cairn
