// Node-suite values that are not plain tensors: the input_N.pb / output_N.pb files of a
// case hold a TensorProto, SequenceProto or OptionalProto, chosen by the model's graph input/output
// type. The importer flattens sequence/optional values to one graph value per element, named NAME[i];
// these helpers read the files and flatten them the same way.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "formats/onnx/onnx.h"
#include "rlx/tensor.h"

namespace rlx::onnx {

struct PbValue {
  std::string name;          // the ONNX graph input/output name
  bool composite = false;    // a sequence or optional
  bool has_element = true;   // an optional: does it hold a value?
  std::vector<Tensor> elems;  // a tensor: exactly one
};

// Reads the case's runtime graph inputs (outputs=false) or outputs from `files`, in order.
std::vector<PbValue> read_pb_values(const std::string& model_path, const std::vector<std::string>& files, bool outputs);
// (flattened name, tensor) pairs: NAME for a tensor, NAME[i] for element i of a sequence/optional.
std::vector<std::pair<std::string, Tensor>> flatten_pb_values(const std::vector<PbValue>& vs);
// Adds an input value to the tensors fed and to the import options (shape, small values, sequence length).
void feed_pb_value(const PbValue& v, std::vector<Tensor>* ins, ImportOptions* o);
// Per graph output, the elements whose value the ONNX spec leaves undefined for these inputs (empty:
// all defined). Today that is an output of Cast/CastLike from a float graph input to a fixed-point
// type, where the input is NaN, infinite or out of the target's range. Test runners skip them.
std::vector<std::vector<bool>> undefined_output_elements(const std::string& model_path, const std::vector<PbValue>& inputs);

}  // namespace rlx::onnx
