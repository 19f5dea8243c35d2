// The data-parallel gradient average of build_train_step (train.h, DataParallel): buckets of
// flattened, concatenated gradients, one all_reduce(sum) each, scaled by 1/ranks, split back.
#include <algorithm>

#include "rlx/builder.h"
#include "rlx/error.h"
#include "train/train.h"

namespace rlx::train {

int emit_gradient_all_reduce(Builder& b, std::vector<ValueId>& grads, const DataParallel& dp) {
  RLX_CHECK(dp.ranks >= 1, "[train] data-parallel ranks must be at least 1, got ", dp.ranks);
  if (dp.ranks == 1 || grads.empty()) return 0;
  std::vector<int64_t> world;
  for (int i = 0; i < dp.ranks; ++i) world.push_back(i);
  // Last parameter first: the backward pass finishes those gradients first.
  std::vector<size_t> order(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) order[i] = grads.size() - 1 - i;
  int buckets = 0;
  size_t at = 0;
  while (at < order.size()) {
    const DType dt = b.dtype(grads[order[at]]);
    std::vector<size_t> bucket;
    int64_t bytes = 0;
    while (at < order.size() && b.dtype(grads[order[at]]) == dt && (bucket.empty() || bytes < dp.bucket_bytes)) {
      int64_t n = 1;
      for (int64_t d : static_dims(b.shape(grads[order[at]]))) n *= d;
      bytes += n * static_cast<int64_t>(dtype_size(dt));
      bucket.push_back(order[at++]);
    }
    std::vector<ValueId> flat;
    std::vector<int64_t> sizes;
    for (size_t i : bucket) {
      int64_t n = 1;
      for (int64_t d : static_dims(b.shape(grads[i]))) n *= d;
      sizes.push_back(n);
      flat.push_back(b.reshape(grads[i], Shape{n}));
    }
    ValueId all = flat.size() == 1 ? flat[0] : b.op1(OpKind::Concatenate, flat, {{"axis", int64_t{0}}});
    ValueId sum = b.op1(OpKind::AllReduce, {all}, {{"reduce", std::string("sum")}, {"groups", world}});
    ValueId mean = b.mul(sum, b.scalar(1.0 / dp.ranks, dt));
    int64_t off = 0;
    for (size_t k = 0; k < bucket.size(); ++k) {
      Shape shape = b.shape(grads[bucket[k]]);
      ValueId part = bucket.size() == 1 ? mean
                                        : b.op1(OpKind::Slice, {mean}, {{"start", std::vector<int64_t>{off}},
                                                                        {"limit", std::vector<int64_t>{off + sizes[k]}}});
      grads[bucket[k]] = b.reshape(part, shape);
      off += sizes[k];
    }
    ++buckets;
  }
  return buckets;
}

}  // namespace rlx::train
