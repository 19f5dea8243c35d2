// Helpers shared by the CUDA C renderer's files (render.cpp: these helpers and fused kernels;
// render_library.cpp: library kernels; render_merged.cpp: merged launches; render_attention.cpp);
// not a public surface: the backend's other files use render.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/render.h"

namespace rlx::cuda::detail {

using O = OpKind;

extern const char* kPrelude;   // typedefs and device helpers (half/bf16 conversion, warp reductions)
extern const char* kRoundOdd;  // odd_f: double -> float rounded to odd (for a later f16/bf16 rounding)

enum class Dm { F, D, I, B };  // compute domain: float, double, int64, bool
Dm dom(DType t);
std::string ctype_compute(DType t);  // the C type a dtype is computed in
// `e` (an element of dtype t) as its compute value / compute value `e` stored as dtype t.
std::string load(DType t, const std::string& e);
std::string store(DType t, const std::string& e);
// The value of `e` (already in compute type) rounded/wrapped to dtype t, as the reference does per node.
std::string wrap(DType t, const std::string& e);
std::string num(double v);  // a C literal that round-trips v (NaN/inf spelled out)
void int_range(DType t, long long* lo, long long* hi);
std::string ll(long long v);  // a long long literal
// A reduction's accumulator type, initial value and per-element step `a = a (op) v` for inputs of
// compute domain `d` (ReduceSum/Prod/Max; anything else is ReduceMin).
void reduce_init_step(O op, Dm d, std::string* acc, std::string* init, std::string* step);
// Conversion of compute value `e` of dtype `from` to the compute value of dtype `to`.
std::string convert_expr(DType from, DType to, const std::string& e);
std::string fn(DType t, const char* name);  // a libm name, with the f suffix below f64
std::string unary_expr(O k, DType t, const std::string& x);
std::string binary_expr(O k, DType t, const std::string& a, const std::string& b);
std::string idx_type(int64_t n);  // "int" when n fits, else "long long"
// Emits code that unravels `var` (row-major over `dims`) into <pre>0..<pre>{r-1}.
std::string unravel(const std::vector<int64_t>& dims, const std::string& var, const std::string& it,
                    const std::string& pre = "c");
std::vector<int64_t> strides(const std::vector<int64_t>& d);  // row-major
int64_t prod(const std::vector<int64_t>& d);
unsigned grid_for(int64_t n, unsigned block);  // blocks for n elements (1 .. 2^20)
// The prelude plus `extern "C" __global__ void rlx_kernel(const T* in0, ..., T* out0, ...) {`.
std::string header(const std::vector<ValueType>& in, const std::vector<ValueType>& out);
// Offset expression of a numpy-broadcast input of shape `s` at output coords c0..c{r-1}.
std::string bcast_offset(const std::vector<int64_t>& s, const std::vector<int64_t>& od);
// Grid-stride loop over N output elements; `body` sees index `i` (and coords when `coords`).
std::string elementwise_loop(int64_t n, const std::vector<int64_t>& od, bool coords, const std::string& body);
std::string join_terms(const std::vector<std::string>& t);  // "a + b + c", "0" when empty

// A reduction's input dims split into the kept ones (kdims, strides kst; n outputs) and the reduced
// ones (rdims, rst; m elements per output); inner: the innermost dim is reduced (a row reduction).
struct ReduceSplit {
  std::vector<int64_t> kdims, kst, rdims, rst;
  int64_t n, m;
  bool inner;
};
ReduceSplit split_reduce(const LirKernel& k, const std::vector<int64_t>& xd);
// The code pieces every reduction kernel shares: the split, the accumulator type/init/step for the
// input's dtype, the output's base offset (`c0 * st0 + ...` over the kept dims) and the loop that
// folds in0[base + offset of reduced element j] into `a` for j = from, next, ... < m.
struct ReduceCode {
  ReduceSplit s;
  DType t;
  Dm d;
  std::string acc, init, step, base;
  std::string loop(const std::string& from, const std::string& next) const;
};
ReduceCode reduce_code(const LirKernel& k, const ValueType& x);

// A rendered grid-stride kernel as a device function `name(bid_, nblk_, rsh_, lo_, hi_, params...)`:
// the launch's block index and count become parameters; no __restrict__ (a merged launch passes one
// buffer to several parts, and a part may read what an earlier part of a sequential launch wrote).
// block_threads > 0: one block of that size runs it (trip counts become constants); `rows`: the
// loop covers output elements [lo_, hi_) only (a row-block launch). (render_merged.cpp)
std::string as_part(const std::string& code, const std::string& name, int block_threads, bool rows,
                    const ValueType& out);

// A reduction run by the whole block of a sequential merged launch: `threads` threads split as S
// slices (a power of two) x threads/S outputs; partials combined by a shared-memory tree; `rows`:
// the outputs [lo_, hi_) of a row block of `rows_per_block` rows. (render_merged.cpp)
std::string block_reduce_part(const LirKernel& k, const ValueType& x, const ValueType& out, const std::string& name,
                              int threads, bool rows, int64_t rows_per_block);

// Attention (render_attention.cpp): tensor-core kernel for halves, fp32 kernels otherwise.
KernelSource attention_kernel(const LirKernel& k, const std::vector<ValueType>& in, const ValueType& out,
                              int64_t sm_count);

}  // namespace rlx::cuda::detail
