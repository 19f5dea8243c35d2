// What the `rlx` commands share: the handlers the command table (tools/cli_table.cpp) points at,
// model-file loading and --input/--bind handling.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "cli.h"
#include "rlx/session.h"

namespace rlx::cli {

// Handlers, one per command (tools/main.cpp unless named).
int cmd_devices(const Args& a);
int cmd_compile(const Args& a);
int cmd_run(const Args& a);
int cmd_inspect(const Args& a);
int cmd_help(const Args& a);
int cmd_ops(const Args& a);          // tools/ops.cpp
int cmd_generate(const Args& a);     // tools/generate.cpp
int cmd_embed(const Args& a);        // tools/embed.cpp
int cmd_serve(const Args& a);        // tools/serve.cpp
int cmd_onnx_suite(const Args& a);   // tools/onnx_cmds.cpp
int cmd_train_mnist(const Args& a);  // tools/train_mnist.cpp
int cmd_bench(const Args& a);        // tools/bench.cpp
int cmd_splat(const Args& a);        // tools/splat.cpp
int cmd_launch(const Args& a);       // tools/launch.cpp
int cmd_quantize(const Args& a);     // tools/quantize.cpp

std::vector<std::string> split(const std::string& s, char sep);
Bindings bind_map(const Graph& g, const std::map<std::string, Tensor>& inputs);
// --bind SYM=N,... (the parser has checked each item).
Bindings bindings(const Args& a);

// The model formats compile/run read, by extension; UsageError naming the known ones otherwise.
// `inspecting`: `rlx inspect` also reads .gguf and .safetensors (weights, not graphs).
enum class ModelFormat { Rlx, Onnx, Rten, Gguf, Safetensors };
ModelFormat model_format(const std::string& path, bool inspecting);

// ONNX (tools/onnx_cmds.cpp): .onnx/.rten/.rlx by extension; `inputs` (the arrays about to be fed)
// fix input shapes, and small ones their values, at import. A --bind naming no symbol of the model
// is a UsageError listing the symbols it has.
Graph load_model_file(const std::string& path, const Args& a, const std::map<std::string, Tensor>& inputs = {});
// The arrays given with --input name=file.npy|file.npz, each file read once; fails naming a bad one.
std::map<std::string, Tensor> read_inputs(const Args& a);
// `rlx inspect` of an .onnx file (tools/onnx_cmds.cpp).
int inspect_onnx_file(const std::string& path);

// GGUF (tools/generate.cpp) and rten (tools/rten_cmds.cpp) summaries for `rlx inspect`.
int inspect_gguf(const std::string& path);
int inspect_rten_file(const std::string& path);
int inspect_safetensors(const std::string& path);  // tools/main.cpp

// `rlx compile/run --device fpga` (tools/fpga_cmds.cpp): the SystemVerilog project and its Verilator run.
int compile_fpga(const Graph& g, const Args& a);
int run_fpga(const Graph& g, const std::map<std::string, Tensor>& inputs, const Args& a);

}  // namespace rlx::cli
