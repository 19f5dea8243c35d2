// Data movement on the cpu device: gather (embeddings) as row copies, transpose as blocked copies
// of the longest contiguous run, concatenate as one copy per (outer index, operand), all parallel.
// Unusual cases defer to the generic kernel.
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"

namespace rlx::cpu {

void gather(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor &x = in[0], &ix = in[1];
  if (ix.dtype() != DType::i64 && ix.dtype() != DType::i32) return generic_kernel(n, in, out);
  int64_t ax = attr_int(n, "axis");
  if (ax < 0) ax += x.rank();
  int64_t outer = 1, inner = 1, len = x.shape()[ax], ni = ix.numel();
  for (int64_t i = 0; i < ax; ++i) outer *= x.shape()[i];
  for (int64_t i = ax + 1; i < x.rank(); ++i) inner *= x.shape()[i];
  std::vector<int64_t> pos(static_cast<size_t>(ni));
  for (int64_t j = 0; j < ni; ++j) {
    int64_t p = ix.dtype() == DType::i64 ? ix.data<int64_t>()[j] : ix.data<int32_t>()[j];
    if (p < 0) p += len;
    if (p < 0 || p >= len) return generic_kernel(n, in, out);  // the reference names the bad index
    pos[j] = p;
  }
  const float* X = x.data<float>();
  float* Y = out[0].data<float>();
  parallel_for(outer * ni, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t a, int64_t b) {
    for (int64_t r = a; r < b; ++r) {
      int64_t o = r / ni, j = r % ni;
      std::memcpy(Y + r * inner, X + (o * len + pos[j]) * inner, static_cast<size_t>(inner) * sizeof(float));
    }
  });
}

void transpose(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  auto perm = attr_ints(n, "perm");
  int64_t r = x.rank();
  if (x.numel() == 0) return;
  size_t es = dtype_size(x.dtype());
  if (es == 0 || r == 0) return generic_kernel(n, in, out);
  for (auto& p : perm)
    if (p < 0) p += r;
  // Merge the trailing dims that stay in place into one contiguous run of `run` elements.
  int64_t keep = r;
  while (keep > 0 && perm[keep - 1] == keep - 1) {
    bool tail = true;
    for (int64_t d = keep - 1; d < r; ++d) tail &= perm[d] == d;
    if (!tail) break;
    --keep;
  }
  int64_t run = 1;
  for (int64_t d = keep; d < r; ++d) run *= x.shape()[d];
  std::vector<int64_t> xs(static_cast<size_t>(r), 1);  // input strides in elements
  for (int64_t d = r - 2; d >= 0; --d) xs[d] = xs[d + 1] * x.shape()[d + 1];
  const auto& os = out[0].shape();
  int64_t rows = out[0].numel() / run;  // output rows of `run` elements, over out dims [0, keep)
  const char* X = static_cast<const char*>(x.raw());
  char* Y = static_cast<char*>(out[0].raw());
  size_t bytes = static_cast<size_t>(run) * es;
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(run, 1)), [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      int64_t rem = i, off = 0;
      for (int64_t d = keep - 1; d >= 0; --d) {
        off += (rem % os[d]) * xs[perm[d]];
        rem /= os[d];
      }
      if (run == 1 && es == 4)
        *reinterpret_cast<uint32_t*>(Y + i * 4) = *reinterpret_cast<const uint32_t*>(X + off * 4);
      else
        std::memcpy(Y + i * bytes, X + off * es, bytes);
    }
  });
}

void concatenate(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Tensor& y = out[0];
  const int64_t r = y.rank();
  int64_t ax = attr_int(n, "axis");
  if (ax < 0) ax += r;
  const size_t es = dtype_size(y.dtype());
  bool ok = es > 0 && ax >= 0 && ax < r;
  for (const Tensor& x : in) ok = ok && x.dtype() == y.dtype() && x.rank() == r;
  if (!ok) return generic_kernel(n, in, out);
  if (y.numel() == 0) return;
  // y viewed as [outer, row]: operand i fills bytes [off_i, off_i + len_i) of every row.
  int64_t outer = 1;
  for (int64_t d = 0; d < ax; ++d) outer *= y.shape()[d];
  const int64_t row = y.numel() / outer * static_cast<int64_t>(es);
  std::vector<int64_t> off, len;
  int64_t o = 0;
  for (const Tensor& x : in) {
    off.push_back(o);
    len.push_back(x.numel() / outer * static_cast<int64_t>(es));
    o += len.back();
  }
  if (o != row) return generic_kernel(n, in, out);  // the reference names the mismatch
  const int64_t parts = static_cast<int64_t>(in.size()), items = outer * parts;
  char* Y = static_cast<char*>(y.raw());
  parallel_for(items, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, row / parts)), [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      const int64_t r0 = i / parts, p = i % parts;
      if (len[p]) std::memcpy(Y + r0 * row + off[p], static_cast<const char*>(in[p].raw()) + r0 * len[p], len[p]);
    }
  });
}

}  // namespace rlx::cpu
