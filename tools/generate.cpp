// `rlx generate` (llama-family decoders from an HF directory or a GGUF file; text or token ids)
// and `rlx inspect FILE.gguf`.
#include <chrono>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "dist/communicator.h"
#include "models/generate.h"
#include "models/llm/llm.h"
#include "passes/shard.h"
#include "quant/blocks.h"
#include "rlx/gguf.h"

namespace rlx::cli {

int inspect_gguf(const std::string& path) {
  gguf::File f = gguf::File::open(path);
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, alignment %llu, %d file(s)\n", path.c_str(),
              f.version(), f.metadata().size(), f.tensors().size(), static_cast<unsigned long long>(f.alignment()),
              f.num_parts());
  std::string arch = f.get_str("general.architecture", "");
  std::string why = models::gguf_support(f), twhy = models::BpeTokenizer::gguf_support(f);
  std::printf("architecture: %s: %s\n", arch.empty() ? "(none)" : arch.c_str(),
              why.empty() ? "supported by rlx generate" : ("not supported by rlx generate: " + why).c_str());
  std::printf("tokenizer: %s: %s\n", f.get_str("tokenizer.ggml.model", "(none)").c_str(),
              twhy.empty() ? "supported" : ("not supported: " + twhy).c_str());
  std::printf("chat template: %s\n", f.find("tokenizer.chat_template") ? "yes (tokenizer.chat_template)" : "none");
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

namespace {

models::SamplingOptions sampling(const Args& a) {
  models::SamplingOptions so;
  so.temperature = a.number("temperature");
  so.top_k = a.integer("top-k");
  so.top_p = a.number("top-p");
  so.min_p = a.number("min-p");
  so.repeat_penalty = a.number("repeat-penalty");
  so.seed = static_cast<uint64_t>(a.integer("seed"));
  return so;
}

void check_context(const models::DecoderConfig& cfg, int64_t prompt, int64_t max_new) {
  int64_t want = prompt + max_new;
  if (cfg.context > 0 && want > cfg.context)
    usage_fail("generate: the prompt (", prompt, " tokens) + --max-new ", max_new, " = ", want,
               " positions exceeds the model's context length of ", cfg.context, "; use --max-new ",
               std::max<int64_t>(0, cfg.context - prompt), " or less");
}

// --tp N: every step graph becomes this rank's part of a tensor-parallel decoder (the llama preset
// of shard-tensor-parallel: heads, FFN and vocabulary split, docs/distributed.md). Each rank runs
// the same generation loop on the same (gathered) logits; rank 0 alone prints.
void tensor_parallel(const Args& a, models::DecoderModel& m) {
  const int64_t tp = a.integer("tp");
  if (tp <= 1) return;
  dist::Communicator& comm = dist::current();
  RLX_CHECK(comm.size() == tp, "[cli] generate --tp ", tp, " needs ", tp, " ranks (rlx launch -n ", tp,
            " -- rlx generate ..., or mpirun -n ", tp, "); this process is rank ", comm.rank(), " of ", comm.size());
  const int64_t rank = comm.rank();
  const bool report = a.has("shard-report") && rank == 0;
  m.set_graph_transform([tp, rank, report](const Graph& g) {
    ShardReport rep;
    Graph part = shard_tensor_parallel(g, "llama", tp, rank, &rep);
    if (report) std::fputs(rep.str().c_str(), stderr);
    return part;
  });
  if (rank != 0 && !std::freopen("/dev/null", "w", stdout)) usage_fail("generate: cannot silence rank ", rank);
}

// Token ids in, token ids out (one line of comma-separated ids per row).
int generate_ids(const Args& a, const std::string& path) {
  std::vector<int64_t> prompt;
  for (auto& id : a.items("prompt-ids")) prompt.push_back(*to_int(id));
  RLX_CHECK(!prompt.empty(), "[cli] --prompt-ids is empty");
  int64_t max_new = a.integer("max-new"), batch = a.integer("batch");
  // The context is checked from the config before any weight is read.
  models::DecoderConfig cfg = models::read_decoder_config(path);
  check_context(cfg, static_cast<int64_t>(prompt.size()), max_new);
  for (int64_t id : prompt)
    if (id >= cfg.vocab) usage_fail("generate --prompt-ids: token id ", id, " is outside the vocabulary (", cfg.vocab, " ids)");
  models::LoadOptions lo;
  lo.keep_packed = !a.has("dequantize");
  models::DecoderModel m(models::load_decoder(path, lo), a.get("device"));
  tensor_parallel(a, m);
  std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(batch), prompt);
  models::GenerateStats st;
  auto out = models::generate(m, prompts, max_new, sampling(a), a.integer("eos"), &st);
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

models::TextOptions text_options(const Args& a) {
  models::TextOptions to;
  to.max_new = a.integer("max-new");
  to.sampling = sampling(a);
  to.stop = a.all("stop");
  return to;
}

// A conversation on stdin/stdout: each line is a user turn; the whole history is re-rendered
// through the chat template every turn. An empty line or end of input ends it.
int chat_loop(const Args& a, const std::string& path) {
  models::LoadOptions lo;
  lo.keep_packed = !a.has("dequantize");
  auto llm = models::Llm::load(path, a.get("device"), lo);
  if (!llm->has_chat_template()) usage_fail("generate --interactive: ", path, " has no chat template");
  std::vector<models::ChatMessage> msgs;
  if (a.has("system")) msgs.push_back({"system", a.get("system")});
  std::string line = a.get("prompt");
  bool first = true;
  for (;;) {
    if (!first || line.empty()) {
      std::fprintf(stderr, "> ");
      std::fflush(stderr);
      if (!std::getline(std::cin, line)) break;
    }
    first = false;
    if (line.empty()) break;
    msgs.push_back({"user", line});
    std::vector<int64_t> ids = llm->encode_prompt(llm->apply_chat(msgs, true), true);
    models::TextOptions to = text_options(a);
    int64_t ctx = llm->model().weights().cfg.context;
    if (ctx > 0 && static_cast<int64_t>(ids.size()) + to.max_new > ctx) {
      std::fprintf(stderr, "[cli] the conversation (%zu tokens) no longer fits the context of %lld\n", ids.size(),
                   static_cast<long long>(ctx));
      return 1;
    }
    std::string reply = llm->generate(ids, to, [](const std::string& piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::printf("\n");
    std::fflush(stdout);
    msgs.push_back({"assistant", reply});
  }
  return 0;
}

}  // namespace

int cmd_generate(const Args& a) {
  std::string path = a.get("model");
  bool has_text = a.has("prompt"), has_ids = a.has("prompt-ids");
  if (a.has("interactive")) {
    if (has_ids || a.integer("batch") != 1) usage_fail("generate: --interactive takes text (no --prompt-ids/--batch)");
    if (a.integer("tp") > 1) usage_fail("generate: --interactive runs in one process (no --tp)");
    return chat_loop(a, path);
  }
  if (has_text == has_ids) usage_fail("generate: give exactly one of --prompt TEXT or --prompt-ids ID,...");
  if (has_ids) {
    if (a.has("chat") || a.has("system")) usage_fail("generate: --chat/--system need --prompt TEXT");
    return generate_ids(a, path);
  }
  if (a.integer("batch") != 1) usage_fail("generate: --batch needs --prompt-ids");
  if (a.has("system") && !a.has("chat")) usage_fail("generate: --system needs --chat");
  models::LoadOptions lo;
  lo.keep_packed = !a.has("dequantize");
  auto llm = models::Llm::load(path, a.get("device"), lo);
  tensor_parallel(a, llm->model());
  std::string text = a.get("prompt");
  if (a.has("chat")) {
    std::vector<models::ChatMessage> msgs;
    if (a.has("system")) msgs.push_back({"system", a.get("system")});
    msgs.push_back({"user", text});
    text = llm->apply_chat(msgs, true);
  }
  std::vector<int64_t> ids = llm->encode_prompt(text, a.has("chat"));
  if (ids.empty()) usage_fail("generate: --prompt encodes to no tokens");
  int64_t max_new = a.integer("max-new");
  check_context(llm->model().weights().cfg, static_cast<int64_t>(ids.size()), max_new);
  models::TextOptions to = text_options(a);
  models::GenerateStats st;
  llm->generate(ids, to, [](const std::string& piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  }, &st);
  std::printf("\n");
  std::fflush(stdout);
  if (a.has("stats")) {
    int64_t new_tokens = st.decode_tokens + 1;
    double prefill_tps = st.prefill_ms > 0 ? ids.size() * 1000.0 / st.prefill_ms : 0;
    std::fprintf(stderr,
                 "model %s (%s, %s); compile %.0f ms\nprefill: %zu tokens in %.1f ms = %.1f tokens/s\n"
                 "decode: %lld tokens in %.1f ms = %.1f tokens/s (%lld new tokens)\n",
                 path.c_str(), llm->model().weights().cfg.arch.c_str(), llm->model().weights().source.c_str(), st.compile_ms,
                 ids.size(),
                 st.prefill_ms, prefill_tps, static_cast<long long>(st.decode_tokens), st.decode_ms, st.decode_tokens_per_s(),
                 static_cast<long long>(new_tokens));
  }
  return 0;
}

}  // namespace rlx::cli
