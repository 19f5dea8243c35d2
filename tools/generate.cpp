// `rlx generate` (Qwen3 from an HF directory or a GGUF file) and `rlx inspect FILE.gguf`.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "models/generate.h"
#include "models/qwen3/qwen3.h"
#include "quant/blocks.h"
#include "rlx/gguf.h"

namespace rlx::cli {

namespace {

std::vector<int64_t> parse_ids(const std::string& s) {
  std::vector<int64_t> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    try {
      size_t used = 0;
      r.push_back(std::stoll(item, &used));
      RLX_CHECK(used == item.size(), "");
    } catch (const std::exception&) {
      fail("[cli] --prompt-ids: '", item, "' is not an integer");
    }
  }
  return r;
}

int64_t int_flag(const Args& a, const char* k, int64_t def) {
  std::string v = a.get(k, "");
  if (v.empty()) return def;
  try {
    return std::stoll(v);
  } catch (const std::exception&) {
    fail("[cli] --", k, ": '", v, "' is not an integer");
  }
}

double float_flag(const Args& a, const char* k, double def) {
  std::string v = a.get(k, "");
  if (v.empty()) return def;
  try {
    return std::stod(v);
  } catch (const std::exception&) {
    fail("[cli] --", k, ": '", v, "' is not a number");
  }
}

}  // namespace

bool is_gguf_path(const std::string& p) { return p.size() > 5 && p.substr(p.size() - 5) == ".gguf"; }

int inspect_gguf(const Args& a) {
  RLX_CHECK(a.positional.size() == 1, "[cli] usage: rlx inspect FILE.gguf");
  gguf::File f = gguf::File::open(a.positional[0]);
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, alignment %llu, %d file(s)\n", a.positional[0].c_str(),
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
  std::string path = a.get("model", "");
  RLX_CHECK(!path.empty() && a.has("prompt-ids"),
            "[cli] usage: rlx generate --model DIR|FILE.gguf --prompt-ids 1,2,3 [--max-new 32] [--batch N] "
            "[--temperature T --top-k K --top-p P --seed S] [--eos ID] [--device cpu] [--dequantize] [--stats]");
  std::vector<int64_t> prompt = parse_ids(a.get("prompt-ids"));
  RLX_CHECK(!prompt.empty(), "[cli] --prompt-ids is empty");
  models::LoadOptions lo;
  lo.keep_packed = !a.has("dequantize");
  models::Qwen3Model m(models::load_qwen3(path, lo), a.get("device", "cpu"));
  models::SamplingOptions so;
  so.temperature = float_flag(a, "temperature", 0);
  so.top_k = int_flag(a, "top-k", 0);
  so.top_p = float_flag(a, "top-p", 1.0);
  so.seed = static_cast<uint64_t>(int_flag(a, "seed", 0));
  RLX_CHECK(so.top_p > 0 && so.top_p <= 1, "[cli] --top-p must be in (0, 1]");
  int64_t max_new = int_flag(a, "max-new", 32), batch = int_flag(a, "batch", 1);
  RLX_CHECK(max_new >= 0 && batch >= 1, "[cli] --max-new must be >= 0 and --batch >= 1");
  std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(batch), prompt);
  models::GenerateStats st;
  auto out = models::generate(m, prompts, max_new, so, int_flag(a, "eos", -1), &st);
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
