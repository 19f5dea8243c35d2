// Window and ordering kernels: conv (direct, grouped, strided, dilated, padded) and reduce_window
// (pooling) as one thread per output element; sort and topk as one thread per input element that
// computes its stable rank in its line (O(len) compares each: no shared-memory sort network, but
// deterministic and exactly the reference's stable order, NaN greatest).
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

using O = OpKind;

namespace {

std::vector<int64_t> or_fill(std::vector<int64_t> v, size_t n, int64_t x) {
  if (v.empty()) v.assign(n, x);
  return v;
}

}  // namespace

std::string CLikeRenderer::k_window(const LirKernel& k, const std::vector<ValueType>& in,
                                    const std::vector<ValueType>& out, RenderedKernel& rk) const {
  Node n{k.op, {}, {}, k.attrs, ""};
  const DType t = in[0].dtype;
  const std::string T = ctype(t);
  const bool f = is_float(t);
  auto xd = dims_of(in[0]);
  auto xs = strides_of(xd);
  const size_t R = xd.size();
  std::ostringstream os;
  auto S = [](int64_t v) { return std::to_string(v); };

  if (k.op == O::Sort || k.op == O::TopK) {
    const bool topk = k.op == O::TopK;
    int64_t ax = norm_axis(attr_int(n, "axis"), static_cast<int64_t>(R), topk ? "topk" : "sort");
    bool desc = attr_int(n, topk ? "largest" : "descending") != 0;
    int64_t len = xd[static_cast<size_t>(ax)], inner = xs[static_cast<size_t>(ax)];
    int64_t kk = topk ? attr_int(n, "k") : len, N = numel(in[0].shape);
    rk.groups = std::max<int64_t>(1, ceil_div(N, rk.local));
    // a < b in the reference's order (floats: NaN greatest, NaNs equal among themselves)
    auto lt = [&](const std::string& a, const std::string& b) {
      if (!f) return "(" + a + " < " + b + ")";
      return "((isnan(" + a + ") || isnan(" + b + ")) ? (!isnan(" + a + ") && isnan(" + b + ")) : (" + a + " < " + b + "))";
    };
    std::string before = desc ? lt("x", "y") : lt("y", "x");  // y goes before x
    std::string eq = "(!" + lt("x", "y") + " && !" + lt("y", "x") + ")";
    os << "int gid = GID;\nif (gid >= " << N << ") return;\nint p = gid / " << inner << " % " << len << ";\nint base = gid - p * "
       << inner << ";\n" << T << " x = LD0(gid);\nint rank = 0;\nfor (int q = 0; q < " << len << "; ++q) {\n  " << T
       << " y = LD0(base + q * " << inner << ");\n  if (" << before << " || (q < p && " << eq << ")) rank++;\n}\n";
    // output line base: same outer/inner position, axis length kk
    os << "int outer = gid / " << len * inner << "; int in_ = gid % " << inner << ";\n";
    os << "if (rank < " << kk << ") { int dst = outer * " << kk * inner << " + rank * " << inner
       << " + in_; ST1(dst, x); ST2(dst, " << cast(ctype(out[1].dtype), "p") << "); }\n";
    return os.str();
  }

  auto od = dims_of(out[0]);
  int64_t N = numel(out[0].shape);
  rk.groups = std::max<int64_t>(1, ceil_div(N, rk.local));
  os << "int gid = GID;\nif (gid >= " << N << ") return;\n" << unravel("gid", od, "o");

  if (k.op == O::ReduceWindow) {
    const std::string& kind = attr_str(n, "kind");
    auto win = attr_ints(n, "window");
    auto st = or_fill(attr_ints(n, "strides"), R, 1);
    auto pads = or_fill(attr_ints(n, "pads"), 2 * R, 0);
    int64_t taps = 1;
    for (auto w : win) taps *= w;
    std::string init, comb;
    std::string nan = cast(T, "NAN_F");
    // integer identities of the storage dtype (an all-padding window gives the
    // dtype's min/max, as the reference); cuda computes i8/u8/i16 natively in int.
    auto ilim = [&](bool hi) -> std::string {
      switch (t) {
        case DType::i8: return hi ? "127" : "(-128)";
        case DType::u8: return hi ? "255" : "0";
        case DType::i16: return hi ? "32767" : "(-32768)";
        default: break;
      }
      if (T == "long") return hi ? "9223372036854775807L" : "(-9223372036854775807L-1L)";
      return hi ? "2147483647" : "(-2147483647-1)";
    };
    if (kind == "sum") init = lit(t, 0), comb = "acc + v";
    else if (kind == "max")
      init = f ? "(-" + cast(T, "INF_F") + ")" : ilim(false),
      comb = f ? "((isnan(acc) || isnan(v)) ? " + nan + " : max(acc, v))" : "max(acc, v)";
    else if (kind == "min")
      init = f ? cast(T, "INF_F") : ilim(true),
      comb = f ? "((isnan(acc) || isnan(v)) ? " + nan + " : min(acc, v))" : "min(acc, v)";
    else fail("[codegen] reduce_window kind '", kind, "'");
    if (!f) init = cast(T, init);
    os << T << " acc = " << init << ";\nfor (int w = 0; w < " << taps << "; ++w) {\n  " << unravel("w", win, "w");
    std::string idx = "0", inside = "true";
    for (size_t j = 0; j < R; ++j) {
      std::string q = "(o" + S(j) + " * " + S(st[j]) + " + w" + S(j) + " - " + S(pads[j]) + ")";
      os << "  int q" << j << " = " << q << ";\n";
      inside += " && q" + S(j) + " >= 0 && q" + S(j) + " < " + S(xd[j]);
      idx += " + q" + S(j) + " * " + S(xs[j]);
    }
    os << "  if (" << inside << ") { " << T << " v = LD0(" << idx << "); acc = " << comb << "; }\n}\nST1(gid, acc);\n";
    return os.str();
  }

  // conv: x [N, C, sp...], w [O, C/groups, k...], out [N, O, osp...]
  auto wd = dims_of(in[1]);
  const size_t sp = R - 2;
  auto st = or_fill(attr_ints(n, "strides"), sp, 1);
  auto dil = or_fill(attr_ints(n, "dilations"), sp, 1);
  auto pads = or_fill(attr_ints(n, "pads"), 2 * sp, 0);
  int64_t g = attr_int(n, "groups"), Cg = wd[1], Og = wd[0] / g;
  std::vector<int64_t> ksp(wd.begin() + 2, wd.end());
  int64_t nk = 1;
  for (auto x : ksp) nk *= x;
  std::string oi = std::to_string(in.size());
  os << "int grp = o1 / " << Og << ";\n" << T << " acc = " << lit(t, 0) << ";\nfor (int c = 0; c < " << Cg
     << "; ++c) {\n  for (int t = 0; t < " << nk << "; ++t) {\n    " << unravel("t", ksp, "kq");
  std::string xi = "(o0 * " + S(xd[1]) + " + grp * " + S(Cg) + " + c) * " + S(xs[1]), inside = "true";
  for (size_t s = 0; s < sp; ++s) {
    os << "    int q" << s << " = o" << s + 2 << " * " << st[s] << " + kq" << s << " * " << dil[s] << " - " << pads[s]
       << ";\n";
    inside += " && q" + S(s) + " >= 0 && q" + S(s) + " < " + S(xd[s + 2]);
    xi += " + q" + S(s) + " * " + S(xs[s + 2]);
  }
  os << "    if (" << inside << ") acc = acc + LD0(" << xi << ") * LD1((o1 * " << Cg << " + c) * " << nk << " + t);\n  }\n}\n";
  if (in.size() > 2) os << "acc = acc + LD2(o1);\n";
  os << "ST" << oi << "(gid, acc);\n";
  return os.str();
}

}  // namespace rlx::codegen
