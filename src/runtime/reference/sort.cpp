// sort and topk along one axis: stable, NaN ordered above everything, i64 indices.
#include <algorithm>
#include <cmath>

#include "runtime/reference/common.h"

namespace rlx::ref {

namespace {

// Key that orders every real value exactly: ints by int64, floats by double with NaN greatest.
struct Key {
  bool nan = false;
  double f = 0;
  int64_t i = 0;
};

bool less(const Key& a, const Key& b, bool is_float) {
  if (!is_float) return a.i < b.i;
  if (a.nan || b.nan) return !a.nan && b.nan;
  return a.f < b.f;
}

// For every line along `ax`, the positions ordered as asked (stable), then `emit(line_base, order)`.
template <class Emit>
void order_lines(const Tensor& x, int64_t ax, bool descending, Emit emit) {
  Dims xd = x.shape();
  if (x.numel() == 0) return;
  bool is_float = dom_of(x.dtype()) == Dom::F;
  RLX_CHECK(is_float || dom_of(x.dtype()) == Dom::I, "[reference] sort/topk: dtype ", dtype_name(x.dtype()),
            " not supported");
  int64_t len = xd[ax], inner = strides_of(xd)[ax], outer = x.numel() / (len * inner);
  std::vector<Key> keys(static_cast<size_t>(len));
  std::vector<int64_t> order(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in_ = 0; in_ < inner; ++in_) {
      int64_t base = o * len * inner + in_;
      for (int64_t p = 0; p < len; ++p) {
        Key& k = keys[p];
        if (is_float) {
          k.f = ld(x, base + p * inner);
          k.nan = std::isnan(k.f);
        } else {
          k.i = order_key(ldi(x, base + p * inner), is_u64(x.dtype()));
        }
        order[p] = p;
      }
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return descending ? less(keys[b], keys[a], is_float) : less(keys[a], keys[b], is_float);
      });
      emit(base, inner, order);
    }
  }
}

}  // namespace

Outs eval_sort(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor vals = alloc(ot[0]), idx = alloc(ot[1]);
  int64_t ax = axis_of(attr_int(n, "axis"), x.rank(), "sort");
  order_lines(x, ax, attr_int(n, "descending") != 0,
              [&](int64_t base, int64_t inner, const std::vector<int64_t>& order) {
                for (size_t j = 0; j < order.size(); ++j) {
                  int64_t dst = base + static_cast<int64_t>(j) * inner;
                  copy_elem(vals, dst, x, base + order[j] * inner);
                  sti(idx, dst, order[j]);
                }
              });
  return {vals, idx};
}

Outs eval_topk(const Node& n, const Ins& in, const Types& ot) {
  const Tensor& x = in[0];
  Tensor vals = alloc(ot[0]), idx = alloc(ot[1]);
  int64_t ax = axis_of(attr_int(n, "axis"), x.rank(), "topk");
  int64_t k = attr_int(n, "k");
  RLX_CHECK(k >= 0 && k <= x.shape()[ax], "[reference] topk k=", k, " exceeds axis size ", x.shape()[ax]);
  // Output lines have length k; map an input line base to the output line base.
  Dims od = vals.shape(), xd = x.shape();
  int64_t inner = strides_of(xd)[ax];
  order_lines(x, ax, attr_int(n, "largest") != 0,
              [&](int64_t base, int64_t, const std::vector<int64_t>& order) {
                int64_t o = base / (xd[ax] * inner), in_ = base % inner;
                int64_t obase = o * k * inner + in_;
                for (int64_t j = 0; j < k; ++j) {
                  int64_t dst = obase + j * inner;
                  copy_elem(vals, dst, x, base + order[j] * inner);
                  sti(idx, dst, order[j]);
                }
              });
  return {vals, idx};
}

}  // namespace rlx::ref
