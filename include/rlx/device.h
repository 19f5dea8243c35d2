// Devices, capability sets and the dispatch report.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

enum class DeviceStatus { Available, CompiledOut, NoDriver, NoHardware, CodegenOnly };
std::string_view device_status_name(DeviceStatus s);

// What a device claims to run natively: op -> dtypes of input 0.
struct CapabilitySet {
  std::map<OpKind, DTypeSet> ops;
  DTypeSet storage = DTypeSet::all();  // dtypes its buffers can hold
  bool has(OpKind k, DType t) const {
    auto it = ops.find(k);
    return it != ops.end() && it->second.has(t);
  }
  void add(OpKind k, DTypeSet s) { ops[k] = ops[k] | s; }
};

struct DeviceInfo {
  std::string name;         // "cpu", "cuda", ...
  std::string description;  // what executes there
  DeviceStatus status;
  std::string reason;       // why not available (or what runs)
  CapabilitySet caps;
  bool can_execute() const { return status == DeviceStatus::Available; }
};

// All 16 targets, in the order `rlx devices` lists them.
const std::vector<std::string>& device_names();
const DeviceInfo& device_info(const std::string& name);  // throws for an unknown name
// The capability set of `name` from the static tables alone: probes no driver and loads
// no library (device_info does both, once). Equal to device_info(name).caps except that the dtypes
// in `*driver_decides` (if given) are claimed here but kept by device_info only where the driver
// supports them: {f64} for "gpu" (OpenCL's cl_khr_fp64). Throws for an unknown name.
const CapabilitySet& device_caps(const std::string& name, DTypeSet* driver_decides = nullptr);

// Fallback: the device cannot run the node and DispatchOptions::fallback placed it on that device.
enum class DispatchPath { Native, CommonIR, Rewritten, Fallback, Unsupported };
std::string_view dispatch_path_name(DispatchPath p);

struct DispatchRow {
  std::string op;        // HIR/MIR op name
  std::string dtype;     // dtype of input 0
  DispatchPath path;
  int count = 0;         // nodes of this op/dtype that took this path
  std::string reason;
};

struct DispatchReport {
  std::string device;
  std::vector<DispatchRow> rows;
  std::vector<std::string> notes;  // specializations, cache hits, rewrites applied
  std::string table() const;       // the printed per-op table
};

// Legalizes a graph with concrete shapes for `device`: every node becomes native, is decomposed
// (common-IR) or rewritten, or compilation fails with a diagnostic. Implemented in src/dispatch.
struct DispatchOptions;
struct Legalized;
Legalized legalize(const Graph& g, const std::string& device, const DispatchOptions& opts);

struct DispatchOptions {
  std::set<std::string> force_common;  // op names that must decompose even when native
  std::set<std::string> force_native;  // op names that must be native (fail otherwise)
  // "cpu": a node the device cannot run is placed on cpu instead of failing (`--fallback cpu`);
  // the session then runs the graph in segments, one per run of same-device nodes. "" fails.
  std::string fallback;
};

struct Legalized {
  Graph graph;
  DispatchReport report;
  // Per node of `graph`: the device a fallback placed it on, "" for the compiled device. Empty when
  // no node fell back.
  std::vector<std::string> placement;
};

}  // namespace rlx
