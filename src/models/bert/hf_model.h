// A Hugging Face model directory: config.json, weights (model.safetensors, or shards listed by
// model.safetensors.index.json), tokenizer files, and the sentence-transformers module files
// (modules.json, 1_Pooling/config.json, sentence_bert_config.json) when present.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlx/safetensors.h"

namespace rlx::models {

class HfWeights {
 public:
  static HfWeights open_dir(const std::string& dir);  // single file or sharded index
  bool has(const std::string& name) const;
  Tensor get(const std::string& name) const;  // throws "[hf] <dir>: no weight '<name>'"
  std::vector<std::string> names() const;

 private:
  std::string dir_;
  std::vector<SafeTensors> files_;
  std::map<std::string, size_t> where_;  // weight -> index into files_
};

// What sentence-transformers does after the transformer, read from its module files.
struct SentencePipeline {
  std::string pooling = "mean";  // mean | cls | max
  bool normalize = false;        // a Normalize module follows pooling
  int64_t max_seq_length = 0;    // 0: the tokenizer's model maximum
  bool is_sentence_transformer = false;
};

struct HfModelDir {
  std::string dir;
  std::string model_dir;  // where config/weights/tokenizer live: `dir`, or its Transformer module folder
                          // (older sentence-transformers layouts keep them in e.g. 0_Transformer/)
  nlohmann::json config;  // config.json
  HfWeights weights;
  SentencePipeline sentence;
  static HfModelDir open(const std::string& dir);
};

nlohmann::json read_json_file(const std::string& path, const char* tag);

}  // namespace rlx::models
