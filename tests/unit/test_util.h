// Small helpers the C++ unit tests share: deterministic test tensors, error measures against an
// oracle, compile-and-run on cpu, and a scoped environment variable. One copy here instead of one
// per test file.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "rlx/builder.h"
#include "rlx/session.h"

namespace rlx_test {

// t[i] = scale * sin(freq * (i + 1) + phase): smooth, sign-changing, deterministic data (cast to dt).
inline rlx::Tensor sine_tensor(rlx::DType dt, const std::vector<int64_t>& shape, double freq, double phase,
                               double scale = 1.0) {
  rlx::Tensor t(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, scale * std::sin(freq * static_cast<double>(i + 1) + phase));
  return t;
}

// Gaussian f32 test data: scale * N(0, 1) drawn from mt19937_64(seed).
inline rlx::Tensor randn(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0) {
  rlx::Tensor t(rlx::DType::f32, std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d;
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, scale * d(rng));
  return t;
}

// Inputs for a training-step graph (train::build_train_step of models::mlp_loss_graph): i64 labels
// (i * 7) % 10, scalars 0.1 (lr and the like; eps_hat 1e-8), every other input
// randn(shape, ++seed, scale) in input order.
inline std::vector<rlx::Tensor> train_step_inputs(const rlx::Graph& step, uint64_t seed, double scale) {
  std::vector<rlx::Tensor> in;
  for (rlx::ValueId v : step.inputs) {
    const rlx::ValueType& t = step.type(v);
    std::vector<int64_t> dims;
    for (auto& d : t.shape) dims.push_back(d.v);
    if (t.dtype == rlx::DType::i64) {
      rlx::Tensor l(rlx::DType::i64, dims);
      for (int64_t i = 0; i < l.numel(); ++i) l.set_int(i, (i * 7) % 10);
      in.push_back(l);
    } else if (dims.empty()) {
      rlx::Tensor s(t.dtype, {});
      s.set(0, step.values[v].name == "eps_hat" ? 1e-8 : 0.1);
      in.push_back(s);
    } else {
      in.push_back(randn(dims, ++seed, scale));
    }
  }
  return in;
}

// The cosine of the angle between two float vectors of length n, accumulated in double.
inline double cosine(const float* a, const float* b, int64_t n) {
  double d = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < n; ++i) {
    d += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return d / std::sqrt(na * nb);
}

// max over the elements (the shapes must match) of |a - b|, or of |a - b| / (1 + |b|) if `relative`
// (b being the oracle). NaN on both sides agrees; NaN on one side only is a mismatch (infinity),
// where a plain std::max would silently skip it.
inline double max_diff(const rlx::Tensor& a, const rlx::Tensor& b, bool relative) {
  EXPECT_EQ(a.shape(), b.shape());
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.get(i), y = b.get(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return std::numeric_limits<double>::infinity();
      continue;
    }
    d = std::max(d, std::abs(x - y) / (relative ? 1.0 + std::abs(y) : 1.0));
  }
  return d;
}
inline double max_abs_diff(const rlx::Tensor& a, const rlx::Tensor& b) { return max_diff(a, b, false); }
inline double max_rel_diff(const rlx::Tensor& a, const rlx::Tensor& b) { return max_diff(a, b, true); }

// Compiles g for cpu (fusion on or off) and runs it `runs` times on `in` (later runs reuse the
// planned arena); returns the last run's outputs.
inline std::vector<rlx::Tensor> run_cpu(const rlx::Graph& g, const std::vector<rlx::Tensor>& in, bool fuse,
                                        int runs = 1) {
  rlx::CompileOptions o;
  o.fuse = fuse;
  rlx::CompiledModel m(g, o);
  std::vector<rlx::Tensor> got;
  for (int r = 0; r < runs; ++r) got = m.run(in);
  return got;
}

// An MLP-like chain over x [rows, 40] and b [40]: ten rounds of h = tanh(h + b), a row sum (which
// ends an elementwise fusion group) and h = sum * x. The cpu JIT and row-fusion tests share it.
inline rlx::Graph chain_model(int64_t rows) {
  rlx::Graph g;
  rlx::Builder c(g);
  rlx::ValueId x = c.input("x", rlx::DType::f32, rlx::Shape{rows, 40});
  rlx::ValueId b = c.input("b", rlx::DType::f32, rlx::Shape{40});
  rlx::ValueId h = x;
  for (int i = 0; i < 10; ++i) {
    h = c.op1(rlx::OpKind::Tanh, {c.add(h, b)});
    h = c.reduce(rlx::OpKind::ReduceSum, h, {1}, false);
    h = c.mul(c.reshape(h, rlx::Shape{rows, 1}), x);  // [rows, 1] * [rows, 40]
  }
  g.outputs = {h};
  return g;
}

// Sets (v != nullptr) or unsets (v == nullptr) an environment variable for one scope, restoring
// the old value after.
struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const char* n, const char* v) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    if (v) ::setenv(n, v, 1);
    else ::unsetenv(n);
  }
  ~ScopedEnv() {
    if (had) ::setenv(name.c_str(), old.c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace rlx_test

// The real MNIST files: ../shared/data/mnist beside the checkout, or RLX_MNIST_DIR.
inline std::string mnist_dir() {
  const char* e = std::getenv("RLX_MNIST_DIR");
  return e && *e ? e : std::string(RLX_SOURCE_DIR) + "/../shared/data/mnist";
}
// A test that needs something the environment provides (data, an installed package) skips where it
// is missing, except under CI=true, where a missing piece fails the test instead of passing it silently.
#define RLX_REQUIRE(cond, what)                                                            \
  if (!(cond)) {                                                                           \
    const char* ci_ = std::getenv("CI");                                                   \
    if (ci_ && std::string(ci_) == "true") FAIL() << "CI=true but missing: " << what;      \
    GTEST_SKIP() << "missing: " << what;                                                   \
  }
#define RLX_REQUIRE_DIR(dir) RLX_REQUIRE(std::filesystem::exists(dir), dir)
