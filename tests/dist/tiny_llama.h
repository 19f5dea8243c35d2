// The prefill step graph of a small llama-family decoder (HF directory) with deterministic inputs
// (ids over the whole vocabulary, positions 0..S-1, RoPE cos/sin from the config's frequencies):
// the tensor-parallel llama tests in one process (tests/unit/test_dist.cpp) and under mpirun
// (tests/dist/worker.cpp) run the same graph.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "models/llm/decoder.h"
#include "rlx/graph.h"

namespace rlx::testing {

// All positions' logits (all_logits), no KV cache; `inputs` receives the graph's inputs in order.
inline Graph tiny_llama_step(const std::string& dir, int64_t B, int64_t S, std::vector<Tensor>* inputs) {
  models::DecoderWeights w = models::load_decoder_hf(dir);
  Graph g = models::decoder_step_graph(w, B, S, 0, /*all_logits=*/true);
  std::vector<double> inv = w.cfg.inv_freq();
  int64_t h = w.cfg.head_dim / 2;
  for (auto v : g.inputs) {
    const std::string& name = g.values[v].name;
    if (name == "ids") {
      Tensor ids(DType::i64, {B, S});
      for (int64_t i = 0; i < B * S; ++i) ids.data<int64_t>()[i] = (i * 37 + 11) % w.cfg.vocab;  // both vocab halves
      inputs->push_back(ids);
    } else if (name == "positions") {
      Tensor p(DType::i64, {S});
      for (int64_t i = 0; i < S; ++i) p.data<int64_t>()[i] = i;
      inputs->push_back(p);
    } else {
      RLX_CHECK(name == "rope_cos" || name == "rope_sin", "[tiny_llama] unexpected input ", name);
      Tensor t(DType::f32, {S, h});
      for (int64_t s = 0; s < S; ++s)
        for (int64_t i = 0; i < h; ++i)
          t.data<float>()[s * h + i] = float(name == "rope_cos" ? std::cos(s * inv[i]) : std::sin(s * inv[i]));
      inputs->push_back(t);
    }
  }
  return g;
}

}  // namespace rlx::testing
