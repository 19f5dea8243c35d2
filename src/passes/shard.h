// shard-tensor-parallel: rewrites a graph into one rank's part of a Megatron-style tensor-parallel
// program (column-parallel Linear -> ops on the split features -> row-parallel Linear + all_reduce).
#pragma once
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

struct InsertedCollective {
  std::string op;     // "all_reduce(sum)"
  std::string where;  // the row-parallel Linear it follows (node name, index)
  std::string type;   // "f32[batch,seq,384]"
  int64_t bytes_per_unit = 0;     // bytes for one unit of the symbolic dims (all static: the bytes)
  std::vector<std::string> syms;  // the symbolic dims the byte count scales with
  std::string bytes_str() const;  // "1536 B" or "1536·batch·seq B"
};

struct ShardReport {
  int64_t tp = 1, rank = 0;
  std::string pattern;
  int64_t column = 0, row = 0, replicated_linear = 0;
  int64_t vocab_parallel = 0;  // llama: the embedding and the LM head
  std::vector<InsertedCollective> collectives;
  std::string str() const;  // one line per inserted collective, then a summary
};

// Linear roles, in graph order, from a preset: "mlp" = "CR" (column, row, repeated), "bert" =
// "CCCRCR" (query/key/value column, attention output row, intermediate column, output row, per
// layer), "llama" = "CCCRCCR" (q/k/v column, o row, gate/up column, down row, per layer); any
// other string of C (column), R (row) and - (replicated) is used as given, repeated.
std::string shard_pattern(const std::string& preset);
// Rank `rank` of `tp`: column Linears keep rows [rank·out/tp, (rank+1)·out/tp) of W (and of b),
// row Linears columns of W's inner dim, followed by all_reduce(sum) over ranks 0..tp-1 and the
// bias. Reshapes of split values divide their first static dim (heads, hidden) by tp. Weights must
// be graph constants. Each split value carries its split axis through reshapes (the heads dim),
// transposes, attention (heads), slices and concatenations off that axis, rms_norm/rope over the
// head dim and elementwise ops (a constant spanning the split axis, e.g. a bias, is sliced).
// The llama preset is also vocab-parallel: an Embedding of a constant table keeps rows
// [rank·V/tp, (rank+1)·V/tp) (ids outside read zeros) then all_reduce(sum); the Linear producing
// a graph output (the LM head) is column-parallel followed by all_gather along the vocabulary; other
// graph outputs still split (per-head K/V) are all-gathered along their split axis.
// Throws "[shard] ..." naming the node that the pattern does not fit.
Graph shard_tensor_parallel(const Graph& g, const std::string& preset, int64_t tp, int64_t rank, ShardReport* report);

}  // namespace rlx
