// What the cpu convolution and pooling kernels (conv.cpp, pool.cpp) share with the schedule rewrite
// that gives a conv its epilogue (conv_fuse.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"

namespace rlx::cpu {

// Per output channel c, applied while a block of the conv's output is still in cache:
// y = clamp(scale[c] * y + shift[c] + res, lo, hi). scale/shift/res may be null (1, 0, none);
// res has the output's layout. ReLU is lo = 0, hi = +inf.
struct ChannelEpi {
  const float* scale = nullptr;
  const float* shift = nullptr;
  const float* res = nullptr;
  const float* res_scale = nullptr;  // per channel factor of res (null: 1)
  float lo = -__builtin_inff(), hi = __builtin_inff();
  bool min_first = false;  // min(., hi) before max(., lo) (the region's order when lo > hi matters)
};

// The epilogue a schedule rewrite moved into a conv (conv_fuse.cpp).
struct ConvEpiPlan;

namespace conv_detail {

// A 2-D view of the conv (1-D: H = KH = OH = 1).
struct Geom {
  int64_t N, C, H, W, O, G, Cg, Og, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
  int64_t K() const { return Cg * KH * KW; }
  int64_t P() const { return OH * OW; }
  bool pointwise() const { return KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && OH == H && OW == W; }
};

// The epilogue on rows [r0, r1) of a block of the output (row r is channel c0 + r, pn pixels, row
// stride ldy); res (the same block of the residual, row stride ldy) or null. conv.cpp.
void epi_rows(const ChannelEpi& e, float* y, int64_t ldy, const float* res, int64_t c0, int64_t r0, int64_t r1,
              int64_t pn);
// Zero-padded planes split into sh x sw phase planes (conv_direct.cpp): tap (i, j) of output
// (oh, ow) is element oh * Wq + ow + off[i * KW + j] of the split buffer.
struct Phases {
  int64_t Wq = 0, plane = 0, n = 0;  // row length, floats a phase plane, flat outputs (a multiple of 32)
  std::vector<int64_t> off;          // per tap: phase plane * plane + offset inside it
};
Phases phases_of(const Geom& g);
// Plane x (H x W) padded with `pad` and split into sh * sw * plane floats at ph.
void split(const Geom& g, const Phases& p, const float* x, float* ph, float pad);
// Even and odd elements of s[0, n) (conv_direct.cpp).
void deinterleave2(const float* s, int64_t n, float* even, float* odd);
// The direct plan (groups with one input channel): conv_direct.cpp.
void run_direct(const Geom& g, const float* x, const float* w, float* y, const ChannelEpi* epi);
// The Winograd F(2x2, 3x3) plan (conv_winograd.cpp): whether it covers g (3x3, stride 1, dilation 1,
// one group, >= 32 input and >= 16 output channels, output rows of >= 13 columns, an AVX2 host,
// Winograd not turned off), the size of the transformed weight, the transform, and the conv on it.
bool winograd_fits(const Geom& g);
int64_t winograd_pack_size(const Geom& g);
void winograd_pack(const Geom& g, const float* w, float* dst);
void run_winograd(const Geom& g, const float* x, const float* u, float* y, const ChannelEpi* epi);

}  // namespace conv_detail

// The conv kernel with an optional epilogue and the weight packed ahead by conv_prepack (null: packed
// per call where the plan needs it). Returns false, having written nothing, when it does not cover
// the case (not f32, not 1-D/2-D): the caller then runs the generic kernel.
bool conv_f32(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const float* packed,
              const ChannelEpi* epi);
// The plan conv_f32 runs for these shapes: "direct", "cols" (im2col GEMM), "rows", "winograd", or
// "" when it does not cover them (profile labels, tests).
std::string conv_plan_name(const Node& n, const std::vector<int64_t>& xdims, const std::vector<int64_t>& wdims,
                           const std::vector<int64_t>& ydims);
// Turns the Winograd plan on or off for the process (default: on unless RLX_CONV_WINOGRAD=0), so
// tests and benchmarks reach the other plans on the same shapes; returns the previous setting.
bool conv_set_winograd(bool on);
// Whether conv_f32 covers a conv of these types.
bool conv_f32_supported(const Node& n, const ValueType& x, const ValueType& w, const ValueType& y);
// The kernel the executor runs for conv (find_kernel's `conv` is this with packed and epi null):
// conv_f32 with the epilogue the conv-epilogue pass attached (its plan from conv_epi_prepare), else the
// generic kernel.
void conv_packed(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out, const float* packed,
                 const ConvEpiPlan* epi);

// The plan of a conv epilogue body (conv output as slot -1), or null when the body is not one: per
// output channel affine in the conv's output plus at most one same-shape tensor, then max/min by
// scalars. The conv-epilogue LIR pass (src/lir/rewrite/conv.cpp) asks this through LirAbsorbs.
std::shared_ptr<const ConvEpiPlan> conv_epi_plan(const Graph& body, const std::vector<int>& slots, const Shape& yshape);
// The profile label of such a plan ("bias+relu", ...).
std::string conv_epi_label(const ConvEpiPlan& p);
// The epilogue plan of a conv kernel that the conv-epilogue pass rewrote, or null for a plain conv.
std::shared_ptr<const ConvEpiPlan> conv_epi_prepare(const LirKernel& k, const LirProgram& p);
// This run's per-channel factors from the kernel's inputs; false when the plan cannot express them
// (a NaN clamp bound): the caller then evaluates the region itself.
bool conv_epi_fill(const ConvEpiPlan& p, const std::vector<Tensor>& in, ChannelEpi& e);
// The region itself on the conv's output (body_in: the region's inputs in order).
void conv_epi_region(const ConvEpiPlan& p, const std::vector<Tensor>& body_in, Tensor& out);
// The weight w (a constant) packed for the plan conv_f32 picks for these shapes, or empty when that plan
// reads the weight in place.
std::vector<float> conv_prepack(const Node& n, const Tensor& w, const std::vector<int64_t>& xdims,
                                const std::vector<int64_t>& ydims);

}  // namespace rlx::cpu
