// Dense linear algebra: each op's defining identity (L Lᵀ = A, P A = L U, Q R = A, A V = V diag(w),
// U S Vh = A, ...) on the reference interpreter and on the cpu device (own small-matrix kernels for
// n <= 32, LAPACKE above), in f64 and f32, batched; the error policy (NaN + info, never a throw); the
// dispatch contract on a device without these kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "rlx/builder.h"
#include "rlx/device.h"
#include "rlx/reference.h"
#include "rlx/session.h"
#include "rlx/text.h"

using namespace rlx;
using Ints = std::vector<int64_t>;

namespace {

// [b, m, n] uniform in [-1, 1), plus `diag` on the diagonal (well-conditioned for diag ~ n).
Tensor rnd(DType dt, Ints shape, uint64_t seed, double diag = 0, bool spd = false) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor t(DType::f64, shape);
  int64_t r = static_cast<int64_t>(shape.size()), m = shape[r - 2], n = shape[r - 1], nb = t.numel() / (m * n);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  if (spd) {  // M Mᵀ
    Tensor s(DType::f64, shape);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double v = 0;
          for (int64_t k = 0; k < n; ++k) v += t.get((b * n + i) * n + k) * t.get((b * n + j) * n + k);
          s.set((b * n + i) * n + j, v);
        }
    t = s;
  }
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < std::min(m, n); ++i) t.set((b * m + i) * n + i, t.get((b * m + i) * n + i) + diag);
  Tensor o(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) o.set(i, t.get(i));
  return o;
}

// Runs one op on `device` ("ref" = the reference interpreter).
std::vector<Tensor> run(const std::string& device, OpKind op, const std::vector<Tensor>& ins, Attrs attrs = {}) {
  Graph g;
  Builder b(g);
  std::vector<ValueId> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(b.input("x" + std::to_string(i), ins[i].dtype(), to_shape(ins[i].shape())));
  for (auto o : b.op(op, vs, attrs)) b.output(o);
  if (device == "ref") return reference_run(g, ins);
  CompileOptions o;
  o.device = device;
  CompiledModel cm(g, o);
  return cm.run(ins);
}

// Element (b, i, j) of a [..., r, c] tensor, as double.
double at(const Tensor& t, int64_t b, int64_t i, int64_t j) {
  int64_t r = t.shape()[t.rank() - 2], c = t.shape().back();
  return t.get((b * r + i) * c + j);
}
int64_t nbatch(const Tensor& t) { return t.numel() / (t.shape()[t.rank() - 2] * t.shape().back()); }

// max |X Y - Z| / (1 + max |Z|) over the batch, with optional transposes of X and Y.
double prod_err(const Tensor& x, bool tx, const Tensor& y, bool ty, const Tensor& z) {
  int64_t xr = x.shape()[x.rank() - 2], xc = x.shape().back(), yr = y.shape()[y.rank() - 2], yc = y.shape().back();
  int64_t m = tx ? xc : xr, k = tx ? xr : xc, n = ty ? yr : yc;
  double err = 0, zmax = 0;
  for (int64_t b = 0; b < nbatch(z); ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l) s += (tx ? at(x, b, l, i) : at(x, b, i, l)) * (ty ? at(y, b, j, l) : at(y, b, l, j));
        err = std::max(err, std::abs(s - at(z, b, i, j)));
        zmax = std::max(zmax, std::abs(at(z, b, i, j)));
      }
  return err / (1 + zmax);
}
Tensor eye(DType dt, int64_t nb, int64_t n) {
  Tensor t(dt, {nb, n, n});
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < n; ++i) t.set((b * n + i) * n + i, 1);
  return t;
}

struct Param {
  std::string device;
  DType dt;
  int64_t n;
};
class LinalgOps : public ::testing::TestWithParam<Param> {
 protected:
  double tol() const { return GetParam().dt == DType::f64 ? 1e-11 : 2e-5; }
};

TEST_P(LinalgOps, CholeskyReconstructs) {
  auto [dev, dt, n] = GetParam();
  Tensor a = rnd(dt, {3, n, n}, 1, static_cast<double>(n), true);
  auto r = run(dev, OpKind::Cholesky, {a});
  EXPECT_LT(prod_err(r[0], false, r[0], true, a), tol());
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_EQ(r[1].get(b), 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) ASSERT_EQ(at(r[0], b, i, j), 0);
  }
}

TEST_P(LinalgOps, TriangularSolveAllForms) {
  auto [dev, dt, n] = GetParam();
  Tensor a = rnd(dt, {2, n, n}, 2, static_cast<double>(n));
  for (int left = 0; left < 2; ++left)
    for (int lower = 0; lower < 2; ++lower)
      for (int tr = 0; tr < 2; ++tr) {
        Tensor bm = rnd(dt, left ? Ints{2, n, 3} : Ints{2, 3, n}, 3);
        auto x = run(dev, OpKind::TriangularSolve, {a, bm},
                     {{"left_side", int64_t{left}}, {"lower", int64_t{lower}}, {"transpose_a", int64_t{tr}}})[0];
        // op(A) from the triangle alone
        Tensor t(dt, {2, n, n});
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j)
              if (lower ? j <= i : j >= i) t.set((b * n + i) * n + j, at(a, b, i, j));
        double e = left ? prod_err(t, tr, x, false, bm) : prod_err(x, false, t, tr, bm);
        EXPECT_LT(e, tol()) << "left " << left << " lower " << lower << " trans " << tr;
      }
}

TEST_P(LinalgOps, LuPermutesToLTimesU) {
  auto [dev, dt, n] = GetParam();
  Tensor a = rnd(dt, {2, n, n}, 4);
  auto r = run(dev, OpKind::Lu, {a});
  Tensor L(dt, {2, n, n}), U(dt, {2, n, n}), PA(dt, {2, n, n});
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_EQ(r[3].get(b), 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double v = at(r[0], b, i, j);
        L.set((b * n + i) * n + j, i == j ? 1 : (j < i ? v : 0));
        U.set((b * n + i) * n + j, j >= i ? v : 0);
        PA.set((b * n + i) * n + j, at(a, b, static_cast<int64_t>(r[2].get(b * n + i)), j));
      }
  }
  EXPECT_LT(prod_err(L, false, U, false, PA), tol() * n);
}

TEST_P(LinalgOps, QrIsOrthogonalTimesTriangular) {
  auto [dev, dt, n] = GetParam();
  for (Ints shape : {Ints{2, n + 3, n}, Ints{2, n, n}, Ints{2, std::max<int64_t>(1, n - 2), n}}) {
    Tensor a = rnd(dt, shape, 5);
    auto r = run(dev, OpKind::Qr, {a});
    int64_t k = std::min(shape[1], shape[2]);
    EXPECT_LT(prod_err(r[0], false, r[1], false, a), tol() * 4);
    EXPECT_LT(prod_err(r[0], true, r[0], false, eye(dt, 2, k)), tol() * 4);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < i; ++j) ASSERT_EQ(at(r[1], 0, i, j), 0);
  }
}

TEST_P(LinalgOps, EighDiagonalizes) {
  auto [dev, dt, n] = GetParam();
  Tensor a = rnd(dt, {2, n, n}, 6, 0, true);
  auto r = run(dev, OpKind::Eigh, {a});
  Tensor vw(dt, {2, n, n});
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i + 1 < n; ++i) EXPECT_LE(r[0].get(b * n + i), r[0].get(b * n + i + 1));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) vw.set((b * n + i) * n + j, at(r[1], b, i, j) * r[0].get(b * n + j));
  }
  Tensor av(dt, {2, n, n});
  EXPECT_LT(prod_err(r[1], true, r[1], false, eye(dt, 2, n)), tol() * 4);
  // A V = V diag(w)
  double e = 0, s = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double t = 0;
        for (int64_t l = 0; l < n; ++l) t += at(a, b, i, l) * at(r[1], b, l, j);
        e = std::max(e, std::abs(t - at(vw, b, i, j)));
        s = std::max(s, std::abs(at(a, b, i, j)));
      }
  EXPECT_LT(e / (1 + s), tol() * 4);
}

TEST_P(LinalgOps, SvdReconstructs) {
  auto [dev, dt, n] = GetParam();
  for (Ints shape : {Ints{2, n + 2, n}, Ints{2, n, n + 3}}) {
    Tensor a = rnd(dt, shape, 7);
    auto r = run(dev, OpKind::Svd, {a});
    int64_t k = std::min(shape[1], shape[2]);
    Tensor us(dt, {2, shape[1], k});
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < shape[1]; ++i)
        for (int64_t j = 0; j < k; ++j) us.set((b * shape[1] + i) * k + j, at(r[0], b, i, j) * r[1].get(b * k + j));
    EXPECT_LT(prod_err(us, false, r[2], false, a), tol() * 4);
    for (int64_t j = 0; j + 1 < k; ++j) EXPECT_GE(r[1].get(j), r[1].get(j + 1));
  }
}

TEST_P(LinalgOps, SolveInvDet) {
  auto [dev, dt, n] = GetParam();
  Tensor a = rnd(dt, {3, n, n}, 8, static_cast<double>(n) * 0.5), bm = rnd(dt, {3, n, 2}, 9);
  auto x = run(dev, OpKind::Solve, {a, bm})[0];
  EXPECT_LT(prod_err(a, false, x, false, bm), tol() * n);
  auto inv = run(dev, OpKind::Inv, {a})[0];
  EXPECT_LT(prod_err(a, false, inv, false, eye(dt, 3, n)), tol() * n);
  Tensor as(dt, a.shape());  // scaled to a determinant of moderate size (f32 range)
  for (int64_t i = 0; i < a.numel(); ++i) as.set(i, a.get(i) * 2.0 / static_cast<double>(n));
  auto det = run(dev, OpKind::Det, {as})[0];
  auto sl = run(dev, OpKind::Slogdet, {as});
  auto ref = run("ref", OpKind::Det, {as})[0];
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_NEAR(det.get(b), ref.get(b), tol() * 10 * std::abs(ref.get(b)));
    EXPECT_NEAR(sl[0].get(b) * std::exp(sl[1].get(b)), ref.get(b), tol() * 10 * std::abs(ref.get(b)));
  }
}

TEST_P(LinalgOps, LstsqMeetsNormalEquations) {
  auto [dev, dt, n] = GetParam();
  int64_t m = n + 4;
  Tensor a = rnd(dt, {2, m, n}, 10), bm = rnd(dt, {2, m, 2}, 11);
  auto r = run(dev, OpKind::Lstsq, {a, bm});
  // Aᵀ (A x - b) = 0
  Tensor res(dt, {2, m, 2});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t c = 0; c < 2; ++c) {
        double s = -at(bm, b, i, c);
        for (int64_t l = 0; l < n; ++l) s += at(a, b, i, l) * at(r[0], b, l, c);
        res.set((b * m + i) * 2 + c, s);
      }
  EXPECT_LT(prod_err(a, true, res, false, Tensor(dt, {2, n, 2})), tol() * 10 * n);
  EXPECT_EQ(r[1].get(0), n);
}

TEST_P(LinalgOps, MatrixExpInverseAndDiagonal) {
  auto [dev, dt, n] = GetParam();
  Tensor a = rnd(dt, {2, n, n}, 12), na(dt, {2, n, n});
  for (int64_t i = 0; i < a.numel(); ++i) a.set(i, a.get(i) * 3.0 / static_cast<double>(n)), na.set(i, -a.get(i));
  auto e = run(dev, OpKind::MatrixExp, {a})[0], en = run(dev, OpKind::MatrixExp, {na})[0];
  EXPECT_LT(prod_err(e, false, en, false, eye(dt, 2, n)), tol() * 20);
  Tensor d(dt, {1, n, n});
  for (int64_t i = 0; i < n; ++i) d.set(i * n + i, 0.3 * static_cast<double>(i) - 1);
  auto ed = run(dev, OpKind::MatrixExp, {d})[0];
  for (int64_t i = 0; i < n; ++i) {
    double want = std::exp(0.3 * static_cast<double>(i) - 1);
    EXPECT_NEAR(ed.get(i * n + i), want, tol() * 10 * want);
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& p) {
  return p.param.device + "_" + std::string(dtype_name(p.param.dt)) + "_n" + std::to_string(p.param.n);
}

// n = 3, 8 run the small-matrix kernels on cpu; 40 runs LAPACKE.
INSTANTIATE_TEST_SUITE_P(Dense, LinalgOps,
                         ::testing::Values(Param{"ref", DType::f64, 5}, Param{"cpu", DType::f64, 3},
                                           Param{"cpu", DType::f64, 8}, Param{"cpu", DType::f64, 40},
                                           Param{"cpu", DType::f32, 8}, Param{"cpu", DType::f32, 40}),
                         param_name);

// cpu (own small kernels at n = 3, 8; LAPACKE at 40) against the float64 reference, entry by entry:
// signs of eigen/singular vectors and Householder reflectors included.
TEST(LinalgCpu, MatchesReference) {
  for (DType dt : {DType::f64, DType::f32})
    for (int64_t n : {3, 8, 40}) {
      double tol = dt == DType::f64 ? 1e-9 : 2e-3;
      Tensor spd = rnd(dt, {2, n, n}, 13, static_cast<double>(n), true), a = rnd(dt, {2, n + 1, n}, 14);
      for (auto [op, in] : std::vector<std::pair<OpKind, Tensor>>{{OpKind::Cholesky, spd}, {OpKind::Eigh, spd},
                                                                 {OpKind::Svd, a}, {OpKind::Qr, a}, {OpKind::Inv, spd}}) {
        auto got = run("cpu", op, {in}), want = run("ref", op, {in});
        for (size_t k = 0; k < got.size(); ++k)
          for (int64_t i = 0; i < got[k].numel(); ++i) {
            double w = want[k].get(i);
            ASSERT_NEAR(got[k].get(i), w, tol * (1 + std::abs(w)))
                << op_name(op) << " " << dtype_name(dt) << " n=" << n << " output " << k << " at " << i;
          }
      }
    }
}

TEST(LinalgErrors, NotPositiveDefiniteGivesNanAndInfo) {
  for (int64_t n : {3, 40}) {
    Tensor a = rnd(DType::f64, {2, n, n}, 20, static_cast<double>(n), true);
    a.set((n + 1) * n + 1, -5.0);  // batch 1, entry (1, 1): minor 2 not positive
    for (const char* dev : {"ref", "cpu"}) {
      auto r = run(dev, OpKind::Cholesky, {a});
      EXPECT_EQ(r[1].get(0), 0) << dev;
      EXPECT_EQ(r[1].get(1), 2) << dev;  // LAPACK's info: the order of the failing minor
      EXPECT_FALSE(std::isnan(r[0].get(0))) << dev;
      EXPECT_TRUE(std::isnan(r[0].get(n * n))) << dev;
    }
  }
}

TEST(LinalgErrors, BatchedSmallCholeskyMatchesReference) {
  // cpu's small-matrix kernel over a batch split across the pool: one bad matrix late in the batch
  // leaves the others intact; every entry and info against the reference, f64 and f32.
  for (DType dt : {DType::f64, DType::f32}) {
    Tensor a = rnd(dt, {11, 5, 5}, 22, 5.0, true);
    a.set(9 * 25 + 2 * 5 + 2, -50.0);  // matrix 9, entry (2, 2): minor 3 not positive
    auto c = run("cpu", OpKind::Cholesky, {a}), r = run("ref", OpKind::Cholesky, {a});
    for (int64_t b = 0; b < 11; ++b) EXPECT_EQ(c[1].get(b), b == 9 ? 3 : 0) << b;
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (i / 25 == 9) {
        EXPECT_TRUE(std::isnan(c[0].get(i)));
        continue;
      }
      EXPECT_NEAR(c[0].get(i), r[0].get(i), dt == DType::f64 ? 1e-12 : 1e-5) << dtype_name(dt) << " " << i;
    }
  }
}

TEST(LinalgErrors, SingularSolveIsNanDetIsZero) {
  for (int64_t n : {4, 40}) {
    Tensor a = rnd(DType::f64, {1, n, n}, 21);
    for (int64_t j = 0; j < n; ++j) a.set(n + j, a.get(j));  // row 1 = row 0
    for (int64_t j = 0; j < n; ++j) a.set(j, 0), a.set(n + j, 0);  // two zero rows: exactly singular
    for (const char* dev : {"ref", "cpu"}) {
      auto x = run(dev, OpKind::Solve, {a, rnd(DType::f64, {1, n, 1}, 22)})[0];
      EXPECT_TRUE(std::isnan(x.get(0))) << dev;
      EXPECT_TRUE(std::isnan(run(dev, OpKind::Inv, {a})[0].get(0))) << dev;
      EXPECT_EQ(run(dev, OpKind::Det, {a})[0].get(0), 0) << dev;
      auto sl = run(dev, OpKind::Slogdet, {a});
      EXPECT_EQ(sl[0].get(0), 0) << dev;
      EXPECT_TRUE(std::isinf(sl[1].get(0)) && sl[1].get(0) < 0) << dev;
      auto lu = run(dev, OpKind::Lu, {a});
      EXPECT_GT(lu[3].get(0), 0) << dev;
    }
  }
}

TEST(LinalgShapes, RulesRejectBadOperands) {
  Graph g;
  Builder b(g);
  EXPECT_THROW(b.op(OpKind::Cholesky, {b.input("r", DType::f64, {3, 4})}), Error);
  EXPECT_THROW(b.op(OpKind::Cholesky, {b.input("v", DType::f64, {4})}), Error);
  EXPECT_THROW(b.op(OpKind::Inv, {b.input("i", DType::i32, {4, 4})}), Error);
  EXPECT_THROW(b.op(OpKind::Solve, {b.input("a", DType::f64, {2, 4, 4}), b.input("bb", DType::f64, {3, 4, 1})}), Error);
  auto o = b.op(OpKind::Svd, {b.input("s", DType::f32, {7, 5, 3})});
  EXPECT_EQ(shape_str(g.type(o[0]).shape), "[7,5,3]");
  EXPECT_EQ(shape_str(g.type(o[1]).shape), "[7,3]");
  EXPECT_EQ(shape_str(g.type(o[2]).shape), "[7,3,3]");
  auto l = b.op(OpKind::Lu, {b.input("l", DType::f64, {"batch", 6, 4})});
  EXPECT_EQ(shape_str(g.type(l[1]).shape), "[batch,4]");
  EXPECT_EQ(g.type(l[2]).dtype, DType::i32);
}

TEST(LinalgDispatch, DevicesWithoutKernelsFailNamingCpu) {
  Graph g;
  Builder b(g);
  for (auto o : b.op(OpKind::Cholesky, {b.input("a", DType::f32, {4, 4})})) b.output(o);
  try {
    legalize(g, "vulkan", {});
    FAIL() << "cholesky legalized for vulkan";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cholesky"), std::string::npos) << m;
    EXPECT_NE(m.find("cpu"), std::string::npos) << m;
  }
}

TEST(LinalgText, RoundTrips) {
  Graph g;
  Builder b(g);
  auto a = b.input("a", DType::f64, {2, 4, 4});
  b.output(b.op(OpKind::TriangularSolve, {a, b.input("b", DType::f64, {2, 4, 3})}, {{"lower", int64_t{0}}})[0]);
  for (auto o : b.op(OpKind::Qr, {a}, {{"full_matrices", int64_t{1}}})) b.output(o);
  std::string t = print_graph(g);
  EXPECT_NE(t.find("triangular_solve"), std::string::npos);
  EXPECT_EQ(print_graph(parse_graph(t, "<t>")), t);
}

}  // namespace
