// The semantic check of the `metal` device's MSL kernels on a machine without an Apple GPU: the
// rendered kernel source is compiled as C++ against a small shim of the Metal types and
// built-ins (address-space qualifiers, half, as_type, the math functions, threadgroup_barrier,
// the thread-position attributes) and run on the host CPU: every thread of a threadgroup is a
// fiber (ucontext), threadgroup_barrier() switches to the next one, and `threadgroup` arrays are
// function statics shared by the fibers of the group being run. Enabled by RLX_METAL_SHIM=1;
// `rlx devices` then says that no Apple GPU ran the kernels. The kernels of one executable are
// compiled as one translation unit (each in its own namespace) into a shared object cached on disk
// by source hash (cache_dir("msl")); RLX_CXX picks the compiler.
#include <dlfcn.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "backends/portable/api.h"
#include "runtime/disk_cache.h"
#include "runtime/subprocess.h"

namespace rlx::gpu {

namespace {

// <metal_stdlib> as the shim sees it: C++17 spellings of what the rendered kernels use (compiler
// built-ins only, no headers, so each translation unit compiles in a few tens of milliseconds).
const char* kShim = R"(#pragma once
#define kernel extern "C"
#define device
#define constant const
#define threadgroup static thread_local
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef _Float16 half;
struct uint3 { uint x, y, z; };
extern "C" { void (*rlx_msl_barrier_fn)() = nullptr; }
#define NAN __builtin_nanf("")
#define INFINITY __builtin_inff()
namespace metal {
enum class mem_flags { mem_none, mem_device, mem_threadgroup };
inline void threadgroup_barrier(mem_flags) { rlx_msl_barrier_fn(); }
template <class T, class U> inline T as_type(U u) { static_assert(sizeof(T) == sizeof(U), "as_type"); T t; __builtin_memcpy(&t, &u, sizeof t); return t; }
inline float exp(float x) { return __builtin_expf(x); }
inline float log(float x) { return __builtin_logf(x); }
inline float sqrt(float x) { return __builtin_sqrtf(x); }
inline float rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
inline float tanh(float x) { return __builtin_tanhf(x); }
inline float sin(float x) { return __builtin_sinf(x); }
inline float cos(float x) { return __builtin_cosf(x); }
inline float floor(float x) { return __builtin_floorf(x); }
inline float ceil(float x) { return __builtin_ceilf(x); }
inline float trunc(float x) { return __builtin_truncf(x); }
inline float fabs(float x) { return __builtin_fabsf(x); }
inline float pow(float x, float y) { return __builtin_powf(x, y); }
inline float fmod(float x, float y) { return __builtin_fmodf(x, y); }
inline float rint(float x) { return __builtin_nearbyintf(x); }  // round half to even (default rounding mode)
inline bool isnan(float x) { return __builtin_isnan(x); }
template <class A, class B> inline auto max(A a, B b) -> decltype(a + b) { return a > b ? a : b; }
template <class A, class B> inline auto min(A a, B b) -> decltype(a + b) { return a < b ? a : b; }
}  // namespace metal
struct RlxAnyPtr { void* p; template <class T> operator T*() const { return static_cast<T*>(p); } };
)";

struct Kernel {
  std::string name, source;
  int nargs;
  bool barriers;
  void (*fn)(void**, uint32_t, uint32_t) = nullptr;
};

// One fiber per thread of a threadgroup; the scheduler runs each to its next barrier in turn.
struct Fibers {
  ucontext_t main{};
  std::vector<ucontext_t> ctx;
  std::vector<std::vector<char>> stacks;
  std::vector<int> done;
  int cur = 0;
  Kernel* k = nullptr;
  void** bufs = nullptr;
  uint32_t group = 0;
};
thread_local Fibers* t_fibers = nullptr;

void fiber_barrier() {
  Fibers* f = t_fibers;
  swapcontext(&f->ctx[static_cast<size_t>(f->cur)], &f->main);
}
void fiber_entry() {
  Fibers* f = t_fibers;
  int me = f->cur;
  f->k->fn(f->bufs, f->group, static_cast<uint32_t>(me));
  f->done[static_cast<size_t>(me)] = 1;  // returns to f->main through uc_link
}

class MslShimApi : public Api {
 public:
  std::unique_ptr<codegen::CLikeRenderer> r = codegen::make_msl_renderer();
  std::string cxx;
  std::map<int, std::vector<uint8_t>> bufs;
  int next_buf = 0;
  std::vector<Kernel> kernels;
  std::vector<int> pending;  // kernels not compiled yet (compiled together by record())
  std::map<uint64_t, int> prog_cache;
  std::map<int, std::vector<Launch>> recs;
  int next_rec = 0;
  std::vector<void*> libs;
  Fibers fibers;

  ~MslShimApi() override {
    for (void* h : libs) dlclose(h);
  }
  std::string name() const override { return "metal"; }
  std::string device() const override {
    return "no Apple GPU: the MSL kernels ran as C++ (" + cxx + ") on the host CPU against RLX's Metal shim";
  }
  const codegen::CLikeRenderer& renderer() const override { return *r; }
  int buffer(size_t bytes) override {
    bufs[next_buf].assign(bytes, 0);
    return next_buf++;
  }
  void free_buffer(int id) override { bufs.erase(id); }
  void upload(int id, const void* src, size_t n) override { std::memcpy(bufs.at(id).data(), src, n); }
  void download(int id, void* dst, size_t n) override { std::memcpy(dst, bufs.at(id).data(), n); }

  int program(const codegen::RenderedKernel& k) override {
    uint64_t h = fnv1a64(k.source);
    if (auto it = prog_cache.find(h); it != prog_cache.end()) return it->second;
    Kernel kk{"m" + hex64(h), k.source, static_cast<int>(k.args.size()), k.source.find("BARRIER;") != std::string::npos};
    // the rendered name is per executable ("k3"); a hash name keeps one TU's kernels apart
    size_t at = kk.source.find("kernel void " + k.name + "(");
    RLX_CHECK(at != std::string::npos, "[metal] no entry point in ", k.name);
    kk.source.replace(at + 12, k.name.size(), kk.name);
    kernels.push_back(kk);
    pending.push_back(static_cast<int>(kernels.size() - 1));
    return prog_cache[h] = static_cast<int>(kernels.size() - 1);
  }
  void compile_pending() {
    if (pending.empty()) return;
    std::ostringstream tu;
    tu << "#include <metal_stdlib>\n";
    for (int i : pending) {
      const Kernel& k = kernels[static_cast<size_t>(i)];
      tu << "namespace ns_" << k.name << " {\n" << k.source << "}\n";
      tu << "extern \"C\" void launch_" << k.name << "(void** b, uint g, uint l) { ns_" << k.name << "::" << k.name << "(";
      for (int a = 0; a < k.nargs; ++a) tu << "RlxAnyPtr{b[" << a << "]}, ";
      tu << "uint3{g, 0, 0}, uint3{l, 0, 0}); }\n";
    }
    const std::string text = tu.str();
    const std::string dir = cache_dir("msl");
    const std::string so = dir + "/" + hex64(fnv1a64(cxx + "|" + kShim + "|" + text)) + ".so";
    if (access(so.c_str(), R_OK) != 0) {
      const std::string shim_dir = dir + "/shim-" + hex64(fnv1a64(kShim));
      ::mkdir(shim_dir.c_str(), 0755);
      RLX_CHECK(write_file_atomic(shim_dir + "/metal_stdlib", kShim), "[metal] cannot write the shim");
      const std::string tmp = temp_path_for(so), src = tmp + ".cpp";
      RLX_CHECK(write_file_atomic(src, text), "[metal] cannot write ", src);
      std::string log;
      std::string tool = find_on_path(cxx);
      int rc = run_tool({tool.empty() ? cxx : tool, "-std=c++17", "-O1", "-fwrapv", "-w", "-shared", "-fPIC", "-I" + shim_dir, "-o", tmp, src}, log);
      RLX_CHECK(rc >= 0 || !log.empty(), "[metal] cannot run ", cxx);
      std::remove(src.c_str());
      if (rc != 0 || std::rename(tmp.c_str(), so.c_str()) != 0) {
        std::remove(tmp.c_str());
        fail("[metal] the MSL kernels did not compile against the shim:\n", log.substr(0, 4000), "\n--- source ---\n",
             text.substr(0, 20000));
      }
      cache_inserted(so);
    } else {
      cache_touch(so);
    }
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    RLX_CHECK(h, "[metal] cannot load ", so, ": ", dlerror());
    libs.push_back(h);
    auto** barrier = reinterpret_cast<void (**)()>(dlsym(h, "rlx_msl_barrier_fn"));
    RLX_CHECK(barrier, "[metal] shim object lacks rlx_msl_barrier_fn");
    *barrier = &fiber_barrier;
    for (int i : pending) {
      Kernel& k = kernels[static_cast<size_t>(i)];
      k.fn = reinterpret_cast<void (*)(void**, uint32_t, uint32_t)>(dlsym(h, ("launch_" + k.name).c_str()));
      RLX_CHECK(k.fn, "[metal] missing launch_", k.name);
    }
    pending.clear();
  }
  int record(const std::vector<Launch>& ls) override {
    compile_pending();
    recs[next_rec] = ls;
    return next_rec++;
  }
  void free_recording(int id) override { recs.erase(id); }

  void run_group(Kernel& k, void** b, uint32_t g, int local) {
    if (!k.barriers) {
      for (int l = 0; l < local; ++l) k.fn(b, g, static_cast<uint32_t>(l));
      return;
    }
    Fibers& f = fibers;
    const size_t n = static_cast<size_t>(local);
    if (f.ctx.size() < n) f.ctx.resize(n), f.stacks.resize(n);
    f.done.assign(n, 0);
    f.k = &k, f.bufs = b, f.group = g;
    t_fibers = &f;
    for (size_t l = 0; l < n; ++l) {
      if (f.stacks[l].empty()) f.stacks[l].resize(256 * 1024);
      getcontext(&f.ctx[l]);
      f.ctx[l].uc_stack.ss_sp = f.stacks[l].data();
      f.ctx[l].uc_stack.ss_size = f.stacks[l].size();
      f.ctx[l].uc_link = &f.main;
      makecontext(&f.ctx[l], fiber_entry, 0);
    }
    for (;;) {
      size_t alive = 0, finished_now = 0;
      for (size_t l = 0; l < n; ++l) {
        if (f.done[l]) continue;
        ++alive;
        f.cur = static_cast<int>(l);
        swapcontext(&f.main, &f.ctx[l]);
        finished_now += f.done[l];
      }
      if (alive == 0) break;
      // a barrier that only part of the group reached (the rest returned) is divergent
      RLX_CHECK(finished_now == 0 || finished_now == alive, "[metal] threadgroup_barrier reached by part of a group in ",
                k.name);
    }
  }
  void submit(int id) override {
    for (const Launch& l : recs.at(id)) {
      Kernel& k = kernels.at(static_cast<size_t>(l.prog));
      std::vector<void*> b;
      for (int x : l.bufs) b.push_back(bufs.at(x).data());
      for (int64_t g = 0; g < l.groups; ++g) run_group(k, b.data(), static_cast<uint32_t>(g), l.local);
    }
  }
};

}  // namespace

std::unique_ptr<Api> make_metal_shim_api(std::string* why) {
  const char* e = std::getenv("RLX_CXX");
  std::string cxx = e && *e ? e : "c++";
  if (std::system((cxx + " --version >/dev/null 2>&1").c_str()) != 0) {
    *why = "no driver: no C++ compiler ('" + cxx + "') for the Metal shim (set RLX_CXX)";
    return nullptr;
  }
  auto a = std::make_unique<MslShimApi>();
  a->cxx = cxx;
  // what the Metal language offers (half, long, char; SIMD-groups, unused by these kernels); no double
  a->features.fp16 = a->features.int64 = a->features.int8 = true;
  a->features.subgroup_size = -1;
  return a;
}

}  // namespace rlx::gpu
