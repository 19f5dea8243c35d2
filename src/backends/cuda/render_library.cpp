// CUDA C rendering of shape-specialized library kernels (movement, serial/tree reductions, arg
// reductions, naive dot_general, softmax, layer/rms norm, post-GEMM activations) and the
// render_library dispatch (attention: render_attention.cpp; window/sort families: render_window.cpp).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "backends/cuda/render.h"
#include "backends/cuda/fuse_embed.h"
#include "backends/cuda/render_internal.h"
#include "backends/cuda/render_window.h"

namespace rlx::cuda {

using namespace detail;

namespace {

// out[i] = in0[offset(c)] (or a fill value when `guard` is false): transpose, broadcast, slice, pad.
KernelSource index_kernel(const std::vector<ValueType>& in, const ValueType& out, const std::string& offset,
                          const std::string& guard = "", const std::string& fill = "") {
  auto od = static_dims(out.shape);
  int64_t n = prod(od);
  std::ostringstream b;
  if (guard.empty()) {
    b << "    out0[i] = in0[" << offset << "];\n";
  } else {
    b << "    if (" << guard << ") out0[i] = in0[" << offset << "]; else out0[i] = " << fill << ";\n";
  }
  KernelSource ks;
  ks.code = header(in, {out}) + elementwise_loop(n, od, true, b.str());
  ks.grid = grid_for(n, ks.block);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}


KernelSource reduce_kernel(const LirKernel& k, const ValueType& x, const ValueType& out) {
  const ReduceCode rc = reduce_code(k, x);
  const auto& [kdims, kst, rdims, rst, n, m, inner] = rc.s;
  const Dm d = rc.d;
  const std::string &acc = rc.acc, &init = rc.init, &step = rc.step;
  std::ostringstream b;
  b << "    long long base = " << rc.base << ";\n    " << acc << " a = " << init << ";\n";
  b << rc.loop("0", "++j");
  b << "    out0[i] = " << store(out.dtype, d == Dm::F ? "(float)a" : "a") << ";\n";
  KernelSource ks;
  if (m >= 64 && n >= 1) {
    // Parallel form: the reduced range is split over threads and the partials combined in shared
    // memory. Rows (innermost dim reduced): one 256-thread block per output, consecutive threads
    // read consecutive elements. Columns: 32 outputs x 16 slices per block, the lanes of a warp
    // on consecutive outputs. The combination order differs from the serial loop (sums round
    // differently, within the reduction tolerance; integer sums wrap identically).
    bool rows = inner;
    const int tx = rows ? 1 : 32, ty = rows ? 256 : 16;
    std::ostringstream p;
    p << header({x}, {out}) << "  __shared__ " << acc << " sh[" << tx * ty << "];\n"
      << "  const int tx = " << (rows ? "0" : "threadIdx.x % 32") << ", ty = " << (rows ? "threadIdx.x" : "threadIdx.x / 32")
      << ";\n"
      << "  long long i = (long long)blockIdx.x * " << tx << " + tx;\n"
      << "  " << acc << " a = " << init << ";\n"
      << "  if (i < " << n << ") {\n";
    auto kd = kdims.empty() ? std::vector<int64_t>{1} : kdims;
    p << unravel(kd, "i", "long long");
    p << "    long long base = " << rc.base << ";\n" << rc.loop("ty", "j += " + std::to_string(ty)) << "  }\n"
      << "  sh[ty * " << tx << " + tx] = a;\n  __syncthreads();\n"
      << "  for (int h = " << ty / 2 << "; h > 0; h >>= 1) {\n"
      << "    if (ty < h) { " << acc << " v = sh[(ty + h) * " << tx << " + tx]; a = sh[ty * " << tx << " + tx]; " << step
      << " sh[ty * " << tx << " + tx] = a; }\n"
      << "    __syncthreads();\n  }\n"
      << "  if (ty == 0 && i < " << n << ") out0[i] = " << store(out.dtype, d == Dm::F ? "(float)sh[tx]" : "sh[tx]") << ";\n}\n";
    ks.code = p.str();
    ks.block = static_cast<unsigned>(tx * ty);
    ks.grid = static_cast<unsigned>((n + tx - 1) / tx);
    ks.num_params = 2;
    return ks;
  }
  ks.code = header({x}, {out}) + elementwise_loop(n, kdims.empty() ? std::vector<int64_t>{1} : kdims, true, b.str());
  ks.grid = grid_for(std::max<int64_t>(n, 1), ks.block);
  ks.num_params = 2;
  return ks;
}

KernelSource arg_kernel(const LirKernel& k, const ValueType& x, const ValueType& out) {
  auto xd = static_dims(x.shape);
  int64_t r = static_cast<int64_t>(xd.size());
  Node nd{k.op, {}, {}, k.attrs, ""};
  int64_t ax = norm_axis(attr_int(nd, "axis"), r, "argmax");
  auto xs = strides(xd);
  std::vector<int64_t> kdims, kst;
  for (int64_t d = 0; d < r; ++d)
    if (d != ax) kdims.push_back(xd[d]), kst.push_back(xs[d]);
  if (kdims.empty()) kdims.push_back(1), kst.push_back(0);
  int64_t n = prod(kdims);
  bool is_max = k.op == O::ArgMax;
  bool fl = is_float(x.dtype);
  std::vector<std::string> base;
  for (size_t j = 0; j < kdims.size(); ++j) base.push_back("c" + std::to_string(j) + " * " + std::to_string(kst[j]));
  std::ostringstream b;
  std::string ct = ctype_compute(x.dtype);
  b << "    long long base = " << join_terms(base) << ", best = 0;\n";
  b << "    " << ct << " bv = " << load(x.dtype, "in0[base]") << ";\n";
  b << "    for (long long j = 1; j < " << xd[ax] << "; ++j) {\n";
  b << "      " << ct << " v = " << load(x.dtype, "in0[base + j * " + std::to_string(xs[ax]) + "]") << ";\n";
  if (fl) b << "      if (bv == bv && (v != v || v " << (is_max ? ">" : "<") << " bv)) { bv = v; best = j; }\n";
  else b << "      if (v " << (is_max ? ">" : "<") << " bv) { bv = v; best = j; }\n";
  b << "    }\n    out0[i] = " << store(out.dtype, "best") << ";\n";
  KernelSource ks;
  ks.code = header({x}, {out}) + elementwise_loop(n, kdims, true, b.str());
  ks.grid = grid_for(n, ks.block);
  ks.num_params = 2;
  return ks;
}

// dot_general by one thread per output element (integers, f64, and layouts cuBLASLt cannot take).
KernelSource dot_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out) {
  Node nd{k.op, {}, {}, k.attrs, ""};
  auto ld = static_dims(in[0].shape), rd = static_dims(in[1].shape);
  auto ls = strides(ld), rs = strides(rd);
  const auto &lb = attr_ints(nd, "lhs_batch"), &rb = attr_ints(nd, "rhs_batch"), &lc = attr_ints(nd, "lhs_contract"),
             &rc = attr_ints(nd, "rhs_contract");
  auto od = static_dims(out.shape);
  std::vector<std::string> lo, ro;
  size_t oc = 0;
  for (size_t j = 0; j < lb.size(); ++j, ++oc) {
    lo.push_back("c" + std::to_string(oc) + " * " + std::to_string(ls[lb[j]]));
    ro.push_back("c" + std::to_string(oc) + " * " + std::to_string(rs[rb[j]]));
  }
  auto free_dims = [&](const std::vector<int64_t>& d, const std::vector<int64_t>& b, const std::vector<int64_t>& c) {
    std::vector<int64_t> f;
    for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i)
      if (std::find(b.begin(), b.end(), i) == b.end() && std::find(c.begin(), c.end(), i) == c.end()) f.push_back(i);
    return f;
  };
  for (auto f : free_dims(ld, lb, lc)) lo.push_back("c" + std::to_string(oc++) + " * " + std::to_string(ls[f]));
  for (auto f : free_dims(rd, rb, rc)) ro.push_back("c" + std::to_string(oc++) + " * " + std::to_string(rs[f]));
  int64_t m = 1;
  for (auto c : lc) m *= ld[c];
  DType t = in[0].dtype;
  Dm d = dom(t);
  std::string acc = d == Dm::I || d == Dm::B ? "long long" : (d == Dm::D ? "double" : "float");
  std::ostringstream b;
  b << "    long long lo = " << join_terms(lo) << ", ro = " << join_terms(ro) << ";\n    " << acc << " a = 0;\n";
  b << "    for (long long j = 0; j < " << m << "; ++j) {\n      long long rr = j, lo2 = lo, ro2 = ro;\n";
  for (int64_t q = static_cast<int64_t>(lc.size()) - 1; q >= 0; --q)
    b << "      { long long cc = rr % " << ld[lc[q]] << "; rr /= " << ld[lc[q]] << "; lo2 += cc * " << ls[lc[q]]
      << "; ro2 += cc * " << rs[rc[q]] << "; }\n";
  std::string x = "(" + acc + ")" + load(t, "in0[lo2]"), y = "(" + acc + ")" + load(in[1].dtype, "in1[ro2]");
  if (d == Dm::I || d == Dm::B) b << "      a = wadd(a, wmul(" << x << ", " << y << "));\n";
  else b << "      a += " << x << " * " << y << ";\n";
  b << "    }\n    out0[i] = " << store(out.dtype, "a") << ";\n";
  KernelSource ks;
  ks.code = header(in, {out}) + elementwise_loop(prod(od), od.empty() ? std::vector<int64_t>{1} : od, true, b.str());
  ks.grid = grid_for(prod(od), ks.block);
  ks.num_params = 3;
  return ks;
}

// Softmax along an axis: one warp per (outer, inner) row.
KernelSource softmax_kernel(const LirKernel& k, const ValueType& x, const ValueType& out) {
  auto xd = static_dims(x.shape);
  int64_t r = static_cast<int64_t>(xd.size());
  int64_t ax = norm_axis(attr_int(Node{k.op, {}, {}, k.attrs, ""}, "axis"), r, "softmax");
  int64_t len = xd[ax], inner = strides(xd)[ax], rows = prod(xd) / std::max<int64_t>(len, 1);
  std::string ct = ctype_compute(x.dtype), ninf = x.dtype == DType::f64 ? "(-1.0/0.0)" : "(-1.0f/0.0f)";
  std::ostringstream b;
  b << kPrelude << "extern \"C\" __global__ void rlx_kernel(const " << c_type(x.dtype) << "* __restrict__ in0, "
    << c_type(out.dtype) << "* __restrict__ out0) {\n"
    << "  long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; int lane = threadIdx.x & 31;\n"
    << "  if (row >= " << rows << ") return;\n"
    << "  long long base = (row / " << inner << ") * " << len * inner << " + row % " << inner << ";\n"
    << "  " << ct << " m = " << ninf << "; bool nan_ = false;\n"
    << "  for (int j = lane; j < " << len << "; j += 32) { " << ct << " v = " << load(x.dtype, "in0[base + (long long)j * " + std::to_string(inner) + "]")
    << "; nan_ |= v != v; m = v > m ? v : m; }\n"
    << "  m = warp_max(m); nan_ = __any_sync(0xffffffffu, nan_);\n"
    << "  " << ct << " s = 0;\n"
    << "  for (int j = lane; j < " << len << "; j += 32) s += " << fn(x.dtype, "exp") << "(" << load(x.dtype, "in0[base + (long long)j * " + std::to_string(inner) + "]") << " - m);\n"
    << "  s = warp_sum(s);\n"
    << "  for (int j = lane; j < " << len << "; j += 32) { " << ct << " v = " << load(x.dtype, "in0[base + (long long)j * " + std::to_string(inner) + "]")
    << "; " << ct << " y = nan_ ? (" << ct << ")(0.0/0.0) : " << fn(x.dtype, "exp") << "(v - m) / s; out0[base + (long long)j * " << inner << "] = "
    << store(out.dtype, "y") << "; }\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.block = 256;
  ks.grid = grid_for(rows * 32, ks.block);
  ks.num_params = 2;
  return ks;
}

// LayerNorm / RmsNorm over the trailing dims from `axis`: one warp per row. With attr cuda_residual
// (set by the backend's fold-residual-add rewrite) the row is in0 + in1, rounded to the dtype as the
// add would have stored it, and gamma/beta follow as in2/in3.
KernelSource norm_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out) {
  const ValueType& x = in[0];
  auto xd = static_dims(x.shape);
  int64_t r = static_cast<int64_t>(xd.size());
  bool layer = k.op == O::LayerNorm, res = k.attrs.count("cuda_residual") > 0;
  Node nd{k.op, {}, {}, k.attrs, ""};
  int64_t ax = layer ? norm_axis(attr_int(nd, "axis"), r, "layer_norm") : r - 1;
  double eps = attr_float(nd, "eps");
  int64_t inner = 1;
  for (int64_t i = ax; i < r; ++i) inner *= xd[i];
  int64_t rows = inner ? prod(xd) / inner : 0;
  size_t gi = res ? 2 : 1;
  bool beta = in.size() > gi + 1;
  std::string ct = ctype_compute(x.dtype);
  auto X = [&](const std::string& idx) {
    if (!res) return load(x.dtype, "in0[" + idx + "]");
    return wrap(x.dtype, load(x.dtype, "in0[" + idx + "]") + " + " + load(in[1].dtype, "in1[" + idx + "]"));
  };
  std::ostringstream b;
  b << header(in, {out})
    << "  long long row = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; int lane = threadIdx.x & 31;\n"
    << "  if (row >= " << rows << ") return;\n  long long base = row * " << inner << ";\n"
    << "  " << ct << " s = 0;\n";
  std::string g = "in" + std::to_string(gi), bt = "in" + std::to_string(gi + 1);
  bool same_dt = true;
  for (auto& t : in) same_dt &= t.dtype == x.dtype;
  bool vec_dt = x.dtype == DType::f16 || x.dtype == DType::bf16 || x.dtype == DType::f32;
  if (inner <= 1024 && inner % 128 == 0 && same_dt && vec_dt && out.dtype == x.dtype) {
    // Row in registers, 4 elements per lane per 128-wide chunk: 8- or 16-byte loads and stores.
    int64_t nc = inner / 128;
    std::string el = c_type(x.dtype), vt = x.dtype == DType::f32 ? "float4" : "uint2";
    auto ldv = [&](const std::string& ptr, const std::string& name) {
      return "      " + vt + " " + name + "_v = *reinterpret_cast<const " + vt + "*>(" + ptr + " + o);\n      const " + el +
             "* " + name + " = reinterpret_cast<const " + el + "*>(&" + name + "_v);\n";
    };
    b << "  float xv[" << nc * 4 << "];\n"
      << "  #pragma unroll\n  for (int c = 0; c < " << nc << "; ++c) {\n"
      << "    long long o = base + c * 128 + lane * 4;\n    {\n" << ldv("in0", "xa");
    if (res) b << ldv("in1", "xb");
    b << "      #pragma unroll\n      for (int e = 0; e < 4; ++e) xv[c * 4 + e] = "
      << (res ? wrap(x.dtype, load(x.dtype, "xa[e]") + " + " + load(x.dtype, "xb[e]")) : load(x.dtype, "xa[e]")) << ";\n    }\n  }\n";
    if (layer)
      b << "  #pragma unroll\n  for (int q = 0; q < " << nc * 4 << "; ++q) s += xv[q];\n"
        << "  float mean = warp_sum(s) / " << inner << ";\n  s = 0;\n"
        << "  #pragma unroll\n  for (int q = 0; q < " << nc * 4 << "; ++q) { float d = xv[q] - mean; s += d * d; }\n";
    else
      b << "  float mean = 0;\n  #pragma unroll\n  for (int q = 0; q < " << nc * 4 << "; ++q) s += xv[q] * xv[q];\n";
    b << "  float inv = 1.0f / sqrtf(warp_sum(s) / " << inner << " + (float)" << num(eps) << ");\n"
      << "  #pragma unroll\n  for (int c = 0; c < " << nc << "; ++c) {\n"
      << "    long long o = c * 128 + lane * 4;\n    {\n" << ldv(g, "ga");
    if (beta) b << ldv(bt, "be");
    b << "      " << vt << " y_v; " << el << "* y = reinterpret_cast<" << el << "*>(&y_v);\n"
      << "      #pragma unroll\n      for (int e = 0; e < 4; ++e) y[e] = "
      << store(x.dtype, "(xv[c * 4 + e] - mean) * inv * " + load(x.dtype, "ga[e]") + (beta ? " + " + load(x.dtype, "be[e]") : ""))
      << ";\n      *reinterpret_cast<" << vt << "*>(out0 + base + o) = y_v;\n    }\n  }\n}\n";
    KernelSource ks;
    ks.code = b.str();
    ks.grid = grid_for(rows * 32, 256);
    ks.num_params = static_cast<int>(in.size()) + 1;
    return ks;
  }
  if (inner <= 1024) {  // the row lives in registers: one read of x (and the residual) instead of three
    int64_t npl = (inner + 31) / 32;
    b << "  " << ct << " xv[" << npl << "];\n"
      << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) { int j = lane + 32 * q; xv[q] = j < " << inner
      << " ? " << X("base + j") << " : (" << ct << ")0; }\n";
    if (layer)
      b << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) s += xv[q];\n"
        << "  " << ct << " mean = warp_sum(s) / " << inner << ";\n  s = 0;\n"
        << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) if (lane + 32 * q < " << inner << ") { " << ct
        << " d = xv[q] - mean; s += d * d; }\n";
    else
      b << "  " << ct << " mean = 0;\n"
        << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) s += xv[q] * xv[q];\n";
    b << "  " << ct << " inv = " << (x.dtype == DType::f64 ? "1.0 / sqrt" : "1.0f / sqrtf") << "(warp_sum(s) / " << inner
      << " + (" << ct << ")" << num(eps) << ");\n"
      << "  #pragma unroll\n  for (int q = 0; q < " << npl << "; ++q) { int j = lane + 32 * q; if (j < " << inner
      << ") { " << ct << " y = (xv[q] - mean) * inv * " << load(in[gi].dtype, g + "[j]")
      << (beta ? " + " + load(in[gi + 1].dtype, bt + "[j]") : "") << "; out0[base + j] = " << store(out.dtype, "y")
      << "; } }\n}\n";
    KernelSource ks;
    ks.code = b.str();
    ks.grid = grid_for(rows * 32, 256);
    ks.num_params = static_cast<int>(in.size()) + 1;
    return ks;
  }
  if (layer) {
    b << "  for (int j = lane; j < " << inner << "; j += 32) s += " << X("base + j") << ";\n"
      << "  " << ct << " mean = warp_sum(s) / " << inner << ";\n  s = 0;\n"
      << "  for (int j = lane; j < " << inner << "; j += 32) { " << ct << " d = " << X("base + j")
      << " - mean; s += d * d; }\n";
  } else {
    b << "  " << ct << " mean = 0;\n"
      << "  for (int j = lane; j < " << inner << "; j += 32) { " << ct << " d = " << X("base + j") << "; s += d * d; }\n";
  }
  b << "  " << ct << " inv = " << (x.dtype == DType::f64 ? "1.0 / sqrt" : "1.0f / sqrtf") << "(warp_sum(s) / " << inner
    << " + (" << ct << ")" << num(eps) << ");\n"
    << "  for (int j = lane; j < " << inner << "; j += 32) { " << ct << " y = (" << X("base + j")
    << " - mean) * inv * " << load(in[gi].dtype, g + "[j]") << (beta ? " + " + load(in[gi + 1].dtype, bt + "[j]") : "")
    << "; out0[base + j] = " << store(out.dtype, "y") << "; }\n}\n";
  KernelSource ks;
  ks.code = b.str();
  ks.grid = grid_for(rows * 32, 256);
  ks.num_params = static_cast<int>(in.size()) + 1;
  return ks;
}

}  // namespace

// In-place activation after a GEMM whose epilogue cuBLASLt cannot fuse exactly (erf-GELU, SiLU),
// computed in f32 and rounded once; 16-byte loads/stores when the size allows.
KernelSource render_activation(const std::string& act, const ValueType& t) {
  RLX_CHECK(act == "gelu" || act == "silu", "[cuda] linear: unknown activation '", act, "'");
  std::string f = act == "gelu" ? "0.5f * x * (1.0f + erff(x * 0.70710678118654752f))" : "x / (1.0f + expf(-x))";
  Graph body;
  body.outputs.push_back(body.add_input("a0", t.dtype, t.shape));
  KernelSource base = render_fused(body, t);  // for the prelude
  std::string pre = base.code.substr(0, base.code.find("extern \"C\""));
  int64_t n = numel(t.shape);
  bool half = t.dtype == DType::f16 || t.dtype == DType::bf16;
  int width = half ? 8 : (t.dtype == DType::f32 ? 4 : 1);
  if (n % width) width = 1;
  std::string ld = t.dtype == DType::f16 ? "h2f(e)" : t.dtype == DType::bf16 ? "bf2f(e)" : "(float)e";
  std::string st = t.dtype == DType::f16 ? "f2h(y)" : t.dtype == DType::bf16 ? "f2bf(y)" : "y";
  std::string elem = c_type(t.dtype);
  int64_t nv = n / width;
  std::ostringstream c;
  c << pre << "extern \"C\" __global__ void rlx_kernel(" << elem << "* out0) {\n"
    << "  for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < " << nv
    << "; v += (long long)gridDim.x * blockDim.x) {\n";
  if (width > 1)
    c << "    uint4 u = reinterpret_cast<uint4*>(out0)[v];\n    " << elem << "* p = reinterpret_cast<" << elem
      << "*>(&u);\n";
  else
    c << "    " << elem << "* p = out0 + v;\n";
  c << "    #pragma unroll\n    for (int q = 0; q < " << width << "; ++q) { " << elem << " e = p[q]; float x = " << ld
    << "; float y = " << f << "; p[q] = " << st << "; }\n";
  if (width > 1) c << "    reinterpret_cast<uint4*>(out0)[v] = u;\n";
  c << "  }\n}\n";
  KernelSource ks;
  ks.code = c.str();
  ks.block = 256;
  ks.grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((nv + 255) / 256, 1 << 20)));
  ks.num_params = 1;
  return ks;
}

bool render_library(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                    KernelSource* ks, int64_t sm_count) {
  if (k.attrs.count("cuda_embed")) return *ks = render_embed_norm(k, in, out[0]), true;  // fuse_embed.h
  Node nd{k.op, {}, {}, k.attrs, ""};
  const ValueType& o = out[0];
  auto od = static_dims(o.shape);
  int64_t r = static_cast<int64_t>(od.size());
  if (is_elementwise(k.op)) {
    Graph body;
    std::vector<ValueId> ins;
    for (size_t i = 0; i < in.size(); ++i) ins.push_back(body.add_input("a" + std::to_string(i), in[i].dtype, in[i].shape));
    body.outputs.push_back(body.add_node(k.op, ins, k.attrs)[0]);
    *ks = render_fused(body, o);
    return true;
  }
  switch (k.op) {
    case O::Reshape: case O::Transpose: case O::BroadcastInDim: case O::Slice: case O::Expand: case O::Squeeze:
    case O::Unsqueeze: {
      auto xd = static_dims(in[0].shape);
      auto xs = strides(xd);
      std::vector<std::string> t;
      if (k.op == O::Reshape || k.op == O::Squeeze || k.op == O::Unsqueeze) {
        *ks = index_kernel(in, o, "i");
        return true;
      }
      if (k.op == O::Transpose) {
        const auto& perm = attr_ints(nd, "perm");
        for (int64_t d = 0; d < r; ++d) t.push_back("c" + std::to_string(d) + " * " + std::to_string(xs[perm[d]]));
      } else if (k.op == O::BroadcastInDim) {
        const auto& dims = attr_ints(nd, "dims");
        for (size_t j = 0; j < dims.size(); ++j)
          if (xd[j] != 1) t.push_back("c" + std::to_string(dims[j]) + " * " + std::to_string(xs[j]));
      } else if (k.op == O::Expand) {
        *ks = index_kernel(in, o, bcast_offset(xd, od));
        return true;
      } else {  // slice
        const auto& st = attr_ints(nd, "start");
        auto stride = attr_ints(nd, "stride");
        if (stride.empty()) stride.assign(r, 1);
        for (int64_t d = 0; d < r; ++d)
          t.push_back("(" + std::to_string(st[d]) + " + c" + std::to_string(d) + " * " + std::to_string(stride[d]) +
                      ") * " + std::to_string(xs[d]));
      }
      *ks = index_kernel(in, o, join_terms(t));
      return true;
    }
    case O::Pad: {
      auto xd = static_dims(in[0].shape);
      auto xs = strides(xd);
      const auto& lo = attr_ints(nd, "low");
      std::vector<std::string> t, g;
      for (int64_t d = 0; d < r; ++d) {
        std::string p = "(c" + std::to_string(d) + " - (" + std::to_string(lo[d]) + "))";
        g.push_back(p + " >= 0 && " + p + " < " + std::to_string(xd[d]));
        t.push_back(p + " * " + std::to_string(xs[d]));
      }
      std::string guard;
      for (auto& x : g) guard += (guard.empty() ? "" : " && ") + x;
      std::string fill = store(o.dtype, convert_expr(DType::f64, o.dtype, num(attr_float(nd, "value"))));
      *ks = index_kernel(in, o, join_terms(t), guard.empty() ? "true" : guard, fill);
      return true;
    }
    case O::Concatenate: {
      int64_t ax = norm_axis(attr_int(nd, "axis"), r, "concatenate");
      std::ostringstream b;
      int64_t start = 0;
      for (size_t j = 0; j < in.size(); ++j) {
        auto xd = static_dims(in[j].shape);
        auto xs = strides(xd);
        std::vector<std::string> t;
        for (int64_t d = 0; d < r; ++d)
          t.push_back((d == ax ? "(c" + std::to_string(d) + " - " + std::to_string(start) + ")" : "c" + std::to_string(d)) +
                      " * " + std::to_string(xs[d]));
        b << "    " << (j ? "else " : "") << "if (c" << ax << " < " << start + xd[ax] << ") out0[i] = in" << j << "["
          << join_terms(t) << "];\n";
        start += xd[ax];
      }
      ks->code = header(in, {o}) + elementwise_loop(prod(od), od, true, b.str());
      ks->grid = grid_for(prod(od), 256);
      ks->num_params = static_cast<int>(in.size()) + 1;
      return true;
    }
    case O::Gather: case O::Embedding: {
      auto xd = static_dims(in[0].shape), id = static_dims(in[1].shape);
      int64_t ax = k.op == O::Embedding ? 0 : norm_axis(attr_int(nd, "axis"), static_cast<int64_t>(xd.size()), "gather");
      int64_t inner = 1, ni = prod(id), len = xd[ax];
      for (size_t d = ax + 1; d < xd.size(); ++d) inner *= xd[d];
      std::ostringstream b;
      std::string it = idx_type(prod(od));
      b << "    " << it << " kk = i % " << inner << ", jj = (i / " << inner << ") % " << ni << ", oo = i / " << inner * ni
        << ";\n    long long p = (long long)in1[jj]; if (p < 0) p += " << len << "; p = p < 0 ? 0 : (p >= " << len
        << " ? " << len - 1 << " : p);\n    out0[i] = in0[(oo * " << len << " + p) * " << inner << " + kk];\n";
      ks->code = header(in, {o}) + elementwise_loop(prod(od), od, false, b.str());
      ks->grid = grid_for(prod(od), 256);
      ks->num_params = 3;
      return true;
    }
    case O::Iota: {
      int64_t dim = attr_int(nd, "dim");
      *ks = KernelSource{};
      ks->code = header({}, {o}) + elementwise_loop(prod(od), od, true,
                                                      "    out0[i] = " + store(o.dtype, "c" + std::to_string(dim)) + ";\n");
      ks->grid = grid_for(prod(od), 256);
      ks->num_params = 1;
      return true;
    }
    case O::ReduceSum: case O::ReduceMax: case O::ReduceMin: case O::ReduceProd:
      *ks = reduce_kernel(k, in[0], o);
      return true;
    case O::ArgMax: case O::ArgMin: *ks = arg_kernel(k, in[0], o); return true;
    case O::Cumsum: {  // one thread per line along the axis; floats accumulate in double like the reference
      if (in[0].dtype == DType::boolean) return false;
      auto xd = static_dims(in[0].shape);
      int64_t ax = norm_axis(attr_int(nd, "axis"), r, "cumsum");
      bool rev = nd.attrs.count("reverse") && attr_int(nd, "reverse") != 0;
      bool excl = nd.attrs.count("exclusive") && attr_int(nd, "exclusive") != 0;
      int64_t len = xd[ax], inner = strides(xd)[ax], lines = len ? prod(xd) / len : 0;
      Dm d = dom(in[0].dtype);
      std::string acc = d == Dm::I ? "long long" : "double";
      std::ostringstream b;
      b << "    long long base = (i / " << inner << ") * " << len * inner << " + i % " << inner << ";\n"
        << "    " << acc << " a = 0;\n"
        << "    for (long long s = 0; s < " << len << "; ++s) {\n"
        << "      long long f = base + (" << (rev ? std::to_string(len - 1) + " - s" : "s") << ") * " << inner << ";\n"
        << "      " << acc << " v = (" << acc << ")" << load(in[0].dtype, "in0[f]") << ";\n";
      std::string add = d == Dm::I ? "a = wadd(a, v);" : "a += v;";
      std::string put = d == Dm::I ? store(o.dtype, wrap(o.dtype, "a")) : (o.dtype == DType::f16 || o.dtype == DType::bf16
                                                                             ? store(o.dtype, "odd_f(a)") : store(o.dtype, "a"));
      if (!excl) b << "      " << add << "\n";
      b << "      out0[f] = " << put << ";\n";
      if (excl) b << "      " << add << "\n";
      b << "    }\n";
      ks->code = header(in, {o}) + elementwise_loop(std::max<int64_t>(lines, 0), {std::max<int64_t>(lines, 1)}, false, b.str());
      ks->code.insert(ks->code.find("extern \"C\""), kRoundOdd);
      ks->grid = grid_for(std::max<int64_t>(lines, 1), 256);
      ks->num_params = 2;
      return true;
    }
    case O::RngUniform: {  // splitmix64 per element, as src/ir/rng.h; halves rounded through f32 by round-to-odd
      if (!is_float(o.dtype)) return false;
      uint64_t seed = static_cast<uint64_t>(attr_int(nd, "seed"));
      double lo = attr_float(nd, "low"), hi = attr_float(nd, "high");
      std::ostringstream b;
      b << "    unsigned long long z = " << seed << "ull + ((unsigned long long)i + 1ull) * 0x9E3779B97F4A7C15ull;\n"
        << "    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;\n    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;\n"
        << "    z ^= z >> 31;\n"
        << "    double v = " << num(lo) << " + (" << num(hi) << " - " << num(lo) << ") * ((double)(z >> 11) * 1.1102230246251565e-16);\n"
        << "    out0[i] = " << (o.dtype == DType::f64 ? "v" : o.dtype == DType::f32 ? "(float)v" : store(o.dtype, "odd_f(v)"))
        << ";\n";
      *ks = KernelSource{};
      ks->code = header({}, {o}) + elementwise_loop(prod(od), od.empty() ? std::vector<int64_t>{1} : od, false, b.str());
      ks->code.insert(ks->code.find("extern \"C\""), kRoundOdd);
      ks->grid = grid_for(std::max<int64_t>(prod(od), 1), 256);
      ks->num_params = 1;
      return true;
    }
    case O::DotGeneral: *ks = dot_kernel(k, in, o); return true;
    case O::Softmax: *ks = softmax_kernel(k, in[0], o); return true;
    case O::LayerNorm: case O::RmsNorm: *ks = norm_kernel(k, in, o); return true;
    case O::Attention: *ks = attention_kernel(k, in, o, sm_count); return true;
    // window/ordering families through src/codegen (render_window.cpp)
    case O::Conv: case O::ReduceWindow: case O::Sort: case O::TopK: case O::ScatterAdd:
      return render_shared_family(k, in, out, ks);
    default: return false;
  }
}

}  // namespace rlx::cuda
