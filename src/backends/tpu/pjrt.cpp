#ifdef RLX_HAVE_PJRT
#include "backends/tpu/pjrt.h"

#include <dlfcn.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "rlx/error.h"
#include "runtime/subprocess.h"

namespace rlx {
namespace pjrt {

namespace {

std::string python_path(const std::string& module, const std::string& file) {
  std::string dir = python_package_dir(module);
  return dir.empty() ? dir : dir + "/" + file;
}

bool exists(const std::string& p) {
  struct stat st;
  return !p.empty() && ::stat(p.c_str(), &st) == 0;
}

std::string error_text(const PJRT_Api* api, PJRT_Error* e) {
  PJRT_Error_Message_Args m{};
  m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  m.error = e;
  api->PJRT_Error_Message(&m);
  std::string s(m.message, m.message_size);
  PJRT_Error_Destroy_Args d{};
  d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  d.error = e;
  api->PJRT_Error_Destroy(&d);
  return s;
}

bool is_libtpu(const std::string& path) { return path.find("libtpu") != std::string::npos; }

// libtpu writes pages of log lines to stderr when it finds no TPU: while it loads and looks for
// one, stderr goes to a scratch file (its last line is kept for the error).
struct QuietStderr {
  int saved = -1;
  FILE* f = nullptr;
  explicit QuietStderr(bool on) {
    if (!on) return;
    std::fflush(stderr);
    f = std::tmpfile();
    if (!f) return;
    saved = ::dup(2);
    ::dup2(::fileno(f), 2);
  }
  ~QuietStderr() {
    if (saved < 0) return;
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    std::fclose(f);
  }
};

// Loads `path` and brings up a client; throws with the reason.
std::unique_ptr<Plugin> load(const std::string& path) {
  QuietStderr quiet(is_libtpu(path));
  // libtpu asks the GCP metadata server for its topology (minutes of retries off GCP) unless told not to.
  if (is_libtpu(path)) ::setenv("TPU_SKIP_MDS_QUERY", "1", 0);
  auto p = std::make_unique<Plugin>();
  p->path = path;
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) fail("[tpu] cannot load PJRT plugin ", path, ": ", ::dlerror());
  using GetApi = const PJRT_Api* (*)();
  auto get = reinterpret_cast<GetApi>(::dlsym(h, "GetPjrtApi"));
  if (!get) fail("[tpu] ", path, " exports no GetPjrtApi: not a PJRT plugin");
  p->api = get();
  if (!p->api) fail("[tpu] ", path, ": GetPjrtApi returned null");
  p->major = p->api->pjrt_api_version.major_version;
  p->minor = p->api->pjrt_api_version.minor_version;
  if (p->major != PJRT_API_MAJOR || p->minor < PJRT_API_MINOR)
    fail("[tpu] ", path, " implements PJRT C API ", p->major, ".", p->minor, "; RLX was built with header ",
         PJRT_API_MAJOR, ".", PJRT_API_MINOR, " and accepts ", PJRT_API_MAJOR, ".", PJRT_API_MINOR, " or a newer ",
         PJRT_API_MAJOR, ".x");
  if (p->api->PJRT_Plugin_Initialize) {
    PJRT_Plugin_Initialize_Args a{};
    a.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
    p->check(p->api->PJRT_Plugin_Initialize(&a), "plugin initialize");
  }
  // RLX_PJRT_CLIENT_OPTIONS="name=value,...": client create options (true/false -> bool, a number
  // with '.' -> float, an integer -> int64, else string), e.g. preallocate=false for the CUDA plugin.
  std::vector<std::pair<std::string, std::string>> kv;
  if (const char* o = std::getenv("RLX_PJRT_CLIENT_OPTIONS"); o && *o) {
    std::string all = o;
    for (size_t at = 0; at <= all.size();) {
      size_t end = all.find(',', at);
      if (end == std::string::npos) end = all.size();
      std::string item = all.substr(at, end - at);
      size_t eq = item.find('=');
      if (eq == std::string::npos) fail("[tpu] RLX_PJRT_CLIENT_OPTIONS: '", item, "' is not name=value");
      kv.push_back({item.substr(0, eq), item.substr(eq + 1)});
      at = end + 1;
    }
  }
  std::vector<PJRT_NamedValue> opts(kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    PJRT_NamedValue& nv = opts[i];
    nv.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    nv.name = kv[i].first.c_str();
    nv.name_size = kv[i].first.size();
    nv.value_size = 1;
    const std::string& v = kv[i].second;
    char* end = nullptr;
    if (v == "true" || v == "false") {
      nv.type = PJRT_NamedValue_kBool;
      nv.bool_value = v == "true";
    } else if (long long n = std::strtoll(v.c_str(), &end, 10); !v.empty() && *end == 0) {
      nv.type = PJRT_NamedValue_kInt64;
      nv.int64_value = n;
    } else if (float x = std::strtof(v.c_str(), &end); !v.empty() && *end == 0) {
      nv.type = PJRT_NamedValue_kFloat;
      nv.float_value = x;
    } else {
      nv.type = PJRT_NamedValue_kString;
      nv.string_value = v.c_str();
      nv.value_size = v.size();
    }
  }
  PJRT_Client_Create_Args c{};
  c.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  c.create_options = opts.data();
  c.num_options = opts.size();
  p->check(p->api->PJRT_Client_Create(&c), (is_libtpu(path) ? "libtpu " : "plugin ") + path + " (C API " +
                                               std::to_string(p->major) + "." + std::to_string(p->minor) + ") found no device");
  p->client = c.client;
  PJRT_Client_PlatformName_Args n{};
  n.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE;
  n.client = p->client;
  p->check(p->api->PJRT_Client_PlatformName(&n), "platform name");
  p->platform.assign(n.platform_name, n.platform_name_size);
  PJRT_Client_PlatformVersion_Args v{};
  v.struct_size = PJRT_Client_PlatformVersion_Args_STRUCT_SIZE;
  v.client = p->client;
  p->check(p->api->PJRT_Client_PlatformVersion(&v), "platform version");
  p->platform_version.assign(v.platform_version, v.platform_version_size);
  PJRT_Client_AddressableDevices_Args d{};
  d.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  d.client = p->client;
  p->check(p->api->PJRT_Client_AddressableDevices(&d), "addressable devices");
  p->num_devices = d.num_addressable_devices;
  if (p->num_devices == 0) fail("[tpu] ", path, ": the PJRT client has no addressable device");
  p->device = d.addressable_devices[0];
  return p;
}

}  // namespace

void Plugin::check(PJRT_Error* e, const std::string& what) const {
  if (e) fail("[tpu] ", what, ": ", error_text(api, e));
}

void Plugin::await(PJRT_Event* ev, const std::string& what) const {
  if (!ev) return;
  PJRT_Event_Await_Args a{};
  a.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  a.event = ev;
  PJRT_Error* e = api->PJRT_Event_Await(&a);
  PJRT_Event_Destroy_Args d{};
  d.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  d.event = ev;
  api->PJRT_Event_Destroy(&d);
  check(e, what);
}

void Plugin::destroy(PJRT_Buffer* b) const {
  if (!b) return;
  PJRT_Buffer_Destroy_Args a{};
  a.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  a.buffer = b;
  PJRT_Error* e = api->PJRT_Buffer_Destroy(&a);
  if (e) error_text(api, e);  // freeing: nothing to report to
}

std::vector<std::string> plugin_candidates() {
  if (const char* e = std::getenv("RLX_PJRT_PLUGIN"); e && *e) return {e};
  std::vector<std::string> c;
  // libtpu first (it runs where a TPU is attached), then the XLA CPU plugins.
  for (auto& p : {python_path("libtpu", "libtpu.so"), python_path("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so"),
                  python_path("lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so")})
    if (exists(p)) c.push_back(p);
  return c;
}

namespace {
struct Search {
  std::unique_ptr<Plugin> plugin;
  std::string tried;  // what each earlier candidate said, "; "-joined
};
const Search& search() {
  static std::once_flag once;
  static Search s;
  std::call_once(once, [] {
    auto c = plugin_candidates();
    if (c.empty()) {
      s.tried = "[tpu] no PJRT plugin: set RLX_PJRT_PLUGIN to a plugin .so, or pip install xla-cpu-pjrt (scripts/bootstrap.sh)";
      return;
    }
    for (auto& path : c) {
      try {
        s.plugin = load(path);
        return;
      } catch (const std::exception& e) {
        s.tried += (s.tried.empty() ? "" : "; ") + std::string(e.what());
      }
    }
  });
  return s;
}
}  // namespace

const Plugin& plugin() {
  const Search& s = search();
  if (!s.plugin) fail(s.tried);
  return *s.plugin;
}

PJRT_Buffer_Type buffer_type(DType t) {
  switch (t) {
    case DType::f32: return PJRT_Buffer_Type_F32;
    case DType::f16: return PJRT_Buffer_Type_F16;
    case DType::bf16: return PJRT_Buffer_Type_BF16;
    case DType::f64: return PJRT_Buffer_Type_F64;
    case DType::i8: return PJRT_Buffer_Type_S8;
    case DType::u8: return PJRT_Buffer_Type_U8;
    case DType::i16: return PJRT_Buffer_Type_S16;
    case DType::i32: return PJRT_Buffer_Type_S32;
    case DType::i64: return PJRT_Buffer_Type_S64;
    case DType::boolean: return PJRT_Buffer_Type_PRED;
    default: break;
  }
  fail("[tpu] no PJRT buffer type for ", dtype_name(t));
}

}  // namespace pjrt

// 0: a plugin loaded and a client came up; 1: no plugin found or it failed to load; 2: the plugin
// loaded but found no device (libtpu on a machine without a TPU).
int pjrt_probe(std::string* why) {
  const pjrt::Search& s = pjrt::search();
  // A libtpu that loaded but found no TPU says so in the reason, before the plugin in use.
  std::string tried = s.tried;
  for (const char* from : {"[tpu] "})
    for (size_t at; (at = tried.find(from)) != std::string::npos;) tried.replace(at, std::strlen(from), "");
  if (!s.plugin) {
    *why = tried;
    return tried.find("found no device") != std::string::npos || tried.find("no addressable device") != std::string::npos ? 2 : 1;
  }
  const pjrt::Plugin& p = *s.plugin;
  *why = "PJRT plugin " + p.path + " (C API " + std::to_string(p.major) + "." + std::to_string(p.minor) + "; RLX accepts " +
         std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) + "+), platform " + p.platform + " " +
         p.platform_version + ", " + std::to_string(p.num_devices) + " device(s)" +
         (tried.empty() ? "" : "; not used: " + tried);
  return 0;
}

}  // namespace rlx
#else
#include <string>
namespace rlx {
int pjrt_probe(std::string* why) {
  *why = "compiled out: pjrt_c_api.h was not found at configure time (pip install xla-cpu-pjrt, or RLX_PJRT_INCLUDE)";
  return 1;
}
}  // namespace rlx
#endif
