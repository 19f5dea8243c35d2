// ONNX ops composed at import: Acos/Asin/Atan, Einsum, SwiGLU, RotaryEmbedding,
// LinearAttention, CausalConvWithState, AffineGrid, TensorScatter, ReverseSequence, Det, TfIdfVectorizer.
// Each becomes existing HIR/MIR ops; recurrences are unrolled over their static length.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "formats/onnx/importer.h"
#include "formats/onnx/ops_util.h"

namespace rlx::onnx {

Tensor as_dtype(const Tensor& t, DType dt) {
  if (t.dtype() == dt) return t;
  Tensor o(dt, t.shape());
  bool ints = !is_float(dt) && !is_complex(dt) && !is_float(t.dtype()) && !is_complex(t.dtype());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (ints) o.set_int(i, t.get_int(i));
    else o.set(i, t.get(i));
  }
  return o;
}

EinsumSpec parse_einsum(const std::string& eq0, const std::vector<int64_t>& ranks) {
  std::string eq;
  for (char ch : eq0)
    if (ch != ' ') eq += ch;
  std::string lhs = eq, rhs;
  bool explicit_out = false;
  auto arrow = eq.find("->");
  if (arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    explicit_out = true;
  }
  std::vector<std::string> terms;
  size_t s = 0;
  while (true) {
    auto k = lhs.find(',', s);
    terms.push_back(lhs.substr(s, k == std::string::npos ? std::string::npos : k - s));
    if (k == std::string::npos) break;
    s = k + 1;
  }
  RLX_CHECK(terms.size() == ranks.size(), "[einsum] equation '", eq0, "' has ", terms.size(), " operands, got ",
            ranks.size());
  int64_t ell = -1;  // labels the ellipsis stands for
  auto expand = [&](const std::string& t, int64_t rank, bool is_out) {
    std::string o;
    auto e = t.find("...");
    std::string rest = t;
    if (e != std::string::npos) rest = t.substr(0, e) + t.substr(e + 3);
    for (char ch : rest)
      RLX_CHECK(std::isalpha(static_cast<unsigned char>(ch)), "[einsum] bad label '", std::string(1, ch), "' in '", eq0, "'");
    if (e == std::string::npos) {
      RLX_CHECK(is_out || static_cast<int64_t>(rest.size()) == rank, "[einsum] operand '", t, "' has ",
                rest.size(), " labels for rank ", rank);
      return rest;
    }
    int64_t n = is_out ? std::max<int64_t>(ell, 0) : rank - static_cast<int64_t>(rest.size());
    RLX_CHECK(n >= 0, "[einsum] operand '", t, "' has more labels than its rank ", rank);
    if (!is_out) ell = std::max(ell, n);
    std::string el;
    for (int64_t i = 0; i < n; ++i) el += static_cast<char>('0' + i);
    return t.substr(0, e) + el + t.substr(e + 3);
  };
  EinsumSpec sp;
  // First pass sizes the ellipsis; the second names its labels right-aligned to the widest.
  for (size_t i = 0; i < terms.size(); ++i) expand(terms[i], ranks[i], false);
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string t = expand(terms[i], ranks[i], false);
    auto e = terms[i].find("...");
    if (e != std::string::npos) {
      int64_t n = ranks[i] - static_cast<int64_t>(terms[i].size() - 3);
      std::string el;
      for (int64_t k = ell - n; k < ell; ++k) el += static_cast<char>('0' + k);
      t = terms[i].substr(0, e) + el + terms[i].substr(e + 3);
    }
    sp.inputs.push_back(t);
  }
  if (explicit_out) {
    sp.output = expand(rhs, 0, true);
    std::set<char> seen;
    for (char ch : sp.output) {
      RLX_CHECK(!seen.count(ch), "[einsum] output label '", std::string(1, ch), "' repeats");
      seen.insert(ch);
      bool found = false;
      for (auto& t : sp.inputs) found = found || t.find(ch) != std::string::npos;
      RLX_CHECK(found, "[einsum] output label '", std::string(1, ch), "' is not in any operand");
    }
  } else {
    std::map<char, int> cnt;
    for (auto& t : sp.inputs)
      for (char ch : t) cnt[ch]++;
    for (int64_t k = 0; k < std::max<int64_t>(ell, 0); ++k) sp.output += static_cast<char>('0' + k);
    for (auto& [ch, n] : cnt)
      if (n == 1 && std::isalpha(static_cast<unsigned char>(ch))) sp.output += ch;
  }
  return sp;
}

V compose_atan(Ctx& c, V x0) {
  DType dt = c.dtype(x0);
  V x = c.convert(x0, DType::f64);
  auto k = [&](double v) { return c.scalar(v, DType::f64); };
  // atan(x) = 2 atan(x / (1 + sqrt(1 + x²))); three times leaves |t| < tan(π/16) ≈ 0.2.
  V t = x;
  for (int i = 0; i < 3; ++i)
    t = c.bin(OpKind::Div, t, c.bin(OpKind::Add, k(1), c.unary(OpKind::Sqrt, c.bin(OpKind::Add, k(1), c.bin(OpKind::Mul, t, t)))));
  V t2 = c.bin(OpKind::Mul, t, t);
  // Series t Σ (-1)^j t^{2j}/(2j+1), j < 9: the first omitted term is below 0.2^19/19 ≈ 3e-15.
  V p = k(1.0 / 17.0);
  for (int j = 7; j >= 0; --j) p = c.bin(OpKind::Add, c.bin(OpKind::Mul, p, t2), k((j % 2 ? -1.0 : 1.0) / (2 * j + 1)));
  V y = c.bin(OpKind::Mul, c.bin(OpKind::Mul, t, p), k(8));
  // ±inf: the reduction gives inf/inf; atan(±inf) = ±π/2.
  V big = c.bin(OpKind::Gt, c.unary(OpKind::Abs, x), k(1e300));
  y = c.select(big, c.bin(OpKind::Mul, c.unary(OpKind::Sign, x), k(1.57079632679489661923)), y);
  return c.convert(y, dt);
}

namespace {

int64_t norm_axis(Ctx& c, int64_t a, int64_t r) {
  if (a < -r || a >= r) c.error("axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
  return a < 0 ? a + r : a;
}

// out[i] = x[i with coordinate `axis` replaced by idx[i]] (GatherElements; idx has x's rank, i64).
V gather_elements(Ctx& c, V x, V idx, int64_t axis) {
  auto xd = c.static_shape(x, "data");
  auto id = c.static_shape(idx, "indices");
  int64_t r = static_cast<int64_t>(xd.size());
  std::vector<int64_t> stride(static_cast<size_t>(r), 1);
  for (int64_t d = r - 2; d >= 0; --d) stride[d] = stride[d + 1] * xd[d + 1];
  V lin = c.bin(OpKind::Mul, idx, c.scalar(static_cast<double>(stride[axis]), DType::i64));
  for (int64_t d = 0; d < r; ++d) {
    if (d == axis) continue;
    V co = c.op1(OpKind::Iota, {}, {{"shape", to_shape(id)}, {"dim", d}, {"dtype", DType::i64}});
    lin = c.bin(OpKind::Add, lin, c.bin(OpKind::Mul, co, c.scalar(static_cast<double>(stride[d]), DType::i64)));
  }
  int64_t n = 1;
  for (auto v : xd) n *= v;
  return c.op1(OpKind::Gather, {c.reshape(x, {n}), lin}, {{"axis", int64_t{0}}});
}

V iota(Ctx& c, const std::vector<int64_t>& shape, int64_t dim) {
  return c.op1(OpKind::Iota, {}, {{"shape", to_shape(shape)}, {"dim", dim}, {"dtype", DType::i64}});
}

// Einsum: diagonals and lone labels first, then pairwise dot_generals, then a final transpose.
void einsum(Ctx& c) {
  std::vector<V> ops;
  std::vector<int64_t> ranks;
  for (int i = 0; i < c.num_inputs(); ++i) {
    ops.push_back(c.in(i));
    ranks.push_back(c.rank(ops.back()));
  }
  EinsumSpec sp;
  try {
    sp = parse_einsum(c.attr_s("equation", ""), ranks);
  } catch (const Error& e) {
    c.error(e.what());
  }
  std::vector<std::string> labs = sp.inputs;
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ops.size(); ++i) {
    auto d = c.static_shape(ops[i], "operand");
    for (size_t k = 0; k < d.size(); ++k) {
      char ch = labs[i][k];
      if (!size.count(ch) || size[ch] == 1) size[ch] = d[k];
      else if (d[k] != 1 && d[k] != size[ch]) c.error("einsum label '" + std::string(1, ch) + "' has sizes " +
                                                      std::to_string(size[ch]) + " and " + std::to_string(d[k]));
    }
  }
  // Diagonals: a label repeated within one operand keeps x where the coordinates agree.
  for (size_t i = 0; i < ops.size(); ++i) {
    while (true) {
      std::string& L = labs[i];
      int64_t a = -1, b = -1;
      for (size_t p = 0; p < L.size() && a < 0; ++p)
        for (size_t q = p + 1; q < L.size(); ++q)
          if (L[p] == L[q]) {
            a = static_cast<int64_t>(p);
            b = static_cast<int64_t>(q);
            break;
          }
      if (a < 0) break;
      auto d = c.static_shape(ops[i], "operand");
      V eq = c.bin(OpKind::Eq, iota(c, d, a), iota(c, d, b));
      V z = c.broadcast_to(c.scalar(0, c.dtype(ops[i])), to_shape(d));
      ops[i] = c.reduce(OpKind::ReduceSum, c.select(eq, ops[i], z), {b}, false);
      L.erase(static_cast<size_t>(b), 1);
    }
  }
  auto needed_later = [&](char ch, size_t from) {
    if (sp.output.find(ch) != std::string::npos) return true;
    for (size_t j = from; j < ops.size(); ++j)
      if (labs[j].find(ch) != std::string::npos) return true;
    return false;
  };
  // Sum out labels that only this operand has.
  auto sum_lone = [&](V& v, std::string& L, size_t self, size_t from, const std::string& other) {
    std::vector<int64_t> ax;
    std::string keep;
    for (size_t p = 0; p < L.size(); ++p) {
      char ch = L[p];
      bool elsewhere = other.find(ch) != std::string::npos || needed_later(ch, from);
      for (size_t j = 0; j < ops.size() && !elsewhere; ++j)
        if (j != self && j >= from && labs[j].find(ch) != std::string::npos) elsewhere = true;
      if (!elsewhere) ax.push_back(static_cast<int64_t>(p));
      else keep += ch;
    }
    if (!ax.empty()) v = c.reduce(OpKind::ReduceSum, v, ax, false);
    L = keep;
  };
  V acc = ops[0];
  std::string al = labs[0];
  sum_lone(acc, al, 0, 1, "");
  for (size_t i = 1; i < ops.size(); ++i) {
    V rhs = ops[i];
    std::string rl = labs[i];
    sum_lone(rhs, rl, i, i + 1, al);
    // Broadcast size-1 dims of shared labels.
    auto fix = [&](V& v, const std::string& L) {
      auto d = c.static_shape(v, "operand");
      std::vector<int64_t> want = d;
      for (size_t p = 0; p < L.size(); ++p) want[p] = size[L[p]];
      if (want != d) v = c.broadcast_to(v, to_shape(want));
    };
    fix(acc, al);
    fix(rhs, rl);
    std::vector<int64_t> lb, rb, lc, rc;
    std::string out;
    for (size_t p = 0; p < al.size(); ++p) {
      auto q = rl.find(al[p]);
      if (q == std::string::npos) continue;
      if (needed_later(al[p], i + 1)) {
        lb.push_back(static_cast<int64_t>(p));
        rb.push_back(static_cast<int64_t>(q));
        out += al[p];
      } else {
        lc.push_back(static_cast<int64_t>(p));
        rc.push_back(static_cast<int64_t>(q));
      }
    }
    for (char ch : al)
      if (rl.find(ch) == std::string::npos) out += ch;
    for (char ch : rl)
      if (al.find(ch) == std::string::npos) out += ch;
    acc = c.op1(OpKind::DotGeneral, {acc, rhs}, {{"lhs_batch", lb}, {"rhs_batch", rb}, {"lhs_contract", lc}, {"rhs_contract", rc}});
    al = out;
  }
  std::vector<int64_t> ax;
  std::string keep;
  for (size_t p = 0; p < al.size(); ++p) {
    if (sp.output.find(al[p]) == std::string::npos) ax.push_back(static_cast<int64_t>(p));
    else keep += al[p];
  }
  if (!ax.empty()) acc = c.reduce(OpKind::ReduceSum, acc, ax, false);
  std::vector<int64_t> perm;
  for (char ch : sp.output) {
    auto p = keep.find(ch);
    if (p == std::string::npos) c.error("einsum output label missing");
    perm.push_back(static_cast<int64_t>(p));
  }
  c.set_output(0, c.transpose(acc, perm));
}

void rotary(Ctx& c) {
  V x = c.in(0), cs = c.in(1), sn = c.in(2);
  auto d = c.static_shape(x, "input");
  bool r4 = d.size() == 4;
  int64_t heads = c.attr_i("num_heads", 0);
  std::vector<int64_t> bshd;  // [B, S, H, D]
  if (r4) {
    x = c.transpose(x, {0, 2, 1, 3});
    bshd = {d[0], d[2], d[1], d[3]};
  } else {
    if (d.size() != 3 || heads <= 0 || d[2] % heads) c.error("rank-3 input needs num_heads dividing the hidden size");
    bshd = {d[0], d[1], heads, d[2] / heads};
    x = c.reshape(x, bshd);
  }
  int64_t D = bshd[3], rd = c.attr_i("rotary_embedding_dim", 0);
  if (rd == 0) rd = D;
  if (rd > D || rd % 2) c.error("bad rotary_embedding_dim");
  int64_t half = rd / 2;
  if (c.has_input(3)) {
    V pos = c.convert(c.in(3), DType::i64);
    cs = c.op1(OpKind::Gather, {cs, pos}, {{"axis", int64_t{0}}});
    sn = c.op1(OpKind::Gather, {sn, pos}, {{"axis", int64_t{0}}});
  }
  cs = c.reshape(cs, {bshd[0], bshd[1], 1, half});
  sn = c.reshape(sn, {bshd[0], bshd[1], 1, half});
  bool inter = c.attr_i("interleaved", 0) != 0;
  V x1 = inter ? c.slice_axis(x, 3, 0, rd, 2) : c.slice_axis(x, 3, 0, half);
  V x2 = inter ? c.slice_axis(x, 3, 1, rd, 2) : c.slice_axis(x, 3, half, rd);
  V re = c.bin(OpKind::Sub, c.bin(OpKind::Mul, cs, x1), c.bin(OpKind::Mul, sn, x2));
  V im = c.bin(OpKind::Add, c.bin(OpKind::Mul, sn, x1), c.bin(OpKind::Mul, cs, x2));
  V rot;
  if (inter) {
    std::vector<int64_t> s5 = {bshd[0], bshd[1], bshd[2], half, 1};
    rot = c.op1(OpKind::Concatenate, {c.reshape(re, s5), c.reshape(im, s5)}, {{"axis", int64_t{4}}});
    rot = c.reshape(rot, {bshd[0], bshd[1], bshd[2], rd});
  } else {
    rot = c.op1(OpKind::Concatenate, {re, im}, {{"axis", int64_t{3}}});
  }
  if (rd < D) rot = c.op1(OpKind::Concatenate, {rot, c.slice_axis(x, 3, rd, D)}, {{"axis", int64_t{3}}});
  c.set_output(0, r4 ? c.transpose(rot, {0, 2, 1, 3}) : c.reshape(rot, d));
}

void linear_attention(Ctx& c) {
  std::string rule = c.attr_s("update_rule", "gated_delta");
  bool gating = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  if (!gating && !delta && rule != "linear") c.error("unsupported update_rule '" + rule + "'");
  int64_t hq = c.attr_i("q_num_heads", 0), hk = c.attr_i("kv_num_heads", 0);
  if (hq <= 0 || hk <= 0 || hq % hk) c.error("q_num_heads must be a positive multiple of kv_num_heads");
  if (gating != c.has_input(4)) c.error("decay input must be given exactly for gated update rules");
  if (delta != c.has_input(5)) c.error("beta input must be given exactly for delta update rules");
  V q = c.in(0), k = c.in(1), v = c.in(2);
  DType odt = c.dtype(q);
  auto qd = c.static_shape(q, "query"), vd = c.static_shape(v, "value");
  if (qd.size() != 3 || vd.size() != 3 || c.rank(k) != 3) c.error("query/key/value must be rank 3");
  int64_t B = qd[0], T = qd[1], dk = qd[2] / hq, dv = vd[2] / hk, grp = hq / hk;
  auto f32 = [&](V a) { return c.convert(a, DType::f32); };
  auto heads4 = [&](V a, int64_t h, int64_t dd) { return c.transpose(c.reshape(f32(a), {B, T, h, dd}), {0, 2, 1, 3}); };
  V q4 = heads4(q, hq, dk), k4 = heads4(k, hk, dk), v4 = heads4(v, hk, dv);
  std::optional<V> g4, b4;
  if (gating) {
    int64_t last = c.static_shape(c.in(4), "decay").at(2);
    if (last == hk) g4 = heads4(c.in(4), hk, 1);
    else if (last == hk * dk) g4 = heads4(c.in(4), hk, dk);
    else c.error("decay's last dim must be kv_num_heads or kv_num_heads*d_k");
  }
  if (delta) {
    int64_t last = c.static_shape(c.in(5), "beta").at(2);
    if (last != hk && last != 1) c.error("beta's last dim must be kv_num_heads or 1");
    b4 = heads4(c.in(5), last, 1);
  }
  DType sdt = odt;
  V S;
  if (c.has_input(3)) {
    sdt = c.dtype(c.in(3));
    S = f32(c.in(3));
  } else {
    S = c.broadcast_to(c.scalar(0, DType::f32), to_shape({B, hk, dk, dv}));
  }
  double scale = c.attr_f("scale", 0);
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<int64_t> rep(static_cast<size_t>(hq));
  for (int64_t h = 0; h < hq; ++h) rep[h] = h / grp;
  V rep_idx = c.ints_const(rep);
  auto step = [&](V a, int64_t t, int64_t h, int64_t dd) { return c.reshape(c.slice_axis(a, 2, t, t + 1), {B, h, dd}); };
  std::vector<V> outs;
  for (int64_t t = 0; t < T; ++t) {
    V qt = step(q4, t, hq, dk), kt = step(k4, t, hk, dk), vt = step(v4, t, hk, dv);
    if (g4) {
      int64_t gl = c.static_shape(*g4, "decay").at(3);
      V gt = c.reshape(c.slice_axis(*g4, 2, t, t + 1), {B, hk, gl, 1});
      S = c.bin(OpKind::Mul, S, c.unary(OpKind::Exp, gt));
    }
    if (b4) {
      V got = c.op1(OpKind::DotGeneral, {S, kt}, {{"lhs_batch", std::vector<int64_t>{0, 1}}, {"rhs_batch", std::vector<int64_t>{0, 1}},
                                                 {"lhs_contract", std::vector<int64_t>{2}}, {"rhs_contract", std::vector<int64_t>{2}}});
      int64_t bl = c.static_shape(*b4, "beta").at(1);
      V bt = c.reshape(c.slice_axis(*b4, 2, t, t + 1), {B, bl, 1});
      vt = c.bin(OpKind::Mul, bt, c.bin(OpKind::Sub, vt, got));
    }
    S = c.bin(OpKind::Add, S, c.bin(OpKind::Mul, c.reshape(kt, {B, hk, dk, 1}), c.reshape(vt, {B, hk, 1, dv})));
    V Sr = grp == 1 ? S : c.op1(OpKind::Gather, {S, rep_idx}, {{"axis", int64_t{1}}});
    V o = c.op1(OpKind::DotGeneral, {qt, Sr}, {{"lhs_batch", std::vector<int64_t>{0, 1}}, {"rhs_batch", std::vector<int64_t>{0, 1}},
                                              {"lhs_contract", std::vector<int64_t>{2}}, {"rhs_contract", std::vector<int64_t>{2}}});
    o = c.bin(OpKind::Mul, o, c.scalar(scale, DType::f32));
    outs.push_back(c.reshape(o, {B, 1, hq * dv}));
  }
  V y = outs.size() == 1 ? outs[0] : c.op1(OpKind::Concatenate, outs, {{"axis", int64_t{1}}});
  c.set_output(0, c.convert(y, odt));
  c.set_output(1, c.convert(S, sdt));
}

void causal_conv(Ctx& c) {
  V x = c.in(0), w = c.in(1);
  std::string act = c.attr_s("activation", "none");
  if (act != "none" && act != "silu" && act != "swish") c.error("unsupported activation '" + act + "'");
  auto xd = c.static_shape(x, "input"), wd = c.static_shape(w, "weight");
  if (xd.size() != 3 || wd.size() != 3 || wd[1] != 1 || wd[0] != xd[1]) c.error("expects input [B,C,L] and weight [C,1,k]");
  DType dt = c.dtype(x);
  int64_t B = xd[0], C = xd[1], K = wd[2];
  V pad = c.has_input(3) ? c.in(3) : c.broadcast_to(c.scalar(0, dt), to_shape({B, C, K - 1}));
  V padded = K == 1 && !c.has_input(3) ? x : c.op1(OpKind::Concatenate, {pad, x}, {{"axis", int64_t{2}}});
  std::vector<V> ins{c.convert(padded, DType::f32), c.convert(w, DType::f32)};
  if (c.has_input(2)) ins.push_back(c.convert(c.in(2), DType::f32));
  V y = c.convert(c.op1(OpKind::Convolution, ins, {{"strides", std::vector<int64_t>{1}}, {"pads", std::vector<int64_t>{0, 0}},
                                                   {"dilations", std::vector<int64_t>{1}}, {"groups", C}}), dt);
  if (act != "none") y = c.convert(c.unary(OpKind::Silu, c.convert(y, DType::f32)), dt);
  c.set_output(0, y);
  int64_t P = c.static_shape(padded, "padded").at(2);
  c.set_output(1, c.slice_axis(padded, 2, P - (K - 1), P));
}

void affine_grid(Ctx& c) {
  V th = c.in(0);
  auto sz = c.ints_in(1, "size");
  bool ac = c.attr_i("align_corners", 0) != 0;
  if (sz.size() != 4 && sz.size() != 5) c.error("size must have 4 or 5 entries");
  std::vector<int64_t> sp(sz.begin() + 2, sz.end());
  auto coord = [&](int64_t i, int64_t n) {
    if (ac) return n == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
    return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n);
  };
  int64_t npts = 1;
  for (auto v : sp) npts *= v;
  int64_t nd = static_cast<int64_t>(sp.size());
  Tensor base(DType::f64, {npts, nd + 1});
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  for (int64_t p = 0; p < npts; ++p) {
    int64_t rem = p;
    for (int64_t a = nd - 1; a >= 0; --a) {
      idx[a] = rem % sp[a];
      rem /= sp[a];
    }
    // Columns: x (last spatial dim), y, [z], 1.
    for (int64_t a = 0; a < nd; ++a) base.set(p * (nd + 1) + a, coord(idx[nd - 1 - a], sp[nd - 1 - a]));
    base.set(p * (nd + 1) + nd, 1.0);
  }
  V g = c.op1(OpKind::DotGeneral, {th, c.constant(as_dtype(base, c.dtype(th)))},
              {{"lhs_contract", std::vector<int64_t>{2}}, {"rhs_contract", std::vector<int64_t>{1}}});  // [N, nd, npts]
  g = c.transpose(g, {0, 2, 1});
  std::vector<int64_t> os{sz[0]};
  os.insert(os.end(), sp.begin(), sp.end());
  os.push_back(nd);
  c.set_output(0, c.reshape(g, os));
}

void tensor_scatter(Ctx& c) {
  V cache = c.in(0), upd = c.in(1);
  auto cd = c.static_shape(cache, "past_cache"), ud = c.static_shape(upd, "update");
  int64_t r = static_cast<int64_t>(cd.size());
  int64_t ax = norm_axis(c, c.attr_i("axis", -2), r);
  if (ax == 0) c.error("axis must not be the batch axis");
  std::string mode = c.attr_s("mode", "linear");
  if (mode != "linear" && mode != "circular") c.error("unsupported mode '" + mode + "'");
  int64_t M = cd[ax], S = ud[ax];
  V w = c.has_input(2) ? c.convert(c.in(2), DType::i64) : c.broadcast_to(c.scalar(0, DType::i64), to_shape({cd[0]}));
  V wb = c.op1(OpKind::Gather, {w, iota(c, cd, 0)}, {{"axis", int64_t{0}}});  // cache-shaped write start
  V s = c.bin(OpKind::Sub, iota(c, cd, ax), wb);
  if (mode == "circular") {
    V m = c.scalar(static_cast<double>(M), DType::i64);
    s = c.op1(OpKind::Rem, {c.bin(OpKind::Add, c.op1(OpKind::Rem, {s, m}), m), m});
  }
  V valid = c.bin(OpKind::And, c.bin(OpKind::Ge, s, c.scalar(0, DType::i64)), c.bin(OpKind::Lt, s, c.scalar(static_cast<double>(S), DType::i64)));
  V sc = c.bin(OpKind::Min, c.bin(OpKind::Max, s, c.scalar(0, DType::i64)), c.scalar(static_cast<double>(S - 1), DType::i64));
  V g = gather_elements(c, upd, sc, ax);  // reads the update at (…, sc, …) for every cache slot
  c.set_output(0, c.select(valid, g, cache));
}

void reverse_sequence(Ctx& c) {
  V x = c.in(0);
  auto d = c.static_shape(x, "input");
  int64_t r = static_cast<int64_t>(d.size());
  int64_t ta = norm_axis(c, c.attr_i("time_axis", 0), r), ba = norm_axis(c, c.attr_i("batch_axis", 1), r);
  V lens = c.convert(c.in(1), DType::i64);
  V lb = c.op1(OpKind::Gather, {lens, iota(c, d, ba)}, {{"axis", int64_t{0}}});
  V t = iota(c, d, ta);
  V inside = c.bin(OpKind::Lt, t, lb);
  V src = c.select(inside, c.bin(OpKind::Sub, c.bin(OpKind::Sub, lb, c.scalar(1, DType::i64)), t), t);
  c.set_output(0, gather_elements(c, x, src, ta));
}

// Det of [..., n, n] by the Leibniz sum over permutations (n <= 5 so the sum stays small).
void det(Ctx& c) {
  V x = c.in(0);
  auto d = c.static_shape(x, "input");
  int64_t r = static_cast<int64_t>(d.size());
  if (r < 2 || d[r - 1] != d[r - 2]) c.error("input must be [..., n, n]");
  int64_t n = d[r - 1];
  if (n > 5) c.error("Det is composed by the Leibniz formula; n = " + std::to_string(n) + " > 5 is unsupported");
  std::vector<int64_t> bd(d.begin(), d.end() - 2);
  if (n == 0) return c.set_output(0, c.broadcast_to(c.scalar(1, c.dtype(x)), to_shape(bd)));
  std::vector<std::vector<V>> e(static_cast<size_t>(n), std::vector<V>(static_cast<size_t>(n)));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      e[i][j] = c.reshape(c.slice_axis(c.slice_axis(x, r - 2, i, i + 1), r - 1, j, j + 1), bd);
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::optional<V> acc;
  do {
    int64_t inv = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) inv += p[i] > p[j];
    V term = e[0][p[0]];
    for (int64_t i = 1; i < n; ++i) term = c.bin(OpKind::Mul, term, e[i][p[i]]);
    if (!acc) acc = inv % 2 ? c.unary(OpKind::Neg, term) : term;
    else acc = c.bin(inv % 2 ? OpKind::Sub : OpKind::Add, *acc, term);
  } while (std::next_permutation(p.begin(), p.end()));
  c.set_output(0, *acc);
}

// TfIdfVectorizer over integer tokens: each pooled n-gram is counted by comparing shifted slices of
// X with its tokens, for every skip distance (unigrams once), then weighted per mode.
void tfidf(Ctx& c) {
  V x = c.in(0);
  auto d = c.static_shape(x, "X");
  if (d.size() > 2 || !is_int(c.dtype(x))) c.error("X must be an integer [C] or [B, C] tensor (string pools are unsupported)");
  if (c.has_attr("pool_strings")) c.error("pool_strings are unsupported (string tensors)");
  int64_t B = d.size() == 2 ? d[0] : 1, L = d.empty() ? 1 : d.back();
  V X = c.reshape(c.convert(x, DType::i64), {B, L});
  int64_t mn = c.attr_i("min_gram_length", 1), mx = c.attr_i("max_gram_length", 1), skip = c.attr_i("max_skip_count", 0);
  std::string mode = c.attr_s("mode", "TF");
  auto counts = c.attr_ints("ngram_counts"), idx = c.attr_ints("ngram_indexes"), pool = c.attr_ints("pool_int64s");
  auto w = c.attr_floats("weights");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") c.error("unsupported mode '" + mode + "'");
  int64_t out_n = 0;
  for (auto v : idx) out_n = std::max(out_n, v + 1);
  if (out_n == 0) c.error("ngram_indexes is empty");
  std::vector<std::optional<V>> col(static_cast<size_t>(out_n));
  int64_t gi = 0;  // running n-gram number (index into ngram_indexes)
  for (size_t level = 0; level < counts.size(); ++level) {
    int64_t n = static_cast<int64_t>(level) + 1;
    int64_t begin = counts[level], end = level + 1 < counts.size() ? counts[level + 1] : static_cast<int64_t>(pool.size());
    if (begin > end || end > static_cast<int64_t>(pool.size()) || (end - begin) % n) c.error("ngram_counts do not fit pool_int64s");
    for (int64_t p = begin; p < end; p += n, ++gi) {
      if (n < mn || n > mx) continue;
      if (gi >= static_cast<int64_t>(idx.size())) c.error("fewer ngram_indexes than n-grams in the pool");
      std::optional<V> cnt;
      for (int64_t dist = 1; dist <= (n == 1 ? 1 : skip + 1); ++dist) {
        int64_t starts = L - (n - 1) * dist;
        if (starts <= 0) break;
        std::optional<V> m;
        for (int64_t k = 0; k < n; ++k) {
          V e = c.bin(OpKind::Eq, c.slice_axis(X, 1, k * dist, k * dist + starts), c.scalar(static_cast<double>(pool[p + k]), DType::i64));
          m = m ? c.bin(OpKind::And, *m, e) : e;
        }
        V s = c.reduce(OpKind::ReduceSum, c.convert(*m, DType::f32), {1}, false);
        cnt = cnt ? c.bin(OpKind::Add, *cnt, s) : s;
      }
      if (!cnt) continue;
      int64_t o = idx[gi];
      col[o] = col[o] ? c.bin(OpKind::Add, *col[o], *cnt) : *cnt;
    }
  }
  std::vector<V> cols;
  for (int64_t o = 0; o < out_n; ++o) {
    V v = col[o] ? *col[o] : c.broadcast_to(c.scalar(0, DType::f32), to_shape({B}));
    double wt = o < static_cast<int64_t>(w.size()) ? w[o] : 1.0;
    if (mode == "IDF") v = c.bin(OpKind::Mul, c.bin(OpKind::Min, v, c.scalar(1, DType::f32)), c.scalar(wt, DType::f32));
    else if (mode == "TFIDF") v = c.bin(OpKind::Mul, v, c.scalar(wt, DType::f32));
    cols.push_back(c.reshape(v, {B, 1}));
  }
  V y = cols.size() == 1 ? cols[0] : c.op1(OpKind::Concatenate, cols, {{"axis", int64_t{1}}});
  c.set_output(0, d.size() == 2 ? y : c.reshape(y, {out_n}));
}

}  // namespace

void register_extra_ops(std::map<std::string, Converter>& r) {
  r["Atan"] = [](Ctx& c) { c.set_output(0, compose_atan(c, c.in(0))); };
  r["Asin"] = [](Ctx& c) {
    V x = c.in(0);
    DType dt = c.dtype(x);
    V xf = c.convert(x, DType::f64);
    auto k = [&](double v) { return c.scalar(v, DType::f64); };
    // asin x = 2 atan(x / (1 + sqrt(1 - x²)))
    V den = c.bin(OpKind::Add, k(1), c.unary(OpKind::Sqrt, c.bin(OpKind::Sub, k(1), c.bin(OpKind::Mul, xf, xf))));
    V y = c.bin(OpKind::Mul, k(2), compose_atan(c, c.bin(OpKind::Div, xf, den)));
    c.set_output(0, c.convert(y, dt));
  };
  r["Acos"] = [](Ctx& c) {
    V x = c.in(0);
    DType dt = c.dtype(x);
    V xf = c.convert(x, DType::f64);
    auto k = [&](double v) { return c.scalar(v, DType::f64); };
    // acos x = 2 atan(sqrt((1 - x) / (1 + x))); x = -1 gives atan(inf) = π/2.
    V q = c.unary(OpKind::Sqrt, c.bin(OpKind::Div, c.bin(OpKind::Sub, k(1), xf), c.bin(OpKind::Add, k(1), xf)));
    c.set_output(0, c.convert(c.bin(OpKind::Mul, k(2), compose_atan(c, q)), dt));
  };
  r["Einsum"] = einsum;
  r["SwiGLU"] = [](Ctx& c) {
    V a = c.in(0), b = c.in(1);
    double alpha = c.attr_f("alpha", 1.0);
    V sa = alpha == 1.0 ? a : c.bin(OpKind::Mul, a, c.scalar(alpha, c.dtype(a)));
    c.set_output(0, c.bin(OpKind::Mul, c.bin(OpKind::Mul, a, c.unary(OpKind::Logistic, sa)), b));
  };
  r["RotaryEmbedding"] = rotary;
  r["LinearAttention"] = linear_attention;
  r["CausalConvWithState"] = causal_conv;
  r["AffineGrid"] = affine_grid;
  r["TensorScatter"] = tensor_scatter;
  r["ReverseSequence"] = reverse_sequence;
  r["Det"] = det;
  r["TfIdfVectorizer"] = tfidf;
}

}  // namespace rlx::onnx
