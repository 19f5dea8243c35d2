// Contractions: dot_general, matmul (numpy), linear (+activation), conv / convolution.
#include <cmath>

#include "runtime/reference/common.h"

namespace rlx::ref {

namespace {

// One accumulator per domain; dot products sum in double / complex<double> / wrapping int64.
struct Acc {
  Dom d;
  double f = 0;
  cplx c = 0;
  int64_t i = 0;
  void fma(const Tensor& a, int64_t ia, const Tensor& b, int64_t ib) {
    if (d == Dom::F) f += ld(a, ia) * ld(b, ib);
    else if (d == Dom::C) c += ldc(a, ia) * ldc(b, ib);
    else i = wadd(i, wmul(ldi(a, ia), ldi(b, ib)));
  }
  void store(Tensor& t, int64_t o) const {
    if (d == Dom::F) st(t, o, f);
    else if (d == Dom::C) stc(t, o, c);
    else sti(t, o, i);
  }
};

Dom numeric_dom(const Node& n, DType t) {
  Dom d = dom_of(t);
  RLX_CHECK(d != Dom::B, "[reference] ", op_name(n.op), ": dtype bool not supported");
  return d;
}

double activate(const std::string& act, double x) {
  if (act == "none") return x;
  if (act == "relu") return std::isnan(x) ? x : (x > 0 ? x : 0.0);
  if (act == "gelu") return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (act == "gelu_tanh")
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  if (act == "silu") return x / (1.0 + std::exp(-x));
  fail("[reference] linear: unknown activation '", act, "'");
}

}  // namespace

Outs eval_dot_general(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &a = in[0], &b = in[1];
  RLX_CHECK(a.dtype() == b.dtype(), "[reference] dot_general: operand dtypes differ");
  Dom d = numeric_dom(n, a.dtype());
  Tensor out = alloc(ot[0]);
  Dims ad = a.shape(), bd = b.shape(), as = strides_of(ad), bs = strides_of(bd);
  auto norm = [](std::vector<int64_t> v, int64_t r) {
    for (auto& x : v) x = axis_of(x, r, "dot_general");
    return v;
  };
  Dims lb = norm(attr_ints(n, "lhs_batch"), a.rank()), rb = norm(attr_ints(n, "rhs_batch"), b.rank());
  Dims lc = norm(attr_ints(n, "lhs_contract"), a.rank()), rc = norm(attr_ints(n, "rhs_contract"), b.rank());
  RLX_CHECK(lb.size() == rb.size() && lc.size() == rc.size(), "[reference] dot_general: dim lists differ in length");
  auto free_dims = [](const Dims& batch, const Dims& con, int64_t r) {
    Dims f;
    for (int64_t i = 0; i < r; ++i) {
      bool used = false;
      for (auto x : batch) used |= x == i;
      for (auto x : con) used |= x == i;
      if (!used) f.push_back(i);
    }
    return f;
  };
  Dims lf = free_dims(lb, lc, a.rank()), rf = free_dims(rb, rc, b.rank());
  // Output dim j maps to a stride in a and in b: batch dims (lhs_batch order), lhs free, rhs free.
  Dims oa, ob;
  for (size_t i = 0; i < lb.size(); ++i) oa.push_back(as[lb[i]]), ob.push_back(bs[rb[i]]);
  for (auto f : lf) oa.push_back(as[f]), ob.push_back(0);
  for (auto f : rf) oa.push_back(0), ob.push_back(bs[f]);
  Dims cd, ca, cb;  // contraction extents and strides
  for (size_t i = 0; i < lc.size(); ++i) {
    RLX_CHECK(ad[lc[i]] == bd[rc[i]], "[reference] dot_general: contracted dims differ");
    cd.push_back(ad[lc[i]]), ca.push_back(as[lc[i]]), cb.push_back(bs[rc[i]]);
  }
  Dims od = out.shape(), oidx, cidx;
  RLX_CHECK(od.size() == oa.size(), "[reference] dot_general: output rank mismatch");
  int64_t nc = count(cd);
  for (int64_t o = 0; o < out.numel(); ++o) {
    unravel(o, od, oidx);
    int64_t pa = 0, pb = 0;
    for (size_t j = 0; j < od.size(); ++j) pa += oidx[j] * oa[j], pb += oidx[j] * ob[j];
    Acc acc{d};
    for (int64_t c = 0; c < nc; ++c) {
      unravel(c, cd, cidx);
      int64_t qa = pa, qb = pb;
      for (size_t j = 0; j < cd.size(); ++j) qa += cidx[j] * ca[j], qb += cidx[j] * cb[j];
      acc.fma(a, qa, b, qb);
    }
    acc.store(out, o);
  }
  return {out};
}

Outs eval_matmul(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &a = in[0], &b = in[1];
  RLX_CHECK(a.dtype() == b.dtype(), "[reference] matmul: operand dtypes differ");
  RLX_CHECK(a.rank() >= 1 && b.rank() >= 1, "[reference] matmul: operands must have rank >= 1");
  Dom d = numeric_dom(n, a.dtype());
  Tensor out = alloc(ot[0]);
  // Promote 1-D operands: [K] x ... as [1,K]; ... x [K] as [K,1].
  Dims ad = a.shape(), bd = b.shape();
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  RLX_CHECK(bd[bd.size() - 2] == K, "[reference] matmul: inner dims differ");
  Dims ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  Dims batch(std::max(ab.size(), bb.size()));
  for (size_t i = 0; i < batch.size(); ++i) {
    int64_t x = i + ab.size() >= batch.size() ? ab[i + ab.size() - batch.size()] : 1;
    int64_t y = i + bb.size() >= batch.size() ? bb[i + bb.size() - batch.size()] : 1;
    RLX_CHECK(x == y || x == 1 || y == 1, "[reference] matmul: batch dims do not broadcast");
    batch[i] = x == 1 ? y : x;
  }
  auto ma = broadcast_map(ab, batch), mb = broadcast_map(bb, batch);
  RLX_CHECK(out.numel() == count(batch) * M * N, "[reference] matmul: output size mismatch");
  for (int64_t bi = 0; bi < count(batch); ++bi) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        Acc acc{d};
        for (int64_t k = 0; k < K; ++k) acc.fma(a, (ma[bi] * M + i) * K + k, b, (mb[bi] * K + k) * N + j);
        acc.store(out, (bi * M + i) * N + j);
      }
    }
  }
  return {out};
}

Outs eval_linear(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &x = in[0], &w = in[1];
  const Tensor* bias = in.size() > 2 ? &in[2] : nullptr;
  RLX_CHECK(dom_of(x.dtype()) == Dom::F, "[reference] linear needs a float dtype");
  RLX_CHECK(w.rank() == 2 && x.rank() >= 1 && x.shape().back() == w.shape()[1], "[reference] linear: shapes differ");
  const std::string& act = attr_str(n, "activation");
  Tensor out = alloc(ot[0]);
  int64_t O = w.shape()[0], I = w.shape()[1], rows = 1;
  for (int64_t i = 0; i + 1 < x.rank(); ++i) rows *= x.shape()[i];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < O; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < I; ++k) acc += ld(x, r * I + k) * ld(w, o * I + k);
      if (bias) acc += ld(*bias, o);
      st(out, r * O + o, activate(act, acc));
    }
  }
  return {out};
}

Outs eval_conv(const Node& n, const Ins& in, const Types& ot) {
  const Tensor &x = in[0], &w = in[1];
  const Tensor* bias = in.size() > 2 ? &in[2] : nullptr;
  RLX_CHECK(dom_of(x.dtype()) == Dom::F && w.dtype() == x.dtype(), "[reference] ", op_name(n.op),
            " needs float operands of one dtype");
  RLX_CHECK(x.rank() >= 3 && w.rank() == x.rank(), "[reference] ", op_name(n.op), ": bad ranks");
  int64_t sp = x.rank() - 2;
  Dims st_ = attr_ints(n, "strides"), pads = attr_ints(n, "pads"), dil = attr_ints(n, "dilations");
  if (st_.empty()) st_.assign(sp, 1);
  if (dil.empty()) dil.assign(sp, 1);
  if (pads.empty()) pads.assign(2 * sp, 0);
  int64_t g = attr_int(n, "groups");
  Dims xd = x.shape(), wd = w.shape();
  int64_t N = xd[0], C = xd[1], O = wd[0], Cg = wd[1];
  RLX_CHECK(g >= 1 && C == Cg * g && O % g == 0, "[reference] ", op_name(n.op), ": channels do not match groups");
  int64_t Og = O / g;
  Tensor out = alloc(ot[0]);
  Dims od = out.shape();
  Dims osp(od.begin() + 2, od.end()), xsp(xd.begin() + 2, xd.end()), ksp(wd.begin() + 2, wd.end());
  int64_t nout = count(osp), nk = count(ksp), nx = count(xsp);
  Dims xss = strides_of(xsp), pidx, kidx;
  for (int64_t b = 0; b < N; ++b) {
    for (int64_t o = 0; o < O; ++o) {
      int64_t grp = o / Og;
      for (int64_t p = 0; p < nout; ++p) {
        unravel(p, osp, pidx);
        double acc = 0;
        for (int64_t c = 0; c < Cg; ++c) {
          for (int64_t t = 0; t < nk; ++t) {
            unravel(t, ksp, kidx);
            int64_t xo = 0;
            bool inside = true;
            for (int64_t s = 0; s < sp; ++s) {
              int64_t q = pidx[s] * st_[s] + kidx[s] * dil[s] - pads[s];
              if (q < 0 || q >= xsp[s]) inside = false;
              xo += q * xss[s];
            }
            if (!inside) continue;
            acc += ld(x, (b * C + grp * Cg + c) * nx + xo) * ld(w, (o * Cg + c) * nk + t);
          }
        }
        if (bias) acc += ld(*bias, o);
        st(out, (b * O + o) * nout + p, acc);
      }
    }
  }
  return {out};
}

}  // namespace rlx::ref
