// Internals of the rten reader: the verified file and the rten -> ONNX translator shared by reader.cpp
// (file layout, graphs, constants) and ops.cpp (one operator -> ONNX nodes).
#pragma once
#ifdef RLX_HAVE_RTEN
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "formats/onnx/onnx.h"
#include "onnx/onnx.pb.h"
#include "rten_generated.h"

namespace rlx::rten {

namespace fb = ::rlx::rten_fb;

// A .rten file whose flatbuffer passed verification. `model` points into `bytes` (or `aligned` when the
// flatbuffer had to be copied to an 8-byte boundary); `tensor_data` is the version-2 tensor segment.
struct RtenFile {
  std::string bytes;
  std::vector<uint64_t> aligned;
  int version = 0;
  size_t model_len = 0;
  const uint8_t* tensor_data = nullptr;
  size_t tensor_len = 0;
  const fb::Model* model = nullptr;
};
RtenFile open_rten(std::string bytes, const std::string& where);

// rten value types -> ONNX TensorProto element types (-1 when out of range).
int onnx_elem_type(fb::DataType t);

class Translator {
 public:
  Translator(const RtenFile& f, std::string where, const onnx::ImportOptions& opts)
      : f_(f), where_(std::move(where)), opts_(opts) {}
  ::onnx::ModelProto model();

  // --- used by ops.cpp
  [[noreturn]] void error(const std::string& why) const;
  std::string fresh(const std::string& base);  // a value name unused so far
  // rten has no bool type (comparisons yield Int32 0/1); ONNX ops that need a bool get a Cast, and a bool
  // produced by an ONNX op is cast to Int32 right away (its bool twin is remembered to avoid a round trip).
  std::string as_bool(const std::string& v, ::onnx::GraphProto* gp);
  void translate_op(const fb::OperatorNode* op, const std::string& name, std::vector<std::string> ins,
                    std::vector<std::string> outs, ::onnx::GraphProto* gp, int depth);
  void graph(const fb::Graph* g, ::onnx::GraphProto* gp, int depth, const std::string& label);

 private:
  const RtenFile& f_;
  std::string where_;
  const onnx::ImportOptions& opts_;
  std::set<std::string> names_;              // every value name given out, across subgraphs
  std::map<std::string, std::string> bool_;  // Int32 value -> the bool it was cast from
  int counter_ = 0;
};

}  // namespace rlx::rten
#endif
