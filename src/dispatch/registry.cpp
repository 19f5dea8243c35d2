// The device registry (registry.h). The built-in entries are registered on first use, through the
// list CMake generates from the backend folders (cmake/backends.cmake), so no source file names one.
#include "dispatch/registry.h"

#include <algorithm>
#include <map>
#include <mutex>

// One registration function per backend folder, defined by RLX_REGISTER_BACKEND in its backend.cpp.
#define RLX_BACKEND(folder) void rlx_register_backend_##folder();
#include "rlx/backends.inc"
#undef RLX_BACKEND

namespace rlx {
namespace sparse {
bool is_sparse_op(OpKind k);  // src/sparse/reference_sparse.cpp
}
void register_codegen_only_targets();  // devices.cpp

namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<DeviceEntry>> entries;
};
Registry& raw() {
  static Registry r;
  return r;
}
Registry& registry() {
  static std::once_flag once;
  std::call_once(once, [] {
#define RLX_BACKEND(folder) ::rlx_register_backend_##folder();
#include "rlx/backends.inc"
#undef RLX_BACKEND
    register_codegen_only_targets();
  });
  return raw();
}
}  // namespace

void register_device(std::unique_ptr<DeviceEntry> e) {
  Registry& r = raw();  // not registry(): the built-ins register themselves from inside its once
  std::lock_guard<std::mutex> g(r.mu);
  std::string n = e->name();
  RLX_CHECK(!r.entries.count(n), "[device] '", n, "' is registered twice");
  r.entries.emplace(n, std::move(e));
}

const DeviceEntry* find_device(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  auto it = r.entries.find(name);
  return it == r.entries.end() ? nullptr : it->second.get();  // entries never move or go away
}

std::vector<std::string> registered_devices() {
  Registry& r = registry();
  std::vector<std::pair<int, std::string>> v;
  {
    std::lock_guard<std::mutex> g(r.mu);
    for (auto& [n, e] : r.entries) v.emplace_back(e->rank(), n);
  }
  std::sort(v.begin(), v.end());
  std::vector<std::string> names;
  for (auto& [rank, n] : v) names.push_back(n);
  return names;
}

CapabilitySet mir_capabilities(DTypeSet dtypes) {
  CapabilitySet c;
  for (int i = 0; i < num_ops(); ++i) {
    auto k = static_cast<OpKind>(i);
    const auto& info = op_info(k);
    if (info.level != Level::Mir || sparse::is_sparse_op(k) || is_linalg(k) || is_collective(k)) continue;
    DTypeSet s = info.min_inputs == 0 ? dtypes : (info.dtypes & dtypes);
    if (k == OpKind::Select) s = DTypeSet::of({DType::boolean});  // predicate; branches checked by dtypes
    if (!s.empty()) c.add(k, s);
  }
  c.storage = dtypes;
  return c;
}

void add_ops(CapabilitySet& c, std::initializer_list<OpKind> ops, DTypeSet s) {
  for (auto k : ops) c.add(k, s);
}

}  // namespace rlx
