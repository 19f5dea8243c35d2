// model.c / model.h from a scheduled LIR program. Every buffer becomes a C pointer: constants are
// `static const` arrays (flash), arena buffers are `rlx_arena + offset` (the planner's offsets, so
// the RAM the model needs is exactly the plan's arena), inputs and outputs are static arrays main.c
// fills and drains, views alias their base. Each kernel becomes one call or loop.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "codegen/cortexm/cortexm.h"
#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx::cortexm {

namespace {

const char* ctype(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::i8: return "int8_t";
    case DType::u8: return "uint8_t";
    case DType::i32: return "int32_t";
    default: return nullptr;
  }
}

// A float literal that round-trips exactly (hex float).
std::string flit(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(f)) return "(0.0f/0.0f)";
  if (std::isinf(f)) return f > 0 ? "(1.0f/0.0f)" : "(-1.0f/0.0f)";
  char b[64];
  std::snprintf(b, sizeof b, "%af", static_cast<double>(f));
  return b;
}

std::string ilit(int64_t v) {
  if (v == INT32_MIN) return "(-2147483647 - 1)";
  return std::to_string(v);
}

struct Emitter {
  const LirProgram& p;
  std::ostringstream decl, body;
  Project proj;
  int tables = 0;
  int64_t col_bytes = 0;  // the largest qconv im2col row (one scratch buffer, RAM)

  explicit Emitter(const LirProgram& prog) : p(prog) {}

  const LirBuffer& buf(int id) const { return p.buffers[static_cast<size_t>(id)]; }

  // The bytes behind buffer `id` (views resolve to their base).
  std::string base_ptr(int id) const {
    const LirBuffer& b = buf(id);
    switch (b.kind) {
      case BufferKind::Input:
      case BufferKind::Output:
      case BufferKind::Const: return "((void*)" + std::string(b.kind == BufferKind::Const ? "rlx_c" : "rlx_io") + std::to_string(id) + ")";
      case BufferKind::Arena: return "((void*)(rlx_arena + " + std::to_string(b.offset) + "))";
      case BufferKind::View: return base_ptr(b.view_of);
    }
    return "";
  }
  std::string ptr(int id) const {
    const char* t = ctype(buf(id).type.dtype);
    return "((" + std::string(t ? t : "uint8_t") + "*)" + base_ptr(id) + ")";
  }

  std::string table(const char* type, const std::vector<std::string>& vals) {
    std::string n = "rlx_t" + std::to_string(tables++);
    decl << "static const " << type << " " << n << "[" << (vals.empty() ? 1 : vals.size()) << "] = {";
    for (size_t i = 0; i < vals.size(); ++i) decl << (i ? (i % 16 ? ", " : ",\n  ") : "") << vals[i];
    if (vals.empty()) decl << "0";
    decl << "};\n";
    proj.const_bytes += static_cast<int64_t>((vals.empty() ? 1 : vals.size()) * (std::string(type) == "float" || std::string(type) == "int32_t" ? 4 : 1));
    return n;
  }

  void buffers() {
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const LirBuffer& b = p.buffers[i];
      const char* t = ctype(b.type.dtype);
      if (b.kind == BufferKind::View || b.kind == BufferKind::Arena) continue;
      if (!t) fail("[cortexm] buffer ", i, " ('", b.name, "') has dtype ", dtype_name(b.type.dtype), "; the firmware holds f32, i8, u8 and i32");
      int64_t n = std::max<int64_t>(1, numel(b.type.shape));
      if (b.kind == BufferKind::Const) {
        decl << "static const " << t << " rlx_c" << i << "[" << n << "] __attribute__((aligned(4))) = {";
        const Tensor& v = b.value;
        for (int64_t k = 0; k < v.numel(); ++k) {
          decl << (k ? (k % 16 ? ", " : ",\n  ") : "");
          decl << (b.type.dtype == DType::f32 ? flit(v.get(k)) : ilit(static_cast<int64_t>(v.get(k))));
        }
        if (v.numel() == 0) decl << "0";
        decl << "};\n";
        proj.const_bytes += n * static_cast<int64_t>(dtype_size(b.type.dtype));
      } else {
        decl << t << " rlx_io" << i << "[" << n << "] __attribute__((aligned(16)));\n";
        proj.io_bytes += n * static_cast<int64_t>(dtype_size(b.type.dtype));
      }
    }
  }

  const Tensor& const_of(int id, const char* what, const LirKernel& k) const {
    int b = id;
    while (buf(b).kind == BufferKind::View) b = buf(b).view_of;
    if (buf(b).kind != BufferKind::Const) fail("[cortexm] kernel '", k.label(), "' (", k.origin, "): ", what, " must be a constant");
    return buf(b).value;
  }

  // qlinear -> rlx_qlinear with its parameter tables.
  void qlinear(const LirKernel& k, const Node& n) {
    const LirBuffer& x = buf(k.in[0]);
    const Tensor& w = const_of(k.in[1], "the weight", k);
    if (w.dtype() != DType::i8) fail("[cortexm] qlinear (", k.origin, "): weight must be i8");
    int64_t N = w.shape()[0], K = w.shape()[1], M = numel(x.type.shape) / K;
    auto per = [&](const std::vector<int64_t>& v, int64_t j, int64_t d) { return v.empty() ? d : v[v.size() == 1 ? 0 : static_cast<size_t>(j)]; };
    std::vector<std::string> wsum, wzp, mul, sh, sc, bias;
    const auto& wz = attr_ints(n, "w_zero_point");
    for (int64_t j = 0; j < N; ++j) {
      int64_t s = 0;
      for (int64_t i = 0; i < K; ++i) s += w.data<int8_t>()[j * K + i];
      wsum.push_back(ilit(s));
      wzp.push_back(ilit(per(wz, j, 0)));
    }
    DType odt = buf(k.out[0]).type.dtype;
    int kind = odt == DType::f32 ? 2 : (odt == DType::u8 ? 1 : 0);
    if (kind == 2) {
      const auto& s = attr_floats(n, "scale");
      for (int64_t j = 0; j < N; ++j) sc.push_back(flit(s.size() == 1 ? s[0] : s.at(static_cast<size_t>(j))));
    } else {
      const auto& m = attr_ints(n, "multiplier");
      const auto& h = attr_ints(n, "shift");
      for (int64_t j = 0; j < N; ++j) mul.push_back(ilit(per(m, j, 0))), sh.push_back(ilit(per(h, j, 0)));
    }
    std::string tw = table("int32_t", wsum), tz = table("int32_t", wzp);
    std::string tm = kind == 2 ? "0" : table("int32_t", mul), ts = kind == 2 ? "0" : table("int32_t", sh);
    std::string tsc = kind == 2 ? table("float", sc) : "0";
    if (k.in.size() > 2 && buf(k.in[2]).type.dtype != DType::i32) fail("[cortexm] qlinear (", k.origin, "): bias must be i32");
    std::string pn = "rlx_p" + std::to_string(tables++);
    decl << "static const rlx_qlinear_params " << pn << " = {" << M << ", " << K << ", " << N << ", "
         << (x.type.dtype == DType::u8 ? 1 : 0) << ", " << attr_int(n, "x_zero_point") << ", (const int8_t*)"
         << base_ptr(k.in[1]) << ", " << tw << ", " << tz << ", " << (k.in.size() > 2 ? "(const int32_t*)" + base_ptr(k.in[2]) : "0")
         << ", " << kind << ", " << attr_int(n, "relu") << ", " << (attr_str(n, "rounding") == "half_away" ? 1 : 0) << ", "
         << tm << ", " << ts << ", " << attr_int(n, "zero_point") << ", " << tsc << "};\n";
    body << "  rlx_qlinear(&" << pn << ", " << base_ptr(k.in[0]) << ", " << base_ptr(k.out[0]) << ");\n";
  }

  // qconv -> rlx_qconv over one im2col row (the shared scratch rlx_col, sized for the largest row).
  void qconv(const LirKernel& k, const Node& n) {
    const auto xd = static_dims(buf(k.in[0]).type.shape), od = static_dims(buf(k.out[0]).type.shape);
    const Tensor& w = const_of(k.in[1], "the weight", k);
    if (w.dtype() != DType::i8) fail("[cortexm] qconv (", k.origin, "): weight must be i8");
    const auto& wd = w.shape();
    int64_t O = wd[0], K = wd[1] * wd[2] * wd[3];
    auto per = [&](const std::vector<int64_t>& v, int64_t j, int64_t d) { return v.empty() ? d : v[v.size() == 1 ? 0 : static_cast<size_t>(j)]; };
    std::vector<std::string> wsum, wzp, mul, sh, sc;
    for (int64_t j = 0; j < O; ++j) {
      int64_t s = 0;
      for (int64_t i = 0; i < K; ++i) s += w.data<int8_t>()[j * K + i];
      wsum.push_back(ilit(s));
      wzp.push_back(ilit(per(attr_ints(n, "w_zero_point"), j, 0)));
    }
    DType odt = buf(k.out[0]).type.dtype;
    int kind = odt == DType::f32 ? 2 : (odt == DType::u8 ? 1 : 0);
    if (kind == 2) {
      const auto& s = attr_floats(n, "scale");
      for (int64_t j = 0; j < O; ++j) sc.push_back(flit(s.size() == 1 ? s[0] : s.at(static_cast<size_t>(j))));
    } else {
      for (int64_t j = 0; j < O; ++j)
        mul.push_back(ilit(per(attr_ints(n, "multiplier"), j, 0))), sh.push_back(ilit(per(attr_ints(n, "shift"), j, 0)));
    }
    std::string tw = table("int32_t", wsum), tz = table("int32_t", wzp);
    std::string tm = kind == 2 ? "0" : table("int32_t", mul), ts = kind == 2 ? "0" : table("int32_t", sh);
    std::string tsc = kind == 2 ? table("float", sc) : "0";
    if (k.in.size() > 2 && buf(k.in[2]).type.dtype != DType::i32) fail("[cortexm] qconv (", k.origin, "): bias must be i32");
    auto v2 = [&](const char* a, int64_t d) {
      auto v = attr_ints(n, a);
      return v.empty() ? std::vector<int64_t>{d, d} : v;
    };
    auto st = v2("strides", 1), dil = v2("dilations", 1), pads = v2("pads", 0);
    col_bytes = std::max(col_bytes, K);
    std::string pn = "rlx_p" + std::to_string(tables++);
    decl << "static const rlx_qconv_params " << pn << " = {" << xd[0] << ", " << xd[1] << ", " << xd[2] << ", " << xd[3]
         << ", " << O << ", " << wd[1] << ", " << wd[2] << ", " << wd[3] << ", " << od[2] << ", " << od[3] << ", "
         << attr_int(n, "groups") << ", " << st[0] << ", " << st[1] << ", " << dil[0] << ", " << dil[1] << ", " << pads[0]
         << ", " << pads[1] << ", " << (buf(k.in[0]).type.dtype == DType::u8 ? 1 : 0) << ", " << attr_int(n, "x_zero_point")
         << ", (const int8_t*)" << base_ptr(k.in[1]) << ", " << tw << ", " << tz << ", "
         << (k.in.size() > 2 ? "(const int32_t*)" + base_ptr(k.in[2]) : "0") << ", " << kind << ", " << attr_int(n, "relu")
         << ", " << (attr_str(n, "rounding") == "half_away" ? 1 : 0) << ", " << std::min<int64_t>(attr_int(n, "max_q"), 255)
         << ", " << tm << ", " << ts << ", " << attr_int(n, "zero_point") << ", " << tsc << "};\n";
    body << "  rlx_qconv(&" << pn << ", " << base_ptr(k.in[0]) << ", " << base_ptr(k.out[0]) << ", rlx_col);\n";
  }

  // reduce_window max|min over i8/u8 -> rlx_pool8 (rank <= 4).
  void pool(const LirKernel& k, const Node& n) {
    DType dt = buf(k.in[0]).type.dtype;
    const std::string& kind = attr_str(n, "kind");
    auto d = static_dims(buf(k.in[0]).type.shape), od = static_dims(buf(k.out[0]).type.shape);
    if ((dt != DType::i8 && dt != DType::u8) || (kind != "max" && kind != "min") || d.size() > 4)
      fail("[cortexm] reduce_window (", k.origin, "): the firmware pools i8/u8 max|min of rank <= 4, got ", kind, " over ",
           dtype_name(dt), " rank ", d.size());
    size_t r = d.size(), off = 4 - r;
    auto win = attr_ints(n, "window"), st = attr_ints(n, "strides"), pads = attr_ints(n, "pads");
    std::vector<int64_t> D(4, 1), OD(4, 1), W(4, 1), S(4, 1), P(4, 0);
    for (size_t i = 0; i < r; ++i) {
      D[off + i] = d[i], OD[off + i] = od[i], W[off + i] = win[i];
      S[off + i] = st.empty() ? 1 : st[i];
      P[off + i] = pads.empty() ? 0 : pads[i];
    }
    auto arr = [](const std::vector<int64_t>& v) {
      return "{" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " + std::to_string(v[2]) + ", " + std::to_string(v[3]) + "}";
    };
    std::string pn = "rlx_p" + std::to_string(tables++);
    decl << "static const rlx_pool8_params " << pn << " = {" << arr(D) << ", " << arr(OD) << ", " << arr(W) << ", " << arr(S)
         << ", " << arr(P) << ", " << (dt == DType::u8 ? 1 : 0) << ", " << (kind == "min" ? 1 : 0) << "};\n";
    body << "  rlx_pool8(&" << pn << ", " << base_ptr(k.in[0]) << ", " << base_ptr(k.out[0]) << ");\n";
  }

  // Per-tensor or per-axis scale/zero point: the channel of flat index i.
  std::string channel(const LirKernel& k, const Node& n, int64_t count) {
    if (count <= 1) return "0";
    const auto dims = static_dims(buf(k.in[0]).type.shape);
    int64_t axis = attr_int(n, "axis");
    if (axis < 0) axis += static_cast<int64_t>(dims.size());
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) inner *= dims[d];
    return "((i / " + std::to_string(inner) + ") % " + std::to_string(count) + ")";
  }

  void quantize(const LirKernel& k, const Node& n) {
    const Tensor& s = const_of(k.in[1], "the scale", k);
    const Tensor& z = const_of(k.in[2], "the zero point", k);
    DType odt = buf(k.out[0]).type.dtype;
    if (odt != DType::i8 && odt != DType::u8) fail("[cortexm] quantize_affine (", k.origin, "): output must be i8/u8");
    std::string ch = channel(k, n, s.numel());
    std::string lo = odt == DType::u8 ? "0" : "-128", hi = odt == DType::u8 ? "255" : "127";
    int64_t total = numel(buf(k.out[0]).type.shape);
    body << "  for (int32_t i = 0; i < " << total << "; ++i) " << ptr(k.out[0]) << "[i] = (" << ctype(odt)
         << ")rlx_quantize(" << ptr(k.in[0]) << "[i], " << ptr(k.in[1]) << "[" << ch << "], (int32_t)" << ptr(k.in[2])
         << "[" << (z.numel() > 1 ? ch : "0") << "], " << lo << ", " << hi << ");\n";
  }

  void dequantize(const LirKernel& k, const Node& n) {
    const Tensor& s = const_of(k.in[1], "the scale", k);
    const Tensor& z = const_of(k.in[2], "the zero point", k);
    if (buf(k.out[0]).type.dtype != DType::f32) fail("[cortexm] dequantize_affine (", k.origin, "): output must be f32");
    std::string ch = channel(k, n, s.numel());
    int64_t total = numel(buf(k.out[0]).type.shape);
    body << "  for (int32_t i = 0; i < " << total << "; ++i) " << ptr(k.out[0]) << "[i] = (float)((int32_t)" << ptr(k.in[0])
         << "[i] - (int32_t)" << ptr(k.in[2]) << "[" << (z.numel() > 1 ? ch : "0") << "]) * " << ptr(k.in[1]) << "[" << ch << "];\n";
  }

  // Elementwise f32 region (a generated kernel's body, or one elementwise library kernel): one loop
  // per output over its elements; operands index by numpy broadcasting against the output's shape.
  void elementwise(const LirKernel& k, const Graph& g) {
    std::map<ValueId, int> arg;  // body input value -> kernel buffer
    for (size_t i = 0; i < g.inputs.size(); ++i) arg[g.inputs[i]] = k.in.at(i);
    for (size_t o = 0; o < g.outputs.size(); ++o) {
      const LirBuffer& ob = buf(k.out.at(o));
      if (ob.type.dtype != DType::f32) fail("[cortexm] elementwise kernel '", k.label(), "' (", k.origin, "): only f32 elementwise regions are generated");
      auto od = static_dims(ob.type.shape);
      std::function<std::string(ValueId)> ex = [&](ValueId v) -> std::string {
        auto a = arg.find(v);
        if (a != arg.end()) {
          const LirBuffer& b = buf(a->second);
          if (b.type.dtype != DType::f32) fail("[cortexm] elementwise kernel (", k.origin, "): operand of dtype ", dtype_name(b.type.dtype));
          auto d = static_dims(b.type.shape);
          // flat index of this operand from the output coordinates c0.. (trailing alignment)
          std::string idx;
          int64_t stride = 1;
          for (int64_t i = static_cast<int64_t>(d.size()) - 1; i >= 0; --i) {
            int64_t oi = static_cast<int64_t>(od.size()) - static_cast<int64_t>(d.size()) + i;
            if (d[static_cast<size_t>(i)] != 1) idx += (idx.empty() ? "" : " + ") + std::string("c") + std::to_string(oi) + " * " + std::to_string(stride);
            stride *= d[static_cast<size_t>(i)];
          }
          return ptr(a->second) + "[" + (idx.empty() ? "0" : idx) + "]";
        }
        const Node& n = g.nodes[static_cast<size_t>(g.values[static_cast<size_t>(v)].producer)];
        if (n.op == OpKind::Constant) {
          const Tensor& t = attr_tensor(n, "value");
          if (t.numel() != 1) fail("[cortexm] elementwise kernel (", k.origin, "): non-scalar constant in the region");
          return flit(t.get(0));
        }
        auto in = [&](size_t i) { return ex(n.inputs.at(i)); };
        switch (n.op) {
          case OpKind::Add: return "(" + in(0) + " + " + in(1) + ")";
          case OpKind::Sub: return "(" + in(0) + " - " + in(1) + ")";
          case OpKind::Mul: return "(" + in(0) + " * " + in(1) + ")";
          case OpKind::Div: return "(" + in(0) + " / " + in(1) + ")";
          case OpKind::Max: return "rlx_maxf(" + in(0) + ", " + in(1) + ")";
          case OpKind::Min: return "rlx_minf(" + in(0) + ", " + in(1) + ")";
          case OpKind::Neg: return "(-" + in(0) + ")";
          default:
            fail("[cortexm] elementwise kernel '", k.label(), "' (", k.origin, "): op '", op_name(n.op),
                 "' has no Cortex-M C form (add, sub, mul, div, max, min, neg)");
        }
      };
      std::string e = ex(g.outputs[o]);
      int64_t total = numel(ob.type.shape);
      body << "  for (int32_t i = 0; i < " << total << "; ++i) {\n";
      int64_t inner = 1;
      for (int64_t i = static_cast<int64_t>(od.size()) - 1; i >= 0; --i) {
        body << "    const int32_t c" << i << " = (i / " << inner << ") % " << od[static_cast<size_t>(i)] << ";\n";
        inner *= od[static_cast<size_t>(i)];
      }
      for (size_t i = 0; i < od.size(); ++i) body << "    (void)c" << i << ";\n";
      body << "    " << ptr(k.out[o]) << "[i] = " << e << ";\n  }\n";
    }
  }

  void kernel(const LirKernel& k) {
    if (k.kind == KernelKind::Generated) return elementwise(k, k.body);
    Node n;
    n.op = k.op;
    n.attrs = k.attrs;
    switch (k.op) {
      case OpKind::QLinear: return qlinear(k, n);
      case OpKind::QConv: return qconv(k, n);
      case OpKind::ReduceWindow: return pool(k, n);
      case OpKind::QuantizeAffine: return quantize(k, n);
      case OpKind::DequantizeAffine: return dequantize(k, n);
      case OpKind::Reshape: {  // a reshape the lowering kept as a copy
        int64_t bytes = numel(buf(k.out[0]).type.shape) * static_cast<int64_t>(dtype_size(buf(k.out[0]).type.dtype));
        body << "  memmove(" << base_ptr(k.out[0]) << ", " << base_ptr(k.in[0]) << ", " << bytes << ");\n";
        return;
      }
      case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Max: case OpKind::Min:
      case OpKind::Neg: {
        Graph g;  // the library kernel as a one-node region
        std::vector<ValueId> ins;
        for (int b : k.in) ins.push_back(g.add_input("a" + std::to_string(ins.size()), buf(b).type.dtype, buf(b).type.shape));
        auto outs = g.add_node(k.op, ins, k.attrs, k.origin);
        g.outputs = outs;
        return elementwise(k, g);
      }
      default:
        fail("[cortexm] kernel '", k.label(), "' (", k.origin, ") has no Cortex-M C kernel (the firmware runs qlinear, "
             "qconv, i8/u8 max/min reduce_window, quantize_affine, dequantize_affine, reshape and f32 add/sub/mul/div/max/min/neg); "
             "quantize the model (rlx quantize) so its contractions become qlinear");
    }
  }
};

}  // namespace

const BoardInfo& board_info(Board b) {
  static const BoardInfo m4{"m4", "mps2-an386", "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16",
                            "Cortex-M4F (DSP extension: SMLAD dot products)"};
  static const BoardInfo m55{"m55", "mps3-an547", "-mcpu=cortex-m55 -mthumb -mfloat-abi=hard",
                             "Cortex-M55 (Helium/MVE: vmladavaq_s8 dot products)"};
  return b == Board::M4 ? m4 : m55;
}

bool parse_board(const std::string& s, Board* b) {
  if (s == "m4") *b = Board::M4;
  else if (s == "m55") *b = Board::M55;
  else return false;
  return true;
}

std::string Project::summary() const {
  return std::to_string(kernels) + " kernels; flash: " + std::to_string(const_bytes) + " B of constants; RAM: arena " +
         std::to_string(arena_bytes) + " B + im2col scratch " + std::to_string(scratch_bytes) + " B + inputs/outputs " +
         std::to_string(io_bytes) + " B (code size: `make size`)";
}

Project generate_project(const LirProgram& p, Board board) {
  Emitter e(p);
  e.buffers();
  for (const LirKernel& k : p.kernels) e.kernel(k);
  Project& proj = e.proj;
  proj.arena_bytes = p.arena_bytes;
  proj.scratch_bytes = e.col_bytes;
  proj.kernels = static_cast<int>(p.kernels.size());
  std::ostringstream h, c;
  h << "/* model.h: the compiled graph '" << p.name << "' (generated by rlx compile --device cortexm). */\n"
    << "#ifndef RLX_MODEL_H\n#define RLX_MODEL_H\n#include <stdint.h>\n"
    << "#define RLX_NUM_INPUTS " << p.inputs.size() << "\n#define RLX_NUM_OUTPUTS " << p.outputs.size() << "\n"
    << "#define RLX_ARENA_BYTES " << std::max<int64_t>(p.arena_bytes, 4) << "\n"
    << "extern void* const rlx_inputs[RLX_NUM_INPUTS];\nextern const uint32_t rlx_input_bytes[RLX_NUM_INPUTS];\n"
    << "extern void* const rlx_outputs[RLX_NUM_OUTPUTS];\nextern const uint32_t rlx_output_bytes[RLX_NUM_OUTPUTS];\n"
    << "void rlx_model_run(void);\n#endif\n";
  c << "/* model.c: kernels, constants (flash) and the planned arena of graph '" << p.name << "'. */\n"
    << "#include \"model.h\"\n#include \"rlx_kernels.h\"\n\n"
    << "static uint8_t rlx_arena[RLX_ARENA_BYTES] __attribute__((aligned(16)));\n"
    << (e.col_bytes ? "static int8_t rlx_col[" + std::to_string(e.col_bytes) + "] __attribute__((aligned(4)));\n" : std::string())
    << e.decl.str() << "\n";
  auto list = [&](const char* name, const std::vector<int>& ids) {
    c << "void* const " << name << "s[] = {";
    for (size_t i = 0; i < ids.size(); ++i) c << (i ? ", " : "") << e.base_ptr(ids[i]);
    c << "};\nconst uint32_t " << name << "_bytes[] = {";
    for (size_t i = 0; i < ids.size(); ++i) {
      const LirBuffer& b = e.buf(ids[i]);
      if (b.kind != BufferKind::Input && b.kind != BufferKind::Output)
        fail("[cortexm] graph ", name, " ", i, " is not a plain buffer (a constant or view output is not supported)");
      c << (i ? ", " : "") << numel(b.type.shape) * static_cast<int64_t>(dtype_size(b.type.dtype));
    }
    c << "};\n";
  };
  list("rlx_input", p.inputs);
  list("rlx_output", p.outputs);
  c << "\nvoid rlx_model_run(void) {\n" << e.body.str() << "}\n";
  proj.files["model.h"] = h.str();
  proj.files["model.c"] = c.str();
  proj.files["rlx_kernels.h"] = kernels_header();
  for (auto& [n, s] : board_files(board)) proj.files[n] = s;
  std::ostringstream js;
  js << "{\"board\": \"" << board_info(board).name << "\", \"machine\": \"" << board_info(board).machine
     << "\", \"kernels\": " << proj.kernels << ", \"const_bytes\": " << proj.const_bytes << ", \"arena_bytes\": "
     << proj.arena_bytes << ", \"scratch_bytes\": " << proj.scratch_bytes << ", \"io_bytes\": " << proj.io_bytes << ", \"inputs\": [";
  for (size_t i = 0; i < p.inputs.size(); ++i) js << (i ? ", " : "") << "\"" << e.buf(p.inputs[i]).name << "\"";
  js << "], \"outputs\": [";
  for (size_t i = 0; i < p.outputs.size(); ++i) js << (i ? ", " : "") << "\"" << e.buf(p.outputs[i]).name << "\"";
  js << "]}\n";
  proj.files["project.json"] = js.str();
  return proj;
}

void write_project(const Project& proj, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("[cortexm] cannot create '", dir, "': ", ec.message());
  for (auto& [name, text] : proj.files) {
    std::string path = dir + "/" + name, tmp = path + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary);
      f << text;
      if (!f) fail("[cortexm] cannot write '", path, "'");
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) fail("[cortexm] cannot write '", path, "': ", ec.message());
  }
}

}  // namespace rlx::cortexm
