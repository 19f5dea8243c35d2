// CPU kernels. Library kernels are written for the dtypes the cpu device claims natively
// (src/backends/cpu/backend.cpp); every other primitive runs a generic kernel built on the reference
// implementation. The fast-CPU work replaces entries here without touching the executor.
#pragma once
#include <memory>
#include <vector>

#include "rlx/graph.h"
#include "rlx/lir.h"
#include "rlx/tensor.h"

namespace rlx::cpu {

// Outputs are preallocated views into the arena/output buffers.
using KernelFn = void (*)(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
// Returns the specialized kernel for (op, dtype of input 0), or nullptr for the generic one.
KernelFn find_kernel(OpKind op, DType dt);
// Generic kernel: the reference evaluation copied into the output buffers.
void generic_kernel(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
// Generated (fused elementwise) kernel over `body`, chunk by chunk.
// Typed evaluator (fused.cpp); bodies it cannot type fall back to the chunked reference one.
void fused_kernel(const Graph& body, const std::vector<Tensor>& in, Tensor& out);
// The typed evaluator behind fused_kernel (f32/bool/i32/i64 values; f32 math,
// compare, select, convert, logic): returns false, having written nothing, for other bodies.
bool fused_kernel_typed(const Graph& body, const std::vector<Tensor>& in, Tensor& out);
void fused_kernel_reference(const Graph& body, const std::vector<Tensor>& in, Tensor& out);

// Linear on the packed AVX2 GEMM (gemm_avx2.h), including the fused forms the LIR passes make (src/lir/rewrite: merge-qkv, residual-into-linear, layernorm-into-linear)
// (attrs cpu_res: input index of a residual; cpu_ln_g / cpu_ln_b / cpu_ln_eps: a LayerNorm of each
// finished row written to out[1]). `packed` is the weight packed by pack_b, or null to pack it now.
// Returns false when the fast GEMM cannot run it (no AVX2, other dtype or activation).
bool linear_fast(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const float* packed);
// LayerNorm of rows [r0, r1) of X[rows, D] (B may be null).
void layer_norm_rows_f32(const float* X, const float* G, const float* B, float* Y, int64_t r0, int64_t r1, int64_t D,
                         float eps);

void dot_general(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void linear(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void matmul(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void softmax(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void layer_norm(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void attention(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void gather(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void transpose(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void concatenate(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void slice(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void pad(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);

// f32 convolution (1-D/2-D; im2col + packed GEMM, or direct for one input channel per group) and
// pooling windows over the last two dims: conv.cpp, pool.cpp. Other cases run the generic kernel.
void conv(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void reduce_window(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);


// Dense linear algebra (linalg.cpp): the kernel for a linear-algebra op, or nullptr (generic).
KernelFn find_linalg_kernel(OpKind op, DType dt);

// GGUF/Qwen3: packed GGML-block weights, dequant_matmul.cpp.
void dequant_matmul(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void dequantize(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);

// Affine int8 (qlinear.cpp on qgemm.h): qlinear with w [N, K] i8, qmatmul with b [K, N]; a constant
// qlinear weight is packed once (qlinear_prepack) for the int8 GEMM path in use.
void qlinear(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
// qconv: im2col per image and group onto the same GEMM and epilogue (qlinear.cpp).
void qconv(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void qmatmul(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
std::shared_ptr<const void> qlinear_prepack(const Tensor& w);
// quantize_affine / dequantize_affine element loops (quant_affine.cpp).
void quantize_affine(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void dequantize_affine(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out);
void qlinear_packed(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const void* packed);

// Gaussian splatting ops on the pool (splat.cpp): the kernel for f32/f64, else nullptr.
KernelFn splat_kernel_for(DType dt);

}  // namespace rlx::cpu
