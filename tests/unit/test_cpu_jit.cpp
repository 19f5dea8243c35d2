// The cpu JIT (src/backends/cpu/jit.cpp, src/codegen/cpp.cpp): generated C++
// against the evaluator (fused.cpp) on fused bodies with broadcasts, mixed dtypes and threads;
// the disk cache (a second compile of the same model never runs the compiler); and the fallback
// when the compiler is missing or broken (results still right, the summary says so).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "backends/cpu/jit.h"
#include "backends/cpu/kernels.h"
#include "rlx/builder.h"
#include "rlx/session.h"
#include "runtime/disk_cache.h"
#include "test_util.h"

using namespace rlx;
using rlx_test::ScopedEnv;

namespace {

// A fresh cache directory per test (so "cold" really is cold), removed at the end.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& tag) {
    auto d = std::filesystem::temp_directory_path() / ("rlx_jit_test_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    path = d.string();
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

Tensor random(DType dt, std::vector<int64_t> shape, uint64_t seed, double lo = -3, double hi = 3) {
  Tensor t(dt, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double x = d(rng);
    if (dt == DType::boolean) t.set_int(i, x > 0);
    else if (is_float(dt)) t.set(i, x);
    else t.set_int(i, static_cast<int64_t>(std::floor(x)));
  }
  return t;
}

// An LIR program with one generated kernel per body (its inputs, then one output buffer).
LirProgram program_of(const std::vector<const Graph*>& bodies) {
  LirProgram p;
  for (const Graph* body : bodies) {
    LirKernel k;
    k.kind = KernelKind::Generated;
    k.body = *body;
    for (auto v : body->inputs) {
      LirBuffer b;
      b.type = body->type(v);
      b.kind = BufferKind::Input;
      k.in.push_back(static_cast<int>(p.buffers.size()));
      p.buffers.push_back(b);
    }
    LirBuffer o;
    o.type = body->type(body->outputs[0]);
    o.kind = BufferKind::Output;
    k.out.push_back(static_cast<int>(p.buffers.size()));
    p.buffers.push_back(o);
    p.kernels.push_back(k);
  }
  return p;
}
LirProgram one_kernel(const Graph& body) { return program_of({&body}); }

int64_t ulp_distance(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  if (x < 0) x = INT32_MIN - x;
  if (y < 0) y = INT32_MIN - y;
  return std::llabs(static_cast<int64_t>(x) - y);
}

struct Case {
  Graph body;
  std::vector<Tensor> in;
  int64_t max_ulp;  // f32 outputs; other dtypes are compared bitwise
  std::string what;
  double atol = 0;  // > 0: absolute tolerance instead (bodies that cancel, like GELU's 1 + erf(x) near x = -3)
};

// Runs every case through the JIT (one program, so one compile) and the evaluator.
void check(const std::vector<Case>& cases) {
  std::vector<const Graph*> bodies;
  for (auto& c : cases) bodies.push_back(&c.body);
  LirProgram p = program_of(bodies);
  std::vector<const Graph*> kb;
  for (auto& k : p.kernels) kb.push_back(&k.body);
  cpu::JitProgram jit(p, kb);
  for (size_t n = 0; n < cases.size(); ++n) {
    const Case& c = cases[n];
    const std::string& what = c.what;
    ASSERT_TRUE(jit.has(n)) << what << ": " << jit.summary();
    const ValueType& ot = c.body.type(c.body.outputs[0]);
    Tensor a(ot.dtype, static_dims(ot.shape)), b(ot.dtype, static_dims(ot.shape));
    jit.run(n, c.in, a);
    cpu::fused_kernel(c.body, c.in, b);
    int64_t worst = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (ot.dtype == DType::f32) {
        float x = a.data<float>()[i], y = b.data<float>()[i];
        if (std::isnan(x) || std::isnan(y)) {
          ASSERT_EQ(std::isnan(x), std::isnan(y)) << what << " [" << i << "]";
          continue;
        }
        if (c.atol > 0) {
          ASSERT_NEAR(x, y, c.atol) << what << " [" << i << "]";
          continue;
        }
        int64_t u = ulp_distance(x, y);
        worst = std::max(worst, u);
        ASSERT_LE(u, c.max_ulp) << what << " [" << i << "] jit " << x << " evaluator " << y;
      } else {
        size_t es = dtype_size(ot.dtype);
        ASSERT_EQ(std::memcmp(static_cast<const char*>(a.raw()) + i * es, static_cast<const char*>(b.raw()) + i * es, es), 0)
            << what << " [" << i << "] jit " << a.get(i) << " evaluator " << b.get(i);
      }
    }
    if (c.max_ulp > 0) testing::Test::RecordProperty(what + "_worst_ulp", static_cast<int>(worst));
  }
}

}  // namespace

TEST(CpuJit, ArithmeticChainsWithBroadcastAreBitwiseEqual) {
  std::vector<Case> cases;
  TempDir tmp_arith("arith");
  ScopedEnv env_cache_dir("RLX_CACHE_DIR", tmp_arith.path.c_str());
  ScopedEnv env_cpu_jit("RLX_CPU_JIT", "1");
  // Output [5, 7, 130] (rows cross thread chunks at the larger size below); inputs: full, trailing
  // row, leading column, middle dim, scalar.
  for (auto [B, S, H] : {std::tuple<int64_t, int64_t, int64_t>{5, 7, 130}, {3, 300, 97}, {1, 1, 1}}) {
    Graph body;
    ValueId x = body.add_input("x", DType::f32, Shape{B, S, H});
    ValueId row = body.add_input("row", DType::f32, Shape{H});
    ValueId col = body.add_input("col", DType::f32, Shape{B, S, 1});
    ValueId mid = body.add_input("mid", DType::f32, Shape{1, S, 1});
    ValueId s = body.add_input("s", DType::f32, Shape{});
    Builder c(body);
    ValueId t = c.add(c.mul(x, row), col);
    t = c.sub(t, c.op1(OpKind::Div, {mid, s}));
    t = c.op1(OpKind::Max, {t, c.op1(OpKind::Neg, {col})});
    t = c.op1(OpKind::Min, {t, c.op1(OpKind::Abs, {row})});
    t = c.mul(t, c.op1(OpKind::Sqrt, {c.op1(OpKind::Abs, {x})}));
    t = c.add(t, c.op1(OpKind::Rsqrt, {c.add(c.op1(OpKind::Abs, {mid}), s)}));
    body.outputs = {t};
    std::vector<Tensor> in = {random(DType::f32, {B, S, H}, 1), random(DType::f32, {H}, 2), random(DType::f32, {B, S, 1}, 3),
                              random(DType::f32, {1, S, 1}, 4), random(DType::f32, {}, 5, 0.5, 2)};
    cases.push_back({body, in, 0, "arith " + std::to_string(B * S * H)});
  }
  check(cases);
}

// vmath's polynomials: the JIT builds with -ffp-contract=off (so body arithmetic stays bitwise equal),
// the evaluator's clones contract to FMA inside exp; measured worst case 2 ulp.
TEST(CpuJit, TranscendentalsWithinTwoUlp) {
  std::vector<Case> cases;
  TempDir tmp_transc("transc");
  ScopedEnv env_cache_dir("RLX_CACHE_DIR", tmp_transc.path.c_str());
  ScopedEnv env_cpu_jit("RLX_CPU_JIT", "1");
  Graph body;
  ValueId x = body.add_input("x", DType::f32, Shape{64, 513});
  ValueId b = body.add_input("b", DType::f32, Shape{513});
  ValueId half = body.add_input("half", DType::f32, Shape{});
  ValueId rs2 = body.add_input("rs2", DType::f32, Shape{});
  ValueId one = body.add_input("one", DType::f32, Shape{});
  Builder c(body);
  // GELU (erf form), tanh, logistic, exp, log: what MiniLM and training bodies contain.
  ValueId h = c.add(x, b);
  body.outputs = {c.mul(c.mul(h, half), c.add(c.op1(OpKind::Erf, {c.mul(h, rs2)}), one))};
  Tensor tx = random(DType::f32, {64, 513}, 7, -9, 9), tb = random(DType::f32, {513}, 8);
  cases.push_back({body, {tx, tb, Tensor::from<float>(DType::f32, {}, {0.5f}), Tensor::from<float>(DType::f32, {}, {0.70710678f}),
                    Tensor::from<float>(DType::f32, {}, {1.f})},
             0, "gelu", 1e-6});
  for (OpKind op : {OpKind::Tanh, OpKind::Logistic, OpKind::Exp, OpKind::Log, OpKind::Erf}) {
    Graph u;
    ValueId ux = u.add_input("x", DType::f32, Shape{64, 513});
    ValueId ub = u.add_input("b", DType::f32, Shape{513});
    Builder cu(u);
    ValueId arg = op == OpKind::Log ? cu.op1(OpKind::Abs, {cu.add(ux, ub)}) : cu.add(ux, ub);
    u.outputs = {cu.op1(op, {arg})};
    cases.push_back({u, {tx, tb}, 2, std::string(op_name(op))});  // measured: exp 1, tanh/erf/logistic 2, log 0
  }
  check(cases);
}

TEST(CpuJit, MixedDtypesAndIntegersAreBitwiseEqual) {
  std::vector<Case> cases;
  TempDir tmp_mixed("mixed");
  ScopedEnv env_cache_dir("RLX_CACHE_DIR", tmp_mixed.path.c_str());
  ScopedEnv env_cpu_jit("RLX_CPU_JIT", "1");
  {  // ReLU backward + one-hot, as training bodies (f32 with bool/i64)
    Graph body;
    ValueId h = body.add_input("h", DType::f32, Shape{37, 70});
    ValueId z = body.add_input("z", DType::f32, Shape{});
    ValueId g = body.add_input("g", DType::f32, Shape{37, 70});
    ValueId lab = body.add_input("lab", DType::i64, Shape{37, 1});
    ValueId cls = body.add_input("cls", DType::i64, Shape{70});
    Builder c(body);
    ValueId ge = c.op1(OpKind::Ge, {h, z});
    ValueId eq = c.op1(OpKind::Eq, {lab, cls});
    ValueId both = c.op1(OpKind::Or, {c.op1(OpKind::Not, {ge}), eq});
    body.outputs = {c.mul(c.select(both, g, c.convert(eq, DType::f32)), h)};
    Tensor tl(DType::i64, {37, 1}), tc(DType::i64, {70});
    for (int64_t i = 0; i < 37; ++i) tl.set_int(i, i % 10);
    for (int64_t i = 0; i < 70; ++i) tc.set_int(i, i % 10);
    cases.push_back({body, {random(DType::f32, {37, 70}, 1), Tensor(DType::f32, {}), random(DType::f32, {37, 70}, 2), tl, tc}, 0,
               "relu-backward"});
  }
  {  // a bool output
    Graph body;
    ValueId a = body.add_input("a", DType::f32, Shape{33, 17});
    ValueId m = body.add_input("m", DType::boolean, Shape{33, 1});
    ValueId q = body.add_input("q", DType::f32, Shape{17});
    Builder c2(body);
    body.outputs = {c2.op1(OpKind::And, {c2.op1(OpKind::Lt, {a, q}), m})};
    cases.push_back({body, {random(DType::f32, {33, 17}, 3), random(DType::boolean, {33, 1}, 4), random(DType::f32, {17}, 5)}, 0,
               "bool-out"});
  }
  {  // i32 division/remainder by zero and -1, wrap-around, max/min; f64 chain; float -> int convert
    Graph body;
    ValueId a = body.add_input("a", DType::i32, Shape{41, 29});
    ValueId b = body.add_input("b", DType::i32, Shape{29});
    ValueId big = body.add_input("big", DType::i32, Shape{});
    Builder c(body);
    ValueId q = c.op1(OpKind::Div, {a, b});
    ValueId r = c.op1(OpKind::Rem, {a, b});
    ValueId w = c.mul(c.add(q, big), r);  // wraps around
    body.outputs = {c.op1(OpKind::Max, {c.op1(OpKind::Min, {w, a}), c.op1(OpKind::Neg, {b})})};
    Tensor ta = random(DType::i32, {41, 29}, 5, -50, 50), tb = random(DType::i32, {29}, 6, -3, 3);
    cases.push_back({body, {ta, tb, Tensor::from<int32_t>(DType::i32, {}, {2147483000})}, 0, "i32"});
    Graph d;
    ValueId x = d.add_input("x", DType::f64, Shape{19, 23});
    ValueId y = d.add_input("y", DType::f64, Shape{19, 1});
    ValueId k = d.add_input("k", DType::f32, Shape{});
    Builder cd(d);
    ValueId t = cd.op1(OpKind::Exp, {cd.op1(OpKind::Tanh, {cd.mul(x, y)})});
    t = cd.op1(OpKind::Max, {cd.sub(t, cd.op1(OpKind::Erf, {x})), cd.op1(OpKind::Sin, {y})});
    d.outputs = {cd.convert(cd.mul(t, cd.convert(k, DType::f64)), DType::i32)};
    cases.push_back({d, {random(DType::f64, {19, 23}, 9), random(DType::f64, {19, 1}, 10), Tensor::from<float>(DType::f32, {}, {1e9f})},
               0, "f64->i32"});
  }
  check(cases);
}

// i8/u8/i16 intermediates wrap at every node as the reference's stores do (they used to be
// computed in int: i32 300 -> i8 -> f32 gave 300, u8 0 - 1 -> f32 gave -1).
TEST(CpuJit, NarrowIntegerIntermediatesWrap) {
  std::vector<Case> cases;
  TempDir tmp("narrow");
  ScopedEnv env_cache_dir("RLX_CACHE_DIR", tmp.path.c_str());
  ScopedEnv env_cpu_jit("RLX_CPU_JIT", "1");
  std::vector<int32_t> big = {300, -200, 127, 128, -129, 255, 256, 1000, 0, -1, 70000, -32769};
  Tensor ta = Tensor::from<int32_t>(DType::i32, {12}, big);
  {
    Graph body;
    ValueId a = body.add_input("a", DType::i32, Shape{12});
    Builder c(body);
    body.outputs = {c.convert(c.convert(a, DType::i8), DType::f32)};
    cases.push_back({body, {ta}, 0, "i32->i8->f32"});
  }
  Tensor tx = Tensor::from<uint8_t>(DType::u8, {2, 6}, {0, 1, 2, 200, 255, 7, 3, 0, 100, 50, 0, 255});
  Tensor ty = Tensor::from<uint8_t>(DType::u8, {6}, {1, 2, 255, 100, 1, 7});
  {
    Graph body;
    ValueId x = body.add_input("x", DType::u8, Shape{2, 6});
    ValueId y = body.add_input("y", DType::u8, Shape{6});
    Builder c(body);
    body.outputs = {c.convert(c.sub(x, y), DType::f32)};
    cases.push_back({body, {tx, ty}, 0, "u8 sub->f32"});
  }
  {  // i16 wraps on mul and on the convert from i32
    Graph body;
    ValueId a = body.add_input("a", DType::i32, Shape{12});
    Builder c(body);
    ValueId h = c.convert(a, DType::i16);
    body.outputs = {c.convert(c.mul(h, h), DType::i32)};
    cases.push_back({body, {ta}, 0, "i16 mul->i32"});
  }
  // The oracle itself: 300 mod 256 = 44, 0 - 1 in u8 = 255.
  Tensor r0(DType::f32, {12}), r1(DType::f32, {2, 6});
  cpu::fused_kernel(cases[0].body, cases[0].in, r0);
  cpu::fused_kernel(cases[1].body, cases[1].in, r1);
  EXPECT_EQ(r0.data<float>()[0], 44.f);
  EXPECT_EQ(r1.data<float>()[0], 255.f);
  check(cases);
}

TEST(CpuJit, SecondCompileHitsTheDiskCache) {
  TempDir tmp("cache");
  const std::string& dir = tmp.path;
  ScopedEnv env_cache_dir("RLX_CACHE_DIR", dir.c_str());
  ScopedEnv env_cpu_jit("RLX_CPU_JIT", "1");
  Graph body;
  ValueId x = body.add_input("x", DType::f32, Shape{8, 9});
  ValueId y = body.add_input("y", DType::f32, Shape{9});
  Builder c(body);
  body.outputs = {c.op1(OpKind::Tanh, {c.add(x, c.mul(y, c.op1(OpKind::Neg, {c.op1(OpKind::Abs, {y})})))})};  // unique here
  LirProgram p = one_kernel(body);
  auto s0 = cpu::jit_stats();
  { cpu::JitProgram a(p, {&p.kernels[0].body}); ASSERT_TRUE(a.has(0)) << a.summary(); }
  auto s1 = cpu::jit_stats();
  EXPECT_EQ(s1.compiles, s0.compiles + 1);
  int sos = 0;
  for (auto& e : std::filesystem::directory_iterator(dir + "/cpu")) sos += e.path().extension() == ".so";
  EXPECT_EQ(sos, 1);
  {  // a new program after the library was closed: loaded from disk, no compiler run
    cpu::JitProgram b(p, {&p.kernels[0].body});
    ASSERT_TRUE(b.has(0)) << b.summary();
    EXPECT_NE(b.summary().find("disk cache"), std::string::npos) << b.summary();
    auto s2 = cpu::jit_stats();
    EXPECT_EQ(s2.compiles, s1.compiles);
    EXPECT_EQ(s2.disk_hits, s1.disk_hits + 1);
    cpu::JitProgram c2(p, {&p.kernels[0].body});  // while b holds it: shared in memory
    EXPECT_EQ(cpu::jit_stats().memory_hits, s2.memory_hits + 1);
    EXPECT_EQ(cpu::jit_stats().compiles, s1.compiles);
  }
  // Other shapes with the same broadcast pattern share the source: still no compile.
  Graph body2;
  ValueId x2 = body2.add_input("x", DType::f32, Shape{80, 33});
  ValueId y2 = body2.add_input("y", DType::f32, Shape{33});
  Builder c2(body2);
  body2.outputs = {c2.op1(OpKind::Tanh, {c2.add(x2, c2.mul(y2, c2.op1(OpKind::Neg, {c2.op1(OpKind::Abs, {y2})})))})};
  LirProgram p2 = one_kernel(body2);
  cpu::JitProgram d(p2, {&p2.kernels[0].body});
  EXPECT_TRUE(d.has(0));
  EXPECT_EQ(cpu::jit_stats().compiles, s1.compiles);
  {  // Auto mode (RLX_CPU_JIT unset): a small model keeps the evaluator, a 1M-element one takes the JIT.
    ScopedEnv e2_cpu_jit("RLX_CPU_JIT", nullptr);
    cpu::JitProgram small(p2, {&p2.kernels[0].body});
    EXPECT_FALSE(small.has(0));
    EXPECT_NE(small.summary().find("below the JIT threshold"), std::string::npos) << small.summary();
    Graph body3;
    ValueId x3 = body3.add_input("x", DType::f32, Shape{1024, 1024});
    ValueId y3 = body3.add_input("y", DType::f32, Shape{1024});
    Builder c3(body3);
    body3.outputs = {c3.op1(OpKind::Tanh, {c3.add(x3, c3.mul(y3, c3.op1(OpKind::Neg, {c3.op1(OpKind::Abs, {y3})})))})};
    LirProgram p3 = one_kernel(body3);
    cpu::JitProgram big(p3, {&p3.kernels[0].body});
    EXPECT_TRUE(big.has(0)) << big.summary();
    EXPECT_EQ(cpu::jit_stats().compiles, s1.compiles);  // same broadcast pattern: the cached library
  }
}

namespace {

struct ChainRun {
  Tensor out;
  std::string profile;  // its first lines say which path the fused kernels took
};

ChainRun run_chain(const char* jit_mode) {
  ScopedEnv env_cpu_jit("RLX_CPU_JIT", jit_mode);
  ScopedEnv env_profile("RLX_PROFILE", "1");
  ScopedEnv env_cpu_rows("RLX_CPU_ROWS", "0");  // else the whole chain is one row kernel (no JIT)
  CompileOptions co;
  co.device = "cpu";
  CompiledModel m(rlx_test::chain_model(16), co);  // fused tails: several generated kernels
  auto out = m.run(std::vector<Tensor>{random(DType::f32, {16, 40}, 11, -0.2, 0.2), random(DType::f32, {40}, 12, -0.2, 0.2)});
  return {out[0], m.profile()};
}

}  // namespace

TEST(CpuJit, FallsBackWhenTheCompilerIsMissingOrBroken) {
  TempDir tmp_fallback("fallback");
  ScopedEnv env_cache_dir("RLX_CACHE_DIR", tmp_fallback.path.c_str());
  auto ref = run_chain("0");
  EXPECT_NE(ref.profile.find("evaluator (RLX_CPU_JIT=0)"), std::string::npos) << ref.profile;
  auto jit = run_chain("1");
  EXPECT_NE(jit.profile.find("C++ JIT"), std::string::npos) << jit.profile;
  ASSERT_EQ(std::memcmp(jit.out.raw(), ref.out.raw(), ref.out.nbytes()), 0) << "JIT model output differs";
  {
    ScopedEnv e2_cxx("RLX_CXX", "/nonexistent/bin/c++");
    auto fb = run_chain("1");
    EXPECT_NE(fb.profile.find("evaluator (RLX_CXX=/nonexistent/bin/c++ not found)"), std::string::npos)
        << fb.profile;
    EXPECT_EQ(std::memcmp(fb.out.raw(), ref.out.raw(), ref.out.nbytes()), 0);
    EXPECT_NE(cpu::jit_probe().find("evaluator"), std::string::npos) << cpu::jit_probe();
  }
  {
    ScopedEnv e2_cxx("RLX_CXX", "false");  // a "compiler" that always fails
    TempDir tmp_fallback2("fallback2");
    ScopedEnv e2_cache_dir("RLX_CACHE_DIR", tmp_fallback2.path.c_str());
    int failures = cpu::jit_stats().failures;
    auto fb = run_chain("1");
    EXPECT_EQ(cpu::jit_stats().failures, failures + 1);
    EXPECT_NE(fb.profile.find("evaluator (" ), std::string::npos) << fb.profile;
    EXPECT_EQ(std::memcmp(fb.out.raw(), ref.out.raw(), ref.out.nbytes()), 0);
    // The failing source is kept under cpu/failed/ (which the cache eviction never lists), named by
    // its key, and the message says where.
    const std::string failed = tmp_fallback2.path + "/cpu/failed";
    EXPECT_NE(fb.profile.find("source kept in " + failed + "/"), std::string::npos) << fb.profile;
    std::vector<std::string> kept;
    for (const auto& f : std::filesystem::directory_iterator(failed))
      if (f.path().extension() == ".cpp") kept.push_back(f.path().string());
    ASSERT_EQ(kept.size(), 1u);
    EXPECT_EQ(std::filesystem::path(kept[0]).stem().string().size(), 16u) << kept[0];
    EXPECT_TRUE(std::filesystem::exists(kept[0] + ".log")) << kept[0];
    rlx::cache_evict(tmp_fallback2.path, 0);  // a cap of 0 evicts every cache entry, but not these
    EXPECT_TRUE(std::filesystem::exists(kept[0]) && std::filesystem::exists(kept[0] + ".log"));
  }
  // Auto mode: 11 small fused kernels stay on the evaluator.
  auto dflt = run_chain(nullptr);
  EXPECT_NE(dflt.profile.find("below the JIT threshold"), std::string::npos) << dflt.profile;
  EXPECT_EQ(std::memcmp(dflt.out.raw(), ref.out.raw(), ref.out.nbytes()), 0);
}
