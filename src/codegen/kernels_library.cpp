// Library-kernel equivalents: dot_general as a shared-memory tiled batched GEMM; softmax,
// layer_norm and attention as one workgroup per row with shared-memory tree reductions.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

using O = OpKind;

namespace {

constexpr int kTile = 16, kRow = 64;

// "(flat / stride % dim)" terms of `var` over `dims`, scaled by the source strides `src`.
std::string offset_terms(const std::string& var, const std::vector<int64_t>& dims, const std::vector<int64_t>& src) {
  std::string s;
  int64_t stride = 1;
  for (int64_t j = static_cast<int64_t>(dims.size()) - 1; j >= 0; --j) {
    s += " + ((" + var + ") / " + std::to_string(stride) + " % " + std::to_string(dims[static_cast<size_t>(j)]) + ") * " +
         std::to_string(src[static_cast<size_t>(j)]);
    stride *= dims[static_cast<size_t>(j)];
  }
  return s;
}

// Emits "red[lid] = X; BARRIER; tree ...;" leaving the combined value in red[0].
std::string tree(const std::string& op) {
  std::ostringstream os;
  os << "BARRIER;\n";
  for (int s = kRow / 2; s >= 1; s /= 2) {
    std::string a = "red[lid]", b = "red[lid + " + std::to_string(s) + "]";
    os << "if (lid < " << s << ") { red[lid] = " << (op == "max" ? "max(" + a + ", " + b + ")" : a + " + " + b)
       << "; }\nBARRIER;\n";
  }
  return os.str();
}

}  // namespace

std::string CLikeRenderer::k_dot(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                                 RenderedKernel& rk, std::string& shared) const {
  Node n{k.op, {}, {}, k.attrs, ""};
  auto ld = dims_of(in[0]), rd = dims_of(in[1]);
  auto ls = strides_of(ld), rs = strides_of(rd);
  auto lb = attr_ints(n, "lhs_batch"), rb = attr_ints(n, "rhs_batch"), lc = attr_ints(n, "lhs_contract"),
       rc = attr_ints(n, "rhs_contract");
  auto pick = [](const std::vector<int64_t>& d, const std::vector<int64_t>& s, const std::vector<int64_t>& which,
                 std::vector<int64_t>& dd, std::vector<int64_t>& ss) {
    for (auto a : which) dd.push_back(d[static_cast<size_t>(a)]), ss.push_back(s[static_cast<size_t>(a)]);
  };
  auto free_of = [](size_t rank, const std::vector<int64_t>& b, const std::vector<int64_t>& c) {
    std::vector<int64_t> f;
    for (size_t i = 0; i < rank; ++i)
      if (std::find(b.begin(), b.end(), int64_t(i)) == b.end() && std::find(c.begin(), c.end(), int64_t(i)) == c.end())
        f.push_back(static_cast<int64_t>(i));
    return f;
  };
  std::vector<int64_t> bd, lbs, rbs, kd, lks, rks, md, lms, nd, rns, tmp;
  pick(ld, ls, lb, bd, lbs);
  pick(rd, rs, rb, tmp, rbs);
  pick(ld, ls, lc, kd, lks);
  tmp.clear();
  pick(rd, rs, rc, tmp, rks);
  pick(ld, ls, free_of(ld.size(), lb, lc), md, lms);
  tmp.clear();
  pick(rd, rs, free_of(rd.size(), rb, rc), nd, rns);
  int64_t B = 1, M = 1, N = 1, K = 1;
  for (auto x : bd) B *= x;
  for (auto x : md) M *= x;
  for (auto x : nd) N *= x;
  for (auto x : kd) K *= x;
  const std::string T = ctype(in[0].dtype), z = lit(in[0].dtype, 0);
  std::ostringstream os;
  os << "#define A_OFF(b, m, q) (0" << offset_terms("b", bd, lbs) << offset_terms("m", md, lms)
     << offset_terms("q", kd, lks) << ")\n";
  os << "#define B_OFF(b, q, n) (0" << offset_terms("b", bd, rbs) << offset_terms("q", kd, rks)
     << offset_terms("n", nd, rns) << ")\n";
  if (!tiled_gemm_) {  // one thread per output element, no shared memory and no barriers
    int64_t total = B * M * N;
    rk.groups = std::max<int64_t>(1, ceil_div(total, rk.local));
    os << "int gid = GID;\nif (gid >= " << total << ") return;\nint n = gid % " << N << "; int m = gid / " << N << " % " << M
       << "; int b = gid / " << M * N << ";\n" << T << " acc = " << z << ";\nfor (int q = 0; q < " << K
       << "; ++q) acc = acc + LD0(A_OFF(b, m, q)) * LD1(B_OFF(b, q, n));\nST2(gid, acc);\n";
    return os.str();
  }
  int64_t tm = ceil_div(M, kTile), tn = ceil_div(N, kTile);
  rk.local = kTile * kTile;
  rk.groups = std::max<int64_t>(1, B * tm * tn);
  shared = shared_decl(T, "As", kTile * kTile) + shared_decl(T, "Bs", kTile * kTile);
  os << "int lid = LID; int tr = lid / " << kTile << "; int tc = lid % " << kTile << ";\nint g = GRP; int nt = g % " << tn
     << "; g = g / " << tn << "; int mt = g % " << tm << "; int b = g / " << tm << ";\nint m = mt * " << kTile
     << " + tr; int n = nt * " << kTile << " + tc;\n" << T << " acc = " << z << ";\nfor (int k0 = 0; k0 < " << K
     << "; k0 += " << kTile << ") {\n  int ka = k0 + tc; int kb = k0 + tr;\n  As[lid] = (m < " << M << " && ka < " << K
     << ") ? LD0(A_OFF(b, m, ka)) : " << z << ";\n  Bs[lid] = (kb < " << K << " && n < " << N
     << ") ? LD1(B_OFF(b, kb, n)) : " << z << ";\n  BARRIER;\n  for (int q = 0; q < " << kTile
     << "; ++q) acc = acc + As[tr * " << kTile << " + q] * Bs[q * " << kTile << " + tc];\n  BARRIER;\n}\nif (m < " << M
     << " && n < " << N << ") { ST2((b * " << M << " + m) * " << N << " + n, acc); }\n";
  return os.str();
}

std::string CLikeRenderer::k_nn(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                                RenderedKernel& rk, std::string& shared) const {
  Node n{k.op, {}, {}, k.attrs, ""};
  const DType t = in[0].dtype;
  const std::string T = ctype(t), z = lit(t, 0);
  auto d = dims_of(in[0]);
  const int64_t R = static_cast<int64_t>(d.size());
  rk.local = kRow;
  shared = shared_decl(T, "red", kRow);
  std::ostringstream os;
  os << "int lid = LID;\nint row = GRP;\n";
  if (k.op == O::Softmax) {
    int64_t ax = norm_axis(attr_int(n, "axis"), R, "softmax");
    int64_t len = d[static_cast<size_t>(ax)], inner = strides_of(d)[static_cast<size_t>(ax)];
    rk.groups = std::max<int64_t>(1, numel(in[0].shape) / std::max<int64_t>(len, 1));
    std::string at = "(row / " + std::to_string(inner) + " * " + std::to_string(len * inner) + " + row % " +
                     std::to_string(inner) + " + j * " + std::to_string(inner) + ")";
    os << T << " m = -" << cast(T, "INF_F") << ";\nfor (int j = lid; j < " << len << "; j += " << kRow
       << ") m = max(m, LD0" << at << ");\nred[lid] = m;\n" << tree("max") << "m = red[0];\nBARRIER;\n" << T << " s = " << z
       << ";\nfor (int j = lid; j < " << len << "; j += " << kRow << ") s = s + exp(LD0" << at << " - m);\nred[lid] = s;\n"
       << tree("sum") << "s = red[0];\nfor (int j = lid; j < " << len << "; j += " << kRow << ") { ST1(" << at
       << ", exp(LD0" << at << " - m) / s); }\n";
    return os.str();
  }
  if (k.op == O::LayerNorm) {
    int64_t ax = norm_axis(attr_int(n, "axis"), R, "layer_norm"), inner = 1;
    for (int64_t i = ax; i < R; ++i) inner *= d[static_cast<size_t>(i)];
    rk.groups = std::max<int64_t>(1, numel(in[0].shape) / std::max<int64_t>(inner, 1));
    bool beta = in.size() == 3;
    std::string oi = std::to_string(in.size()), base = "row * " + std::to_string(inner);
    os << T << " s = " << z << ";\nfor (int j = lid; j < " << inner << "; j += " << kRow << ") s = s + LD0(" << base
       << " + j);\nred[lid] = s;\n" << tree("sum") << T << " mean = red[0] / " << lit(t, static_cast<double>(inner))
       << ";\nBARRIER;\ns = " << z << ";\nfor (int j = lid; j < " << inner << "; j += " << kRow << ") { " << T
       << " c = LD0(" << base << " + j) - mean; s = s + c * c; }\nred[lid] = s;\n" << tree("sum") << T
       << " inv = " << lit(t, 1) << " / sqrt(red[0] / " << lit(t, static_cast<double>(inner)) << " + "
       << lit(t, attr_float(n, "eps")) << ");\nfor (int j = lid; j < " << inner << "; j += " << kRow << ") { ST" << oi
       << "(" << base << " + j, (LD0(" << base << " + j) - mean) * inv * LD1(j)" << (beta ? " + LD2(j)" : "") << "); }\n";
    return os.str();
  }
  // attention: one workgroup per (b, h, s) query row; scores live in shared memory.
  auto kd = dims_of(in[1]), vd = dims_of(in[2]);
  int64_t B = d[0], Hq = d[1], S = d[2], D = d[3], Hkv = kd[1], Tn = kd[2], Dv = vd[3];
  const std::string& kind = attr_str(n, "mask");
  double scale = attr_float(n, "scale");
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  RLX_CHECK(Tn <= 8192, "[codegen] attention: ", Tn, " keys exceed the shared-memory score row");
  rk.groups = std::max<int64_t>(1, B * Hq * S);
  shared += shared_decl(T, "sc", static_cast<int>(std::max<int64_t>(Tn, 1)));
  std::string oi = std::to_string(in.size());
  os << "int s = row % " << S << "; int h = row / " << S << " % " << Hq << "; int b = row / " << S * Hq << ";\nint hk = h / "
     << Hq / Hkv << ";\nfor (int t = lid; t < " << Tn << "; t += " << kRow << ") {\n  " << T << " a = " << z
     << ";\n  for (int e = 0; e < " << D << "; ++e) a = a + LD0(row * " << D << " + e) * LD1(((b * " << Hkv
     << " + hk) * " << Tn << " + t) * " << D << " + e);\n  a = a * " << lit(t, scale) << ";\n  bool keep = true;\n";
  if (kind == "causal" || kind == "causal_padding") os << "  keep = t <= s + " << Tn - S << ";\n";
  if (kind == "padding" || kind == "causal_padding") os << "  keep = keep && LD3(b * " << Tn << " + t) != " << lit(in[3].dtype, 0) << ";\n";
  if (kind == "bias") {
    auto bdims = dims_of(in[3]);
    std::vector<int64_t> full = {B, Hq, S, Tn};
    auto bs = strides_of(bdims);
    std::string bi = "0";
    std::string coord[4] = {"b", "h", "s", "t"};
    size_t off = 4 - bdims.size();
    for (size_t j = 0; j < bdims.size(); ++j)
      if (bdims[j] != 1) bi += " + " + coord[off + j] + " * " + std::to_string(bs[j]);
    os << "  a = a + LD3(" << bi << ");\n";
  }
  os << "  sc[t] = (keep && a != -" << cast(T, "INF_F") << ") ? a : -" << cast(T, "INF_F") << ";\n}\nBARRIER;\n" << T
     << " m = -" << cast(T, "INF_F") << ";\nfor (int t = lid; t < " << Tn << "; t += " << kRow
     << ") m = max(m, sc[t]);\nred[lid] = m;\n" << tree("max") << "m = red[0];\nBARRIER;\n" << T << " l = " << z
     << ";\nfor (int t = lid; t < " << Tn << "; t += " << kRow << ") l = l + (sc[t] == -" << cast(T, "INF_F") << " ? " << z
     << " : exp(sc[t] - m));\nred[lid] = l;\n" << tree("sum") << "l = red[0];\nfor (int e = lid; e < " << Dv << "; e += "
     << kRow << ") {\n  " << T << " acc = " << z << ";\n  for (int t = 0; t < " << Tn << "; ++t)\n    if (sc[t] != -"
     << cast(T, "INF_F") << ") acc = acc + exp(sc[t] - m) / l * LD2(((b * " << Hkv << " + hk) * " << Tn << " + t) * "
     << Dv << " + e);\n  ST" << oi << "(row * " << Dv << " + e, acc);\n}\n";
  return os.str();
}

}  // namespace rlx::codegen
