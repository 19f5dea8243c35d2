// Dense linear algebra on c64: each op's defining identity with Hermitian transposes (L Lᴴ = A,
// A[perm] = L U, Q R = A with QᴴQ = I, A V = V diag(w), U S Vh = A, op(A) X = B for every
// triangular_solve form), on the reference and on cpu (which runs the complex reference), batched;
// the dtype rules (real eigenvalues / singular values / log|det|, lstsq and matrix_exp refused) and
// the refusal of complex gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>

#include "autodiff/autodiff.h"
#include "rlx/builder.h"
#include "rlx/reference.h"
#include "rlx/session.h"

using namespace rlx;
using Ints = std::vector<int64_t>;
using Cx = std::complex<double>;

namespace {

// [b, n, n] complex uniform in the unit square, plus `diag` on the diagonal; Hermitian PD with `hpd`.
Tensor crnd(Ints shape, uint64_t seed, double diag = 0, bool hpd = false) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor t(DType::c64, shape);
  int64_t r = static_cast<int64_t>(shape.size()), m = shape[r - 2], n = shape[r - 1], nb = t.numel() / (m * n);
  for (int64_t i = 0; i < t.numel(); ++i) t.setc(i, Cx(u(rng), u(rng)));
  if (hpd) {  // M Mᴴ
    Tensor s(DType::c64, shape);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          Cx v = 0;
          for (int64_t k = 0; k < n; ++k) v += t.getc((b * n + i) * n + k) * std::conj(t.getc((b * n + j) * n + k));
          s.setc((b * n + i) * n + j, v);
        }
    t = s;
  }
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < std::min(m, n); ++i) t.setc((b * m + i) * n + i, t.getc((b * m + i) * n + i) + diag);
  return t;
}

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

// Element (b, i, j) of a [..., r, c] tensor; `op` 'n' plain, 't' transposed, 'c' conjugated, 'h' both.
Cx at(const Tensor& t, int64_t b, int64_t i, int64_t j, char op = 'n') {
  if (op == 't' || op == 'h') std::swap(i, j);
  int64_t r = t.shape()[t.rank() - 2], c = t.shape().back();
  Cx v = t.getc((b * r + i) * c + j);
  return (op == 'c' || op == 'h') ? std::conj(v) : v;
}
int64_t rows(const Tensor& t, char op = 'n') { return t.shape()[t.rank() - ((op == 't' || op == 'h') ? 1 : 2)]; }
int64_t cols(const Tensor& t, char op = 'n') { return t.shape()[t.rank() - ((op == 't' || op == 'h') ? 2 : 1)]; }
int64_t nbatch(const Tensor& t) { return t.numel() / (t.shape()[t.rank() - 2] * t.shape().back()); }

// max |op(X) op(Y) - Z| / (1 + max |Z|) over the batch.
double prod_err(const Tensor& x, char ox, const Tensor& y, char oy, const Tensor& z) {
  int64_t m = rows(x, ox), k = cols(x, ox), n = cols(y, oy);
  double err = 0, zmax = 0;
  for (int64_t b = 0; b < nbatch(z); ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        Cx s = 0;
        for (int64_t l = 0; l < k; ++l) s += at(x, b, i, l, ox) * at(y, b, l, j, oy);
        err = std::max(err, std::abs(s - at(z, b, i, j)));
        zmax = std::max(zmax, std::abs(at(z, b, i, j)));
      }
  return err / (1 + zmax);
}
// Z with Z[b] = diag(v[b]) (n x n) or the identity batch.
Tensor diag_of(const Tensor& v, int64_t nb, int64_t n) {
  Tensor d(DType::c64, {nb, n, n});
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < n; ++i) d.setc((b * n + i) * n + i, v.numel() ? v.get(b * n + i) : 1.0);
  return d;
}
Tensor eye(int64_t nb, int64_t n) { return diag_of(Tensor(DType::f32, {0}), nb, n); }

constexpr double kTol = 2e-5;  // c64 holds f32 parts

class LinalgComplex : public ::testing::TestWithParam<std::string> {};

TEST_P(LinalgComplex, CholeskyTriangularSolveEveryForm) {
  const std::string dev = GetParam();
  for (int64_t n : {3, 8}) {
    Tensor a = crnd({2, n, n}, 1, 1, true);
    auto r = run(dev, OpKind::Cholesky, {a});
    EXPECT_LT(prod_err(r[0], 'n', r[0], 'h', a), kTol) << dev << " n=" << n;
    for (int64_t i = 0; i < 2; ++i) EXPECT_EQ(r[1].get(i), 0);
    Tensor t = crnd({2, n, n}, 2, 3);
    for (int left = 0; left < 2; ++left)
      for (int lower = 0; lower < 2; ++lower)
        for (char op : {'n', 't', 'c', 'h'}) {
          Tensor bb = crnd(left ? Ints{2, n, 2} : Ints{2, 2, n}, 3);
          Attrs at{{"left_side", int64_t{left}}, {"lower", int64_t{lower}}, {"transpose_a", int64_t{op == 't' || op == 'h'}},
                   {"conjugate_a", int64_t{op == 'c' || op == 'h'}}};
          Tensor x = run(dev, OpKind::TriangularSolve, {t, bb}, at)[0];
          // op(T) with only the triangle read: mask T first.
          Tensor tm = t.clone();
          for (int64_t b = 0; b < 2; ++b)
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < n; ++j)
                if (lower ? j > i : j < i) tm.setc((b * n + i) * n + j, 0);
          double e = left ? prod_err(tm, op, x, 'n', bb) : prod_err(x, 'n', tm, op, bb);
          EXPECT_LT(e, kTol) << dev << " left=" << left << " lower=" << lower << " op=" << op;
        }
  }
}

TEST_P(LinalgComplex, LuQrSolveInv) {
  const std::string dev = GetParam();
  for (Ints sh : {Ints{2, 4, 4}, Ints{1, 5, 3}, Ints{1, 3, 5}}) {
    Tensor a = crnd(sh, 4);
    auto q = run(dev, OpKind::Qr, {a});
    EXPECT_LT(prod_err(q[0], 'n', q[1], 'n', a), kTol) << dev;
    int64_t k = q[0].shape().back(), nb = nbatch(a);
    EXPECT_LT(prod_err(q[0], 'h', q[0], 'n', eye(nb, k)), kTol) << dev;
    for (int64_t b = 0; b < nb; ++b)  // R's diagonal is real, as LAPACK's
      for (int64_t i = 0; i < k; ++i) EXPECT_EQ(at(q[1], b, i, i).imag(), 0.0);
    auto f = run(dev, OpKind::Lu, {a});  // A[perm] = L U
    int64_t m = sh[1], n = sh[2], kk = std::min(m, n);
    Tensor L(DType::c64, {nb, m, kk}), U(DType::c64, {nb, kk, n}), pa(DType::c64, {nb, m, n});
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < kk; ++j) L.setc((b * m + i) * kk + j, i == j ? Cx(1) : (i > j ? at(f[0], b, i, j) : Cx(0)));
      for (int64_t i = 0; i < kk; ++i)
        for (int64_t j = 0; j < n; ++j) U.setc((b * kk + i) * n + j, j >= i ? at(f[0], b, i, j) : Cx(0));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) pa.setc((b * m + i) * n + j, at(a, b, f[2].get(b * m + i), j));
    }
    EXPECT_LT(prod_err(L, 'n', U, 'n', pa), kTol) << dev;
  }
  Tensor a = crnd({3, 6, 6}, 5, 3), bb = crnd({3, 6, 2}, 6);
  EXPECT_LT(prod_err(a, 'n', run(dev, OpKind::Solve, {a, bb})[0], 'n', bb), kTol) << dev;
  EXPECT_LT(prod_err(a, 'n', run(dev, OpKind::Inv, {a})[0], 'n', eye(3, 6)), kTol) << dev;
}

TEST_P(LinalgComplex, EighSvd) {
  const std::string dev = GetParam();
  Tensor a = crnd({2, 5, 5}, 7, 0, true);
  auto e = run(dev, OpKind::Eigh, {a});
  ASSERT_EQ(e[0].dtype(), DType::f32);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i + 1 < 5; ++i) EXPECT_LE(e[0].get(b * 5 + i), e[0].get(b * 5 + i + 1));
  // A V = V diag(w), VᴴV = I
  Tensor vw(DType::c64, {2, 5, 5});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 5; ++j) vw.setc((b * 5 + i) * 5 + j, at(e[1], b, i, j) * e[0].get(b * 5 + j));
  EXPECT_LT(prod_err(a, 'n', e[1], 'n', vw), kTol) << dev;
  EXPECT_LT(prod_err(e[1], 'h', e[1], 'n', eye(2, 5)), kTol) << dev;
  for (Ints sh : {Ints{2, 5, 3}, Ints{1, 3, 5}, Ints{1, 4, 4}}) {
    Tensor x = crnd(sh, 8);
    auto s = run(dev, OpKind::Svd, {x});
    ASSERT_EQ(s[1].dtype(), DType::f32);
    int64_t k = s[1].shape().back(), nb = nbatch(x);
    Tensor us(DType::c64, s[0].shape());
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t i = 0; i < sh[1]; ++i)
        for (int64_t j = 0; j < k; ++j) us.setc((b * sh[1] + i) * k + j, at(s[0], b, i, j) * s[1].get(b * k + j));
    EXPECT_LT(prod_err(us, 'n', s[2], 'n', x), kTol) << dev;
    EXPECT_LT(prod_err(s[0], 'h', s[0], 'n', eye(nb, k)), kTol) << dev;
    EXPECT_LT(prod_err(s[2], 'n', s[2], 'h', eye(nb, k)), kTol) << dev;
  }
}

TEST_P(LinalgComplex, DetSlogdetAndErrors) {
  const std::string dev = GetParam();
  // An upper triangular matrix with a row swap: det = -(product of the diagonal).
  Tensor a(DType::c64, {1, 2, 2});
  a.setc(0, 0);
  a.setc(1, Cx(2, 1));
  a.setc(2, Cx(0, 3));
  a.setc(3, Cx(1, 1));
  Cx want = -Cx(2, 1) * Cx(0, 3);
  Tensor d = run(dev, OpKind::Det, {a})[0];
  EXPECT_LT(std::abs(d.getc(0) - want), 1e-5) << dev;
  auto sl = run(dev, OpKind::Slogdet, {a});
  ASSERT_EQ(sl[1].dtype(), DType::f32);
  EXPECT_LT(std::abs(sl[0].getc(0) * std::exp(sl[1].get(0)) - want), 1e-5) << dev;
  // Not Hermitian PD: NaN factor and info; singular: NaN solve, det 0, slogdet (0, -inf).
  Tensor bad = crnd({1, 3, 3}, 9, 0, true);
  bad.setc(0, -1);
  auto c = run(dev, OpKind::Cholesky, {bad});
  EXPECT_EQ(c[1].get(0), 1);
  EXPECT_TRUE(std::isnan(c[0].getc(4).real()));
  Tensor sing(DType::c64, {1, 2, 2});
  sing.setc(0, Cx(1, 1));
  sing.setc(1, Cx(2, 2));
  sing.setc(2, Cx(1, 1));
  sing.setc(3, Cx(2, 2));
  EXPECT_TRUE(std::isnan(run(dev, OpKind::Inv, {sing})[0].getc(0).real()));
  EXPECT_EQ(std::abs(run(dev, OpKind::Det, {sing})[0].getc(0)), 0.0);
  auto s2 = run(dev, OpKind::Slogdet, {sing});
  EXPECT_EQ(std::abs(s2[0].getc(0)), 0.0);
  EXPECT_TRUE(std::isinf(s2[1].get(0)) && s2[1].get(0) < 0);
}

INSTANTIATE_TEST_SUITE_P(Devices, LinalgComplex, ::testing::Values("ref", "cpu"));

TEST(LinalgComplexRules, RealOnlyOpsAndGradientsRefuse) {
  Graph g;
  Builder b(g);
  ValueId a = b.input("a", DType::c64, {3, 3});
  EXPECT_THROW(b.op(OpKind::MatrixExp, {a}), Error);
  EXPECT_THROW(b.op(OpKind::Lstsq, {a, a}), Error);
  // The rules are the real ones: called on c64 they refuse instead of returning a wrong gradient.
  ValueId y = b.op(OpKind::Inv, {a})[0];
  ValueId gy = b.input("g", DType::c64, {3, 3});
  Node n = g.nodes.back();  // a copy: the rule adds nodes
  ASSERT_EQ(n.op, OpKind::Inv);
  try {
    ad::vjp_rule(OpKind::Inv)(b, n, {a}, {y}, {gy});
    ADD_FAILURE() << "complex gradient accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("complex"), std::string::npos) << e.what();
  }
}

}  // namespace
