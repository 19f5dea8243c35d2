// load_model: picks the reader by extension (or, for a folder, by config.json's model_type).
#include "models/load_model.h"

#include <filesystem>

#include "formats/rten/rten.h"
#include "models/bert/bert.h"
#include "models/qwen3/qwen3.h"
#include "rlx/text.h"

namespace rlx::models {

namespace fs = std::filesystem;

namespace {
bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}
}  // namespace

std::string model_kind(const std::string& path) {
  RLX_CHECK(fs::exists(path), "[load] '", path, "' does not exist");
  if (fs::is_directory(path)) {
    fs::path cfg = fs::path(path) / "config.json";
    RLX_CHECK(fs::exists(cfg), "[load] ", path, ": a model folder needs config.json (a Hugging Face layout)");
    auto j = read_json_file(cfg.string(), "load");
    std::string type = j.value("model_type", "");
    if (type == "bert") return "hf-bert";
    if (type == "qwen3") return "hf-qwen3";
    fail("[load] ", path, ": model_type '", type, "' in config.json; RLX builds bert and qwen3 folders");
  }
  for (const char* e : {"rlx", "onnx", "rten", "gguf"})
    if (ends_with(path, std::string(".") + e)) return e;
  std::string hint = ends_with(path, ".safetensors")
                         ? " (a .safetensors file holds weights only: load its Hugging Face folder, with config.json)"
                         : "";
  fail("[load] '", path, "': unknown model format; known: .rlx (text), .onnx, .rten, .gguf, a Hugging Face folder",
       hint);
}

Graph load_model(const std::string& path, const ModelLoadOptions& o) {
  std::string kind = model_kind(path);
  if (kind == "rlx") return load_graph_file(path);
  if (kind == "onnx") return onnx::load_onnx(path, o.import);
  if (kind == "rten") return rten::load_rten(path, o.import);
  RLX_CHECK(o.batch >= 1 && o.seq >= 1, "[load] batch and seq must be >= 1");
  if (kind == "hf-bert") {
    HfModelDir m = HfModelDir::open(path);
    return build_bert_graph(BertConfig::from_json(m.config, path), m.weights, BertGraphOptions{});
  }
  Qwen3Weights w = load_qwen3(path);
  return qwen3_step_graph(w, o.batch, o.seq, 0, true);
}

}  // namespace rlx::models
