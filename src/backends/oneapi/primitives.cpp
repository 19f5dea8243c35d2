// LIR kernels as oneDNN primitives on the CPU engine: matmul (Linear with bias, activation and
// residual-add post-ops; matmul; dot_general with one contracting dim), convolution, max pooling,
// softmax, layer normalization, eltwise (exp, tanh, logistic, sqrt, abs, neg), binary and transpose (a reorder). Every primitive is
// created once, at build time, for the program's static shapes; constant weights are reordered once
// into the layout the primitive prefers. Buffers are the executable's host memory, bound per run.
#include "backends/oneapi/primitives.h"

#if RLX_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <functional>
#include <unordered_map>

namespace rlx::oneapi {

namespace {

using dnnl::algorithm;
using dnnl::memory;
using mdt = memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& cpu_stream() {
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

mdt dnnl_type(DType t) {
  switch (t) {
    case DType::f32: return mdt::f32;
    case DType::i32: return mdt::s32;
    case DType::i8: return mdt::s8;
    case DType::u8: return mdt::u8;
    default: return mdt::undef;
  }
}

memory::dims row_major(const memory::dims& d) {
  memory::dims s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}
memory::desc plain(mdt t, memory::dims d) {
  if (d.empty()) d = {1};
  return memory::desc(d, t, row_major(d));
}
memory::dims dims_of(const LirProgram& p, int b) { return static_dims(p.buffers[b].type.shape); }
DType dtype_of(const LirProgram& p, int b) { return p.buffers[b].type.dtype; }

bool activation_alg(const std::string& a, algorithm* alg) {
  if (a.empty() || a == "none") return false;
  *alg = a == "relu" ? algorithm::eltwise_relu
         : a == "gelu" ? algorithm::eltwise_gelu_erf
         : a == "gelu_tanh" ? algorithm::eltwise_gelu_tanh
                            : algorithm::eltwise_swish;  // silu: x * logistic(x)
  return true;
}
bool known_activation(const std::string& a) {
  return a.empty() || a == "none" || a == "relu" || a == "gelu" || a == "gelu_tanh" || a == "silu";
}

// Log is left to the cpu kernels: oneDNN 2.6's eltwise_log is off by up to 3.4e-6 in f32, outside
// the conformance tolerance of log.
bool unary_alg(OpKind k, algorithm* alg, float* alpha) {
  *alpha = 0.f;
  switch (k) {
    case OpKind::Exp: *alg = algorithm::eltwise_exp; return true;
    case OpKind::Tanh: *alg = algorithm::eltwise_tanh; return true;
    case OpKind::Logistic: *alg = algorithm::eltwise_logistic; return true;
    case OpKind::Sqrt: *alg = algorithm::eltwise_sqrt; return true;
    case OpKind::Abs: *alg = algorithm::eltwise_abs; return true;
    case OpKind::Neg: *alg = algorithm::eltwise_linear, *alpha = -1.f; return true;
    default: return false;
  }
}
bool binary_alg(OpKind k, algorithm* alg) {
  switch (k) {
    case OpKind::Add: *alg = algorithm::binary_add; return true;
    case OpKind::Sub: *alg = algorithm::binary_sub; return true;
    case OpKind::Mul: *alg = algorithm::binary_mul; return true;
    case OpKind::Div: *alg = algorithm::binary_div; return true;
    case OpKind::Max: *alg = algorithm::binary_max; return true;
    case OpKind::Min: *alg = algorithm::binary_min; return true;
    default: return false;
  }
}

Node node_of(const LirKernel& k) { return Node{k.op, {}, {}, k.attrs, k.origin}; }

// A Linear's epilogue attrs other than the residual slot belong to the cpu GEMM's own fused forms.
bool foreign_attrs(const LirKernel& k) {
  for (auto& [name, a] : k.attrs)
    if ((name.rfind("cpu_", 0) == 0 && name != "cpu_res") || name.rfind("cuda_", 0) == 0) return true;
  return false;
}

// dot_general with one contracting dim and at most one free dim per side, batch dims anywhere:
// the matmul's src [batch..., M, K] and weights [batch..., K, N] as strided views of the operands.
struct DotShape {
  memory::dims src, src_st, wei, wei_st, dst;
};
bool dot_shape(const LirKernel& k, const LirProgram& p, DotShape* s, std::string* why) {
  Node n = node_of(k);
  const auto &lb = attr_ints(n, "lhs_batch"), &rb = attr_ints(n, "rhs_batch"), &lc = attr_ints(n, "lhs_contract"),
             &rc = attr_ints(n, "rhs_contract");
  memory::dims a = dims_of(p, k.in[0]), b = dims_of(p, k.in[1]);
  if (lc.size() != 1 || rc.size() != 1 || lb.size() != rb.size()) return *why = "more than one contracting dim", false;
  auto free_dims = [](const memory::dims& d, const std::vector<int64_t>& batch, int64_t c) {
    std::vector<int64_t> f;
    for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i)
      if (i != c && std::find(batch.begin(), batch.end(), i) == batch.end()) f.push_back(i);
    return f;
  };
  auto fa = free_dims(a, lb, lc[0]), fb = free_dims(b, rb, rc[0]);
  if (fa.size() > 1 || fb.size() > 1) return *why = "more than one free dim per operand", false;
  memory::dims as = row_major(a), bs = row_major(b);
  for (size_t i = 0; i < lb.size(); ++i) {
    if (a[lb[i]] != b[rb[i]]) return *why = "batch dims differ", false;
    s->src.push_back(a[lb[i]]), s->src_st.push_back(as[lb[i]]);
    s->wei.push_back(b[rb[i]]), s->wei_st.push_back(bs[rb[i]]);
  }
  int64_t M = fa.empty() ? 1 : a[fa[0]], K = a[lc[0]], N = fb.empty() ? 1 : b[fb[0]];
  s->src.push_back(M), s->src_st.push_back(fa.empty() ? K : as[fa[0]]);
  s->src.push_back(K), s->src_st.push_back(as[lc[0]]);
  s->wei.push_back(K), s->wei_st.push_back(bs[rc[0]]);
  s->wei.push_back(N), s->wei_st.push_back(fb.empty() ? 1 : bs[fb[0]]);
  s->dst = s->src;
  s->dst.back() = N;
  if (K == 0 || M == 0 || N == 0) return *why = "empty operand", false;
  return true;
}

// ---- the prepared primitives ----------------------------------------------------------------

// Arguments bound per run: (dnnl arg, slot); slot >= 0 an input, -1 - slot an output.
struct Binding {
  int arg, slot;
  memory mem;
};

class Prepared : public DnnlKernel {
 public:
  Prepared(dnnl::primitive prim, std::string label) : prim_(std::move(prim)), label_(std::move(label)) {}
  void bind(int arg, int slot, const memory::desc& md) { binds_.push_back({arg, slot, memory(md, cpu_engine(), nullptr)}); }
  void fixed(int arg, memory m) { fixed_.emplace_back(arg, std::move(m)); }
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    std::unordered_map<int, memory> args;
    for (auto& b : binds_) {
      void* h = b.slot >= 0 ? const_cast<void*>(in[b.slot].raw()) : out[-b.slot - 1].raw();
      b.mem.set_data_handle(h);
      args.emplace(b.arg, b.mem);
    }
    for (auto& [a, m] : fixed_) args.emplace(a, m);
    prim_.execute(cpu_stream(), args);
    cpu_stream().wait();
  }
  std::string label() const override { return label_; }

 private:
  dnnl::primitive prim_;
  std::string label_;
  std::vector<Binding> binds_;
  std::vector<std::pair<int, memory>> fixed_;
};

std::string impl(const dnnl::primitive_desc_base& pd) { return "(" + std::string(pd.impl_info_str()) + ")"; }

// A matmul whose constant weights are reordered once into the layout the primitive picked.
std::unique_ptr<DnnlKernel> make_matmul(const memory::desc& src, const memory::desc& wei, const memory::desc* bias,
                                        const memory::desc& dst, const dnnl::primitive_attr& attr, const Tensor* const_w,
                                        std::string label, int bias_slot, int res_slot, const memory::desc* res) {
  memory::desc wsel = const_w ? memory::desc(wei.dims(), mdt::f32, memory::format_tag::any) : wei;
  auto d = bias ? dnnl::matmul::desc(src, wsel, *bias, dst) : dnnl::matmul::desc(src, wsel, dst);
  dnnl::matmul::primitive_desc pd(d, attr, cpu_engine());
  auto k = std::make_unique<Prepared>(dnnl::matmul(pd), label + impl(pd));
  k->bind(DNNL_ARG_SRC, 0, src);
  if (const_w) {
    memory user(wei, cpu_engine(), const_cast<void*>(const_w->raw()));
    memory packed(pd.weights_desc(), cpu_engine());
    dnnl::reorder(user, packed).execute(cpu_stream(), user, packed);
    cpu_stream().wait();
    k->fixed(DNNL_ARG_WEIGHTS, packed);
  } else {
    k->bind(DNNL_ARG_WEIGHTS, 1, wei);
  }
  if (bias) k->bind(DNNL_ARG_BIAS, bias_slot, *bias);
  if (res) k->bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(res_slot >> 8) | DNNL_ARG_SRC_1, res_slot & 0xff, *res);
  k->bind(DNNL_ARG_DST, -1, dst);
  return k;
}

std::unique_ptr<DnnlKernel> make_linear(const LirKernel& kr, const LirProgram& p) {
  Node n = node_of(kr);
  memory::dims x = dims_of(p, kr.in[0]), w = dims_of(p, kr.in[1]);
  int64_t O = w[0], I = w[1], M = I ? static_cast<int64_t>(numel(p.buffers[kr.in[0]].type.shape)) / I : 0;
  memory::desc src({M, I}, mdt::f32, {I, 1}), wei({I, O}, mdt::f32, {1, I}), dst({M, O}, mdt::f32, {O, 1});
  int res = kr.attrs.count("cpu_res") ? static_cast<int>(attr_int(n, "cpu_res")) : -1;
  int bias_slot = -1;
  for (int s = 2; s < static_cast<int>(kr.in.size()); ++s)
    if (s != res) bias_slot = s;
  memory::desc bias({1, O}, mdt::f32, {O, 1});
  dnnl::post_ops po;
  std::string label = "matmul";
  if (bias_slot >= 0) label += "+bias";
  algorithm act = algorithm::undef;
  if (activation_alg(attr_str(n, "activation"), &act)) {
    po.append_eltwise(1.f, act, act == algorithm::eltwise_swish ? 1.f : 0.f, 0.f);
    label += "+" + attr_str(n, "activation");
  }
  int res_index = po.len();
  if (res >= 0) {
    po.append_binary(algorithm::binary_add, dst);
    label += "+residual";
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  const LirBuffer& wb = p.buffers[kr.in[1]];
  return make_matmul(src, wei, bias_slot >= 0 ? &bias : nullptr, dst, attr,
                     wb.kind == BufferKind::Const ? &wb.value : nullptr, label, bias_slot, (res_index << 8) | std::max(res, 0),
                     res >= 0 ? &dst : nullptr);
}

std::unique_ptr<DnnlKernel> make_batched(const LirKernel& kr, const LirProgram& p) {
  memory::dims a, as, b, bs, d;
  if (kr.op == OpKind::DotGeneral) {
    DotShape s;
    std::string why;
    dot_shape(kr, p, &s, &why);
    a = s.src, as = s.src_st, b = s.wei, bs = s.wei_st, d = s.dst;
  } else {  // matmul: numpy batch broadcasting, leading dims padded with 1
    a = dims_of(p, kr.in[0]), b = dims_of(p, kr.in[1]);
    size_t r = std::max(a.size(), b.size());
    a.insert(a.begin(), r - a.size(), 1), b.insert(b.begin(), r - b.size(), 1);
    as = row_major(a), bs = row_major(b);
    d = a;
    for (size_t i = 0; i + 2 < r; ++i) d[i] = std::max(a[i], b[i]);
    d[r - 1] = b[r - 1];
  }
  memory::desc src(a, mdt::f32, as), wei(b, mdt::f32, bs), dst(d, mdt::f32, row_major(d));
  const LirBuffer& wb = p.buffers[kr.in[1]];
  return make_matmul(src, wei, nullptr, dst, dnnl::primitive_attr(), wb.kind == BufferKind::Const ? &wb.value : nullptr,
                     "matmul", -1, 0, nullptr);
}

memory::dims ints(const std::vector<int64_t>& v, size_t from, size_t n, int64_t sub = 0) {
  memory::dims r;
  for (size_t i = 0; i < n; ++i) r.push_back(v[from + i] - sub);
  return r;
}

std::unique_ptr<DnnlKernel> make_conv(const LirKernel& kr, const LirProgram& p) {
  Node n = node_of(kr);
  memory::dims x = dims_of(p, kr.in[0]), w = dims_of(p, kr.in[1]), y = dims_of(p, kr.out[0]);
  size_t sp = x.size() - 2;
  std::vector<int64_t> st = attr_ints(n, "strides"), pads = attr_ints(n, "pads"), dil = attr_ints(n, "dilations");
  if (st.empty()) st.assign(sp, 1);
  if (dil.empty()) dil.assign(sp, 1);
  if (pads.empty()) pads.assign(2 * sp, 0);
  int64_t g = attr_int(n, "groups");
  memory::desc src = plain(mdt::f32, x), dst = plain(mdt::f32, y), wei = plain(mdt::f32, w);
  if (g > 1) {
    memory::dims gw = w;
    gw[0] /= g;
    gw.insert(gw.begin(), g);
    wei = plain(mdt::f32, gw);
  }
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, algorithm::convolution_direct, src, wei, dst,
                                    ints(st, 0, sp), ints(dil, 0, sp, 1), ints(pads, 0, sp), ints(pads, sp, sp));
  dnnl::convolution_forward::primitive_desc pd(d, cpu_engine());
  auto k = std::make_unique<Prepared>(dnnl::convolution_forward(pd), "convolution" + impl(pd));
  k->bind(DNNL_ARG_SRC, 0, src);
  k->bind(DNNL_ARG_WEIGHTS, 1, wei);
  k->bind(DNNL_ARG_DST, -1, dst);
  return k;
}

std::unique_ptr<DnnlKernel> make_pool(const LirKernel& kr, const LirProgram& p) {
  Node n = node_of(kr);
  memory::dims x = dims_of(p, kr.in[0]), y = dims_of(p, kr.out[0]);
  size_t r = x.size(), sp = r - 2;
  std::vector<int64_t> win = attr_ints(n, "window"), st = attr_ints(n, "strides"), pads = attr_ints(n, "pads");
  if (st.empty()) st.assign(r, 1);
  if (pads.empty()) pads.assign(2 * r, 0);
  memory::desc src = plain(mdt::f32, x), dst = plain(mdt::f32, y);
  dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, algorithm::pooling_max, src, dst, ints(st, 2, sp),
                                ints(win, 2, sp), ints(pads, 2, sp), ints(pads, r + 2, sp));
  dnnl::pooling_forward::primitive_desc pd(d, cpu_engine());
  auto k = std::make_unique<Prepared>(dnnl::pooling_forward(pd), "pooling_max" + impl(pd));
  k->bind(DNNL_ARG_SRC, 0, src);
  k->bind(DNNL_ARG_DST, -1, dst);
  return k;
}

int norm_axis(int64_t axis, size_t rank) { return static_cast<int>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis); }

std::unique_ptr<DnnlKernel> make_softmax(const LirKernel& kr, const LirProgram& p) {
  memory::dims x = dims_of(p, kr.in[0]);
  memory::desc md = plain(mdt::f32, x);
  dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, norm_axis(attr_int(node_of(kr), "axis"), x.size()));
  dnnl::softmax_forward::primitive_desc pd(d, cpu_engine());
  auto k = std::make_unique<Prepared>(dnnl::softmax_forward(pd), "softmax" + impl(pd));
  k->bind(DNNL_ARG_SRC, 0, md);
  k->bind(DNNL_ARG_DST, -1, md);
  return k;
}

std::unique_ptr<DnnlKernel> make_layer_norm(const LirKernel& kr, const LirProgram& p) {
  memory::dims x = dims_of(p, kr.in[0]);
  memory::desc md = plain(mdt::f32, x), ch = plain(mdt::f32, {x.back()});
  bool shift = kr.in.size() > 2;
  auto flags = dnnl::normalization_flags::use_scale;
  if (shift) flags = flags | dnnl::normalization_flags::use_shift;
  dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md,
                                            static_cast<float>(attr_float(node_of(kr), "eps")), flags);
  dnnl::layer_normalization_forward::primitive_desc pd(d, cpu_engine());
  auto k = std::make_unique<Prepared>(dnnl::layer_normalization_forward(pd), "layer_normalization" + impl(pd));
  k->bind(DNNL_ARG_SRC, 0, md);
  k->bind(DNNL_ARG_SCALE, 1, ch);
  if (shift) k->bind(DNNL_ARG_SHIFT, 2, ch);
  k->bind(DNNL_ARG_DST, -1, md);
  if (pd.mean_desc().get_size()) k->fixed(DNNL_ARG_MEAN, memory(pd.mean_desc(), cpu_engine()));
  if (pd.variance_desc().get_size()) k->fixed(DNNL_ARG_VARIANCE, memory(pd.variance_desc(), cpu_engine()));
  return k;
}

std::unique_ptr<DnnlKernel> make_eltwise(const LirKernel& kr, const LirProgram& p) {
  memory::desc md = plain(mdt::f32, dims_of(p, kr.in[0]));
  algorithm alg = algorithm::undef;
  float alpha;
  unary_alg(kr.op, &alg, &alpha);
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, 0.f);
  dnnl::eltwise_forward::primitive_desc pd(d, cpu_engine());
  auto k = std::make_unique<Prepared>(dnnl::eltwise_forward(pd), "eltwise_" + std::string(op_name(kr.op)) + impl(pd));
  k->bind(DNNL_ARG_SRC, 0, md);
  k->bind(DNNL_ARG_DST, -1, md);
  return k;
}

std::unique_ptr<DnnlKernel> make_binary(const LirKernel& kr, const LirProgram& p) {
  memory::desc md = plain(mdt::f32, dims_of(p, kr.out[0]));
  algorithm alg = algorithm::undef;
  binary_alg(kr.op, &alg);
  dnnl::binary::desc d(alg, md, md, md);
  dnnl::binary::primitive_desc pd(d, cpu_engine());
  auto k = std::make_unique<Prepared>(dnnl::binary(pd), "binary_" + std::string(op_name(kr.op)) + impl(pd));
  k->bind(DNNL_ARG_SRC_0, 0, md);
  k->bind(DNNL_ARG_SRC_1, 1, md);
  k->bind(DNNL_ARG_DST, -1, md);
  return k;
}

std::unique_ptr<DnnlKernel> make_reorder(const LirKernel& kr, const LirProgram& p) {
  memory::dims x = dims_of(p, kr.in[0]), y = dims_of(p, kr.out[0]);
  Node n = node_of(kr);  // attr_ints refers into the node
  const auto& perm = attr_ints(n, "perm");
  memory::dims xs = row_major(x), ss;
  for (int64_t a : perm) ss.push_back(xs[a]);
  mdt t = dnnl_type(dtype_of(p, kr.in[0]));
  memory::desc src(y, t, ss), dst = plain(t, y);
  memory s(src, cpu_engine(), nullptr), d(dst, cpu_engine(), nullptr);
  dnnl::reorder::primitive_desc pd(s, d);
  auto k = std::make_unique<Prepared>(dnnl::reorder(pd), "reorder" + impl(pd));
  k->bind(DNNL_ARG_FROM, 0, src);
  k->bind(DNNL_ARG_TO, -1, dst);
  return k;
}

bool all_f32(const LirKernel& k, const LirProgram& p) {
  for (int b : k.in)
    if (dtype_of(p, b) != DType::f32) return false;
  for (int b : k.out)
    if (dtype_of(p, b) != DType::f32) return false;
  return true;
}

}  // namespace

std::string dnnl_kind(const LirKernel& k, const LirProgram& p, std::string* why) {
  std::string dummy;
  std::string& w = why ? *why : dummy;
  if (k.kind != KernelKind::Library) return w = "generated (fused elementwise) kernel", "";
  if (k.out.size() != 1) return w = "more than one output", "";
  for (int b : k.in)
    if (numel(p.buffers[b].type.shape) == 0) return w = "empty operand", "";
  if (numel(p.buffers[k.out[0]].type.shape) == 0) return w = "empty result", "";
  Node n = node_of(k);
  bool f32 = all_f32(k, p);
  algorithm alg = algorithm::undef;
  float alpha;
  switch (k.op) {
    case OpKind::Linear:
      if (!f32) return w = "not f32", "";
      if (foreign_attrs(k) || !known_activation(attr_str(n, "activation"))) return w = "epilogue oneDNN has no post-op for", "";
      if (dims_of(p, k.in[1]).size() != 2) return w = "weight not 2-D", "";
      return "matmul";
    case OpKind::MatMul: {
      if (!f32) return w = "not f32", "";
      auto a = dims_of(p, k.in[0]), b = dims_of(p, k.in[1]);
      if (a.size() < 2 || b.size() < 2) return w = "vector operand", "";
      size_t r = std::max(a.size(), b.size());
      a.insert(a.begin(), r - a.size(), 1), b.insert(b.begin(), r - b.size(), 1);
      for (size_t i = 0; i + 2 < r; ++i)
        if (a[i] != b[i] && a[i] != 1 && b[i] != 1) return w = "batch dims do not broadcast", "";
      return "matmul";
    }
    case OpKind::DotGeneral: {
      if (!f32) return w = "not f32", "";
      DotShape s;
      return dot_shape(k, p, &s, &w) ? "matmul" : "";
    }
    case OpKind::Conv: {
      auto x = dims_of(p, k.in[0]);
      if (!f32 || k.in.size() != 2) return w = "not f32", "";
      if (x.size() < 3 || x.size() > 5) return w = "rank", "";
      return "convolution";
    }
    case OpKind::ReduceWindow: {
      if (!f32 || attr_str(n, "kind") != "max") return w = "only f32 max windows", "";
      auto x = dims_of(p, k.in[0]);
      size_t r = x.size();
      std::vector<int64_t> win = attr_ints(n, "window"), st = attr_ints(n, "strides"), pads = attr_ints(n, "pads");
      if (st.empty()) st.assign(r, 1);
      if (pads.empty()) pads.assign(2 * r, 0);
      if (r < 3 || r > 5) return w = "rank", "";
      for (size_t i = 0; i < 2; ++i)
        if (win[i] != 1 || st[i] != 1 || pads[i] || pads[r + i]) return w = "window over batch or channel dims", "";
      for (size_t i = 2; i < r; ++i)
        if (pads[i] >= win[i] || pads[r + i] >= win[i]) return w = "a window made only of padding", "";
      return "pooling";
    }
    case OpKind::Softmax:
      if (!f32 || dims_of(p, k.in[0]).empty()) return w = "not f32", "";
      return "softmax";
    case OpKind::LayerNorm: {
      if (!f32) return w = "not f32", "";
      auto x = dims_of(p, k.in[0]);
      if (x.empty() || norm_axis(attr_int(n, "axis"), x.size()) != static_cast<int>(x.size()) - 1)
        return w = "not over the last dim", "";
      for (size_t i = 1; i < k.in.size(); ++i)
        if (dims_of(p, k.in[i]) != memory::dims{x.back()}) return w = "scale/shift not [D]", "";
      return "layer_normalization";
    }
    case OpKind::Transpose: {
      DType t = dtype_of(p, k.in[0]);
      if (dnnl_type(t) == mdt::undef) return w = "dtype", "";
      if (dims_of(p, k.in[0]).empty()) return w = "scalar", "";
      return "reorder";
    }
    default: break;
  }
  if (f32 && k.in.size() == 1 && unary_alg(k.op, &alg, &alpha)) return "eltwise";
  if (f32 && k.in.size() == 2 && binary_alg(k.op, &alg) && dims_of(p, k.in[0]) == dims_of(p, k.out[0]) &&
      dims_of(p, k.in[1]) == dims_of(p, k.out[0]))
    return "binary";
  return w = "no oneDNN primitive for " + std::string(op_name(k.op)), "";
}

std::unique_ptr<DnnlKernel> make_dnnl_kernel(const LirKernel& k, const LirProgram& p) {
  std::string kind = dnnl_kind(k, p);
  try {
    if (kind == "matmul") return k.op == OpKind::Linear ? make_linear(k, p) : make_batched(k, p);
    if (kind == "convolution") return make_conv(k, p);
    if (kind == "pooling") return make_pool(k, p);
    if (kind == "softmax") return make_softmax(k, p);
    if (kind == "layer_normalization") return make_layer_norm(k, p);
    if (kind == "eltwise") return make_eltwise(k, p);
    if (kind == "binary") return make_binary(k, p);
    if (kind == "reorder") return make_reorder(k, p);
  } catch (const dnnl::error&) {
    return nullptr;  // oneDNN has no implementation for this descriptor: the cpu kernel runs it
  }
  return nullptr;
}

std::string dnnl_summary() {
  const dnnl_version_t* v = dnnl_version();
  std::string isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    default: isa = "sse41 or other"; break;
  }
  std::string rt = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB" : "sequential/threadpool";
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " (CPU engine, " + std::to_string(dnnl::engine::get_count(dnnl::engine::kind::cpu)) + " device; runtime " + rt +
         "; ISA " + isa + "; " +
         (v->gpu_runtime == DNNL_RUNTIME_NONE ? std::string("no GPU runtime")
                                              : v->gpu_runtime == DNNL_RUNTIME_OCL ? "GPU runtime OpenCL" : "GPU runtime SYCL") +
         ")";
}

}  // namespace rlx::oneapi
#endif  // RLX_HAVE_DNNL
