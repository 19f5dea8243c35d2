// The cpu JIT: renders every fused body of a compiled model to C++
// (codegen/cpp.cpp), compiles them as one translation unit with the host compiler, dlopens the
// library and keeps it in a disk cache keyed by source + compiler + flags + CPU (runtime/disk_cache).
// RLX_CPU_JIT: 0 = off, 1 = always, unset = on when a model's fused kernels write >= kAutoMinElements
// per run or it has >= kAutoMinKernels of them. The gain grows with elements (1.2-14x per element
// measured) and calls (a few us each); a cold compile costs 0.5-4 s (one-time: disk cache), which
// small graphs (unit tests) never earn back. RLX_CXX picks the compiler.
#include "backends/cpu/jit.h"
#include "backends/cpu/isa.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/cpu/parallel.h"
#include "backends/cpu/vmath.h"  // not used here: makes this file rebuild when the embedded text changes
#include "codegen/renderer.h"
#include "runtime/disk_cache.h"
#include "runtime/subprocess.h"


namespace rlx::cpu {

namespace {

const char* kVmathText =
#include "cpu_jit_vmath.inc"
    ;

// See docs/cpu.md (the JIT policy): with ">= 8 kernels" the C++ unit tests compiled 37 libraries
// (+118 s cold on 2 loaded cores); MiniLM b32 s128 writes 4.7M fused elements per run.
constexpr int kAutoMinKernels = 32;
constexpr int64_t kAutoMinElements = int64_t{1} << 20;
constexpr int kMaxArgs = 64;

const std::vector<std::string>& flags() {
  // The host's own -march at its best level; a level forced lower by RLX_CPU_ISA gets that level's
  // x86-64 micro-architecture level (tuned for this host), so generated kernels obey it too.
  static const std::vector<std::string> f = [] {
    CpuIsa isa = cpu_isa();
    std::vector<std::string> r = {"-std=c++20", "-O3"};
    if (isa == cpu_isa_host()) r.push_back("-march=native");
    else r.insert(r.end(), {isa == CpuIsa::Avx2 ? "-march=x86-64-v3" : "-march=x86-64", "-mtune=native"});
    r.insert(r.end(), {"-fPIC", "-shared", "-fno-trapping-math", "-fno-math-errno", "-fwrapv", "-ffp-contract=off",
                       "-fno-semantic-interposition", "-w"});
    return r;
  }();
  return f;
}

std::atomic<int> g_compiles{0}, g_failures{0}, g_disk{0}, g_mem{0};

bool executable_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// The compiler to use, or "" with `why`.
std::string find_compiler(std::string* why) {
  if (const char* e = std::getenv("RLX_CXX"); e && *e) {
    std::string p = find_on_path(e);
    if (p.empty()) *why = std::string("RLX_CXX=") + e + " not found";
    return p;
  }
  for (const char* n : {"c++", "g++", "clang++"})
    if (std::string p = find_on_path(n); !p.empty()) return p;
  *why = "no C++ compiler on PATH (c++, g++, clang++; or set RLX_CXX)";
  return "";
}

// Runs argv with stdout+stderr to `log` (or captured into *out: run_tool); returns the exit
// status, -1 if it could not start. After 1 s, prints `progress` once on stderr.
int spawn_wait(const std::vector<std::string>& argv, const std::string& log, std::string* out,
               const std::string& progress) {
  if (out) return run_tool(argv, *out);
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  pid_t pid = spawn_process(argv, -1, fd, fd);
  ::close(fd);
  if (pid < 0) return -1;
  auto t0 = std::chrono::steady_clock::now();
  bool said = progress.empty();
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return -1;
    if (!said && std::chrono::steady_clock::now() - t0 > std::chrono::seconds(1)) {
      std::fprintf(stderr, "%s\n", progress.c_str());
      said = true;
    }
    ::usleep(5000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Compiler identity (first line of --version), once per compiler path.
std::string compiler_version(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, std::string> seen;
  std::lock_guard<std::mutex> g(mu);
  auto it = seen.find(cxx);
  if (it != seen.end()) return it->second;
  std::string out;
  int rc = spawn_wait({cxx, "--version"}, "", &out, "");
  std::string v = rc == 0 ? out.substr(0, out.find('\n')) : "";
  return seen[cxx] = v;
}

// -march=native depends on the CPU: a cache shared between machines must not mix them.
std::string cpu_identity() {
  static const std::string id = [] {
    std::ifstream f("/proc/cpuinfo");
    std::string line, model, fl;
    while (std::getline(f, line) && (model.empty() || fl.empty())) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (fl.empty() && line.rfind("flags", 0) == 0) fl = line;
    }
    return model + "|" + fl;
  }();
  return id;
}

struct Lib {
  std::shared_ptr<void> handle;
  std::string origin;  // "compiled", "disk cache", "loaded"
};

std::shared_ptr<void> open_lib(const std::string& path, std::string* why) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *why = std::string("dlopen failed: ") + ::dlerror();
    return nullptr;
  }
  return std::shared_ptr<void>(h, [](void* p) { ::dlclose(p); });
}

// Loads the library for `tu`: from this process, the disk cache, or a fresh compile.
Lib get_lib(const std::string& cxx, const std::string& tu, int nkernels, std::string* why) {
  std::string key = cxx + "|" + compiler_version(cxx) + "|" + cpu_identity() + "|";
  for (auto& f : flags()) key += f + " ";
  std::string hex = hex64(fnv1a64(key + "|" + tu));
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<void>> loaded;
  std::lock_guard<std::mutex> g(mu);  // one compile at a time in a process (2 cores: no loss)
  if (auto it = loaded.find(hex); it != loaded.end())
    if (auto h = it->second.lock()) {
      ++g_mem;
      return {h, "loaded"};
    }
  const std::string dir = cache_dir("cpu");
  const std::string so = dir + "/" + hex + ".so";
  if (executable_file(so) || ::access(so.c_str(), R_OK) == 0) {
    std::string w;
    auto t0 = std::chrono::steady_clock::now();
    if (auto h = open_lib(so, &w)) {
      cache_touch(so);  // a hit: most recently used (RLX_CACHE_MAX_MB eviction)
      ++g_disk;
      loaded[hex] = h;
      char b[64];
      std::snprintf(b, sizeof b, "disk cache, loaded in %.1f ms",
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      return {h, b};
    }
    std::remove(so.c_str());  // unreadable or truncated by a crash elsewhere: rebuild it
  }
  const std::string src = temp_path_for(dir + "/" + hex) + ".cpp", tmp_so = temp_path_for(so), log = src + ".log";
  if (!write_file_atomic(src, tu)) {
    ++g_failures;
    *why = "cannot write " + src;
    return {};
  }
  std::vector<std::string> argv = {cxx};
  for (auto& f : flags()) argv.push_back(f);
  argv.insert(argv.end(), {"-o", tmp_so, src});
  auto t0 = std::chrono::steady_clock::now();
  int rc = spawn_wait(argv, log, nullptr,
                      "[cpu] compiling " + std::to_string(nkernels) + " fused kernels with " + cxx +
                          " (once; cached in " + dir + ")");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) {
    ++g_failures;
    std::ifstream lf(log);
    std::string first;
    std::getline(lf, first);
    // Keep the source and log where the cache eviction never looks (cpu/failed/ is no
    // evictable sub-cache), under the key's name: the temporary name would be evicted after an hour.
    std::string kept = cache_dir("cpu/failed") + "/" + hex + ".cpp";
    if (std::rename(src.c_str(), kept.c_str()) == 0) std::rename(log.c_str(), (kept + ".log").c_str());
    else kept = src;
    *why = cxx + (rc < 0 ? " could not run" : " failed (exit " + std::to_string(rc) + ")") +
           (first.empty() ? "" : ": " + first) + "; source kept in " + kept + " (compiler output in " + kept + ".log)";
    std::remove(tmp_so.c_str());
    std::fprintf(stderr, "[cpu] JIT compile failed, fused kernels use the evaluator: %s\n", why->c_str());
    return {};
  }
  std::remove(src.c_str());
  std::remove(log.c_str());
  if (std::rename(tmp_so.c_str(), so.c_str()) != 0) {  // concurrent writers: the last rename wins, both whole
    std::remove(tmp_so.c_str());
    *why = "cannot rename into " + so;
    return {};
  }
  ++g_compiles;
  cache_inserted(so);  // evicts least recently used entries over RLX_CACHE_MAX_MB
  auto h = open_lib(so, why);
  if (!h) return {};
  loaded[hex] = h;
  char b[64];
  std::snprintf(b, sizeof b, "compiled in %.1f s", secs);
  return {h, b};
}

}  // namespace

JitStats jit_stats() { return {g_compiles.load(), g_failures.load(), g_disk.load(), g_mem.load()}; }

std::string jit_probe() {
  const char* e = std::getenv("RLX_CPU_JIT");
  if (e && std::string(e) == "0") return "fused kernels: evaluator (RLX_CPU_JIT=0)";
  std::string why, cxx = find_compiler(&why);
  if (cxx.empty()) return "fused kernels: evaluator (" + why + ")";
  return "fused kernels: C++ JIT with " + cxx + (e && std::string(e) == "1" ? "" : " (models with >= " +
         std::to_string(kAutoMinKernels) + " fused kernels or 1M fused elements; RLX_CPU_JIT=1 for all)") + ", cache " +
         cache_dir("cpu", false);
}

JitProgram::JitProgram(const LirProgram& p, const std::vector<const Graph*>& bodies) {
  fns_.resize(p.kernels.size());
  int candidates = 0;
  int64_t elements = 0;
  for (size_t k = 0; k < bodies.size() && k < p.kernels.size(); ++k)
    if (bodies[k] && !p.kernels[k].attrs.count("cpu_rows")) {  // row regions: rows_kernel
      ++candidates;
      for (int o : p.kernels[k].out) elements += numel(p.buffers[o].type.shape);
    }
  const char* e = std::getenv("RLX_CPU_JIT");
  std::string mode = e ? e : "";
  if (candidates == 0) {
    summary_ = "no fused kernels";
    return;
  }
  if (mode == "0") {
    summary_ = "evaluator (RLX_CPU_JIT=0)";
    return;
  }
  if (mode != "1" && candidates < kAutoMinKernels && elements < kAutoMinElements) {
    summary_ = "evaluator (" + std::to_string(candidates) + " small fused kernels, below the JIT threshold of " +
               std::to_string(kAutoMinKernels) + " kernels or 1M elements; RLX_CPU_JIT=1 forces it)";
    return;
  }
  std::string why, cxx = find_compiler(&why);
  if (cxx.empty()) {
    summary_ = "evaluator (" + why + ")";
    return;
  }
  // Render; identical kernels (same body, dtypes and broadcast pattern) share one function.
  std::map<std::string, std::string> by_source;  // source with a placeholder name -> function name
  std::vector<std::string> names(p.kernels.size());
  std::string tu = codegen::cpp_prelude(kVmathText);
  int rendered = 0;
  for (size_t k = 0; k < p.kernels.size() && k < bodies.size(); ++k) {
    if (!bodies[k] || p.kernels[k].attrs.count("cpu_rows")) continue;
    const LirKernel& kr = p.kernels[k];
    if (kr.out.size() != 1 || kr.in.size() + 1 > static_cast<size_t>(kMaxArgs)) continue;
    std::vector<ValueType> in;
    for (int b : kr.in) in.push_back(p.buffers[b].type);
    codegen::CppKernel ck;
    std::string w;
    if (!codegen::render_cpp_fused(*bodies[k], in, p.buffers[kr.out[0]].type, "RLXFN", ck, &w)) continue;
    auto [it, fresh] = by_source.try_emplace(ck.source, "");
    if (fresh) {
      it->second = "rlx_" + hex64(fnv1a64(ck.source));
      std::string s = ck.source;
      for (size_t pos; (pos = s.find("RLXFN")) != std::string::npos;) s.replace(pos, 5, it->second);
      tu += s;
    }
    names[k] = it->second;
    fns_[k].dims = ck.dims;
    fns_[k].total = ck.total;
    ++rendered;
  }
  if (rendered == 0) {
    summary_ = "evaluator (no fused kernel the C++ renderer covers)";
    return;
  }
  Lib lib = get_lib(cxx, tu, static_cast<int>(by_source.size()), &why);
  if (!lib.handle) {
    for (auto& f : fns_) f = Entry{};
    summary_ = "evaluator (" + why + ")";
    return;
  }
  lib_ = lib.handle;
  int resolved = 0;
  for (size_t k = 0; k < fns_.size(); ++k) {
    if (names[k].empty()) continue;
    fns_[k].fn = reinterpret_cast<Fn>(::dlsym(lib_.get(), names[k].c_str()));
    resolved += fns_[k].fn != nullptr;
  }
  summary_ = "C++ JIT for " + std::to_string(resolved) + " of " + std::to_string(candidates) + " fused kernels (" +
             std::to_string(by_source.size()) + " functions, " + cxx + ", " + lib.origin + ")";
}

JitProgram::~JitProgram() = default;

void JitProgram::run(size_t k, const std::vector<Tensor>& in, Tensor& out) const {
  const Entry& f = fns_[k];
  if (f.total == 0) return;
  void* b[kMaxArgs];
  for (size_t i = 0; i < in.size(); ++i) b[i] = const_cast<void*>(in[i].raw());
  b[in.size()] = out.raw();
  // >= 16K elements per thread, as the evaluator
  parallel_for(f.total, 16384, [&](int64_t a, int64_t e) { f.fn(b, f.dims.data(), a, e); });
}

}  // namespace rlx::cpu
