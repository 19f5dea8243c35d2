// `rlx inspect MODEL.onnx`, the model-file dispatch used by compile/run, and `rlx onnx-suite`:
// the runner over the ONNX backend node tests (each case in a forked child, so a crash or a hang
// fails that case only).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "commands.h"
#include "progress.h"
#include "rlx/safetensors.h"
#include "formats/file_io.h"
#include "formats/onnx/onnx.h"
#include "formats/rten/rten.h"
#include "formats/onnx/pb_values.h"
#include "rlx/npy.h"
#include "rlx/text.h"

namespace rlx::cli {

namespace fs = std::filesystem;

std::map<std::string, Tensor> read_inputs(const Args& a) {
  std::map<std::string, Tensor> inputs;
  std::map<std::string, std::map<std::string, Tensor>> npz;  // several inputs may come from one .npz
  for (auto& v : a.all("input")) {
    auto eq = v.find('=');
    RLX_CHECK(eq != std::string::npos, "[cli] --input expects name=path.npy, got '", v, "'");
    std::string name = v.substr(0, eq), path = v.substr(eq + 1);
    if (path.size() > 4 && path.substr(path.size() - 4) == ".npz") {
      auto it = npz.find(path);
      if (it == npz.end()) it = npz.emplace(path, read_npz(path)).first;
      RLX_CHECK(it->second.count(name), "[cli] ", path, " has no array '", name, "'");
      inputs[name] = it->second.at(name);
    } else if (path.size() > 12 && path.substr(path.size() - 12) == ".safetensors") {
      SafeTensors st = SafeTensors::open(path);
      RLX_CHECK(st.has(name), "[cli] ", path, " has no tensor '", name, "'");
      inputs[name] = st.get(name).clone();  // a copy: the tensor otherwise keeps the file mapped
    } else {
      inputs[name] = read_npy(path);
    }
  }
  return inputs;
}

namespace {
// --bind sizes symbolic dims; the arrays about to be fed fix input shapes (and small ones their
// values), so shape computations in an imported model (ONNX or rten) fold at import.
onnx::ImportOptions import_options(const Args& a, const std::map<std::string, Tensor>& inputs) {
  onnx::ImportOptions o;
  if (a.cmd->find("bind")) o.bind = bindings(a);
  for (auto& [name, t] : inputs) {
    o.input_shapes[name] = t.shape();
    if (t.numel() <= 64) o.input_values[name] = t;
  }
  return o;
}

// Every --bind must name a symbolic dim of the model: its inputs' dims, and for an imported model
// the dims it declares (bound at import, so no longer in the graph).
void check_bindings(const Args& a, const Graph& g, const std::set<std::string>& imported) {
  if (!a.cmd->find("bind")) return;
  std::vector<std::string> known = g.symbols();
  for (auto& s : imported)
    if (std::find(known.begin(), known.end(), s) == known.end()) known.push_back(s);
  for (auto& [sym, n] : bindings(a)) {
    if (std::find(known.begin(), known.end(), sym) != known.end()) continue;
    std::string list;
    for (auto& k : known) list += (list.empty() ? "" : ", ") + k;
    usage_fail("--bind ", sym, "=", n, ": the model has no symbolic dim '", sym, "'",
               known.empty() ? "; it has none (every dim is static)" : "; its symbolic dims: " + list);
  }
}
}  // namespace

Graph load_model_file(const std::string& path, const Args& a, const std::map<std::string, Tensor>& inputs) {
  std::set<std::string> dims;
  onnx::ImportOptions o = import_options(a, inputs);
  o.dim_params = &dims;
  Graph g;
  switch (model_format(path, false)) {
    case ModelFormat::Rten: g = rten::load_rten(path, o); break;
    case ModelFormat::Onnx: g = onnx::load_onnx(path, o); break;
    default: g = load_graph_file(path); break;
  }
  check_bindings(a, g, dims);
  return g;
}

int inspect_onnx_file(const std::string& path) {
  std::cout << onnx::inspect_onnx(path);
  return 0;
}

namespace {

struct CaseResult {
  bool pass = false;
  std::string msg;
};

std::vector<std::string> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> r;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    r.push_back(p.string());
  }
  return r;
}

// `skip` (may be empty) marks elements whose expected value the spec leaves undefined.
std::string compare(const Tensor& got, const Tensor& want, double rtol, double atol, const std::vector<bool>& skip) {
  // rtol 1e-3 is below one ulp of bf16 (2^-8) and about one ulp of f16 (2^-10): for those outputs the
  // bound is two ulps, since any change in evaluation order moves a rounding by one.
  if (want.dtype() == DType::bf16) rtol = std::max(rtol, 2.0 / 256);
  if (want.dtype() == DType::f16) rtol = std::max(rtol, 2.0 / 1024);
  if (got.dtype() != want.dtype())
    return "dtype mismatch: got " + std::string(dtype_name(got.dtype())) + " want " + std::string(dtype_name(want.dtype()));
  if (got.shape() != want.shape()) {
    std::ostringstream os;
    os << "shape mismatch: got " << got.str(0) << " want " << want.str(0);
    return os.str();
  }
  bool exact = !is_float(want.dtype()) && !is_complex(want.dtype());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (static_cast<size_t>(i) < skip.size() && skip[i]) continue;
    bool ok;
    if (exact) ok = got.get_int(i) == want.get_int(i);
    else if (is_complex(want.dtype())) ok = std::abs(got.getc(i) - want.getc(i)) <= atol + rtol * std::abs(want.getc(i));
    else {
      double g = got.get(i), w = want.get(i);
      if (std::isnan(w)) ok = std::isnan(g);
      else if (std::isinf(w)) ok = g == w;
      else ok = std::abs(g - w) <= atol + rtol * std::abs(w);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return "";
  std::ostringstream os;
  os.precision(9);
  os << "values differ at " << bad << "/" << want.numel() << " elements (first at " << first << ": got "
     << got.get(first) << " want " << want.get(first) << ")";
  return os.str();
}

CaseResult run_case(const fs::path& dir, const std::string& device, double rtol, double atol) {
  CaseResult r;
  try {
    fs::path model = dir / "model.onnx", ds = dir / "test_data_set_0";
    auto in_files = numbered(ds, "input_"), out_files = numbered(ds, "output_");
    std::vector<Tensor> ins;
    onnx::ImportOptions o;
    // Inputs may be sequences/optionals (SequenceProto/OptionalProto .pb files); they are
    // fed flattened, one tensor per element (formats/onnx/pb_values.h).
    auto in_values = onnx::read_pb_values(model.string(), in_files, false);
    for (auto& v : in_values) onnx::feed_pb_value(v, &ins, &o);
    auto undefined = onnx::undefined_output_elements(model.string(), in_values);
    Graph g = onnx::load_onnx(model.string(), o);
    std::vector<std::string> out_names;
    for (auto v : g.outputs) out_names.push_back(g.values[v].name);
    RLX_CHECK(g.inputs.size() == ins.size(), "[suite] model has ", g.inputs.size(), " inputs, data set has ", ins.size());
    CompileOptions co;
    co.device = device;
    CompiledModel m(std::move(g), co);
    auto outs = m.run(ins);
    auto want_values = onnx::read_pb_values(model.string(), out_files, true);
    bool plain = std::none_of(want_values.begin(), want_values.end(), [](auto& v) { return v.composite; });
    auto want = onnx::flatten_pb_values(want_values);
    RLX_CHECK(outs.size() == want.size(), "[suite] ", outs.size(), " outputs, expected ", want.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      RLX_CHECK(want[i].first.find('[') == std::string::npos || out_names[i] == want[i].first, "[suite] output ", i,
                " is '", out_names[i], "', expected sequence/optional element '", want[i].first, "'");
      static const std::vector<bool> none;
      const auto& skip = plain && i < undefined.size() ? undefined[i] : none;
      std::string e = compare(outs[i], want[i].second, rtol, atol, skip);
      RLX_CHECK(e.empty(), "[suite] output ", i, ": ", e);
    }
    r.pass = true;
  } catch (const std::exception& e) {
    r.msg = e.what();
  }
  return r;
}

std::string bucket_of(const std::string& name, const std::string& msg) {
  static const char* training[] = {"test_adagrad", "test_adam", "test_momentum", "test_nesterov", "test_gradient",
                                   "training_dropout", "test_batchnorm_epsilon_training", "test_batchnorm_example_training"};
  for (auto t : training)
    if (name.find(t) != std::string::npos) return "training-op";
  auto has = [&](const char* s) { return msg.find(s) != std::string::npos; };
  if (has("timed out") || has("crashed")) return "crash-or-timeout";
  if (has("sequence") || has("optional") || has("map type")) return "sequence-optional-map";
  if (has("unsupported dtype") || has("STRING") || has("FLOAT8") || has("UINT") || has("INT4") || has("FLOAT4"))
    return "dtype-unsupported";
  if (has("unsupported op If") || has("unsupported op Loop") || has("unsupported op Scan")) return "control-flow";
  if (has("unsupported op")) return "op-missing";
  if (has("known at import time") || has("symbolic")) return "dynamic-shape";
  if (has("values differ")) return "numerics";
  if (has("mismatch")) return "wrong-shape-or-dtype";
  if (has("[onnx]")) return "import-limitation";
  return "runtime-error";
}

struct XFail {
  std::map<std::string, std::string> bucket;  // case -> bucket ("skip" = not run)
};

XFail read_xfail(const std::string& path) {
  XFail x;
  if (path.empty()) return x;
  std::ifstream f(path);
  RLX_CHECK(f.good(), "[suite] cannot open expected-failure list ", path);
  std::string line;
  while (std::getline(f, line)) {
    auto h = line.find('#');
    std::string body = h == std::string::npos ? line : line.substr(0, h);
    std::istringstream is(body);
    std::string name, b;
    if (!(is >> name)) continue;
    is >> b;
    x.bucket[name] = b.empty() ? "unbucketed" : b;
  }
  return x;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\', o += ch;
    else if (static_cast<unsigned char>(ch) < 0x20) o += ' ';
    else o += ch;
  }
  return o + "\"";
}

}  // namespace

int cmd_onnx_suite(const Args& a) {
  fs::path root = a.positional[0];
  RLX_CHECK(fs::is_directory(root), "[suite] ", root.string(), " is not a directory");
  XFail xf = read_xfail(a.get("xfail"));
  std::string filter = a.get("filter"), device = a.get("device");
  int jobs = static_cast<int>(std::min<int64_t>(a.integer("jobs"), 1024));
  int timeout = static_cast<int>(std::min<int64_t>(a.integer("timeout"), 1 << 30));
  bool verbose = a.has("verbose");
  const double rtol = 1e-3, atol = 1e-7;

  std::vector<std::string> cases;
  for (auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path().filename().string());
  std::sort(cases.begin(), cases.end());

  struct Outcome {
    std::string name, status, msg, bucket;  // status: pass | fail | skip
  };
  std::vector<Outcome> res;
  std::vector<std::string> todo;
  for (auto& c : cases) {
    if (!filter.empty() && c.find(filter) == std::string::npos) continue;
    auto it = xf.bucket.find(c);
    if ((it != xf.bucket.end() && it->second == "skip") || !fs::exists(root / c / "test_data_set_0")) {
      res.push_back({c, "skip", "", "skip"});
      continue;
    }
    todo.push_back(c);
  }
  // Fork one child per case, `jobs` at a time; each reports through a pipe.
  struct Running {
    std::string name;
    int fd;
    pid_t pid;
    std::chrono::steady_clock::time_point start;
  };
  std::vector<Running> running;
  size_t next = 0;
  auto finish = [&](Running& r, bool timed_out) {
    std::string buf;
    char tmp[4096];
    ssize_t k;
    while ((k = read(r.fd, tmp, sizeof tmp)) > 0) buf.append(tmp, static_cast<size_t>(k));
    close(r.fd);
    int st = 0;
    waitpid(r.pid, &st, 0);
    Outcome o{r.name, "fail", "", ""};
    if (timed_out) o.msg = "timed out after " + std::to_string(timeout) + " s";
    else if (WIFSIGNALED(st)) o.msg = "crashed with signal " + std::to_string(WTERMSIG(st));
    else if (buf.rfind("PASS", 0) == 0) o.status = "pass";
    else o.msg = buf.size() > 5 ? buf.substr(5) : "child exited without a result";
    if (o.status == "fail") o.bucket = bucket_of(o.name, o.msg);
    res.push_back(o);
  };
  std::cout.flush();
  Progress bar("rlx onnx-suite: cases");
  size_t counted = 0, nfail = 0;
  auto fails = [&] {
    for (; counted < res.size(); ++counted) nfail += res[counted].status == "fail";
    return std::to_string(nfail) + " failed";
  };
  while (next < todo.size() || !running.empty()) {
    bar.update(res.size(), todo.size(), fails());
    while (next < todo.size() && static_cast<int>(running.size()) < jobs) {
      int p[2];
      RLX_CHECK(pipe(p) == 0, "[suite] pipe failed");
      std::fflush(nullptr);
      pid_t pid = fork();
      RLX_CHECK(pid >= 0, "[suite] fork failed");
      if (pid == 0) {
        close(p[0]);
        CaseResult cr = run_case(root / todo[next], device, rtol, atol);
        std::string out = cr.pass ? "PASS" : "FAIL\t" + cr.msg.substr(0, 2000);
        ssize_t w = write(p[1], out.data(), out.size());
        (void)w;
        close(p[1]);
        _exit(0);
      }
      close(p[1]);
      running.push_back({todo[next++], p[0], pid, std::chrono::steady_clock::now()});
    }
    bool progressed = false;
    for (size_t i = 0; i < running.size();) {
      int st;
      pid_t w = waitpid(running[i].pid, &st, WNOHANG);
      bool late = std::chrono::steady_clock::now() - running[i].start > std::chrono::seconds(timeout);
      if (w == 0 && !late) {
        ++i;
        continue;
      }
      if (w == 0) {
        kill(running[i].pid, SIGKILL);
      } else {
        // Already reaped: re-create a status the finisher can read.
        Running r = running[i];
        std::string buf;
        char tmp[4096];
        ssize_t k;
        while ((k = read(r.fd, tmp, sizeof tmp)) > 0) buf.append(tmp, static_cast<size_t>(k));
        close(r.fd);
        Outcome o{r.name, "fail", "", ""};
        if (WIFSIGNALED(st)) o.msg = "crashed with signal " + std::to_string(WTERMSIG(st));
        else if (buf.rfind("PASS", 0) == 0) o.status = "pass";
        else o.msg = buf.size() > 5 ? buf.substr(5) : "child exited without a result";
        if (o.status == "fail") o.bucket = bucket_of(o.name, o.msg);
        res.push_back(o);
        running.erase(running.begin() + static_cast<long>(i));
        progressed = true;
        continue;
      }
      finish(running[i], true);
      running.erase(running.begin() + static_cast<long>(i));
      progressed = true;
    }
    if (!progressed) usleep(2000);
  }
  bar.update(res.size(), todo.size(), fails());
  bar.done();
  std::sort(res.begin(), res.end(), [](const Outcome& x, const Outcome& y) { return x.name < y.name; });

  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> buckets;
  std::vector<std::string> unexpected_pass, unexpected_fail;
  for (auto& o : res) {
    auto it = xf.bucket.find(o.name);
    bool listed = it != xf.bucket.end() && it->second != "skip";
    if (o.status == "skip") ++skipped;
    else if (o.status == "pass") {
      ++passed;
      if (listed) unexpected_pass.push_back(o.name);
    } else {
      ++failed;
      buckets[listed ? it->second : o.bucket]++;
      if (!listed) unexpected_fail.push_back(o.name + ": " + o.msg);
    }
    if (verbose && o.status == "fail") std::cout << "FAIL " << o.name << " [" << o.bucket << "] " << o.msg << "\n";
  }
  if (a.has("write-xfail")) {
    std::ostringstream f;
    f << "# ONNX node tests expected to fail on " << device << ": <case> <bucket>  # first error line.\n"
         "# Regenerate with: build/bin/rlx onnx-suite NODE_DIR --write-xfail tests/onnx/expected_failures.txt\n"
         "# Buckets: op-missing, control-flow, dtype-unsupported, sequence-optional-map, training-op, dynamic-shape,\n"
         "#          import-limitation, numerics, wrong-shape-or-dtype, runtime-error, crash-or-timeout; skip = not run.\n";
    for (auto& o : res) {
      if (o.status == "skip" && xf.bucket.count(o.name)) f << o.name << " skip\n";
      if (o.status != "fail") continue;
      std::string m = o.msg.substr(0, o.msg.find('\n'));
      if (m.size() > 160) m = m.substr(0, 160) + "...";
      f << o.name << " " << o.bucket << "  # " << m << "\n";
    }
    formats::write_file_atomic(a.get("write-xfail"), f.str(), "suite");
  }
  if (a.has("json")) {
    std::string src = "pip onnx wheel", ver = "unknown";
    std::ifstream sj(root / "suite.json");
    if (sj.good()) {
      std::stringstream ss;
      ss << sj.rdbuf();
      std::string s = ss.str();
      auto field = [&](const std::string& k) {
        auto p = s.find("\"" + k + "\"");
        if (p == std::string::npos) return std::string();
        p = s.find('"', s.find(':', p) + 1);
        return s.substr(p + 1, s.find('"', p + 1) - p - 1);
      };
      if (!field("source").empty()) src = field("source");
      if (!field("version").empty()) ver = field("version");
    }
    std::ostringstream js;
    int run = passed + failed;
    js << "{\n  \"suite\": \"onnx backend node tests\",\n  \"source\": " << json_str(src) << ",\n  \"version\": "
       << json_str(ver) << ",\n  \"device\": " << json_str(device) << ",\n  \"rtol\": " << rtol << ",\n  \"atol\": " << atol
       << ",\n  \"passed\": " << passed << ",\n  \"failed\": " << failed << ",\n  \"skipped\": " << skipped
       << ",\n  \"total\": " << res.size() << ",\n  \"pass_rate\": " << (run ? static_cast<double>(passed) / run : 0.0)
       << ",\n  \"buckets\": {";
    bool first = true;
    for (auto& [b, n] : buckets) js << (first ? "" : ",") << "\n    " << json_str(b) << ": " << n, first = false;
    js << "\n  },\n  \"unexpected_passes\": " << unexpected_pass.size() << ",\n  \"unexpected_failures\": "
       << unexpected_fail.size() << "\n}\n";
    formats::write_file_atomic(a.get("json"), js.str(), "suite");
  }
  for (auto& n : unexpected_pass) std::cout << "UNEXPECTED PASS " << n << " (remove it from the expected-failure list)\n";
  for (auto& n : unexpected_fail) std::cout << "UNEXPECTED FAIL " << n << "\n";
  std::cout << "onnx node tests: " << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  std::vector<std::pair<std::string, int>> bs(buckets.begin(), buckets.end());
  std::stable_sort(bs.begin(), bs.end(), [](auto& x, auto& y) { return x.second > y.second; });
  for (auto& [b, n] : bs) std::cout << "  " << b << ": " << n << "\n";
  // A runner fails on any failure nobody expected (without --xfail: on any failure), on a stale
  // expected-failure list, and when it ran nothing; --write-xfail records the failures instead.
  if (passed + failed == 0) {
    std::cerr << "[suite] no cases ran under " << root.string() << (filter.empty() ? "" : " matching --filter " + filter) << "\n";
    return 1;
  }
  if (a.has("write-xfail")) return 0;
  return !unexpected_pass.empty() || !unexpected_fail.empty() ? 1 : 0;
}

}  // namespace rlx::cli
