// CUDA C rendering of merged launches (executable.cpp's merge-launches, planned in fuse_lir.cpp):
// several LIR kernels as device-function parts of one launch: single-block regions (block-wide
// reductions, shared-memory intermediates), row launches (row ranges per block, last-block tail)
// and side-by-side elementwise parts.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/render.h"
#include "backends/cuda/render_internal.h"

namespace rlx::cuda {

using namespace detail;

namespace {

bool index_op(OpKind op) {
  switch (op) {
    case O::Reshape: case O::Transpose: case O::BroadcastInDim: case O::Slice: case O::Expand: case O::Squeeze:
    case O::Unsqueeze: case O::Pad: case O::Concatenate: case O::Iota: case O::Gather: case O::Embedding:
    case O::ArgMax: case O::ArgMin:
      return true;
    default: return false;
  }
}

}  // namespace

std::string detail::block_reduce_part(const LirKernel& k, const ValueType& x, const ValueType& out,
                                      const std::string& name, int threads, bool rows, int64_t rows_per_block) {
  auto xd = static_dims(x.shape);
  const ReduceCode rc = reduce_code(k, x);
  const auto& [kdims, kst, rdims, rst, n, m, inner] = rc.s;
  const Dm d = rc.d;
  const std::string &acc = rc.acc, &init = rc.init, &step = rc.step;
  int64_t S = 1, nb = rows ? std::max<int64_t>(1, n / std::max<int64_t>(xd[0], 1) * rows_per_block) : n;
  while (S * 2 * std::max<int64_t>(nb, 1) <= threads && S * 2 <= std::max<int64_t>(m, 1)) S *= 2;
  int64_t OC = threads / S;
  std::ostringstream p;
  std::string lo = rows ? "lo_" : "0", hi = rows ? "hi_" : std::to_string(n);
  p << "__device__ __forceinline__ void " << name
    << "(const int bid_, const int nblk_, unsigned long long* rsh_, const long long lo_, const long long hi_, const "
    << c_type(x.dtype) << "* in0, " << c_type(out.dtype) << "* out0) {\n"
    << "  " << acc << "* sh = reinterpret_cast<" << acc << "*>(rsh_);\n"
    << "  const int tx = threadIdx.x % " << OC << ", s = threadIdx.x / " << OC << ";\n"
    << "  for (long long o0 = " << lo << "; o0 < " << (rows ? "hi_" : std::to_string(std::max<int64_t>(n, 1))) << "; o0 += " << OC << ") {\n"
    << "    long long i = o0 + tx;\n    " << acc << " a = " << init << ";\n"
    << "    if (i < " << hi << " && s < " << S << ") {\n";
  p << unravel(kdims.empty() ? std::vector<int64_t>{1} : kdims, "i", "long long");
  p << "    long long base = " << rc.base << ";\n" << rc.loop("s", "j += " + std::to_string(S)) << "    }\n";
  if (S > 1) {
    p << "    sh[threadIdx.x] = a;\n    __syncthreads();\n"
      << "    for (int h = " << S / 2 << "; h > 0; h >>= 1) {\n"
      << "      if (s < h) { " << acc << " v = sh[(s + h) * " << OC << " + tx]; a = sh[s * " << OC << " + tx]; " << step
      << " sh[s * " << OC << " + tx] = a; }\n      __syncthreads();\n    }\n"
      << "    a = sh[tx];\n";
  }
  p << "    if (s == 0 && i < " << hi << ") out0[i] = " << store(out.dtype, d == Dm::F ? "(float)a" : "a") << ";\n";
  if (S > 1) p << "    __syncthreads();\n";
  p << "  }\n}\n";
  return p.str();
}

std::string detail::as_part(const std::string& code, const std::string& name, int block_threads, bool rows,
                            const ValueType& out) {
  const std::string entry = "extern \"C\" __global__ void rlx_kernel(";
  size_t at = code.find(entry);
  RLX_CHECK(at != std::string::npos, "[cuda] merge: rendered kernel without entry point");
  std::string s = "__device__ __forceinline__ void " + name +
                  "(const int bid_, const int nblk_, unsigned long long* rsh_, const long long lo_, const long long hi_, " +
                  code.substr(at + entry.size());
  auto repl = [&](const std::string& from, const std::string& to) {
    int n = 0;
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to), ++n;
    return n;
  };
  repl("__restrict__ ", "");
  repl("blockIdx.x", "bid_");
  repl("gridDim.x", "nblk_");
  if (block_threads > 0) {  // one block of known size: loop trip counts are constants, unroll for loads in flight
    std::string t = std::to_string(block_threads);
    repl("blockDim.x", t);
    if (rows) {
      int64_t n = numel(out.shape);
      std::string it = idx_type(n);
      RLX_CHECK(repl("i = bid_ * (" + it + ")" + t + " + threadIdx.x; i < " + std::to_string(n) + ";",
                     "i = lo_ + threadIdx.x; i < hi_;") == 1,
                "[cuda] merge: no row loop in a part");
    }
    repl("  for (int i = ", "  #pragma unroll 4\n  for (int i = ");
    repl("  for (long long i = ", "  #pragma unroll 4\n  for (long long i = ");
  }
  return s;
}

bool mergeable(const LirKernel& k, const std::vector<ValueType>& in, const std::vector<ValueType>& out, bool sequential) {
  if (out.size() != 1) return false;
  for (auto& t : in)
    if (t.dtype == DType::c64) return false;
  if (out[0].dtype == DType::c64) return false;
  if (k.kind == KernelKind::Generated) return true;
  if (is_elementwise(k.op)) return true;
  if (index_op(k.op)) return k.op != O::Reshape || in.size() == 1;
  return sequential && is_reduce_op(k.op) && in.size() == 1;
}

namespace {

struct TailRed {
  std::string init, step;  // on `a` and `v` (double)
  int64_t n = 1, C = 1;    // outputs; row length
};

TailRed tail_red(const LirKernel& k, const ValueType& in, int64_t rows) {
  TailRed t;
  auto d = static_dims(in.shape);
  t.C = numel(in.shape) / std::max<int64_t>(rows, 1);
  Node nd{k.op, {}, {}, k.attrs, ""};
  int64_t r = static_cast<int64_t>(d.size());
  std::set<int64_t> ax;
  for (auto a : attr_ints(nd, "axes")) ax.insert(norm_axis(a, r, "reduce"));
  t.n = static_cast<int64_t>(ax.size()) == r ? 1 : t.C;
  switch (k.op) {
    case O::ReduceSum: t.init = "0.0"; t.step = "a += v;"; break;
    case O::ReduceMax: t.init = "__longlong_as_double(0xfff0000000000000LL)"; t.step = "a = fmaxr(a, v);"; break;
    default: t.init = "__longlong_as_double(0x7ff0000000000000LL)"; t.step = "a = fminr(a, v);"; break;
  }
  return t;
}

}  // namespace

bool tail_reduction(const LirKernel& k, const ValueType& in, int64_t rows) {
  if (k.kind != KernelKind::Library || !(k.op == O::ReduceSum || k.op == O::ReduceMax || k.op == O::ReduceMin)) return false;
  if (!is_float(in.dtype) || in.dtype == DType::f64 || k.in.size() != 1) return false;
  auto d = static_dims(in.shape);
  if (d.empty() || d.size() > 2 || d[0] != rows) return false;
  Node nd{k.op, {}, {}, k.attrs, ""};
  int64_t r = static_cast<int64_t>(d.size());
  std::set<int64_t> ax;
  for (auto a : attr_ints(nd, "axes")) ax.insert(norm_axis(a, r, "reduce"));
  // Column sums need one thread per column in the partial (threads / S >= columns).
  bool all = static_cast<int64_t>(ax.size()) == r;
  return ax.count(0) && (all || (ax.size() == 1 && numel(in.shape) / rows <= kRowThreads));
}

int64_t rows_per_block(int64_t max_row_elems, int64_t rows, bool tail) {
  int64_t r = std::max<int64_t>(1, kRowThreads / std::max<int64_t>(max_row_elems, 1));
  if (tail) r = std::max<int64_t>(r, (rows + kMaxTailBlocks - 1) / kMaxTailBlocks);  // few partials to combine
  return r;
}

KernelSource render_merged(const std::vector<MergePart>& parts, MergeMode mode, int64_t rows, int64_t sm_count) {
  const bool sequential = mode != MergeMode::Concurrent, row_mode = mode == MergeMode::Rows;
  const int threads = mode == MergeMode::Sequential ? kSequentialThreads : (row_mode ? kRowThreads : 256);
  int64_t max_inner = 1;
  if (row_mode)
    for (auto& mp : parts)
      if (!mp.tail) max_inner = std::max<int64_t>(max_inner, numel(mp.out[0].shape) / rows);
  std::ostringstream tail_partial, tail_finish, tail_rest;
  int64_t tail_doubles = 0;
  bool any_tail = false;
  for (auto& mp : parts) any_tail |= mp.tail;
  const int64_t rpb = row_mode ? rows_per_block(max_inner, rows, any_tail) : 0;
  std::ostringstream fns, call;
  std::vector<std::string> params;
  std::vector<int64_t> grids;
  int np = 0;
  int64_t smem_bytes = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const MergePart& mp = parts[i];
    std::string name = "part" + std::to_string(i);
    KernelSource ks;
    bool red = mp.k->kind != KernelKind::Generated && is_reduce_op(mp.k->op);
    if (mp.tail && red) {  // per-block partial over this block's rows, finished by the last block
      RLX_CHECK(row_mode && tail_reduction(*mp.k, mp.in[0], rows), "[cuda] merge: bad tail reduction");
      TailRed t = tail_red(*mp.k, mp.in[0], rows);
      std::string x = "p" + std::to_string(np), y = "p" + std::to_string(np + 1);
      int64_t off_in = mp.smem.size() > 0 ? mp.smem[0] : -1;
      std::string ct = c_type(mp.in[0].dtype);
      std::string src = off_in >= 0 ? "(reinterpret_cast<" + ct + "*>(smem_ + " + std::to_string(off_in) + ") - r0_ * " +
                                          std::to_string(t.C) + ")"
                                    : x;
      params.push_back("const " + ct + "* " + x);
      params.push_back(c_type(mp.out[0].dtype) + "* " + y);
      np += 2;
      std::string base = std::to_string(tail_doubles);
      int64_t S = 1;
      while (S * 2 * t.n <= threads) S *= 2;
      int64_t OC = threads / S;
      tail_partial << "  { // " << mp.k->label() << ": partial of this block's rows\n"
                   << "    const " << ct << "* src = " << src << ";\n"
                   << "    const int tx = threadIdx.x % " << OC << ", s = threadIdx.x / " << OC << ";\n"
                   << "    double a = " << t.init << ";\n";
      if (t.n == 1)
        tail_partial << "    for (long long e = r0_ * " << t.C << " + threadIdx.x; e < r1_ * " << t.C << "; e += " << threads
                     << ") { double v = " << load(mp.in[0].dtype, "src[e]") << "; " << t.step << " }\n";
      else
        tail_partial << "    if (tx < " << t.n << ") for (long long r = r0_ + s; r < r1_; r += " << S << ") { double v = "
                     << load(mp.in[0].dtype, "src[r * " + std::to_string(t.C) + " + tx]") << "; " << t.step << " }\n";
      tail_partial << "    double* sh = reinterpret_cast<double*>(rsh_);\n    sh[threadIdx.x] = a;\n    __syncthreads();\n"
                   << "    for (int h = " << S / 2 << "; h > 0; h >>= 1) {\n"
                   << "      if (s < h) { double v = sh[(s + h) * " << OC << " + tx]; a = sh[s * " << OC << " + tx]; " << t.step
                   << " sh[s * " << OC << " + tx] = a; }\n      __syncthreads();\n    }\n"
                   << "    if (s == 0 && tx < " << t.n << ") part_[" << base << " + blockIdx.x * " << t.n << " + tx] = sh[tx];\n"
                   << "    __syncthreads();\n  }\n";
      // Finish: S slices of the blocks' partials per output, combined by a shared-memory tree
      // (the same order on every run: deterministic).
      tail_finish << "  { // " << mp.k->label() << ": combine the blocks' partials\n"
                  << "    const int tx = threadIdx.x % " << OC << ", s = threadIdx.x / " << OC << ";\n"
                  << "    double a = " << t.init << ";\n"
                  << "    if (tx < " << t.n << ") {\n      #pragma unroll 8\n      for (int b = s; b < gridDim.x; b += " << S
                  << ") { double v = __ldcg(part_ + " << base << " + b * " << t.n << " + tx); " << t.step << " }\n    }\n"
                  << "    double* sh = reinterpret_cast<double*>(rsh_);\n    sh[threadIdx.x] = a;\n    __syncthreads();\n"
                  << "    for (int h = " << S / 2 << "; h > 0; h >>= 1) {\n"
                  << "      if (s < h) { double v = sh[(s + h) * " << OC << " + tx]; a = sh[s * " << OC << " + tx]; " << t.step
                  << " sh[s * " << OC << " + tx] = a; }\n      __syncthreads();\n    }\n"
                  << "    if (s == 0 && tx < " << t.n << ") " << y << "[tx] = " << store(mp.out[0].dtype, "(float)sh[tx]") << ";\n"
                  << "    __syncthreads();\n  }\n";
      tail_doubles += t.n * ((rows + rpb - 1) / rpb);  // one partial per block and output
      grids.push_back(0);
      continue;
    }
    if (mp.k->kind == KernelKind::Generated) {
      ks = render_fused(mp.k->body, mp.out[0]);
    } else if (!red) {
      RLX_CHECK(render_library(*mp.k, mp.in, mp.out, &ks, sm_count), "[cuda] merge: no kernel for ", mp.k->label());
    }
    RLX_CHECK(!red || sequential, "[cuda] merge: a reduction in a concurrent launch");
    if (red) fns << block_reduce_part(*mp.k, mp.in[0], mp.out[0], name, threads, row_mode, rpb);
    else fns << as_part(ks.code, name, sequential ? threads : 0, row_mode && !mp.tail, mp.out[0]);
    grids.push_back(ks.grid);
    std::vector<std::string> args;
    auto arg = [&](size_t slot, const ValueType& t, bool is_const) {
      params.push_back((is_const ? "const " : "") + c_type(t.dtype) + "* p" + std::to_string(np));
      int64_t off = slot < mp.smem.size() ? mp.smem[slot] : -1;
      if (off >= 0) {
        int64_t inner = row_mode ? numel(t.shape) / rows : 0;  // a row block keeps its own rows only
        args.push_back("(reinterpret_cast<" + c_type(t.dtype) + "*>(smem_ + " + std::to_string(off) + ")" +
                       (row_mode ? " - r0_ * " + std::to_string(inner) : "") + ")");
        smem_bytes = std::max<int64_t>(smem_bytes, off + (row_mode ? rpb * inner : numel(t.shape)) * static_cast<int64_t>(dtype_size(t.dtype)));
      } else {
        args.push_back("p" + std::to_string(np));
      }
      ++np;
    };
    for (size_t j = 0; j < mp.in.size(); ++j) arg(j, mp.in[j], true);
    arg(mp.in.size(), mp.out[0], false);
    std::string a;
    for (auto& x : args) a += ", " + x;
    if (row_mode && mp.tail) {
      tail_rest << "  __syncthreads();\n  " << name << "(0, 1, rsh_, 0, 0" << a << ");\n";
    } else if (row_mode) {
      std::string inner = std::to_string(numel(mp.out[0].shape) / rows);
      call << "  " << (i ? "__syncthreads();\n  " : "") << name << "(0, 1, rsh_, r0_ * " << inner << ", r1_ * " << inner << a
           << ");\n";
    } else if (sequential) {
      call << "  " << (i ? "__syncthreads();\n  " : "") << name << "(0, 1, rsh_, 0, 0" << a << ");\n";
    } else {
      call << "  if (b < " << ks.grid << ") { " << name << "(b, " << ks.grid << ", rsh_, 0, 0" << a << "); return; }\n  b -= "
           << ks.grid << ";\n";
    }
  }
  std::ostringstream c;
  const bool tails = tail_doubles > 0 || !tail_rest.str().empty();
  if (tails) params.push_back("unsigned char* scratch_");
  c << kPrelude << fns.str() << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") rlx_kernel(";
  for (size_t i = 0; i < params.size(); ++i) c << (i ? ", " : "") << params[i];
  c << ") {\n";
  if (sequential)
    c << "  __shared__ unsigned long long rsh_[" << threads << "];\n"
      << "  extern __shared__ __align__(16) unsigned char smem_[];\n";
  else c << "  unsigned long long* rsh_ = 0;\n  int b = blockIdx.x;\n";
  if (row_mode)
    c << "  const long long r0_ = (long long)blockIdx.x * " << rpb << ", r1_ = r0_ + " << rpb << " < " << rows << " ? r0_ + "
      << rpb << " : " << rows << ";\n";
  c << call.str();
  if (tails) {
    RLX_CHECK(row_mode, "[cuda] merge: tail parts outside a row launch");
    c << "  __syncthreads();\n  unsigned* count_ = reinterpret_cast<unsigned*>(scratch_);\n"
      << "  double* part_ = reinterpret_cast<double*>(scratch_ + 16);\n"
      << tail_partial.str()
      << "  __shared__ int last_;\n  __threadfence();\n  __syncthreads();\n"
      << "  if (threadIdx.x == 0) last_ = atomicAdd(count_, 1u) == gridDim.x - 1;\n  __syncthreads();\n"
      << "  if (!last_) return;\n  __threadfence();\n"
      << tail_finish.str() << tail_rest.str()
      << "  if (threadIdx.x == 0) *count_ = 0u;\n";
  }
  c << "}\n";
  KernelSource ks;
  if (tails) ks.scratch_bytes = static_cast<size_t>(16 + 8 * std::max<int64_t>(tail_doubles, 1));
  ks.code = c.str();
  ks.block = static_cast<unsigned>(threads);
  int64_t g = 0;
  for (auto x : grids) g += x;
  ks.grid = row_mode ? static_cast<unsigned>((rows + rpb - 1) / rpb) : (sequential ? 1u : static_cast<unsigned>(g));
  ks.smem = static_cast<unsigned>(smem_bytes);
  ks.num_params = np;
  return ks;
}

}  // namespace rlx::cuda
