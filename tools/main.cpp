// The `rlx` command: dispatch through the command table (tools/cli_table.cpp), and the devices,
// compile, run, inspect and help commands. Usage errors print "rlx: [cli] ..." and exit 2; other
// failures print "rlx: [component] message" and exit 1.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "dist/communicator.h"
#include "codegen/cortexm/cortexm.h"
#include "passes/shard.h"
#include "rlx/safetensors.h"
#include "rlx/device.h"
#include "rlx/lir.h"
#include "rlx/npy.h"
#include "rlx/session.h"
#include "rlx/text.h"

namespace rlx::cli {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) r.push_back(item);
  return r;
}

static bool ends_with(const std::string& s, const char* e) {
  size_t n = std::strlen(e);
  return s.size() >= n && s.compare(s.size() - n, n, e) == 0;
}

ModelFormat model_format(const std::string& path, bool inspecting) {
  if (ends_with(path, ".rlx")) return ModelFormat::Rlx;
  if (ends_with(path, ".onnx")) return ModelFormat::Onnx;
  if (ends_with(path, ".rten")) return ModelFormat::Rten;
  if (inspecting && ends_with(path, ".gguf")) return ModelFormat::Gguf;
  if (inspecting && ends_with(path, ".safetensors")) return ModelFormat::Safetensors;
  std::string hint;
  if (ends_with(path, ".gguf")) hint = " (a .gguf is read by `rlx generate`, `rlx bench` and `rlx inspect`)";
  if (ends_with(path, ".safetensors"))
    hint = " (a .safetensors holds weights, not a graph: `rlx inspect` lists them, `--input NAME=FILE.safetensors` "
           "feeds one, and its Hugging Face folder runs through `rlx generate` / `rlx embed` / `rlx bench`)";
  usage_fail("'", path, "': unknown model format; known: .rlx (text), .onnx, .rten",
             inspecting ? ", .gguf, .safetensors" : "", hint);
}

int inspect_safetensors(const std::string& path) {
  SafeTensors f = SafeTensors::open(path);
  auto names = f.names();
  uint64_t bytes = 0;
  std::cout << "safetensors: " << path << "\ntensors: " << names.size() << "\n";
  for (auto& [k, v] : f.metadata()) std::cout << "metadata " << k << ": " << v << "\n";
  for (auto& n : names) {
    auto s = f.shape(n);
    std::string dims;
    uint64_t count = 1;
    for (auto d : s) {
      dims += (dims.empty() ? "" : ",") + std::to_string(d);
      count *= static_cast<uint64_t>(d);
    }
    std::cout << "  " << n << "  " << f.dtype_str(n) << "[" << dims << "]\n";
    bytes += count;
  }
  std::cout << "elements: " << bytes << "\n";
  return 0;
}

CompileOptions compile_options(const Args& a) {
  CompileOptions o;
  o.device = a.get("device");
  for (auto& op : a.items("force-common")) o.dispatch.force_common.insert(op);
  for (auto& op : a.items("force-native")) o.dispatch.force_native.insert(op);
  o.fuse = !a.has("no-fuse");
  o.dispatch.fallback = a.get("fallback");
  return o;
}

Bindings bindings(const Args& a) {
  Bindings b;
  for (auto& kv : a.items("bind")) {
    auto eq = kv.find('=');
    b[kv.substr(0, eq)] = *to_int(kv.substr(eq + 1));  // the parser checked the form and range
  }
  return b;
}

Bindings bind_map(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  Bindings b;
  for (auto i : g.inputs) {
    auto it = inputs.find(g.values[i].name);
    if (it == inputs.end()) continue;
    const Shape& s = g.type(i).shape;
    for (size_t d = 0; d < s.size() && d < it->second.shape().size(); ++d)
      if (!s[d].is_static()) b[s[d].sym] = it->second.shape()[d];
  }
  return b;
}

static bool env_report() {
  const char* e = std::getenv("RLX_DISPATCH_REPORT");
  return e && std::string(e) == "1";
}

int cmd_devices(const Args& a) {
  if (a.has("json")) {
    nlohmann::json list = nlohmann::json::array();
    for (auto& n : device_names()) {
      const DeviceInfo& d = device_info(n);
      list.push_back({{"name", n},
                      {"status", std::string(device_status_name(d.status))},
                      {"runs", d.can_execute()},
                      {"description", d.description},
                      {"reason", d.reason}});
    }
    std::cout << list.dump(2) << "\n";
    return 0;
  }
  std::printf("%-8s %-13s %s\n", "device", "status", "what runs / why not");
  for (auto& n : device_names()) {
    const DeviceInfo& d = device_info(n);
    std::printf("%-8s %-13s %s — %s\n", n.c_str(), std::string(device_status_name(d.status)).c_str(),
                d.description.c_str(), d.reason.c_str());
  }
  std::printf("%zu targets\n", device_names().size());
  // Collective transports (src/dist): which ones this build and host exercise.
  std::printf("collectives: cpu only; transports: local (in-process ranks), mpi (%s), ucx (as Open MPI's pml: "
              "rlx launch --transport ucx; tcp/shm here, no RDMA device), nccl (%s)\n",
              rlx::dist::mpi_compiled_in() ? "Open MPI, compiled in" : "not compiled in: no MPI at build time",
              rlx::dist::nccl_status().c_str());
  return 0;
}

int cmd_compile(const Args& a) {
  model_format(a.positional[0], false);
  std::map<std::string, Tensor> inputs = read_inputs(a);
  Graph g = load_model_file(a.positional[0], a, inputs);  // --input arrays fix shapes at import
  if (a.get("device") == "fpga") return compile_fpga(g, a);
  if (a.integer("tp") > 1) {  // one rank's part of a tensor-parallel program (docs/distributed.md)
    ShardReport rep;
    if (a.integer("tp-rank") >= a.integer("tp")) usage_fail("compile --tp-rank must be below --tp");
    g = shard_tensor_parallel(g, a.get("tp-preset"), a.integer("tp"), a.integer("tp-rank"), &rep);
    std::cout << rep.str();
  }
  CompiledModel m(std::move(g), compile_options(a));
  Bindings b = bind_map(m.graph(), inputs);  // ... and size a .rlx graph's symbolic dims
  for (auto& [sym, n] : bindings(a)) b[sym] = n;
  bool report = a.has("report") || env_report();
  const DispatchReport& r = m.report(b);  // compiles (and fails with the diagnostic if it cannot)
  if (report) std::cout << r.table();
  if (a.has("dump")) std::cout << m.dump(a.get("dump"), b);
  if (a.has("dump-after")) std::cout << m.dump_after(a.get("dump-after"), b);
  if (a.has("out")) {  // a device that is a code generator writes its project
    if (m.options().device != "cortexm")
      usage_fail("compile --out: device '", m.options().device, "' writes no project (cortexm and fpga do)");
    cortexm::Board board = cortexm::Board::M4;
    cortexm::parse_board(a.get("board"), &board);
    cortexm::Project proj = cortexm::generate_project(m.lir(b), board);
    cortexm::write_project(proj, a.get("out"));
    std::cout << "wrote " << a.get("out") << " (" << cortexm::board_info(board).core << ", QEMU "
              << cortexm::board_info(board).machine << "): " << proj.summary() << "\n";
    return 0;
  }
  if (!report && !a.has("dump") && !a.has("dump-after"))
    std::cout << "compiled " << a.positional[0] << " for " << m.options().device << " (use --report or --dump)\n";
  return 0;
}

int cmd_run(const Args& a) {
  model_format(a.positional[0], false);
  // each --input file is read once (tools/onnx_cmds.cpp) and also fixes shapes at import
  std::map<std::string, Tensor> inputs = read_inputs(a);
  Graph g = load_model_file(a.positional[0], a, inputs);
  std::string out = a.get("output");
  if (ends_with(out, ".npy") && g.outputs.size() != 1)
    usage_fail("run --output ", out, ": the model has ", g.outputs.size(),
               " outputs and a .npy holds one array; name an .npz instead");
  if (a.get("device") == "fpga") return run_fpga(g, inputs, a);
  CompiledModel m(std::move(g), compile_options(a));
  auto outs = m.run(inputs);
  if (a.has("report")) std::cout << m.report(bind_map(m.graph(), inputs)).table();
  else if (env_report()) std::cerr << m.report(bind_map(m.graph(), inputs)).table();
  std::string prof = m.profile();
  if (!prof.empty()) std::cerr << prof;
  std::vector<std::pair<std::string, Tensor>> ordered(outs.begin(), outs.end());
  for (auto& [k, t] : ordered) std::cout << k << " = " << t.str(8) << "\n";
  if (!out.empty()) {
    if (ends_with(out, ".npy")) write_npy(out, ordered.at(0).second);
    else write_npz(out, ordered);
    std::cout << "wrote " << ordered.size() << (ordered.size() == 1 ? " array" : " arrays") << " to " << out << "\n";
  }
  return 0;
}

int cmd_inspect(const Args& a) {
  const std::string& p = a.positional[0];
  switch (model_format(p, true)) {
    case ModelFormat::Gguf: return inspect_gguf(p);
    case ModelFormat::Rten: return inspect_rten_file(p);
    case ModelFormat::Onnx: return inspect_onnx_file(p);
    case ModelFormat::Safetensors: return inspect_safetensors(p);
    case ModelFormat::Rlx: break;
  }
  Graph g = load_graph_file(p);
  std::cout << "graph: " << g.name << "\ninputs: " << g.inputs.size() << "\noutputs: " << g.outputs.size()
            << "\nnodes: " << g.nodes.size() << "\n";
  auto syms = g.symbols();
  if (!syms.empty()) {
    std::cout << "symbols:";
    for (auto& s : syms) std::cout << " " << s;
    std::cout << "\n";
  }
  return 0;
}

int cmd_help(const Args& a) {
  if (a.has("markdown")) {
    if (!a.positional.empty()) usage_fail("help --markdown prints the whole table; give no COMMAND");
    std::cout << markdown_table();
    return 0;
  }
  if (a.positional.empty()) {
    std::cout << overview();
    return 0;
  }
  const Command* c = find_command(a.positional[0]);
  if (!c) {
    std::vector<std::string> names;
    for (auto& x : commands()) names.push_back(x.name);
    usage_fail("help: unknown command '", a.positional[0], "'", closest(a.positional[0], names));
  }
  std::cout << command_help(*c);
  return 0;
}

}  // namespace rlx::cli

int main(int argc, char** argv) {
  using namespace rlx::cli;
  const Command* cmd = nullptr;
  try {
    if (argc < 2) {
      std::fputs(overview().c_str(), stderr);
      return 2;
    }
    std::string first = argv[1];
    if (first == "--help" || first == "-h") {
      std::fputs(overview().c_str(), stdout);
      return 0;
    }
    if (first == "--version" || first == "-V") {
      std::printf("rlx %s\n", version());
      return 0;
    }
    cmd = find_command(first);
    if (!cmd) {
      std::vector<std::string> names;
      for (auto& c : commands()) names.push_back(c.name);
      usage_fail(first.rfind("-", 0) == 0 ? "unknown option '" : "unknown command '", first, "'",
                 closest(first, names), "; the commands are: ", [&] {
                   std::string s;
                   for (auto& n : names) s += (s.empty() ? "" : ", ") + n;
                   return s;
                 }());
    }
    Args a = parse_args(*cmd, argc, argv, 2);
    if (a.help) {
      std::fputs(command_help(*cmd).c_str(), stdout);
      return 0;
    }
    // A rank under mpirun (or rlx launch) joins the world before any graph runs (src/dist/mpi.cpp).
    if (cmd->name != "launch" && rlx::dist::launched_by_mpi()) rlx::dist::set_process(rlx::dist::make_mpi());
    return cmd->run(a);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "rlx: %s\n", e.what());
    if (cmd) std::fprintf(stderr, "usage: %s\n(`rlx %s --help` lists the flags)\n", cmd->usage.c_str(), cmd->name.c_str());
    else std::fprintf(stderr, "(`rlx --help` lists the commands)\n");
    return 2;
  } catch (const rlx::Error& e) {
    std::fprintf(stderr, "rlx: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx: internal error: %s\n", e.what());
    return 1;
  }
}
