// Data movement on the cpu device: gather (embeddings) as row copies, transpose as blocked copies
// of the longest contiguous run, concatenate as one copy per (outer index, operand), slice and pad
// (the conv VJP's dilations and crops) row by row, all parallel. Unusual cases defer to the
// generic kernel.
#include <algorithm>
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
      const char* src = static_cast<const char*>(in[p].raw()) + r0 * len[p];
      if (src == Y + r0 * row + off[p]) continue;  // planned in place (concat-in-place): already there
      if (len[p]) std::memcpy(Y + r0 * row + off[p], src, len[p]);
    }
  });
}

namespace {

// Output rows (all dims but the last) of an N-D strided copy: row i's first element reads input
// element `off` (an odometer over the output's outer dims with input strides `st`).
template <class F>
void for_rows(const std::vector<int64_t>& od, const std::vector<int64_t>& st, int64_t base, int64_t r0, int64_t r1, F f) {
  const int64_t r = static_cast<int64_t>(od.size());
  thread_local std::vector<int64_t> idx;  // reused: a warm run allocates nothing
  idx.assign(static_cast<size_t>(std::max<int64_t>(r - 1, 0)), 0);
  int64_t off = base;
  for (int64_t d = r - 2, rem = r0; d >= 0; --d) {
    idx[d] = rem % od[d];
    rem /= od[d];
    off += idx[d] * st[d];
  }
  for (int64_t row = r0; row < r1; ++row) {
    f(row, off);
    for (int64_t d = r - 2; d >= 0; --d) {
      off += st[d];
      if (++idx[d] < od[d]) break;
      off -= idx[d] * st[d];
      idx[d] = 0;
    }
  }
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int64_t i = static_cast<int64_t>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

}  // namespace

void slice(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const int64_t r = x.rank();
  std::vector<int64_t> start = attr_ints(n, "start"), stride = attr_ints(n, "stride");
  if (stride.empty()) stride.assign(static_cast<size_t>(r), 1);
  const size_t es = dtype_size(x.dtype());
  if (r == 0 || es == 0 || y.rank() != r || static_cast<int64_t>(start.size()) != r ||
      static_cast<int64_t>(stride.size()) != r)
    return generic_kernel(n, in, out);
  if (y.numel() == 0) return;
  const std::vector<int64_t> xs = strides_of(x.shape());
  std::vector<int64_t> st(static_cast<size_t>(r));
  int64_t base = 0;
  for (int64_t d = 0; d < r; ++d) st[d] = xs[d] * stride[d], base += start[d] * xs[d];
  const std::vector<int64_t>& od = y.shape();
  const int64_t inner = od[r - 1], step = st[r - 1], rows = y.numel() / inner;
  const char* X = static_cast<const char*>(x.raw());
  char* Y = static_cast<char*>(y.raw());
  parallel_for(rows, std::max<int64_t>(1, 16384 / inner), [&](int64_t a, int64_t b) {
    for_rows(od, st, base, a, b, [&](int64_t row, int64_t off) {
      char* dst = Y + row * inner * static_cast<int64_t>(es);
      if (step == 1) {
        std::memcpy(dst, X + off * static_cast<int64_t>(es), static_cast<size_t>(inner) * es);
      } else if (es == 4) {
        const uint32_t* s = reinterpret_cast<const uint32_t*>(X) + off;
        uint32_t* d = reinterpret_cast<uint32_t*>(dst);
        for (int64_t j = 0; j < inner; ++j) d[j] = s[j * step];
      } else {
        for (int64_t j = 0; j < inner; ++j) std::memcpy(dst + j * es, X + (off + j * step) * es, es);
      }
    });
  });
}

void pad(const Node& n, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const int64_t r = x.rank();
  const auto& low = attr_ints(n, "low");
  const size_t es = dtype_size(x.dtype());
  if (r == 0 || es == 0 || y.rank() != r || static_cast<int64_t>(low.size()) != r) return generic_kernel(n, in, out);
  if (y.numel() == 0) return;
  // The fill value in the output's dtype, then the input's part of every output row copied over it.
  Tensor fill(y.dtype(), {1});
  fill.set(0, attr_float(n, "value"));
  const std::vector<int64_t>& od = y.shape();
  const std::vector<int64_t>& xd = x.shape();
  const std::vector<int64_t> xs = strides_of(xd);
  const int64_t inner = od[r - 1], rows = y.numel() / inner;
  // Output columns [c0, c1) of a row hold input columns from c0 - low; a row is inside when every
  // outer index lands in the input.
  const int64_t c0 = std::clamp<int64_t>(low[r - 1], 0, inner), c1 = std::clamp<int64_t>(low[r - 1] + xd[r - 1], c0, inner);
  const char* X = static_cast<const char*>(x.raw());
  char* Y = static_cast<char*>(y.raw());
  const int64_t E = static_cast<int64_t>(es);
  const bool f4 = es == 4;  // 4-byte elements copied by plain loops (rows may be 2 elements long)
  uint32_t fill4 = 0;
  if (f4) std::memcpy(&fill4, fill.raw(), 4);
  auto put_fill = [&](char* dst, int64_t j0, int64_t j1) {
    if (f4)
      for (int64_t j = j0; j < j1; ++j) reinterpret_cast<uint32_t*>(dst)[j] = fill4;
    else
      for (int64_t j = j0; j < j1; ++j) std::memcpy(dst + j * E, fill.raw(), es);
  };
  bool flat = true;  // only the last dim is padded: row i reads input row i
  for (int64_t d = 0; d + 1 < r; ++d) flat &= low[d] == 0 && od[d] == xd[d];
  if (flat && f4 && c0 < c1) {
    const int64_t xl = xd[r - 1], s0 = c0 - low[r - 1];
    parallel_for(rows, std::max<int64_t>(1, 65536 / inner), [&](int64_t a, int64_t b) {
      for (int64_t row = a; row < b; ++row) {
        uint32_t* d = reinterpret_cast<uint32_t*>(Y) + row * inner;
        const uint32_t* s = reinterpret_cast<const uint32_t*>(X) + row * xl + s0;
        for (int64_t j = 0; j < c0; ++j) d[j] = fill4;
        for (int64_t j = c0; j < c1; ++j) d[j] = s[j - c0];
        for (int64_t j = c1; j < inner; ++j) d[j] = fill4;
      }
    });
    return;
  }
  parallel_for(rows, std::max<int64_t>(1, 16384 / inner), [&](int64_t a, int64_t b) {
    // Odometer over the outer dims: idx, the input offset of the row's column 0, and how many
    // outer dims lie outside the input.
    thread_local std::vector<int64_t> idx;
    idx.assign(static_cast<size_t>(r), 0);
    int64_t src = 0, outside = 0;
    for (int64_t d = r - 2, rem = a; d >= 0; --d) {
      idx[d] = rem % od[d];
      rem /= od[d];
      const int64_t i = idx[d] - low[d];
      src += i * xs[d];
      outside += i < 0 || i >= xd[d];
    }
    for (int64_t row = a; row < b; ++row) {
      char* dst = Y + row * inner * E;
      if (outside || c0 >= c1) {
        put_fill(dst, 0, inner);
      } else {
        put_fill(dst, 0, c0);
        const char* s = X + (src + c0 - low[r - 1]) * E;
        if (f4)
          for (int64_t j = c0; j < c1; ++j) reinterpret_cast<uint32_t*>(dst)[j] = reinterpret_cast<const uint32_t*>(s)[j - c0];
        else
          std::memcpy(dst + c0 * E, s, static_cast<size_t>((c1 - c0) * E));
        put_fill(dst, c1, inner);
      }
      for (int64_t d = r - 2; d >= 0; --d) {
        const int64_t was = idx[d] - low[d];
        outside -= was < 0 || was >= xd[d];
        ++idx[d];
        src += xs[d];
        const bool wrap = idx[d] == od[d];
        if (wrap) src -= idx[d] * xs[d], idx[d] = 0;
        const int64_t now = idx[d] - low[d];
        outside += now < 0 || now >= xd[d];
        if (!wrap) break;
      }
    }
  });
}

}  // namespace rlx::cpu
