// The reference interpreter's sparse ops: the shared evaluation (eval_impl.h) run serially.
#include "sparse/eval_impl.h"

namespace rlx {
namespace ref {
std::vector<Tensor> eval_sparse(const Node& n, const std::vector<Tensor>& in, const std::vector<ValueType>& ot) {
  return sparse::eval_sparse_with(sparse::SerialPar{}, n, in, ot);
}
}  // namespace ref

namespace sparse {
bool is_sparse_op(OpKind k) { return op_info(k).group == OpGroup::Sparse; }
}  // namespace sparse
}  // namespace rlx
