// Data-movement kernels: one thread per output element computes where its value comes from.
// Values move through the compute type, which round-trips every storage dtype exactly.
#include <sstream>

#include "codegen/renderer.h"

namespace rlx::codegen {

using O = OpKind;

std::string CLikeRenderer::k_movement(const LirKernel& k, const std::vector<ValueType>& in,
                                      const std::vector<ValueType>& out, RenderedKernel& rk) const {
  auto od = dims_of(out[0]);
  int64_t N = numel(out[0].shape);
  rk.groups = std::max<int64_t>(1, ceil_div(N, rk.local));
  const size_t R = od.size();
  const std::string oi = std::to_string(in.size());  // output arg index
  const std::string T = ctype(out[0].dtype);
  std::ostringstream os;
  os << "int gid = GID;\nif (gid >= " << N << ") return;\n" << unravel("gid", od, "o");
  Node n{k.op, {}, {}, k.attrs, ""};
  auto ints = [&](const char* a) { return attr_ints(n, a); };
  auto src_index = [&](const std::vector<int64_t>& d, const std::vector<std::string>& c) {
    auto st = strides_of(d);
    std::string s = "0";
    for (size_t j = 0; j < d.size(); ++j) s += " + (" + c[j] + ") * " + std::to_string(st[j]);
    return s;
  };
  auto o = [](size_t j) { return "o" + std::to_string(j); };
  switch (k.op) {
    case O::Reshape: os << "ST" << oi << "(gid, LD0(gid));\n"; break;
    case O::Iota: {
      int64_t dim = attr_int(n, "dim");
      os << "ST0(gid, " << cast(T, o(static_cast<size_t>(dim))) << ");\n";
      break;
    }
    case O::BroadcastInDim: {
      auto d = dims_of(in[0]);
      auto bd = ints("dims");
      std::vector<std::string> c;
      for (size_t j = 0; j < d.size(); ++j) c.push_back(d[j] == 1 ? "0" : o(static_cast<size_t>(bd[j])));
      os << "ST1(gid, LD0(" << src_index(d, c) << "));\n";
      break;
    }
    case O::Transpose: {
      auto d = dims_of(in[0]);
      auto perm = ints("perm");
      std::vector<std::string> c(d.size());
      for (size_t j = 0; j < R; ++j) c[static_cast<size_t>(perm[j])] = o(j);
      os << "ST1(gid, LD0(" << src_index(d, c) << "));\n";
      break;
    }
    case O::Slice: {
      auto d = dims_of(in[0]);
      auto start = ints("start");
      auto stride = ints("stride");
      std::vector<std::string> c;
      for (size_t j = 0; j < R; ++j)
        c.push_back(std::to_string(start[j]) + " + " + o(j) + " * " + std::to_string(stride.empty() ? 1 : stride[j]));
      os << "ST1(gid, LD0(" << src_index(d, c) << "));\n";
      break;
    }
    case O::Pad: {
      auto d = dims_of(in[0]);
      auto low = ints("low");
      std::vector<std::string> c;
      std::string inside = "true";
      for (size_t j = 0; j < R; ++j) {
        std::string cj = "(" + o(j) + " - " + std::to_string(low[j]) + ")";
        c.push_back(cj);
        inside += " && " + cj + " >= 0 && " + cj + " < " + std::to_string(d[j]);
      }
      double pv = attr_float(n, "value");
      std::string v = lit(out[0].dtype, pv);
      if (out[0].dtype == DType::boolean) v = pv != 0 ? "1" : "0";
      os << "if (" << inside << ") { ST1(gid, LD0(" << src_index(d, c) << ")); } else { ST1(gid, " << v << "); }\n";
      break;
    }
    case O::Concatenate: {
      size_t ax = static_cast<size_t>(norm_axis(attr_int(n, "axis"), static_cast<int64_t>(R), "concatenate"));
      int64_t base = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        auto d = dims_of(in[i]);
        std::vector<std::string> c;
        for (size_t j = 0; j < R; ++j) c.push_back(j == ax ? o(j) + " - " + std::to_string(base) : o(j));
        os << (i ? "else " : "") << "if (" << o(ax) << " < " << base + d[ax] << ") { ST" << oi << "(gid, LD" << i << "("
           << src_index(d, c) << ")); }\n";
        base += d[ax];
      }
      break;
    }
    case O::Gather: {  // out = x[:axis] + idx.shape + x[axis+1:]
      auto d = dims_of(in[0]);
      auto id = dims_of(in[1]);
      size_t ax = static_cast<size_t>(norm_axis(attr_int(n, "axis"), static_cast<int64_t>(d.size()), "gather"));
      std::vector<std::string> ic;
      for (size_t j = 0; j < id.size(); ++j) ic.push_back(o(ax + j));
      os << "int ix = " << cast("int", "LD1(" + src_index(id, ic) + ")") << ";\nif (ix < 0) ix += " << d[ax] << ";\n";
      std::vector<std::string> c;
      for (size_t j = 0; j < d.size(); ++j)
        c.push_back(j < ax ? o(j) : j == ax ? "ix" : o(j - 1 + id.size()));
      os << "ST2(gid, LD0(" << src_index(d, c) << "));\n";
      break;
    }
    default: fail("[codegen] no movement kernel for ", op_name(k.op));
  }
  return os.str();
}

}  // namespace rlx::codegen
