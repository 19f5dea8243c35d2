// VJP rules of the linear-algebra ops against central finite differences in float64, on the
// reference interpreter: loss = sum(w ∘ f(A, B)) with a fixed random w, every input entry probed.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "autodiff/autodiff.h"
#include "rlx/builder.h"
#include "rlx/reference.h"

using namespace rlx;
using Ints = std::vector<int64_t>;

namespace {

Tensor rnd(Ints shape, uint64_t seed, double diag = 0, bool spd = false) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor t(DType::f64, shape);
  int64_t r = static_cast<int64_t>(shape.size()), n = shape[r - 1], m = shape[r - 2], nb = t.numel() / (m * n);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  if (spd) {
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
  return t;
}

using Fn = std::function<std::vector<ValueId>(Builder&, const std::vector<ValueId>&)>;

// Gradient of sum_k sum(w_k ∘ out_k) against central differences; `tol` relative to max |grad|.
void check(const char* name, const std::vector<Tensor>& xs, const Fn& f, double tol = 1e-6) {
  Graph g;
  Builder b(g);
  std::vector<ValueId> ins;
  for (size_t i = 0; i < xs.size(); ++i) ins.push_back(b.input("x" + std::to_string(i), DType::f64, to_shape(xs[i].shape())));
  ValueId loss = -1;
  std::mt19937_64 wr(99);
  std::uniform_real_distribution<double> wu(0.5, 1.5);
  for (ValueId y : f(b, ins)) {
    Tensor wt(DType::f64, static_dims(b.shape(y)));
    for (int64_t i = 0; i < wt.numel(); ++i) wt.set(i, wu(wr) * (i % 2 ? -1 : 1));
    Ints axes;
    for (size_t i = 0; i < static_dims(b.shape(y)).size(); ++i) axes.push_back(static_cast<int64_t>(i));
    ValueId p = b.mul(y, b.constant(wt));
    ValueId s = axes.empty() ? p : b.reduce(OpKind::ReduceSum, p, axes, false);
    loss = loss < 0 ? s : b.add(loss, s);
  }
  b.output(loss);
  Graph vg = ad::value_and_grad(g);
  auto r = reference_run(vg, xs);
  const double eps = 1e-6;
  for (size_t i = 0; i < xs.size(); ++i) {
    double gmax = 0, err = 0;
    for (int64_t k = 0; k < xs[i].numel(); ++k) {
      auto xp = xs, xm = xs;
      xp[i] = xs[i].clone();
      xm[i] = xs[i].clone();
      xp[i].set(k, xs[i].get(k) + eps);
      xm[i].set(k, xs[i].get(k) - eps);
      double fd = (reference_run(g, xp)[0].get(0) - reference_run(g, xm)[0].get(0)) / (2 * eps);
      gmax = std::max(gmax, std::abs(fd));
      err = std::max(err, std::abs(fd - r[1 + i].get(k)));
    }
    EXPECT_LT(err, tol * (1 + gmax)) << name << " input " << i << " max |grad| " << gmax;
  }
}

ValueId op1(Builder& b, OpKind k, std::vector<ValueId> in, Attrs a = {}, int out = 0) { return b.op(k, in, a)[out]; }

TEST(LinalgVjp, Cholesky) {
  check("cholesky", {rnd({2, 4, 4}, 1, 4, true)}, [](Builder& b, const std::vector<ValueId>& x) {
    return std::vector<ValueId>{op1(b, OpKind::Cholesky, {x[0]})};
  });
}

TEST(LinalgVjp, TriangularSolveEveryForm) {
  for (int left = 0; left < 2; ++left)
    for (int lower = 0; lower < 2; ++lower)
      for (int tr = 0; tr < 2; ++tr)
        for (int unit = 0; unit < 2; ++unit) {
          Attrs a{{"left_side", int64_t{left}}, {"lower", int64_t{lower}}, {"transpose_a", int64_t{tr}},
                  {"unit_diagonal", int64_t{unit}}};
          check("triangular_solve", {rnd({2, 3, 3}, 2, 3), rnd(left ? Ints{2, 3, 2} : Ints{2, 2, 3}, 3)},
                [&](Builder& b, const std::vector<ValueId>& x) {
                  return std::vector<ValueId>{op1(b, OpKind::TriangularSolve, {x[0], x[1]}, a)};
                });
        }
}

TEST(LinalgVjp, SolveInv) {
  check("solve", {rnd({2, 4, 4}, 4, 2), rnd({2, 4, 2}, 5)}, [](Builder& b, const std::vector<ValueId>& x) {
    return std::vector<ValueId>{op1(b, OpKind::Solve, {x[0], x[1]})};
  });
  check("inv", {rnd({2, 3, 3}, 6, 2)}, [](Builder& b, const std::vector<ValueId>& x) {
    return std::vector<ValueId>{op1(b, OpKind::Inv, {x[0]})};
  });
}

TEST(LinalgVjp, DetSlogdet) {
  check("det", {rnd({2, 4, 4}, 7, 1.5)}, [](Builder& b, const std::vector<ValueId>& x) {
    return std::vector<ValueId>{op1(b, OpKind::Det, {x[0]})};
  });
  check("slogdet", {rnd({3, 3, 3}, 8, 1.0)}, [](Builder& b, const std::vector<ValueId>& x) {
    return std::vector<ValueId>{op1(b, OpKind::Slogdet, {x[0]}, {}, 1)};
  });
}

TEST(LinalgVjp, EighValuesAndVectors) {
  check("eigh", {rnd({2, 4, 4}, 9, 0, true)}, [](Builder& b, const std::vector<ValueId>& x) {
    auto o = b.op(OpKind::Eigh, {x[0]});
    return std::vector<ValueId>{o[0], o[1]};
  }, 1e-5);
  check("eigvalsh", {rnd({1, 5, 5}, 10)}, [](Builder& b, const std::vector<ValueId>& x) {
    return std::vector<ValueId>{op1(b, OpKind::Eigh, {x[0]})};
  });
}

TEST(LinalgVjp, QrTallAndSquare) {
  for (Ints shape : {Ints{2, 5, 3}, Ints{1, 4, 4}}) {
    check("qr", {rnd(shape, 13)}, [](Builder& b, const std::vector<ValueId>& x) {
      auto o = b.op(OpKind::Qr, {x[0]});
      return std::vector<ValueId>{o[0], o[1]};
    }, 1e-5);
  }
}

TEST(LinalgVjp, SvdTallWideSquare) {
  for (Ints shape : {Ints{2, 5, 3}, Ints{1, 3, 5}, Ints{1, 4, 4}}) {
    check("svd", {rnd(shape, 14)}, [](Builder& b, const std::vector<ValueId>& x) {
      auto o = b.op(OpKind::Svd, {x[0]});
      return std::vector<ValueId>{o[0], o[1], o[2]};
    }, 1e-5);
  }
}

TEST(LinalgVjp, ComposedCholeskySolve) {
  // log det via Cholesky and a solve through its factor: the pattern of a Gaussian likelihood.
  check("cholesky+triangular_solve", {rnd({1, 4, 4}, 11, 4, true), rnd({1, 4, 1}, 12)},
        [](Builder& b, const std::vector<ValueId>& x) {
          ValueId L = op1(b, OpKind::Cholesky, {x[0]});
          ValueId z = op1(b, OpKind::TriangularSolve, {L, x[1]});
          return std::vector<ValueId>{b.mul(z, z), L};
        });
}

TEST(LinalgVjp, LuSquare) {
  // Packed LU of a matrix with a pivot in every column (rows far from diagonally dominant).
  check("lu", {rnd({2, 4, 4}, 15)}, [](Builder& b, const std::vector<ValueId>& x) {
    return std::vector<ValueId>{op1(b, OpKind::Lu, {x[0]})};
  });
}

TEST(LinalgVjp, LstsqTallWide) {
  // Overdetermined (residual nonzero), underdetermined (minimum norm) and square, full rank.
  for (auto sh : {std::pair<Ints, Ints>{{2, 5, 3}, {2, 5, 2}}, {{1, 3, 5}, {1, 3, 2}}, {{1, 4, 4}, {1, 4, 1}}}) {
    check("lstsq", {rnd(sh.first, 16, 0.5), rnd(sh.second, 17)}, [](Builder& b, const std::vector<ValueId>& x) {
      return std::vector<ValueId>{op1(b, OpKind::Lstsq, {x[0], x[1]})};
    });
  }
}

TEST(LinalgVjp, MatrixExpSmallAndLargeNorm) {
  // A small norm (low Padé degree) and a large one (degree 13 with squarings).
  for (double scale : {0.3, 3.0}) {
    Tensor a = rnd({2, 3, 3}, 18);
    for (int64_t i = 0; i < a.numel(); ++i) a.set(i, a.get(i) * scale);
    check("matrix_exp", {a}, [](Builder& b, const std::vector<ValueId>& x) {
      return std::vector<ValueId>{op1(b, OpKind::MatrixExp, {x[0]})};
    }, 1e-5);
  }
}

}  // namespace
