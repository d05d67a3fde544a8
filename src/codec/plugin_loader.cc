#include "codec/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <regex>

#include <fmt/format.h>

#include "cairn/plugin.h"
#include "codec/transform_registry.h"
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

  Result<std::vector<uint8_t>> Encode(std::span<const uint8_t> input) const override {
    cairn_call call{};
    call.version = version_;
    std::vector<uint8_t> out(plugin_->max_encoded_size(instance_, input.size()));
    size_t length = 0;
    char err[kErrorLength] = "";
    if (plugin_->encode(instance_, &call, input.data(), input.size(), out.data(), out.size(), &length, err,
                        sizeof err) != CAIRN_PLUGIN_OK ||
        length > out.size()) {
      return Status::IOError(fmt::format("plugin {}: encode failed: {}", plugin_->name, Message(err)));
    }
    out.resize(length);
    return out;
  }

  Result<std::vector<uint8_t>> Decode(std::span<const uint8_t> encoded) const override {
    cairn_call call{};
    call.version = version_;
    std::vector<uint8_t> out(std::max<size_t>(encoded.size(), 4096));
    for (int attempt = 0; attempt < 2; attempt++) {
      size_t length = 0;
      char err[kErrorLength] = "";
      int rc = plugin_->decode(instance_, &call, encoded.data(), encoded.size(), out.data(), out.size(), &length, err,
                               sizeof err);
      if (rc == CAIRN_PLUGIN_OK && length <= out.size()) {
        out.resize(length);
        return out;
      }
      if (rc != CAIRN_PLUGIN_SHORT_BUFFER || length <= out.size() || length > kMaxDecoded) {
        return Status::Corruption(fmt::format("plugin {}@{}: {}", plugin_->name, version_,
                                              rc == CAIRN_PLUGIN_SHORT_BUFFER ? "asks for an impossible buffer"
                                                                              : Message(err)));
      }
      out.resize(length);
    }
    return Status::Corruption(fmt::format("plugin {}@{}: the buffer it asked for was too small", plugin_->name,
                                          version_));
  }

 private:
  static constexpr size_t kMaxDecoded = size_t{1} << 31;  // far above any segment or pack
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
  if (plugin && plugin->name) m.name = plugin->name;
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

}  // namespace

Result<std::vector<PluginModule>> LoadPlugins(const std::string& dir) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<PluginModule>> loaded;  // by directory, guarded by mutex
  std::lock_guard lock(mutex);
  if (auto it = loaded.find(dir); it != loaded.end()) return it->second;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status::NotFound(fmt::format("plugin directory {} does not exist", dir));
  }
  std::vector<std::string> paths;
  auto add_modules_in = [&](const std::filesystem::path& d, bool descend) {
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) {
      if (e.is_regular_file(ec) && e.path().extension() == ".so") paths.push_back(e.path().string());
      if (descend && e.is_directory(ec)) {
        for (const auto& inner : std::filesystem::directory_iterator(e.path(), ec)) {
          if (inner.is_regular_file(ec) && inner.path().extension() == ".so") paths.push_back(inner.path().string());
        }
      }
    }
  };
  add_modules_in(dir, true);
  if (ec) return Status::IOError(fmt::format("plugin directory {}: {}", dir, ec.message()));
  std::sort(paths.begin(), paths.end());  // the same order, so the same module wins a duplicate name
  std::vector<PluginModule> modules;
  for (const std::string& path : paths) {
    modules.push_back(LoadModule(path));
    if (!modules.back().status.ok()) LogWarning("{}", modules.back().status.message());
  }
  loaded.emplace(dir, modules);
  return modules;
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
