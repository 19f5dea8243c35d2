// cuda kernels for conv, reduce_window (pooling), sort/topk and scatter_add, rendered through the
// shared codegen (src/backends/cuda/render_window.cpp): the capability claims and the NVRTC
// compile of every kernel these families lower to run everywhere libnvrtc exists (no GPU needed);
// execution against the reference interpreter runs only where a GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/render.h"
#include "backends/cuda/render_window.h"
#include "passes/passes.h"
#include "rlx/builder.h"
#include "rlx/conformance.h"
#include "rlx/device.h"
#include "rlx/lir.h"
#include "rlx/reference.h"
#include "rlx/session.h"

namespace rlx {
namespace {

using O = OpKind;

const std::set<OpKind> kFamilies = {O::Conv,       O::ReduceWindow, O::Sort,    O::TopK,
                                    O::ScatterAdd, O::Convolution,  O::MaxPool, O::AvgPool};
const std::vector<DType> kCudaTypes = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8,
                                       DType::u8,  DType::i16, DType::i32,  DType::i64};

struct Case {
  std::string name;
  OpKind op;
  DType dt;
  Graph g;
  std::vector<Tensor> in;
};

Tensor rand_t(DType dt, std::vector<int64_t> s, std::mt19937& rng, bool nans = false) {
  Tensor t(dt, std::move(s));
  bool f = is_float(dt);
  double lo = dt == DType::u8 ? 0 : -40, hi = 40;
  std::uniform_real_distribution<double> u(f ? -2.0 : lo, f ? 2.0 : hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(rng);
    if (!f) v = std::round(v / 8);  // few distinct values: ties exercise the stable order
    if (nans && f && i % 7 == 3) v = NAN;
    t.set(i, v);
  }
  return t;
}

// Shapes and attributes beyond the conformance cases: 1-D/3-D conv with dilation, groups and
// asymmetric pads; sum/min windows; a window made only of padding (the kind's identity); sort
// descending on a non-last axis with ties and NaN; smallest-k; scatter_add on axis 1 with
// negative and repeated indices.
std::vector<Case> extra_cases(DType dt, std::mt19937& rng) {
  std::vector<Case> r;
  auto add = [&](const std::string& name, OpKind op, auto build) {
    Case c{name, op, dt, Graph{}, {}};
    Builder b(c.g);
    build(b, c);
    r.push_back(std::move(c));
  };
  auto in = [&](Builder& b, Case& c, std::vector<int64_t> s, bool nans = false) {
    c.in.push_back(rand_t(c.dt, s, rng, nans));
    return b.input("x" + std::to_string(c.in.size()), c.dt, to_shape(s));
  };
  using V = std::vector<int64_t>;
  if (is_float(dt)) {
    add("conv1d_dilated_grouped", O::Conv, [&](Builder& b, Case& c) {
      auto x = in(b, c, {2, 4, 9}), w = in(b, c, {6, 2, 3});
      b.output(b.op1(O::Conv, {x, w}, {{"strides", V{2}}, {"pads", V{1, 2}}, {"dilations", V{2}}, {"groups", int64_t{2}}}));
    });
    add("conv3d", O::Conv, [&](Builder& b, Case& c) {
      auto x = in(b, c, {1, 2, 4, 5, 3}), w = in(b, c, {3, 2, 2, 3, 1});
      b.output(b.op1(O::Conv, {x, w}, {{"pads", V{1, 0, 0, 0, 1, 0}}}));
    });
  }
  add("window_sum", O::ReduceWindow, [&](Builder& b, Case& c) {
    auto x = in(b, c, {2, 3, 7});
    b.output(b.op1(O::ReduceWindow, {x}, {{"kind", "sum"}, {"window", V{1, 2, 3}}, {"strides", V{1, 1, 2}},
                                          {"pads", V{0, 1, 1, 0, 0, 1}}}));
  });
  add("window_min_all_padding", O::ReduceWindow, [&](Builder& b, Case& c) {
    auto x = in(b, c, {3, 4});
    b.output(b.op1(O::ReduceWindow, {x}, {{"kind", "min"}, {"window", V{1, 2}}, {"pads", V{0, 2, 0, 0}}}));
    b.output(b.op1(O::ReduceWindow, {x}, {{"kind", "max"}, {"window", V{1, 2}}, {"pads", V{0, 2, 0, 0}}}));
  });
  add("sort_desc_axis0", O::Sort, [&](Builder& b, Case& c) {
    auto x = in(b, c, {6, 4}, true);
    for (auto v : b.op(O::Sort, {x}, {{"axis", int64_t{0}}, {"descending", int64_t{1}}})) b.output(v);
  });
  add("topk_smallest_axis0", O::TopK, [&](Builder& b, Case& c) {
    auto x = in(b, c, {5, 3, 2}, true);
    for (auto v : b.op(O::TopK, {x}, {{"k", int64_t{2}}, {"axis", int64_t{0}}, {"largest", int64_t{0}}})) b.output(v);
  });
  add("scatter_add_axis1", O::ScatterAdd, [&](Builder& b, Case& c) {
    auto x = in(b, c, {3, 5});
    Tensor idx(DType::i64, {4});
    const int64_t iv[] = {4, -1, 0, 2};  // -1 is 4 again: a repeated target
    for (int64_t i = 0; i < 4; ++i) idx.set_int(i, iv[i]);
    c.in.push_back(idx);
    auto ix = b.input("idx", DType::i64, {4});
    auto up = in(b, c, {3, 4});
    b.output(b.op1(O::ScatterAdd, {x, ix, up}, {{"axis", int64_t{1}}}));
  });
  return r;
}

// Every case of the conformance harness of these families at a dtype cuda stores, plus the extras.
std::vector<Case> all_cases() {
  std::vector<Case> r;
  for (auto& c : conformance_cases())
    if (kFamilies.count(c.op) && device_info("cuda").caps.storage.has(c.dtype))
      r.push_back({std::string(op_name(c.op)), c.op, c.dtype, c.graph, c.inputs});
  std::mt19937 rng(7);
  for (DType dt : kCudaTypes)
    for (auto& c : extra_cases(dt, rng)) r.push_back(std::move(c));
  return r;
}

// What CompiledModel does before the cuda executable: legalize, fold, DCE, lower.
LirProgram lower_for_cuda(const Graph& g, DispatchReport* report = nullptr) {
  Legalized l = legalize(g, "cuda", {});
  if (report) *report = l.report;
  return lower_to_lir(eliminate_dead_code(fold_constants(l.graph)), true);
}

TEST(CudaOps, FamiliesAreClaimedNatively) {
  const DeviceInfo& d = device_info("cuda");
  for (OpKind op : {O::Conv, O::ReduceWindow, O::Sort, O::TopK, O::ScatterAdd})
    for (DType dt : kCudaTypes)
      if (op_info(op).dtypes.has(dt)) {
        EXPECT_TRUE(d.caps.has(op, dt)) << op_name(op) << " " << dtype_name(dt);
      }
  int cases = 0;
  for (auto& c : conformance_cases()) {
    if (!kFamilies.count(c.op) || !d.caps.storage.has(c.dtype)) continue;
    DispatchReport rep;
    ASSERT_NO_THROW(lower_for_cuda(c.graph, &rep)) << op_name(c.op) << " " << dtype_name(c.dtype);
    for (auto& row : rep.rows) {  // the MIR families are native; pools/convolution decompose onto them
      if (row.op == op_name(c.op) && row.dtype == dtype_name(c.dtype)) {
        EXPECT_EQ(row.path, op_info(c.op).level == Level::Mir ? DispatchPath::Native : DispatchPath::CommonIR)
            << row.op << " " << row.dtype;
      }
    }
    ++cases;
  }
  // conv 4 + convolution 4 + reduce_window 9 + max_pool 9 + avg_pool 4 + sort 9 + topk 9 + scatter_add 9
  EXPECT_EQ(cases, 57);
}

TEST(CudaOps, KernelsRenderAndCompileWithNvrtc) {
  std::string why;
  cuda::Api* a = cuda::nvrtc_only(&why);
  int family = 0, compiled = 0;
  std::set<OpKind> seen;
  for (auto& c : all_cases()) {
    LirProgram p = lower_for_cuda(c.g);
    for (auto& k : p.kernels) {
      std::vector<ValueType> in, out;
      for (int bi : k.in) in.push_back(p.buffers[bi].type);
      for (int bi : k.out) out.push_back(p.buffers[bi].type);
      if (k.kind == KernelKind::Generated || !cuda::is_shared_family(k.op)) continue;  // other tests cover those
      cuda::KernelSource ks;
      ASSERT_TRUE(cuda::render_library(k, in, out, &ks)) << c.name << " " << dtype_name(c.dt);
      EXPECT_NE(ks.code.find("extern \"C\" __global__ void rlx_kernel("), std::string::npos) << ks.code;
      EXPECT_EQ(ks.num_params, static_cast<int>(in.size() + out.size()));
      EXPECT_GE(ks.grid, 1u);
      if (c.dt == DType::f16) {
        EXPECT_NE(ks.code.find("h2f(b0[(I_)])"), std::string::npos) << ks.code;
      }
      if (c.dt == DType::bf16) {
        EXPECT_NE(ks.code.find("f2bf("), std::string::npos) << ks.code;
      }
      ++family;
      seen.insert(k.op);
      if (!a) continue;
      EXPECT_NO_THROW(cuda::nvrtc_compile_for(*a, "sm_90", ks.code)) << c.name << " " << dtype_name(c.dt);
      ++compiled;
    }
  }
  std::printf("[cuda ops] %d conv/reduce_window/sort/topk/scatter_add kernels rendered, %d compiled with NVRTC (sm_90)\n",
              family, compiled);
  EXPECT_EQ(seen.size(), 5u);  // conv, reduce_window, sort, topk, scatter_add
  EXPECT_GE(family, 57 + 53 + 9);  // 53 extra cases (7 per float dtype, 5 per integer), 9 with two windows
  if (!a) GTEST_SKIP() << family << " kernels rendered, not compiled: no NVRTC here: " << why;
  EXPECT_EQ(compiled, family);
}

// A window made only of padding gives the kind's identity of the storage dtype (ints: its min/max).
TEST(CudaOps, IntegerWindowIdentityIsTheDtypes) {
  std::mt19937 rng(3);
  for (auto& c : extra_cases(DType::i8, rng)) {
    if (c.name != "window_min_all_padding") continue;
    LirProgram p = lower_for_cuda(c.g);
    int n = 0;
    for (auto& k : p.kernels) {
      if (k.op != O::ReduceWindow) continue;
      std::vector<ValueType> in{p.buffers[k.in[0]].type}, out{p.buffers[k.out[0]].type};
      cuda::KernelSource ks;
      ASSERT_TRUE(cuda::render_library(k, in, out, &ks));
      EXPECT_TRUE(ks.code.find("acc = ((int)((-128)));") != std::string::npos ||
                  ks.code.find("acc = ((int)(127));") != std::string::npos)
          << ks.code;
      ++n;
    }
    EXPECT_EQ(n, 2);
  }
}

// ---- GPU-only: execution against the reference ------------------------------------------------

bool close(const Tensor& got, const Tensor& want, Tolerance tol, std::string* where) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) return *where = "dtype/shape", false;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (!is_float(want.dtype())) {
      if (got.get_int(i) != want.get_int(i))
        return *where = "element " + std::to_string(i) + ": " + std::to_string(got.get_int(i)) + " vs " +
                        std::to_string(want.get_int(i)),
               false;
      continue;
    }
    double g = got.get(i), w = want.get(i);
    bool ok = (std::isnan(g) && std::isnan(w)) || (std::isinf(w) ? g == w : std::abs(g - w) <= tol.atol + tol.rtol * std::abs(w));
    if (!ok) return *where = "element " + std::to_string(i) + ": " + std::to_string(g) + " vs " + std::to_string(w), false;
  }
  return true;
}

TEST(CudaOps, FamiliesMatchReferenceOnGpu) {
  const DeviceInfo& d = device_info("cuda");
  if (!d.can_execute()) GTEST_SKIP() << "no GPU here: " << d.reason;
  int ran = 0;
  for (auto& c : all_cases()) {
    auto want = reference_run(c.g, c.in);
    CompileOptions o;
    o.device = "cuda";
    CompiledModel m(c.g, o);
    std::vector<Tensor> got;
    ASSERT_NO_THROW(got = m.run(c.in)) << c.name << " " << dtype_name(c.dt);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      std::string where;
      EXPECT_TRUE(close(got[i], want[i], tolerance(c.op, c.dt), &where))
          << c.name << " " << dtype_name(c.dt) << " output " << i << ": " << where;
    }
    ++ran;
  }
  EXPECT_EQ(ran, 57 + 53);
}

}  // namespace
}  // namespace rlx
