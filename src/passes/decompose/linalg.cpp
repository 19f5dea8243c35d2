// Decompositions of the contraction ops: matmul, linear, embedding.
#include <algorithm>

#include "passes/decompose/common.h"

namespace rlx {

using namespace decomp;

// numpy matmul: 1-D operands are promoted (and the added dim removed again); batch dims broadcast.
std::vector<int32_t> decompose_matmul(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  ValueId a = in[0], c = in[1];
  Ints da = dims_of(b, a), dc = dims_of(b, c);
  bool va = da.size() == 1, vc = dc.size() == 1;
  if (va) a = b.reshape(a, to_shape({1, da[0]})), da = {1, da[0]};
  if (vc) c = b.reshape(c, to_shape({dc[0], 1})), dc = {dc[0], 1};
  int64_t ra = static_cast<int64_t>(da.size()), rc = static_cast<int64_t>(dc.size());
  ValueId y;
  if (rc == 2) {
    // A shared 2-D rhs needs no batch dims: contract lhs's last dim directly ([..., M, N] out).
    y = b.dot_general(a, c, {}, {}, {ra - 1}, {0});
  } else {
    Ints ba(da.begin(), da.end() - 2), bc(dc.begin(), dc.end() - 2);
    size_t nb = std::max(ba.size(), bc.size());
    Ints bs(nb);
    for (size_t i = 0; i < nb; ++i) {
      int64_t x = i < nb - ba.size() ? 1 : ba[i - (nb - ba.size())];
      int64_t z = i < nb - bc.size() ? 1 : bc[i - (nb - bc.size())];
      bs[i] = x == 1 ? z : x;
    }
    Ints sa = bs, sc = bs;
    sa.insert(sa.end(), da.end() - 2, da.end());
    sc.insert(sc.end(), dc.end() - 2, dc.end());
    a = broadcast_to(b, a, sa);
    c = broadcast_to(b, c, sc);
    auto k = static_cast<int64_t>(nb);
    y = b.dot_general(a, c, range(0, k), range(0, k), {k + 1}, {k});
  }
  if (va || vc) {
    Ints dy = dims_of(b, y), keep;
    size_t r = dy.size();
    for (size_t i = 0; i < r; ++i) {
      if (va && i == r - 2) continue;
      if (vc && i == r - 1) continue;
      keep.push_back(dy[i]);
    }
    y = b.reshape(y, to_shape(keep));
  }
  return {y};
}

// linear(x [..., in], w [out, in], b [out]) = x·wᵀ + b, then the activation (HIR ops lowered next round).
std::vector<int32_t> decompose_linear(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  ValueId x = in[0], w = in[1];
  ValueId y = b.dot_general(x, w, {}, {}, {b.rank(x) - 1}, {1});
  if (in.size() > 2) y = b.add(y, in[2]);
  const std::string& act = attr_str(n, "activation");
  if (act == "relu")
    y = b.relu(y);
  else if (act == "gelu")
    y = b.gelu(y, "none");
  else if (act == "gelu_tanh")
    y = b.gelu(y, "tanh");
  else if (act == "silu")
    y = b.op1(OpKind::Silu, {y});
  else
    RLX_CHECK(act == "none", "[decompose] linear: unknown activation '", act, "'");
  return {y};
}

std::vector<int32_t> decompose_embedding(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  return {b.op1(OpKind::Gather, {in[0], in[1]}, {{"axis", int64_t{0}}})};
}

}  // namespace rlx
