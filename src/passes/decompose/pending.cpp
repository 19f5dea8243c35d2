// TEMPORARY: replaced by the real decompositions (one file per family).
#include "rlx/builder.h"
namespace rlx {
std::vector<int32_t> decompose_matmul(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_linear(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_convolution(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_max_pool(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_avg_pool(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_global_avg_pool(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_layer_norm(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_rms_norm(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_softmax(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_log_softmax(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_gelu(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_silu(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_relu(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_embedding(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_attention(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_rope(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_reduce_mean(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_expand(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_squeeze(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
std::vector<int32_t> decompose_unsqueeze(Builder&, const Node& n, const std::vector<int32_t>&) { fail("[decompose] pending: ", op_name(n.op)); }
}
