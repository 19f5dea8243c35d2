// `rlx generate` (Qwen3 from an HF directory or a GGUF file) and `rlx inspect FILE.gguf`.
#include <chrono>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "models/generate.h"
#include "models/qwen3/qwen3.h"
#include "quant/blocks.h"
#include "rlx/gguf.h"

namespace rlx::cli {

int inspect_gguf(const std::string& path) {
  gguf::File f = gguf::File::open(path);
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, alignment %llu, %d file(s)\n", path.c_str(),
              f.version(), f.metadata().size(), f.tensors().size(), static_cast<unsigned long long>(f.alignment()),
              f.num_parts());
  std::printf("metadata:\n");
  for (auto& [k, v] : f.metadata())
    std::printf("  %-44s %-8s %s\n", k.c_str(), value_type_name(v.type), v.str().c_str());
  std::printf("tensors:\n  %-36s %-6s %-22s %12s %12s\n", "name", "type", "shape", "elements", "bytes");
  uint64_t total = 0;
  for (auto& t : f.tensors()) {
    std::string shape = "[";
    auto s = t.shape();
    for (size_t i = 0; i < s.size(); ++i) shape += (i ? "," : "") + std::to_string(s[i]);
    shape += "]";
    std::printf("  %-36s %-6s %-22s %12lld %12llu\n", t.name.c_str(), quant::type_name(t.type).c_str(), shape.c_str(),
                static_cast<long long>(t.numel()), static_cast<unsigned long long>(t.nbytes));
    total += t.nbytes;
  }
  std::printf("%zu tensors, %.2f MiB of tensor data\n", f.tensors().size(), total / 1048576.0);
  return 0;
}

int cmd_generate(const Args& a) {
  std::string path = a.get("model");
  std::vector<int64_t> prompt;
  for (auto& id : a.items("prompt-ids")) prompt.push_back(*to_int(id));
  RLX_CHECK(!prompt.empty(), "[cli] --prompt-ids is empty");
  int64_t max_new = a.integer("max-new"), batch = a.integer("batch");
  // The context is checked from the config before any weight is read.
  models::Qwen3Config cfg = models::read_qwen3_config(path);
  int64_t want = static_cast<int64_t>(prompt.size()) + max_new;
  if (cfg.context > 0 && want > cfg.context)
    usage_fail("generate: the prompt (", prompt.size(), " tokens) + --max-new ", max_new, " = ", want,
               " positions exceeds the model's context length of ", cfg.context, "; use --max-new ",
               std::max<int64_t>(0, cfg.context - static_cast<int64_t>(prompt.size())), " or less");
  for (int64_t id : prompt)
    if (id >= cfg.vocab) usage_fail("generate --prompt-ids: token id ", id, " is outside the vocabulary (", cfg.vocab, " ids)");
  models::LoadOptions lo;
  lo.keep_packed = !a.has("dequantize");
  models::Qwen3Model m(models::load_qwen3(path, lo), a.get("device"));
  models::SamplingOptions so;
  so.temperature = a.number("temperature");
  so.top_k = a.integer("top-k");
  so.top_p = a.number("top-p");
  so.seed = static_cast<uint64_t>(a.integer("seed"));
  std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(batch), prompt);
  models::GenerateStats st;
  auto out = models::generate(m, prompts, max_new, so, a.integer("eos"), &st);
  for (auto& row : out) {
    for (size_t i = 0; i < row.size(); ++i) std::printf("%s%lld", i ? "," : "", static_cast<long long>(row[i]));
    std::printf("\n");
  }
  if (a.has("stats"))
    std::fprintf(stderr, "model %s (%s); prefill %.1f ms; decode %lld steps in %.1f ms = %.1f steps/s (x%lld rows)\n",
                 path.c_str(), m.weights().source.c_str(), st.prefill_ms, static_cast<long long>(st.decode_tokens),
                 st.decode_ms, st.decode_tokens_per_s(), static_cast<long long>(batch));
  return 0;
}

}  // namespace rlx::cli
