// The `rlx` command: devices, compile, run, ops. Errors print "rlx: <message>" and exit 1.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "rlx/device.h"
#include "rlx/npy.h"
#include "rlx/session.h"
#include "rlx/text.h"
#include "commands.h"

namespace rlx::cli {

// .rten models: tools/rten_cmds.cpp
bool is_rten_file(const std::string& path);
int inspect_rten_file(const Args& a);

Args parse_args(int argc, char** argv, int first) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) == 0) {
      auto eq = s.find('=');
      std::string key = s.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      std::string val;
      if (eq != std::string::npos) {
        val = s.substr(eq + 1);
      } else if (key != "report" && key != "help" && key != "no-fuse" && key != "quiet" && i + 1 < argc &&
                 std::strncmp(argv[i + 1], "--", 2) != 0) {
        val = argv[++i];
      }
      a.flags[key].push_back(val);
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

std::string Args::get(const std::string& k, const std::string& def) const {
  auto it = flags.find(k);
  return it == flags.end() || it->second.empty() ? def : it->second.back();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) r.push_back(item);
  return r;
}

CompileOptions compile_options(const Args& a) {
  CompileOptions o;
  o.device = a.get("device", "cpu");
  for (auto& v : a.all("force-common"))
    for (auto& op : split(v, ',')) o.dispatch.force_common.insert(op);
  for (auto& v : a.all("force-native"))
    for (auto& op : split(v, ',')) o.dispatch.force_native.insert(op);
  o.fuse = !a.has("no-fuse");
  return o;
}

Bindings bindings(const Args& a) {
  Bindings b;
  for (auto& v : a.all("bind"))
    for (auto& kv : split(v, ',')) {
      auto eq = kv.find('=');
      RLX_CHECK(eq != std::string::npos, "[cli] --bind expects name=size, got '", kv, "'");
      try {
        b[kv.substr(0, eq)] = std::stoll(kv.substr(eq + 1));
      } catch (const std::exception&) {
        fail("[cli] --bind ", kv, ": size is not an integer");
      }
    }
  return b;
}

static int cmd_devices(const Args&) {
  std::printf("%-8s %-13s %s\n", "device", "status", "what runs / why not");
  for (auto& n : device_names()) {
    const DeviceInfo& d = device_info(n);
    std::printf("%-8s %-13s %s — %s\n", n.c_str(), std::string(device_status_name(d.status)).c_str(),
                d.description.c_str(), d.reason.c_str());
  }
  std::printf("%zu targets\n", device_names().size());
  return 0;
}

static int cmd_compile(const Args& a) {
  RLX_CHECK(a.positional.size() == 1, "[cli] usage: rlx compile FILE.rlx [--device D] [--report] [--dump=hir|mir|lir] "
                                      "[--bind sym=N,...] [--force-common=Op,...] [--force-native=Op,...]");
  Graph g = load_model_file(a.positional[0], a, read_inputs(a));  // --input arrays fix shapes
  CompiledModel m(std::move(g), compile_options(a));
  Bindings b = bindings(a);
  bool report = a.has("report") || (std::getenv("RLX_DISPATCH_REPORT") && std::string(std::getenv("RLX_DISPATCH_REPORT")) == "1");
  const DispatchReport& r = m.report(b);  // compiles (and fails with the diagnostic if it cannot)
  if (report) std::cout << r.table();
  if (a.has("dump")) std::cout << m.dump(a.get("dump", "mir"), b);
  if (!report && !a.has("dump"))
    std::cout << "compiled " << a.positional[0] << " for " << m.options().device << " (use --report or --dump)\n";
  return 0;
}

static int cmd_run(const Args& a) {
  RLX_CHECK(a.positional.size() == 1, "[cli] usage: rlx run FILE.rlx --input name=file.npy ... [--output out.npz] [--device D]");
  // each --input file is read once (tools/onnx_cmds.cpp) and also fixes shapes at import
  std::map<std::string, Tensor> inputs = read_inputs(a);
  Graph g = load_model_file(a.positional[0], a, inputs);
  CompiledModel m(std::move(g), compile_options(a));
  auto outs = m.run(inputs);
  if (std::getenv("RLX_DISPATCH_REPORT") && std::string(std::getenv("RLX_DISPATCH_REPORT")) == "1")
    std::cerr << m.report(bind_map(m.graph(), inputs)).table();
  std::string prof = m.profile();
  if (!prof.empty()) std::cerr << prof;
  std::vector<std::pair<std::string, Tensor>> ordered(outs.begin(), outs.end());
  for (auto& [k, t] : ordered) std::cout << k << " = " << t.str(8) << "\n";
  if (a.has("output")) {
    write_npz(a.get("output"), ordered);
    std::cout << "wrote " << ordered.size() << " arrays to " << a.get("output") << "\n";
  }
  return 0;
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

static void usage() {
  std::puts(
      "rlx — tensor compiler and runtime\n"
      "  rlx devices                          list the 16 targets and whether they run here\n"
      "  rlx compile FILE.rlx --device D      legalize and lower; --report, --dump=hir|mir|lir,\n"
      "                                       --bind batch=2, --force-common=Op, --force-native=Op, --no-fuse\n"
      "  rlx run FILE.rlx --input x=a.npy     run on a device; --output out.npz\n"
      "  rlx inspect FILE.gguf                GGUF metadata and tensor table\n"
      "  rlx generate --model DIR|FILE.gguf --prompt-ids 1,2,3 [--max-new 32]  Qwen3 token ids (KV cache)\n"
      "  rlx inspect MODEL.onnx               inputs/outputs/opsets/op histogram (FILE.onnx also works for compile/run)\n"
      "  rlx inspect MODEL.rten               rten model summary (FILE.rten also works for compile/run)\n"
      "  rlx onnx-suite NODE_DIR              ONNX backend node tests; --xfail list --json out.json --write-xfail list\n"
      "  rlx train-mnist --data fashion|mnist --model mlp|cnn --epochs N --batch B [--device D]   train (tools/train_mnist.cpp)\n"
      "  rlx ops [--write docs/ops.md]        conformance of every op x dtype on runnable devices\n"
      "                                       against the reference, plus the support matrix\n"
      "  rlx embed --model DIR \"s1\" \"s2\"    sentence embeddings (BERT); --similarity, --file F --output E.npy\n"
      "env: RLX_DISPATCH_REPORT=1 prints the dispatch table; RLX_PROFILE=1 prints kernel times");
}

int cmd_embed(int argc, char** argv);  // sentence embeddings: tools/embed.cpp (own flag parser)
}  // namespace rlx::cli

int main(int argc, char** argv) {
  using namespace rlx::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    usage();
    return argc < 2 ? 1 : 0;
  }
  std::string cmd = argv[1];
  try {
    Args a = parse_args(argc, argv, 2);
    if (a.has("help") && cmd != "train-mnist" && cmd != "embed") {  // those two print their own flags
      usage();
      return 0;
    }
    if (cmd == "devices") return cmd_devices(a);
    if (cmd == "compile") return cmd_compile(a);
    if (cmd == "run") return cmd_run(a);
    if (cmd == "ops") return cmd_ops(a);
    if (cmd == "embed") return cmd_embed(argc - 2, argv + 2);
    if (cmd == "inspect" && a.positional.size() == 1 && is_gguf_path(a.positional[0])) return inspect_gguf(a);
    if (cmd == "inspect" && a.positional.size() == 1 && is_rten_file(a.positional[0])) return inspect_rten_file(a);
    if (cmd == "generate") return cmd_generate(a);  // tools/generate.cpp
    if (cmd == "inspect") return cmd_inspect(a);  // ONNX: tools/onnx_cmds.cpp
    if (cmd == "onnx-suite") return cmd_onnx_suite(a);
    if (cmd == "train-mnist") return cmd_train_mnist(a);  // training: tools/train_mnist.cpp
    std::fprintf(stderr, "rlx: unknown command '%s'\n", cmd.c_str());
    usage();
    return 1;
  } catch (const rlx::Error& e) {
    std::fprintf(stderr, "rlx: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx: internal error: %s\n", e.what());
    return 1;
  }
}
