// rlx._rlx.llm: decoder LLMs from Python — the tokenizer, the chat template, and text generation as
// a pull session (python/rlx/llm.py wraps it as an iterator of text pieces).
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "models/llm/llm.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rlx {

void bind_llm(nb::module_& parent) {
  using namespace rlx::models;
  nb::module_ m = parent.def_submodule("llm", "llama-family decoders: tokenizer, chat template, generation");

  nb::class_<BpeTokenizer>(m, "Tokenizer")
      .def_static(
          "from_json", [](const std::string& p) { return BpeTokenizer::from_hf_json(p); }, "path"_a,
          "A BPE tokenizer from an HF tokenizer.json.")
      .def("encode", &BpeTokenizer::encode, "text"_a, "add_special"_a = true)
      .def("decode", &BpeTokenizer::decode, "ids"_a, "skip_special"_a = false)
      .def("token", &BpeTokenizer::token, "id"_a)
      .def_prop_ro("vocab_size", &BpeTokenizer::vocab_size)
      .def_prop_ro("bos", &BpeTokenizer::bos)
      .def_prop_ro("eos", &BpeTokenizer::eos);

  nb::class_<ChatTemplate>(m, "ChatTemplate")
      .def(nb::init<const std::string&>(), "source"_a)
      .def(
          "render_json",
          [](const ChatTemplate& t, const std::string& ctx) { return t.render(nlohmann::json::parse(ctx)); },
          "context_json"_a, "Renders with a JSON-encoded context (messages, add_generation_prompt, ...).");

  nb::class_<TextSession>(m, "TextSession")
      .def(
          "next",
          [](TextSession& s) -> nb::object {
            std::string piece;
            bool more;
            {
              nb::gil_scoped_release r;
              more = s.next(piece);
            }
            if (!more) return nb::none();
            return nb::str(piece.data(), piece.size());
          },
          "The next piece of text, or None when generation has ended.")
      .def_prop_ro("tokens", &TextSession::tokens)
      .def_prop_ro("prefill_ms", [](const TextSession& s) { return s.stats().prefill_ms; })
      .def_prop_ro("decode_ms", [](const TextSession& s) { return s.stats().decode_ms; })
      .def_prop_ro("decode_tokens", [](const TextSession& s) { return s.stats().decode_tokens; });

  nb::class_<Llm>(m, "Llm")
      .def_static(
          "load", [](const std::string& path, const std::string& device) { return Llm::load(path, device); },
          "path"_a, "device"_a = "cpu")
      .def_prop_ro("tokenizer", &Llm::tokenizer, nb::rv_policy::reference_internal)
      .def_prop_ro("has_chat_template", &Llm::has_chat_template)
      .def_prop_ro("architecture", [](Llm& l) { return l.model().weights().cfg.arch; })
      .def(
          "apply_chat",
          [](const Llm& l, const std::vector<std::pair<std::string, std::string>>& msgs, bool gen) {
            std::vector<ChatMessage> v;
            for (auto& [r, c] : msgs) v.push_back({r, c});
            return l.apply_chat(v, gen);
          },
          "messages"_a, "add_generation_prompt"_a = true)
      .def("encode_prompt", &Llm::encode_prompt, "text"_a, "chat"_a = false)
      .def(
          "session",
          [](Llm& l, const std::vector<int64_t>& prompt, int64_t max_new, double temperature, int64_t top_k, double top_p,
             double min_p, double repeat_penalty, uint64_t seed, const std::vector<std::string>& stop) {
            TextOptions o;
            o.max_new = max_new;
            o.sampling.temperature = temperature;
            o.sampling.top_k = top_k;
            o.sampling.top_p = top_p;
            o.sampling.min_p = min_p;
            o.sampling.repeat_penalty = repeat_penalty;
            o.sampling.seed = seed;
            o.stop = stop;
            return new TextSession(l, prompt, o);
          },
          "prompt"_a, "max_new"_a = 128, "temperature"_a = 0.0, "top_k"_a = 0, "top_p"_a = 1.0, "min_p"_a = 0.0,
          "repeat_penalty"_a = 1.0, "seed"_a = 0, "stop"_a = std::vector<std::string>{}, nb::keep_alive<0, 1>(),
          nb::rv_policy::take_ownership);
}

}  // namespace rlx
