// .rten import: a model file of the rten runtime (flatbuffers, written by the pip `rten-convert`) becomes an
// rlx::Graph. The file is verified with the flatbuffers Verifier, its operators (which mirror ONNX
// operators) are translated into an ONNX ModelProto, and the ONNX importer's converters build the graph,
// so both formats meet the same op coverage. Errors read "[rten] <file>: why".
#pragma once
#include <string>
#include <vector>

#include "formats/onnx/onnx.h"
#include "rlx/graph.h"

namespace rlx::rten {

// False when this build has no rten reader (flatc or the flatbuffers headers were missing at configure
// time); every other call then throws with unavailable_reason().
bool available();
std::string unavailable_reason();

bool is_rten_path(const std::string& path);  // by the ".rten" extension

// Loads MODEL.rten. `opts` as for ONNX: symbolic-dim bindings, input shapes and small input values.
Graph load_rten(const std::string& path, const onnx::ImportOptions& opts = {});
Graph import_rten(const std::string& bytes, const std::string& where, const onnx::ImportOptions& opts = {});
// The ONNX model the reader hands to the ONNX converters (serialized ModelProto), for tests and debugging.
std::string rten_to_onnx(const std::string& bytes, const std::string& where, const onnx::ImportOptions& opts = {});
// Human-readable summary: format version, metadata, inputs/outputs, constants, op histogram.
std::string inspect_rten(const std::string& path);

}  // namespace rlx::rten
