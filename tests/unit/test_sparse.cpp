// Sparse CSR: the Csr/Coo types, Matrix Market parsing, the sparse ops on cpu against dense
// oracles, the iterative and direct solvers, bad input, and the VJP rules by finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "autodiff/autodiff.h"
#include "rlx/reference.h"
#include "rlx/sparse.h"
#include "sparse/direct.h"
#include "test_util.h"

using namespace rlx;
using rlx::sparse::Coo;
using rlx::sparse::Csr;
using rlx::sparse::poisson2d;

namespace {

// A random n x n matrix with ~density off-diagonal entries plus a dominant diagonal (shift).
Coo random_square(int64_t n, double density, double shift, uint64_t seed, bool symmetric) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1), p(0, 1);
  Coo c;
  c.rows = c.cols = n;
  for (int64_t i = 0; i < n; ++i) {
    c.add(i, i, shift + u(rng));
    for (int64_t j = symmetric ? i + 1 : 0; j < n; ++j)
      if (j != i && p(rng) < density) {
        double v = u(rng);
        c.add(i, j, v);
        if (symmetric) c.add(j, i, v);
      }
  }
  return c;
}

Tensor vec(DType dt, int64_t n, double freq) { return rlx_test::sine_tensor(dt, {n}, freq, 0.3); }

struct CsrGraph {
  Graph g;
  sparse::CsrValues a;
  ValueId x;
};

CsrGraph csr_graph(const Csr& m, DType dt, Shape xshape) {
  CsrGraph c;
  ValueId v = c.g.add_input("values", dt, Shape{Dim(m.nnz())});
  ValueId ci = c.g.add_input("col", m.index_dtype(), Shape{Dim(m.nnz())});
  ValueId rp = c.g.add_input("row_ptr", m.index_dtype(), Shape{Dim(m.rows + 1)});
  c.a = {v, ci, rp, m.rows, m.cols};
  c.x = c.g.add_input("x", dt, std::move(xshape));
  return c;
}

// Dense y = op(D) x for an [r, c] row-major dense D and x [.., k].
Tensor dense_mm(const Tensor& d, const Tensor& x, bool t, int64_t k) {
  int64_t r = d.shape()[0], c = d.shape()[1], orows = t ? c : r, inner = t ? r : c;
  Tensor y(x.dtype(), k == 0 ? std::vector<int64_t>{orows} : std::vector<int64_t>{orows, k});
  int64_t kk = std::max<int64_t>(k, 1);
  for (int64_t i = 0; i < orows; ++i)
    for (int64_t j = 0; j < kk; ++j) {
      double s = 0;
      for (int64_t q = 0; q < inner; ++q) s += (t ? d.get(q * c + i) : d.get(i * c + q)) * x.get(q * kk + j);
      y.set(i * kk + j, s);
    }
  return y;
}

}  // namespace

TEST(SparseTypes, CooToCsrSumsDuplicatesAndSorts) {
  Coo c;
  c.rows = 3;
  c.cols = 4;
  c.add(2, 3, 1);
  c.add(0, 2, 5);
  c.add(0, 1, 2);
  c.add(2, 3, 4);  // duplicate of (2, 3)
  c.add(0, 2, -1);
  for (DType it : {DType::i32, DType::i64}) {
    Csr a = c.to_csr(DType::f64, it);
    a.validate();
    ASSERT_EQ(a.nnz(), 3);
    EXPECT_EQ(a.row_ptr.get_int(0), 0);
    EXPECT_EQ(a.row_ptr.get_int(1), 2);
    EXPECT_EQ(a.row_ptr.get_int(2), 2);
    EXPECT_EQ(a.row_ptr.get_int(3), 3);
    EXPECT_EQ(a.col_indices.get_int(0), 1);
    EXPECT_EQ(a.col_indices.get_int(1), 2);
    EXPECT_DOUBLE_EQ(a.values.get(1), 4.0);
    EXPECT_DOUBLE_EQ(a.values.get(2), 5.0);
    Tensor d = a.to_dense();
    EXPECT_DOUBLE_EQ(d.get(2 * 4 + 3), 5.0);
    Csr t = a.transpose();
    t.validate();
    EXPECT_EQ(t.rows, 4);
    EXPECT_DOUBLE_EQ(t.to_dense().get(3 * 3 + 2), 5.0);
    Csr back = Csr::from_dense(d, it);
    EXPECT_EQ(back.nnz(), 3);
  }
  c.add(3, 0, 1);  // row 3 of a 3-row matrix
  EXPECT_THROW(c.to_csr(), Error);
}

TEST(SparseTypes, ValidateNamesTheProblem) {
  Csr a = poisson2d(3).to_csr(DType::f64, DType::i32);
  auto expect_msg = [](const Csr& m, const std::string& part) {
    try {
      m.validate();
      ADD_FAILURE() << "no error, expected: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  Csr b = a;
  b.col_indices = a.col_indices.clone();
  b.col_indices.set_int(4, 99);
  expect_msg(b, "out of range");
  Csr c = a;
  c.col_indices = a.col_indices.clone();
  std::swap(c.col_indices.data<int32_t>()[0], c.col_indices.data<int32_t>()[1]);
  expect_msg(c, "not strictly increasing");
  Csr d = a;
  d.row_ptr = Tensor(DType::i32, {a.rows});
  expect_msg(d, "expected rows + 1");
  Csr e = a;
  e.row_ptr = a.row_ptr.clone();
  e.row_ptr.set_int(a.rows, a.nnz() - 1);
  expect_msg(e, "expected nnz");
}

TEST(SparseMtx, ParsesGeneralSymmetricPattern) {
  Coo g = sparse::parse_matrix_market(
      "%%MatrixMarket matrix coordinate real general\n% a comment\n3 3 3\n1 1 2.5\n3 2 -1e-3\n2 3 4\n");
  Csr a = g.to_csr();
  EXPECT_EQ(a.nnz(), 3);
  EXPECT_DOUBLE_EQ(a.to_dense().get(2 * 3 + 1), -1e-3);
  Coo s = sparse::parse_matrix_market("%%MatrixMarket matrix coordinate integer symmetric\n2 2 2\n1 1 3\n2 1 7\n");
  Tensor sd = s.to_csr().to_dense();
  EXPECT_DOUBLE_EQ(sd.get(1), 7.0);
  EXPECT_DOUBLE_EQ(sd.get(2), 7.0);
  Coo p = sparse::parse_matrix_market("%%MatrixMarket matrix coordinate pattern general\n2 3 2\n1 3\n2 1\n");
  EXPECT_DOUBLE_EQ(p.to_csr().to_dense().get(2), 1.0);
  // Round trip through a file.
  auto path = std::filesystem::temp_directory_path() / "rlx_test_sparse.mtx";
  sparse::write_matrix_market(a, path.string());
  Csr r = sparse::read_matrix_market(path.string()).to_csr();
  EXPECT_EQ(rlx_test::max_abs_diff(r.to_dense(), a.to_dense()), 0.0);
  std::filesystem::remove(path);
}

TEST(SparseMtx, ErrorsNameTheLine) {
  auto expect_line = [](const std::string& text, const std::string& part) {
    try {
      sparse::parse_matrix_market(text, "m.mtx");
      ADD_FAILURE() << "no error for: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_line("%%MatrixMarket matrix array real general\n2 2\n1\n", "m.mtx:1: format 'array'");
  expect_line("MatrixMarket\n", "m.mtx:1: missing");
  expect_line("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n", "m.mtx:3: entry (3, 1) outside");
  expect_line("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n2 2 x\n", "m.mtx:4: bad value 'x'");
  expect_line("%%MatrixMarket matrix coordinate real general\n2 2 x\n", "m.mtx:2: size line");
  expect_line("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n", "file ends after 1 of 3");
  expect_line("%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n", "m.mtx:3: entry above the diagonal");
  expect_line("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n", "m.mtx:3: entry needs 3 fields");
}

// matvec / matmul (both orientations), add_dense, sddmm, sample and transpose on cpu against dense
// arithmetic, for f32/f64 values and i32/i64 indices.
TEST(SparseOps, MatchDenseOnCpu) {
  Coo c = random_square(37, 0.15, 0.0, 7, false);
  c.cols = 37;
  for (DType dt : {DType::f64, DType::f32})
    for (DType it : {DType::i32, DType::i64}) {
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      Csr a = c.to_csr(dt, it);
      Tensor d = a.to_dense();
      for (bool t : {false, true}) {
        CsrGraph mv = csr_graph(a, dt, Shape{Dim(37)});
        {
          Builder b(mv.g);
          mv.g.outputs = {sparse::matvec(b, mv.a, mv.x, t)};
        }
        Tensor x = vec(dt, 37, 0.7);
        auto y = rlx_test::run_cpu(mv.g, {a.values, a.col_indices, a.row_ptr, x}, true);
        EXPECT_LT(rlx_test::max_rel_diff(y[0], dense_mm(d, x, t, 0)), tol) << t;
        auto yr = reference_run(mv.g, {a.values, a.col_indices, a.row_ptr, x});
        EXPECT_LT(rlx_test::max_rel_diff(yr[0], y[0]), tol);

        CsrGraph mm = csr_graph(a, dt, Shape{Dim(37), Dim(5)});
        {
          Builder b(mm.g);
          mm.g.outputs = {sparse::matmul(b, mm.a, mm.x, t)};
        }
        Tensor X = rlx_test::sine_tensor(dt, {37, 5}, 0.31, 0.1);
        auto Y = rlx_test::run_cpu(mm.g, {a.values, a.col_indices, a.row_ptr, X}, true);
        EXPECT_LT(rlx_test::max_rel_diff(Y[0], dense_mm(d, X, t, 5)), tol);
      }
      // add_dense, transpose, sample, sddmm in one graph.
      CsrGraph g = csr_graph(a, dt, Shape{Dim(37), Dim(37)});
      {
        Builder b(g.g);
        Attrs sh = {{"shape", std::vector<int64_t>{37, 37}}};
        ValueId sum = b.op1(OpKind::SparseAddDense, {g.a.values, g.a.col, g.a.row_ptr, g.x}, sh);
        auto tr = b.op(OpKind::SparseTranspose, {g.a.values, g.a.col, g.a.row_ptr}, sh);
        ValueId smp = b.op1(OpKind::SparseSample, {g.x, g.a.col, g.a.row_ptr}, sh);
        ValueId u = b.reduce(OpKind::ReduceSum, g.x, {1}, false), w = b.reduce(OpKind::ReduceSum, g.x, {0}, false);
        ValueId sd = b.op1(OpKind::SparseSddmm, {u, w, g.a.col, g.a.row_ptr}, sh);
        g.g.outputs = {sum, tr[0], tr[1], tr[2], smp, sd};
      }
      Tensor D = rlx_test::sine_tensor(dt, {37, 37}, 0.13, 0.2);
      auto o = rlx_test::run_cpu(g.g, {a.values, a.col_indices, a.row_ptr, D}, true);
      Tensor want_sum = D.clone();
      for (int64_t i = 0; i < 37 * 37; ++i) want_sum.set(i, D.get(i) + d.get(i));
      EXPECT_LT(rlx_test::max_rel_diff(o[0], want_sum), tol);
      Csr at = a.transpose();
      EXPECT_EQ(rlx_test::max_abs_diff(o[1], at.values), 0.0);
      EXPECT_EQ(rlx_test::max_abs_diff(o[2], at.col_indices), 0.0);
      EXPECT_EQ(rlx_test::max_abs_diff(o[3], at.row_ptr), 0.0);
      for (int64_t i = 0, p = 0; i < 37; ++i)
        for (; p < a.row_ptr.get_int(i + 1); ++p) {
          int64_t j = a.col_indices.get_int(p);
          EXPECT_EQ(o[4].get(p), D.get(i * 37 + j));
          double ui = 0, wj = 0;
          for (int64_t q = 0; q < 37; ++q) {
            ui += D.get(i * 37 + q);
            wj += D.get(q * 37 + j);
          }
          EXPECT_NEAR(o[5].get(p), ui * wj, tol * (1 + std::fabs(ui * wj)) * 10);
        }
    }
}

TEST(SparseOps, BadInputIsAnErrorNotACrash) {
  Csr a = poisson2d(4).to_csr(DType::f64, DType::i32);
  CsrGraph mv = csr_graph(a, DType::f64, Shape{Dim(16)});
  {
    Builder b(mv.g);
    mv.g.outputs = {sparse::matvec(b, mv.a, mv.x)};
  }
  CompiledModel m(mv.g, {});
  Tensor x = vec(DType::f64, 16, 0.5);
  Tensor bad_col = a.col_indices.clone();
  bad_col.set_int(7, 1000);
  EXPECT_THROW(m.run({a.values, bad_col, a.row_ptr, x}), Error);
  bad_col.set_int(7, -1);
  EXPECT_THROW(m.run({a.values, bad_col, a.row_ptr, x}), Error);
  Tensor bad_rp = a.row_ptr.clone();
  bad_rp.set_int(3, 1000);
  EXPECT_THROW(m.run({a.values, a.col_indices, bad_rp, x}), Error);
  // Wrong row_ptr length and mixed index dtypes fail the shape rule.
  Graph g;
  ValueId v = g.add_input("v", DType::f64, Shape{Dim(a.nnz())});
  ValueId ci = g.add_input("c", DType::i32, Shape{Dim(a.nnz())});
  ValueId rp = g.add_input("r", DType::i32, Shape{Dim(16)});
  ValueId rp64 = g.add_input("r64", DType::i64, Shape{Dim(17)});
  ValueId xx = g.add_input("x", DType::f64, Shape{Dim(16)});
  Builder b(g);
  EXPECT_THROW(sparse::matvec(b, {v, ci, rp, 16, 16}, xx), Error);
  EXPECT_THROW(sparse::matvec(b, {v, ci, rp64, 16, 16}, xx), Error);
  // Unsorted columns: transpose (whose gradient relies on sorted rows) refuses them.
  Tensor uns = a.col_indices.clone();
  std::swap(uns.data<int32_t>()[0], uns.data<int32_t>()[1]);
  Graph tg;
  ValueId tv = tg.add_input("v", DType::f64, Shape{Dim(a.nnz())});
  ValueId tc = tg.add_input("c", DType::i32, Shape{Dim(a.nnz())});
  ValueId tr = tg.add_input("r", DType::i32, Shape{Dim(17)});
  Builder tb(tg);
  auto t = tb.op(OpKind::SparseTranspose, {tv, tc, tr}, {{"shape", std::vector<int64_t>{16, 16}}});
  tg.outputs = {t[0], t[1], t[2]};
  EXPECT_THROW(rlx_test::run_cpu(tg, {a.values, uns, a.row_ptr}, true), Error);
}

// CG (plain, Jacobi, IC(0)), BiCGSTAB and every direct method against the dense LU solve.
TEST(SparseSolvers, IterativeAndDirectAgree) {
  Csr a = poisson2d(12).to_csr(DType::f64, DType::i32);
  const int64_t n = a.rows;
  Tensor rhs = vec(DType::f64, n, 0.37);
  std::vector<double> want(n);
  {
    std::vector<int64_t> rp(n + 1), ci(a.nnz());
    for (int64_t i = 0; i <= n; ++i) rp[i] = a.row_ptr.get_int(i);
    for (int64_t k = 0; k < a.nnz(); ++k) ci[k] = a.col_indices.get_int(k);
    ASSERT_EQ(sparse::direct_solve("dense", n, rp.data(), ci.data(), a.values.data<double>(), rhs.data<double>(), 1,
                                   want.data(), false),
              "");
  }
  auto check_x = [&](const Tensor& x, double tol, const std::string& what) {
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; ++i) {
      e = std::max(e, std::fabs(x.get(i) - want[i]));
      s = std::max(s, std::fabs(want[i]));
    }
    EXPECT_LT(e / s, tol) << what;
  };
  int64_t plain_iters = 0;
  for (std::string pc : {"none", "jacobi", "ic0"}) {
    CsrGraph g = csr_graph(a, DType::f64, Shape{Dim(n)});
    {
      Builder b(g.g);
      auto s = sparse::cg(b, g.a, g.x, 1e-12, 0, pc);
      g.g.outputs = {s.x, s.iterations, s.residual};
    }
    auto o = rlx_test::run_cpu(g.g, {a.values, a.col_indices, a.row_ptr, rhs}, true);
    check_x(o[0], 1e-10, "cg " + pc);
    EXPECT_LE(o[2].get(0), 1e-11) << pc;
    int64_t it = o[1].get_int(0);
    EXPECT_GT(it, 0);
    if (pc == "none") plain_iters = it;
    if (pc == "ic0") {
      EXPECT_LT(it, plain_iters) << "IC(0) should cut the iteration count";
    }
  }
  for (std::string pc : {"none", "jacobi"}) {
    CsrGraph g = csr_graph(a, DType::f64, Shape{Dim(n)});
    {
      Builder b(g.g);
      auto s = sparse::bicgstab(b, g.a, g.x, 1e-12, 0, pc);
      g.g.outputs = {s.x, s.iterations, s.residual};
    }
    auto o = rlx_test::run_cpu(g.g, {a.values, a.col_indices, a.row_ptr, rhs}, true);
    check_x(o[0], 1e-9, "bicgstab " + pc);
  }
  for (const std::string& m : sparse::direct_methods()) {
    CsrGraph g = csr_graph(a, DType::f64, Shape{Dim(n)});
    {
      Builder b(g.g);
      g.g.outputs = {sparse::solve(b, g.a, g.x, m)};
    }
    auto o = rlx_test::run_cpu(g.g, {a.values, a.col_indices, a.row_ptr, rhs}, true);
    check_x(o[0], 1e-12, "solve " + m);
  }
  const auto ms = sparse::direct_methods();
  RLX_REQUIRE(std::find(ms.begin(), ms.end(), "klu") != ms.end(), "SuiteSparse (libsuitesparse-dev)");
}

TEST(SparseSolvers, GeneralSystemAndF32) {
  Csr a = random_square(60, 0.08, 4.0, 11, false).to_csr(DType::f32, DType::i64);
  Tensor rhs = vec(DType::f32, 60, 0.21);
  CsrGraph g = csr_graph(a, DType::f32, Shape{Dim(60)});
  {
    Builder b(g.g);
    auto s = sparse::bicgstab(b, g.a, g.x, 1e-6, 0, "jacobi");
    g.g.outputs = {s.x, s.residual, sparse::solve(b, g.a, g.x, "dense")};
  }
  auto o = rlx_test::run_cpu(g.g, {a.values, a.col_indices, a.row_ptr, rhs}, true);
  EXPECT_LT(o[1].get(0), 1e-5);
  EXPECT_LT(rlx_test::max_rel_diff(o[0], o[2]), 1e-4);
}

// Non-SPD input to CG stops with the breakdown visible in the residual output; IC(0) on it and a
// singular direct solve are errors naming the cause.
TEST(SparseSolvers, FailuresAreReported) {
  Coo c = poisson2d(5);
  for (size_t k = 0; k < c.val.size(); ++k)
    if (c.row[k] == c.col[k] && c.row[k] % 3 == 0) c.val[k] = -4;  // indefinite
  Csr a = c.to_csr(DType::f64, DType::i32);
  Tensor rhs(DType::f64, {25});
  rhs.set(0, 1.0);  // e0ᵀ A e0 = -4: CG breaks down at its first step
  CsrGraph g = csr_graph(a, DType::f64, Shape{Dim(25)});
  {
    Builder b(g.g);
    auto s = sparse::cg(b, g.a, g.x, 1e-10, 50);
    g.g.outputs = {s.x, s.iterations, s.residual};
  }
  auto o = rlx_test::run_cpu(g.g, {a.values, a.col_indices, a.row_ptr, rhs}, true);
  EXPECT_GT(o[2].get(0), 1e-6);
  EXPECT_EQ(o[1].get_int(0), 0);

  CsrGraph h = csr_graph(a, DType::f64, Shape{Dim(25)});
  {
    Builder b(h.g);
    h.g.outputs = {sparse::cg(b, h.a, h.x, 1e-10, 0, "ic0").x};
  }
  try {
    rlx_test::run_cpu(h.g, {a.values, a.col_indices, a.row_ptr, rhs}, true);
    ADD_FAILURE() << "ic0 on an indefinite matrix should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ic0: non-positive pivot"), std::string::npos) << e.what();
  }
  Coo s;
  s.rows = s.cols = 3;
  s.add(0, 0, 1);
  s.add(1, 1, 1);
  s.add(2, 0, 1);  // row 2 duplicates row 0's pattern, column 2 is empty: singular
  Csr sa = s.to_csr(DType::f64, DType::i32);
  for (const std::string& m : sparse::direct_methods()) {
    CsrGraph d = csr_graph(sa, DType::f64, Shape{Dim(3)});
    {
      Builder b(d.g);
      d.g.outputs = {sparse::solve(b, d.a, d.x, m)};
    }
    EXPECT_THROW(rlx_test::run_cpu(d.g, {sa.values, sa.col_indices, sa.row_ptr, vec(DType::f64, 3, 1)}, true), Error)
        << m;
  }
}

// ---- gradients by central finite differences in f64 ----------------------------------------------

namespace {

std::vector<int64_t> dims_of(const Shape& s) {
  std::vector<int64_t> d;
  for (auto& x : s) d.push_back(x.v);
  return d;
}

// loss = sum(w * f(A, x)) for the graph built by `body`; checks d loss / d values and d loss / d x.
void check_grad(const Csr& a, int64_t xn, const std::function<ValueId(Builder&, const sparse::CsrValues&, ValueId)>& body,
                double tol, const std::string& what) {
  Graph f;
  ValueId v = f.add_input("values", DType::f64, Shape{Dim(a.nnz())});
  ValueId ci = f.add_input("col", a.index_dtype(), Shape{Dim(a.nnz())});
  ValueId rp = f.add_input("row_ptr", a.index_dtype(), Shape{Dim(a.rows + 1)});
  ValueId x = f.add_input("x", DType::f64, Shape{Dim(xn)});
  {
    Builder b(f);
    ValueId y = body(b, {v, ci, rp, a.rows, a.cols}, x);
    Tensor w = rlx_test::sine_tensor(DType::f64, dims_of(b.shape(y)), 0.9, 0.4);
    f.outputs = {b.reduce(OpKind::ReduceSum, b.mul(y, b.constant(w)), {0}, false)};
  }
  Graph gr = ad::grad(f, {0, 3});
  Tensor xv = vec(DType::f64, xn, 0.53);
  CompiledModel fm(f, {}), gm(gr, {});
  auto g = gm.run({a.values, a.col_indices, a.row_ptr, xv});
  auto loss = [&](const Tensor& vals, const Tensor& xx) { return fm.run({vals, a.col_indices, a.row_ptr, xx})[0].get(0); };
  const double h = 1e-6;
  for (int which = 0; which < 2; ++which) {
    const Tensor& base = which == 0 ? a.values : xv;
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < base.numel(); i += std::max<int64_t>(1, base.numel() / 40)) {
      Tensor p = base.clone(), m = base.clone();
      p.set(i, base.get(i) + h);
      m.set(i, base.get(i) - h);
      double fd = which == 0 ? (loss(p, xv) - loss(m, xv)) / (2 * h) : (loss(a.values, p) - loss(a.values, m)) / (2 * h);
      worst = std::max(worst, std::fabs(fd - g[which].get(i)));
      scale = std::max(scale, std::fabs(fd));
    }
    EXPECT_LT(worst / std::max(scale, 1e-12), tol) << what << (which == 0 ? ": d values" : ": d x");
  }
}
}  // namespace

TEST(SparseGrad, MatVecAndTransposeByFiniteDifferences) {
  Coo c = random_square(14, 0.3, 0.5, 5, false);
  c.cols = 14;
  Csr a = c.to_csr(DType::f64, DType::i32);
  check_grad(a, 14, [](Builder& b, const sparse::CsrValues& m, ValueId x) { return sparse::matvec(b, m, x); }, 1e-7,
             "matvec");
  check_grad(a, 14, [](Builder& b, const sparse::CsrValues& m, ValueId x) { return sparse::matvec(b, m, x, true); },
             1e-7, "matvec transposed");
  // The values of Aᵀ (a permutation) times x.
  check_grad(a, 14,
             [](Builder& b, const sparse::CsrValues& m, ValueId x) {
               auto t = b.op(OpKind::SparseTranspose, {m.values, m.col, m.row_ptr}, {{"shape", std::vector<int64_t>{m.rows, m.cols}}});
               return sparse::matvec(b, {t[0], t[1], t[2], m.cols, m.rows}, x);
             },
             1e-7, "transpose then matvec");
  // SpMM: x reshaped to [7, 2] (A here is 14 x 7).
  Coo r = random_square(14, 0.3, 0.5, 6, false);
  Coo rect;
  rect.rows = 14;
  rect.cols = 7;
  for (size_t k = 0; k < r.val.size(); ++k)
    if (r.col[k] < 7) rect.add(r.row[k], r.col[k], r.val[k]);
  Csr ar = rect.to_csr(DType::f64, DType::i64);
  check_grad(ar, 14,
             [](Builder& b, const sparse::CsrValues& m, ValueId x) {
               ValueId y = sparse::matmul(b, m, b.reshape(x, Shape{Dim(7), Dim(2)}));
               return b.reshape(y, Shape{Dim(28)});
             },
             1e-7, "matmul");
}

TEST(SparseGrad, SolvesByFiniteDifferences) {
  Csr spd = poisson2d(4).to_csr(DType::f64, DType::i32);
  check_grad(spd, 16, [](Builder& b, const sparse::CsrValues& m, ValueId x) { return sparse::cg(b, m, x, 1e-14).x; },
             1e-6, "cg");
  check_grad(spd, 16,
             [](Builder& b, const sparse::CsrValues& m, ValueId x) { return sparse::cg(b, m, x, 1e-14, 0, "ic0").x; },
             1e-6, "pcg ic0");
  Csr gen = random_square(12, 0.3, 3.0, 9, false).to_csr(DType::f64, DType::i32);
  for (const std::string& meth : sparse::direct_methods()) {
    if (meth == "cholmod") continue;  // symmetric only
    check_grad(gen, 12, [&](Builder& b, const sparse::CsrValues& m, ValueId x) { return sparse::solve(b, m, x, meth); },
               1e-7, "solve " + meth);
  }
  check_grad(gen, 12,
             [](Builder& b, const sparse::CsrValues& m, ValueId x) { return sparse::bicgstab(b, m, x, 1e-14).x; }, 1e-6,
             "bicgstab");
}
