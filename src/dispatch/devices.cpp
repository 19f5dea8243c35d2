// The device listing (device_names, device_info, device_caps over the registry, registry.h) and
// the code-generation-only targets that have no backend folder: each of those is an entry built
// here from its static capability table. Every other target registers itself from
// src/backends/<folder>/backend.cpp.

#include <map>
#include <memory>
#include <mutex>

#include "dispatch/registry.h"
#include "rlx/device.h"

namespace rlx {

std::string_view device_status_name(DeviceStatus s) {
  switch (s) {
    case DeviceStatus::Available: return "available";
    case DeviceStatus::CompiledOut: return "compiled-out";
    case DeviceStatus::NoDriver: return "no driver";
    case DeviceStatus::NoHardware: return "no hardware";
    case DeviceStatus::CodegenOnly: return "codegen only";
  }
  return "?";
}

const std::vector<std::string>& device_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (auto& name : registered_devices())
      if (find_device(name)->listed()) v.push_back(name);
    return v;
  }();
  return n;
}

namespace {

// Builds the entry of code-generation-only target `only` (probing: as DeviceEntry::info).
std::vector<DeviceInfo> build(const std::string& only, bool probing) {
  auto want = [&](const char* n) { return only == n; };
  using D = DType;
  std::vector<DeviceInfo> v;

  if (want("fpga")) {
    // Not a dispatch backend: src/codegen/fpga turns an int8 MLP (fuse-qdq's qlinear chain) into
    // SystemVerilog; `rlx compile/run --device fpga` write it and simulate it with Verilator.
    bool sim = probing && std::system("verilator --version >/dev/null 2>&1") == 0;
    DeviceInfo f{"fpga", "SystemVerilog INT8 datapath (Verilator simulation)", DeviceStatus::CodegenOnly,
                 std::string("int8 MLP graphs only (quantize_affine -> qlinear chain), through `rlx compile/run --device "
                             "fpga`; ") +
                     (sim ? "Verilator found: simulated, cycle-accurate, not hardware"
                          : (probing ? "verilator not found (Debian package verilator): RTL is written, not simulated"
                                     : "not probed")),
                 CapabilitySet{}};
    const DTypeSet q = DTypeSet::of({D::i8, D::i32});
    for (auto k : {OpKind::Constant, OpKind::Add, OpKind::Mul, OpKind::Max, OpKind::Convert, OpKind::DotGeneral,
                   OpKind::Reshape, OpKind::Transpose, OpKind::BroadcastInDim})
      f.caps.add(k, q);
    f.caps.storage = q;
    v.push_back(f);
  }
  return v;
}

// A code-generation-only target: its entry is build()'s.
class CodegenTarget : public DeviceEntry {
 public:
  CodegenTarget(std::string name, int rank) : name_(std::move(name)), rank_(rank) {}
  std::string name() const override { return name_; }
  int rank() const override { return rank_; }
  DeviceInfo info(bool probing) const override {
    std::vector<DeviceInfo> one = build(name_, probing);
    RLX_CHECK(one.size() == 1 && one[0].name == name_, "[device] no entry built for '", name_, "'");
    return std::move(one[0]);
  }

 private:
  std::string name_;
  int rank_;
};

// The entry of `name`; throws for an unknown name. Probing a device loads its driver (Mesa's
// vulkan/opengl and PoCL's OpenCL bring a second LLVM into the process, which breaks a later
// `import triton`), so only the entry asked for is built.
DeviceInfo build_one(const std::string& name, bool probing) {
  const DeviceEntry* e = find_device(name);
  if (!e) {
    std::string names;
    for (auto& n : device_names()) names += (names.empty() ? "" : ", ") + n;
    fail("[device] unknown device '", name, "' (known: ", names, ")");
  }
  DeviceInfo d = e->info(probing);
  RLX_CHECK(d.name == name, "[device] the entry of '", name, "' is named '", d.name, "'");
  return d;
}

}  // namespace

// Ranks in `rlx devices` between the backends' (src/backends/*/backend.cpp).
void register_codegen_only_targets() {
  register_device(std::make_unique<CodegenTarget>("fpga", 15));
}

// Each entry is built (its driver probed) on its first request only;
// `rlx devices` and rlx.devices() ask for all of them. Entries never move once built.
// The mutex guards the map only; each entry is built under its own
// once_flag, so a thread asking for "cpu" does not wait behind another thread's multi-second
// vulkan/PoCL probe. A build that throws (unknown name) leaves the flag unset: the next call retries.
const DeviceInfo& device_info(const std::string& name) {
  struct Entry {
    std::once_flag once;
    std::unique_ptr<const DeviceInfo> info;
  };
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Entry>> built;
  Entry* e;
  {
    std::lock_guard<std::mutex> g(mu);
    std::unique_ptr<Entry>& slot = built[name];
    if (!slot) slot = std::make_unique<Entry>();
    e = slot.get();
  }
  std::call_once(e->once, [&] { e->info = std::make_unique<const DeviceInfo>(build_one(name, true)); });
  return *e->info;
}

// The static capability tables, for callers that must not load
// drivers (legalize.cpp's "devices that could run it" hint): see device.h.
const CapabilitySet& device_caps(const std::string& name, DTypeSet* driver_decides) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<const CapabilitySet>> built;
  std::lock_guard<std::mutex> g(mu);
  if (driver_decides) {
    const DeviceEntry* e = find_device(name);
    *driver_decides = e ? e->driver_dtypes() : DTypeSet{};
  }
  if (auto it = built.find(name); it != built.end()) return *it->second;
  return *(built[name] = std::make_unique<const CapabilitySet>(build_one(name, false).caps));
}

}  // namespace rlx
