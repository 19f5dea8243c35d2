// Reductions: reduce_{sum,max,min,prod} as one workgroup per output with a shared-memory tree;
// argmax/argmin, cumsum and scatter_add as one thread per output row/element (deterministic: no
// float atomics, so every run sums in the same order).
#include <set>
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

using O = OpKind;

namespace {
constexpr int kTree = 64;
}

std::string CLikeRenderer::k_reduce(const LirKernel& k, const std::vector<ValueType>& in,
                                    const std::vector<ValueType>& out, RenderedKernel& rk, std::string& shared) const {
  Node n{k.op, {}, {}, k.attrs, ""};
  DType t = in[0].dtype;
  const std::string T = ctype(t);
  const bool f = is_float(t);
  auto d = dims_of(in[0]);
  auto st = strides_of(d);
  const int64_t R = static_cast<int64_t>(d.size());
  std::ostringstream os;
  auto idx_of = [&](const std::vector<std::string>& c) {
    std::string s = "0";
    for (size_t j = 0; j < c.size(); ++j) s += " + (" + c[j] + ") * " + std::to_string(st[j]);
    return s;
  };

  if (k.op == O::ScatterAdd) {
    int64_t ax = norm_axis(attr_int(n, "axis"), R, "scatter_add");
    int64_t N = numel(out[0].shape), ni = numel(in[1].shape);
    rk.groups = ceil_div(N, rk.local);
    os << "int gid = GID;\nif (gid >= " << N << ") return;\n" << unravel("gid", d, "o");
    // updates: [outer..., ni, inner...] in x's layout with the axis replaced by the flat index list
    std::vector<int64_t> ud = d;
    ud[static_cast<size_t>(ax)] = ni;
    auto us = strides_of(ud);
    std::string ui = "0";
    for (int64_t j = 0; j < R; ++j) ui += " + " + (j == ax ? std::string("j") : "o" + std::to_string(j)) + " * " + std::to_string(us[static_cast<size_t>(j)]);
    os << T << " acc = LD0(gid);\nfor (int j = 0; j < " << ni << "; ++j) {\n  int p = " << cast("int", "LD1(j)")
       << ";\n  if (p < 0) p += " << d[static_cast<size_t>(ax)] << ";\n  if (p == o" << ax << ") acc = acc + LD2(" << ui
       << ");\n}\nST3(gid, acc);\n";
    return os.str();
  }
  if (k.op == O::ArgMax || k.op == O::ArgMin || k.op == O::Cumsum) {
    int64_t ax = norm_axis(attr_int(n, "axis"), R, op_name(k.op).data());
    std::vector<int64_t> kept;
    for (int64_t j = 0; j < R; ++j)
      if (j != ax) kept.push_back(d[static_cast<size_t>(j)]);
    int64_t rows = 1;
    for (auto x : kept) rows *= x;
    rk.groups = std::max<int64_t>(1, ceil_div(rows, rk.local));
    os << "int gid = GID;\nif (gid >= " << rows << ") return;\n" << unravel("gid", kept, "k");
    std::vector<std::string> c;
    for (int64_t j = 0, q = 0; j < R; ++j) c.push_back(j == ax ? "s" : "k" + std::to_string(q++));
    int64_t len = d[static_cast<size_t>(ax)];
    if (k.op == O::Cumsum) {
      bool rev = attr_int(n, "reverse") != 0, excl = attr_int(n, "exclusive") != 0;
      os << T << " acc = " << lit(t, 0) << ";\nfor (int q = 0; q < " << len << "; ++q) {\n  int s = "
         << (rev ? std::to_string(len - 1) + " - q" : "q") << ";\n  int f = " << idx_of(c) << ";\n  " << T
         << " x = LD0(f);\n"
         << (excl ? "  ST1(f, acc);\n  acc = acc + x;\n" : "  acc = acc + x;\n  ST1(f, acc);\n") << "}\n";
      return os.str();
    }
    const char* better = k.op == O::ArgMax ? ">" : "<";
    os << "int s = 0;\n" << T << " best = LD0(" << idx_of(c) << ");\nint bi = 0;\nfor (s = 1; s < " << len << "; ++s) {\n  "
       << T << " x = LD0(" << idx_of(c) << ");\n";
    if (f) os << "  if (!isnan(best) && (isnan(x) || x " << better << " best)) { best = x; bi = s; }\n";
    else os << "  if (x " << better << " best) { best = x; bi = s; }\n";
    os << "}\nST1(gid, " << cast(ctype(out[0].dtype), "bi") << ");\n";
    return os.str();
  }

  // reduce_{sum,max,min,prod}: one workgroup per output element, threads stride the reduced set.
  std::set<int64_t> axes;
  for (auto a : attr_ints(n, "axes")) axes.insert(norm_axis(a, R, op_name(k.op).data()));
  std::vector<int64_t> kept, red;
  for (int64_t j = 0; j < R; ++j) (axes.count(j) ? red : kept).push_back(d[static_cast<size_t>(j)]);
  int64_t M = numel(out[0].shape), K = 1;
  for (auto x : red) K *= x;
  rk.local = kTree;
  rk.groups = std::max<int64_t>(1, M);
  shared = shared_decl(T, "red", kTree);
  std::string init, comb;
  std::string nan = cast(T, "NAN_F");
  switch (k.op) {
    case O::ReduceSum: init = lit(t, 0), comb = "(@1 + @2)"; break;
    case O::ReduceProd: init = lit(t, 1), comb = "(@1 * @2)"; break;
    case O::ReduceMax:
      init = f ? "(-" + cast(T, "INF_F") + ")" : (t == DType::i64 ? "(-9223372036854775807L-1L)" : "(-2147483647-1)");
      comb = f ? "((isnan(@1) || isnan(@2)) ? " + nan + " : max(@1, @2))" : "max(@1, @2)";
      break;
    case O::ReduceMin:
      init = f ? cast(T, "INF_F") : (t == DType::i64 ? "9223372036854775807L" : "2147483647");
      comb = f ? "((isnan(@1) || isnan(@2)) ? " + nan + " : min(@1, @2))" : "min(@1, @2)";
      break;
    default: fail("[codegen] no reduction kernel for ", op_name(k.op));
  }
  if (t != DType::i32 && !f) init = cast(T, init);
  auto combine = [&](const std::string& a, const std::string& b) {
    std::string s = comb;
    for (size_t p; (p = s.find("@1")) != std::string::npos;) s.replace(p, 2, a);
    for (size_t p; (p = s.find("@2")) != std::string::npos;) s.replace(p, 2, b);
    return s;
  };
  std::vector<std::string> c;
  for (int64_t j = 0, kq = 0, rq = 0; j < R; ++j)
    c.push_back(axes.count(j) ? "q" + std::to_string(rq++) : "k" + std::to_string(kq++));
  os << "int lid = LID;\n" << unravel("GRP", kept, "k") << T << " acc = " << init << ";\nfor (int r = lid; r < " << K
     << "; r += " << kTree << ") {\n  " << unravel("r", red, "q") << "  " << T << " x = LD0(" << idx_of(c) << ");\n  acc = "
     << combine("acc", "x") << ";\n}\nred[lid] = acc;\nBARRIER;\n";
  for (int s = kTree / 2; s >= 1; s /= 2)
    os << "if (lid < " << s << ") { red[lid] = " << combine("red[lid]", "red[lid + " + std::to_string(s) + "]")
       << "; }\nBARRIER;\n";
  os << "if (lid == 0) { ST1(GRP, red[0]); }\n";
  return os.str();
}

}  // namespace rlx::codegen
