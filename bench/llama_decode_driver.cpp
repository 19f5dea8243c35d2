// The llama.cpp side of bench/llm_decode.py when a llama.cpp build has libllama but no llama-bench:
// greedy decode through llama.h (prefill of the prompt as one batch, then one token per step), with
// `rlx generate --stats`'s report lines on stderr ("prefill: P tokens in T ms = X tokens/s",
// "decode: ...") and the text on stdout, so both systems are timed the same way. Built by the
// benchmark against that checkout (its headers and shared libraries); usage: MODEL PROMPT N THREADS.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "ggml-backend.h"
#include "llama.h"
int main(int argc, char** argv) {
  if (argc < 5) { std::fprintf(stderr, "usage: model prompt n_new threads\n"); return 2; }
  const char* path = argv[1]; std::string prompt = argv[2]; int n_new = std::atoi(argv[3]), nt = std::atoi(argv[4]);
  ggml_backend_load_all();
  llama_model* model = llama_model_load_from_file(path, llama_model_default_params());
  if (!model) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> toks(prompt.size() + 16);
  int n = llama_tokenize(vocab, prompt.c_str(), prompt.size(), toks.data(), toks.size(), false, true);
  toks.resize(n);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n + n_new + 8; cp.n_batch = n + 8; cp.n_threads = nt; cp.n_threads_batch = nt; cp.no_perf = false;
  llama_context* ctx = llama_init_from_model(model, cp);
  llama_sampler* smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
  llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
  using clk = std::chrono::steady_clock;
  auto t0 = clk::now();
  if (llama_decode(ctx, llama_batch_get_one(toks.data(), n))) return 1;
  llama_token tok = llama_sampler_sample(smpl, ctx, -1);
  auto t1 = clk::now();
  std::string out;
  char buf[256];
  int made = 1;
  auto piece = [&](llama_token t) { int k = llama_token_to_piece(vocab, t, buf, sizeof buf, 0, false); if (k > 0) out.append(buf, k); };
  piece(tok);
  for (; made < n_new && !llama_vocab_is_eog(vocab, tok); ++made) {
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1))) return 1;
    tok = llama_sampler_sample(smpl, ctx, -1);
    piece(tok);
  }
  auto t2 = clk::now();
  double pm = std::chrono::duration<double, std::milli>(t1 - t0).count(), dm = std::chrono::duration<double, std::milli>(t2 - t1).count();
  std::printf("%s\n", out.c_str());
  std::fprintf(stderr, "prefill: %d tokens in %.1f ms = %.1f tokens/s\n", n, pm, n * 1000.0 / pm);
  std::fprintf(stderr, "decode: %d tokens in %.1f ms = %.1f tokens/s (%d new tokens)\n", made - 1, dm, (made - 1) * 1000.0 / dm, made);
  llama_sampler_free(smpl); llama_free(ctx); llama_model_free(model);
  return 0;
}
