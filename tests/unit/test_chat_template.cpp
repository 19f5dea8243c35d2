// Chat templates rendered by models::ChatTemplate against transformers' apply_chat_template
// (goldens from tests/models/llm/make_chat_goldens.py): ChatML, Llama 2/3, Mistral, Zephyr, SmolLM2's
// own template and one exercising namespace/tojson/slices/tests; raise_exception and syntax errors.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <nlohmann/json.hpp>

#include "models/llm/chat_template.h"
#include "rlx/error.h"

using namespace rlx;
using namespace rlx::models;

namespace {

const nlohmann::json& goldens() {
  static const nlohmann::json g = [] {
    std::ifstream f(std::string(RLX_SOURCE_DIR) + "/tests/models/llm/chat_goldens.json");
    return nlohmann::json::parse(f);
  }();
  return g;
}

std::string error_of(const std::string& src, const nlohmann::json& ctx = nlohmann::json::object()) {
  try {
    ChatTemplate(src).render(ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ChatTemplate, MatchesTransformersApplyChatTemplate) {
  const auto& g = goldens();
  int checked = 0;
  for (const auto& c : g["cases"]) {
    std::string name = c["template"];
    ChatTemplate t(g["templates"][name].get<std::string>());
    nlohmann::json ctx = {{"messages", g["conversations"][c["conversation"].get<int>()]},
                          {"add_generation_prompt", c["add_generation_prompt"]},
                          {"bos_token", g["bos_token"]},
                          {"eos_token", g["eos_token"]}};
    std::string label = name + " conversation " + std::to_string(c["conversation"].get<int>()) +
                        (c["add_generation_prompt"].get<bool>() ? " +gen" : "");
    if (c["error"].is_string()) {
      try {
        t.render(ctx);
        ADD_FAILURE() << label << ": expected the template to raise";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos) << label << ": " << e.what();
      }
    } else {
      EXPECT_EQ(t.render(ctx), c["text"].get<std::string>()) << label;
    }
    ++checked;
  }
  EXPECT_GE(checked, 48);
}

TEST(ChatTemplate, UnknownConstructsFailWithPosition) {
  EXPECT_EQ(error_of("{% macro m() %}x{% endmacro %}"), "[chat-template] 1:1: unsupported statement 'macro'");
  EXPECT_EQ(error_of("ab\n  {{ x | frobnicate }}"), "[chat-template] 2:10: unsupported filter 'frobnicate'");
  EXPECT_EQ(error_of("{% if x %}open"), "[chat-template] 1:1: missing '{% endif %}'");
  EXPECT_EQ(error_of("{{ 'unterminated }}"), "[chat-template] 1:4: unterminated string");
  EXPECT_EQ(error_of("{{ a +* b }}"), "[chat-template] 1:7: unexpected '*'");
  EXPECT_EQ(error_of("{{ raise_exception('no system role') }}"),
            "[chat-template] 1:4: template raised an exception: no system role");
  EXPECT_NE(error_of("{{ 1 < 'a' }}").find("cannot compare"), std::string::npos);
}

TEST(ChatTemplate, ExpressionsAndWhitespaceControl) {
  nlohmann::json ctx = {{"xs", {1, 2, 3}}, {"s", "  Hi  "}, {"d", {{"k", "v"}}}};
  auto r = [&](const std::string& src) { return ChatTemplate(src).render(ctx); };
  EXPECT_EQ(r("{{ xs[1:] }}|{{ xs[::-1][0] }}|{{ xs|length }}|{{ 7 // 2 }}|{{ 7 % 3 }}|{{ -1 }}"), "[2, 3]|3|3|3|1|-1");
  EXPECT_EQ(r("{{ s|trim }}|{{ s.strip().lower() }}|{{ 'a' ~ 1 ~ none }}|{{ 'x' in 'xyz' }}"), "Hi|hi|a1None|True");
  EXPECT_EQ(r("{% for k, v in d.items() %}{{ k }}={{ v }}{% endfor %}"), "k=v");
  EXPECT_EQ(r("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(r("{% if false %}x{% elif xs %}y{% else %}z{% endif %}"), "y");
  EXPECT_EQ(r("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(r("{% set t = 1 %}{% for x in xs %}{% set t = x %}{% endfor %}{{ t }}"), "1");  // loop scope
  EXPECT_EQ(r("{{ d.missing is defined }}{{ d.missing }}{{ d.k is string }}"), "FalseTrue");
}

// Bad input never crashes: deep nesting fails cleanly; mutated real templates either render or
// throw rlx::Error.
TEST(ChatTemplate, HostileTemplatesFailCleanly) {
  EXPECT_NE(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested too deeply"),
            std::string::npos);
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "{% if true %}";
  EXPECT_NE(error_of(deep).find("nested too deeply"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(3000, '-') + "1 }}").find("nested too deeply"), std::string::npos);
  const auto& g = goldens();
  nlohmann::json ctx = {{"messages", g["conversations"][1]}, {"add_generation_prompt", true}, {"bos_token", "<s>"},
                        {"eos_token", "</s>"}};
  std::mt19937 rng(1);
  int rendered = 0, failed = 0;
  for (auto& [name, src] : g["templates"].items()) {
    std::string base = src.get<std::string>();
    for (int i = 0; i < 300; ++i) {
      std::string s = base;
      for (int k = 0; k < 3; ++k) {
        size_t at = rng() % s.size();
        switch (rng() % 3) {
          case 0: s.erase(at, 1 + rng() % 4); break;
          case 1: s.insert(at, 1, "{}%()[]'\"|.-~+"[rng() % 14]); break;
          default: s[at] = static_cast<char>(rng() % 128);
        }
        if (s.empty()) s = "x";
      }
      try {
        ChatTemplate(s).render(ctx);
        ++rendered;
      } catch (const Error&) {
        ++failed;
      }
    }
  }
  EXPECT_GT(rendered, 0);
  EXPECT_GT(failed, 0);
}
