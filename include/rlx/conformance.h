// The op x dtype x device conformance harness: one case per (op, dtype) — a one-node graph on
// seeded random inputs — legalized for each device and, where the device runs here, executed and
// compared with the reference interpreter under one tolerance table keyed by (op, dtype).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "rlx/device.h"
#include "rlx/graph.h"

namespace rlx {

struct ConformanceCase {
  OpKind op;
  DType dtype;  // dtype of input 0 (or the output, for ops without inputs)
  Graph graph;
  std::vector<Tensor> inputs;
};

struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance(OpKind op, DType dt);

// All cases: every op of the table for every dtype it accepts (some ops restrict further).
std::vector<ConformanceCase> conformance_cases();

struct ConformanceRow {
  std::string op, dtype, device;
  DispatchPath path = DispatchPath::Unsupported;
  std::string status;  // "pass", "FAIL", "not run (<why>)", "unsupported"
  double max_err = 0;
  std::string detail;
};

// Legalizes every case for `device` and, when `execute` and the device runs here, runs it.
// `progress` (optional) is called after each case with (cases done, total).
std::vector<ConformanceRow> run_conformance(const std::string& device, bool execute,
                                            const std::function<void(size_t, size_t)>& progress = {});
// Markdown support matrix over all 16 devices (+ the cpu conformance results).
std::string support_matrix_markdown(const std::vector<ConformanceRow>& cpu_rows);

}  // namespace rlx
