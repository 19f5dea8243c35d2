// Runs conformance cases on a device and compares with the reference; renders docs/ops.md.
#include <cmath>
#include <map>
#include <sstream>

#include "rlx/conformance.h"
#include "rlx/reference.h"
#include "rlx/session.h"

namespace rlx {

// Bounds by dtype, loosened by the op's tolerance class (the tolerance column of src/ir/ops.def).
Tolerance tolerance(OpKind op, DType dt) {
  ToleranceClass tc = op_info(op).tolerance;
  bool transcendental = tc == ToleranceClass::Transcendental;
  bool reduces = tc == ToleranceClass::Accumulating;
  switch (dt) {
    case DType::f64: return {1e-10, 1e-9};
    case DType::f32: return reduces ? Tolerance{2e-5, 2e-4} : Tolerance{1e-6, transcendental ? 1e-5 : 1e-6};
    // c64 holds two f32 parts: factorizations (LAPACK's single-precision complex routines against
    // the complex<double> reference) get f32's accumulating bound.
    case DType::c64:
      return op_info(op).group == OpGroup::LinearAlgebra ? Tolerance{2e-5, 2e-4} : Tolerance{1e-5, 1e-5};
    // Halves: the device may round intermediates (e.g. after a promoted GEMM) where the
    // reference rounds once; allow a few units in the last place.
    case DType::f16: return reduces ? Tolerance{2e-2, 2e-2} : Tolerance{2e-3, 2e-3};
    case DType::bf16: return reduces ? Tolerance{6e-2, 4e-2} : Tolerance{1e-2, 1.6e-2};
    default: return {0, 0};  // integers and bool: exact
  }
}

namespace {

double compare(const Tensor& got, const Tensor& want, Tolerance tol, bool* ok) {
  *ok = got.dtype() == want.dtype() && got.shape() == want.shape();
  if (!*ok) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    auto g = got.getc(i), w = want.getc(i);
    if (want.dtype() == DType::i64) {
      if (got.get_int(i) != want.get_int(i)) *ok = false;
      continue;
    }
    bool gn = std::isnan(g.real()) || std::isnan(g.imag()), wn = std::isnan(w.real()) || std::isnan(w.imag());
    if (gn || wn) {
      if (gn != wn) *ok = false;
      continue;
    }
    if (std::isinf(w.real()) || std::isinf(g.real())) {
      if (g != w) *ok = false;
      continue;
    }
    double err = std::abs(g - w);
    worst = std::max(worst, err);
    if (err > tol.atol + tol.rtol * std::abs(w)) *ok = false;
  }
  return worst;
}

}  // namespace

std::vector<ConformanceRow> run_conformance(const std::string& device, bool execute,
                                            const std::function<void(size_t, size_t)>& progress) {
  std::vector<ConformanceRow> rows;
  const DeviceInfo& dev = device_info(device);
  const auto cases = conformance_cases();
  struct Pending {
    size_t row;
    const ConformanceCase* c;
    std::unique_ptr<CompiledModel> model;
  };
  std::vector<Pending> pending;
  for (auto& c : cases) {
    if (progress) progress(rows.size(), cases.size());
    ConformanceRow r;
    r.op = op_name(c.op), r.dtype = dtype_name(c.dtype), r.device = device;
    try {
      Legalized l = legalize(c.graph, device, {});
      for (auto& row : l.report.rows)  // the case's own row (a rewrite also records the promoted op's row)
        if (row.op == r.op && row.dtype == r.dtype) {
          r.path = row.path;
          break;
        }
    } catch (const Error& e) {
      r.status = "unsupported";
      r.detail = e.what();
      rows.push_back(r);
      continue;
    }
    if (!execute || !dev.can_execute()) {
      r.status = "not run (" + std::string(device_status_name(dev.status)) + ")";
      rows.push_back(r);
      continue;
    }
    // Compiled now, run below: a device that builds all kernels of a batch at once (hexagon: one
    // emulated program) sees every case's kernels before the first run.
    try {
      CompileOptions co;
      co.device = device;
      pending.push_back({rows.size(), &c, std::make_unique<CompiledModel>(c.graph, co)});
      pending.back().model->executable();
    } catch (const Error& e) {
      r.status = "FAIL";
      r.detail = e.what();
      pending.pop_back();
    }
    rows.push_back(r);
  }
  for (auto& pc : pending) {
    ConformanceRow& r = rows[pc.row];
    try {
      auto want = reference_run(pc.c->graph, pc.c->inputs);
      auto got = pc.model->run(pc.c->inputs);
      bool all = true;
      for (size_t i = 0; i < want.size(); ++i) {
        bool ok;
        r.max_err = std::max(r.max_err, compare(got[i], want[i], tolerance(pc.c->op, pc.c->dtype), &ok));
        all &= ok;
      }
      r.status = all ? "pass" : "FAIL";
    } catch (const Error& e) {
      r.status = "FAIL";
      r.detail = e.what();
    }
    pc.model.reset();
  }
  if (progress) progress(rows.size(), cases.size());
  return rows;
}

std::string support_matrix_markdown(const std::vector<ConformanceRow>& cpu_rows) {
  const auto& devs = device_names();
  // op -> device -> path -> dtypes
  std::map<std::string, std::map<std::string, std::map<int, std::vector<std::string>>>> m;
  std::vector<std::string> order;
  for (auto& d : devs) {
    for (auto& r : run_conformance(d, false)) {
      if (!m.count(r.op)) order.push_back(r.op);
      m[r.op][d][static_cast<int>(r.path)].push_back(r.dtype);
    }
  }
  std::ostringstream os;
  os << "# Op support matrix\n\n"
        "Generated by `rlx ops --write docs/ops.md` from the op table, each device's capability set and the\n"
        "dispatch contract; do not edit by hand. Each cell lists, per dispatch path, the dtypes of input 0\n"
        "that take it: **N** native kernel, **C** common-IR (decomposed into primitives), **R** rewritten\n"
        "(f16/bf16 promoted to f32, i8/u8/i16 to i32; on vulkan/opengl i64 narrowed to i32, exact while\n"
        "values fit in int32), **-** unsupported (compilation fails with a diagnostic). Devices that cannot\n"
        "execute here are still legalized; `rlx devices` says which run.\n\n| op |";
  for (auto& d : devs) os << " " << d << " |";
  os << "\n|---|";
  for (size_t i = 0; i < devs.size(); ++i) os << "---|";
  os << "\n";
  const char* code[] = {"N", "C", "R", "-"};
  for (auto& op : order) {
    os << "| `" << op << "` |";
    for (auto& d : devs) {
      std::string cell;
      for (int p = 0; p < 4; ++p) {
        auto it = m[op][d].find(p);
        if (it == m[op][d].end()) continue;
        std::string ts;
        for (auto& t : it->second) ts += (ts.empty() ? "" : ",") + t;
        cell += (cell.empty() ? "" : "<br>") + std::string(code[p]) + ": " + ts;
      }
      os << " " << cell << " |";
    }
    os << "\n";
  }
  int pass = 0, failn = 0;
  for (auto& r : cpu_rows) (r.status == "pass" ? pass : failn)++;
  os << "\n## Conformance on `cpu` against the reference interpreter\n\n" << pass << " of " << cpu_rows.size()
     << " op x dtype cases pass (tolerances: the tolerance class of each op in src/ir/ops.def, bounds per dtype in `tolerance()` in src/conformance/harness.cpp).\n\n"
        "| op | dtype | path | status | max abs err |\n|---|---|---|---|---|\n";
  for (auto& r : cpu_rows) {
    char e[32];
    std::snprintf(e, sizeof e, "%.3g", r.max_err);
    os << "| `" << r.op << "` | " << r.dtype << " | " << dispatch_path_name(r.path) << " | " << r.status << " | " << e
       << " |\n";
  }
  return os.str();
}

}  // namespace rlx
