// Loading a Hugging Face model directory.
#include "models/bert/hf_model.h"

#include <filesystem>

#include "formats/file_io.h"

namespace rlx::models {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json_file(const std::string& path, const char* tag) {
  std::string text = formats::read_file_bytes(path, tag);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("[", tag, "] ", path, ": not valid JSON: ", e.what());
  }
}

HfWeights HfWeights::open_dir(const std::string& dir) {
  HfWeights w;
  w.dir_ = dir;
  fs::path d(dir);
  if (fs::exists(d / "model.safetensors")) {
    w.files_.push_back(SafeTensors::open((d / "model.safetensors").string()));
  } else if (fs::exists(d / "model.safetensors.index.json")) {
    json idx = read_json_file((d / "model.safetensors.index.json").string(), "hf");
    RLX_CHECK(idx.contains("weight_map") && idx["weight_map"].is_object(), "[hf] ", dir,
              ": model.safetensors.index.json has no weight_map");
    std::map<std::string, size_t> file_index;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      RLX_CHECK(it.value().is_string(), "[hf] ", dir, ": weight_map entry '", it.key(), "' is not a file name");
      std::string f = it.value().get<std::string>();
      RLX_CHECK(f.find('/') == std::string::npos && f.find("..") == std::string::npos, "[hf] ", dir,
                ": shard name '", f, "' must be a plain file name");
      if (!file_index.count(f)) {
        file_index[f] = w.files_.size();
        w.files_.push_back(SafeTensors::open((d / f).string()));
      }
    }
  } else {
    fail("[hf] ", dir, ": no model.safetensors or model.safetensors.index.json (only safetensors weights are read)");
  }
  for (size_t i = 0; i < w.files_.size(); ++i)
    for (auto& n : w.files_[i].names()) w.where_.emplace(n, i);
  return w;
}

bool HfWeights::has(const std::string& name) const { return where_.count(name) > 0; }

Tensor HfWeights::get(const std::string& name) const {
  auto it = where_.find(name);
  RLX_CHECK(it != where_.end(), "[hf] ", dir_, ": no weight '", name, "'");
  return files_[it->second].get(name);
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> r;
  for (auto& [n, i] : where_) r.push_back(n);
  return r;
}

HfModelDir HfModelDir::open(const std::string& dir) {
  fs::path d(dir);
  RLX_CHECK(fs::is_directory(d), "[hf] ", dir, ": not a directory");
  HfModelDir m;
  m.dir = m.model_dir = dir;
  if (!fs::exists(d / "config.json") && fs::exists(d / "modules.json")) {
    json mods = read_json_file((d / "modules.json").string(), "hf");
    if (mods.is_array())
      for (auto& mod : mods)
        if (mod.value("type", "").find("Transformer") != std::string::npos && !mod.value("path", "").empty() &&
            mod.value("path", "").find("..") == std::string::npos)
          m.model_dir = (d / mod.value("path", "")).string();
  }
  fs::path md(m.model_dir);
  RLX_CHECK(fs::exists(md / "config.json"), "[hf] ", dir, ": no config.json (not a Hugging Face model directory)");
  m.config = read_json_file((md / "config.json").string(), "hf");
  RLX_CHECK(m.config.is_object(), "[hf] ", m.model_dir, "/config.json: not a JSON object");
  m.weights = HfWeights::open_dir(m.model_dir);
  SentencePipeline& s = m.sentence;
  if (fs::exists(d / "modules.json")) {
    json mods = read_json_file((d / "modules.json").string(), "hf");
    RLX_CHECK(mods.is_array(), "[hf] ", dir, "/modules.json: not a list");
    s.is_sentence_transformer = true;
    for (auto& mod : mods) {
      std::string type = mod.value("type", "");
      std::string path = mod.value("path", "");
      if (type.find("Pooling") != std::string::npos) {
        fs::path pc = d / path / "config.json";
        if (fs::exists(pc)) {
          json p = read_json_file(pc.string(), "hf");
          int modes = 0;
          if (p.value("pooling_mode_mean_tokens", false)) s.pooling = "mean", ++modes;
          if (p.value("pooling_mode_cls_token", false)) s.pooling = "cls", ++modes;
          if (p.value("pooling_mode_max_tokens", false)) s.pooling = "max", ++modes;
          RLX_CHECK(modes == 1 && !p.value("pooling_mode_mean_sqrt_len_tokens", false), "[hf] ", pc.string(),
                    ": only a single mean, cls or max pooling mode is supported");
        }
      } else if (type.find("Normalize") != std::string::npos) {
        s.normalize = true;
      } else if (type.find("Transformer") == std::string::npos) {
        fail("[hf] ", dir, "/modules.json: module '", type, "' is not supported (Transformer, Pooling, Normalize)");
      }
    }
  }
  fs::path sb = fs::exists(d / "sentence_bert_config.json") ? d / "sentence_bert_config.json"
                                                             : md / "sentence_bert_config.json";
  if (fs::exists(sb)) {
    json c = read_json_file(sb.string(), "hf");
    if (c.contains("max_seq_length") && c["max_seq_length"].is_number_integer())
      s.max_seq_length = c["max_seq_length"].get<int64_t>();
  }
  return m;
}

}  // namespace rlx::models
