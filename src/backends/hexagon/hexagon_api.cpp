// The hexagon gpu::Api: buffers are host memory; program() keeps a rendered kernel's source;
// record() lays a schedule's buffers out in one arena image. The first submit of a recording that
// is not in the current program builds one program holding every live recording (so a caller that
// compiles many graphs before running them pays for one clang run), starts it under qemu-hexagon
// once, and from then on each submit is one request to that process: the arena image in, the
// written buffers and per-launch wall times (clock_gettime inside the emulated program) out.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "backends/hexagon/hexagon.h"
#include "runtime/disk_cache.h"
#include "runtime/subprocess.h"

namespace rlx::hexagon {

namespace {

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

class HexagonApi : public gpu::Api {
 public:
  HexagonApi(std::string clang, std::string qemu) : clang_(std::move(clang)), qemu_(std::move(qemu)) {
    renderer_ = codegen::make_hexagon_renderer();
    features.fp64 = true, features.int64 = true, features.int8 = true;
    ::signal(SIGPIPE, SIG_IGN);  // a server that died is reported by the failed read, not a signal
  }
  ~HexagonApi() override { stop(); }
  std::string name() const override { return "hexagon"; }
  std::string device() const override {
    return "Hexagon v68 scalar code (clang " + std::string(build_flags()) + ") emulated by qemu-hexagon -cpu v67";
  }
  const codegen::CLikeRenderer& renderer() const override { return *renderer_; }

  int buffer(size_t bytes) override {
    std::lock_guard<std::mutex> l(mu_);
    bufs_.emplace_back(bytes, 0);
    return static_cast<int>(bufs_.size() - 1);
  }
  void free_buffer(int b) override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<unsigned char>().swap(bufs_.at(b));
  }
  void upload(int b, const void* src, size_t n) override {
    std::lock_guard<std::mutex> l(mu_);
    std::memcpy(bufs_.at(b).data(), src, std::min(n, bufs_[b].size()));
  }
  void download(int b, void* dst, size_t n) override {
    std::lock_guard<std::mutex> l(mu_);
    std::memcpy(dst, bufs_.at(b).data(), std::min(n, bufs_[b].size()));
  }
  int program(const codegen::RenderedKernel& k) override {
    std::lock_guard<std::mutex> l(mu_);
    std::string key = k.name + "\n" + k.source;
    auto it = prog_ids_.find(key);
    if (it != prog_ids_.end()) return it->second;
    Prog p;
    p.kernel = k.name;
    p.source = k.source;
    p.barriers = k.source.find("BARRIER") != std::string::npos;
    for (auto& a : k.args) p.written.push_back(a.written);
    progs_.push_back(p);
    int id = static_cast<int>(progs_.size() - 1);
    prog_ids_.emplace(key, id);
    return id;
  }
  int record(const std::vector<Launch>& launches) override {
    std::lock_guard<std::mutex> l(mu_);
    Rec r;
    r.launches = launches;
    for (auto& la : launches)
      for (size_t j = 0; j < la.bufs.size(); ++j) {
        int b = la.bufs[j];
        if (!r.offset.count(b)) {
          r.order.push_back(b);
          r.offset[b] = r.bytes;
          r.bytes = align_up(r.bytes + std::max<size_t>(bufs_.at(b).size(), 1), 128);
        }
        if (progs_.at(la.prog).written.at(j)) r.written.insert(b);
      }
    recs_.push_back(std::move(r));
    return static_cast<int>(recs_.size() - 1);
  }
  void free_recording(int rec) override {
    std::lock_guard<std::mutex> l(mu_);
    if (rec >= 0 && rec < static_cast<int>(recs_.size())) recs_[rec].live = false;
  }
  void submit(int rec) override {
    std::lock_guard<std::mutex> l(mu_);
    Rec& r = recs_.at(rec);
    auto slot = in_binary_.find(rec);
    if (slot == in_binary_.end() || pid_ < 0) {
      build_and_start();
      slot = in_binary_.find(rec);
    }
    std::vector<unsigned char> image(r.bytes);
    for (int b : r.order) std::memcpy(image.data() + r.offset[b], bufs_[b].data(), bufs_[b].size());
    uint32_t cmd = static_cast<uint32_t>(slot->second);
    bool ok = write_all(to_, &cmd, 4) && write_all(to_, image.data(), image.size());
    for (int b : r.order)
      if (ok && r.written.count(b)) ok = read_all(from_, bufs_[b].data(), bufs_[b].size());
    std::vector<uint64_t> ns(r.launches.size());
    if (ok && !ns.empty()) ok = read_all(from_, ns.data(), ns.size() * 8);
    if (!ok) {
      stop();
      fail("[hexagon] the emulated program stopped while running a schedule of ", r.launches.size(),
           " kernels (qemu-hexagon exited or crashed)");
    }
    last_ns_ = ns;
  }
  std::string timing(int) const override {
    std::ostringstream os;
    os << "emulated wall time per kernel (qemu-hexagon, not hardware) in us:";
    for (auto n : last_ns_) os << " " << n / 1000.0;
    return os.str();
  }

 private:
  struct Prog {
    std::string kernel, source;
    bool barriers = false;
    std::vector<bool> written;
  };
  struct Rec {
    std::vector<Launch> launches;
    std::vector<int> order;
    std::map<int, size_t> offset;
    std::set<int> written;
    size_t bytes = 0;
    bool live = true;
  };

  void stop() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    to_ = from_ = -1;
    if (pid_ > 0) {
      int st;
      ::kill(pid_, SIGKILL);
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {}
    }
    pid_ = -1;
  }

  std::string program_source(std::map<int, int>& slots) const {
    std::ostringstream os;
    os << runtime_source() << "#define long long long\n"
       << "struct RlxPtr { unsigned char* p; template <class T> operator T*() const { return (T*)p; } };\n";
    std::set<int> used;
    for (size_t r = 0; r < recs_.size(); ++r)
      if (recs_[r].live)
        for (auto& la : recs_[r].launches) used.insert(la.prog);
    for (int p : used) os << "namespace p" << p << " {\n" << progs_[p].source << "}\n";
    size_t arena = 128;
    std::ostringstream sw;
    int slot = 0;
    for (size_t r = 0; r < recs_.size(); ++r) {
      const Rec& rc = recs_[r];
      if (!rc.live) continue;
      slots[static_cast<int>(r)] = slot;
      arena = std::max(arena, rc.bytes);
      for (size_t i = 0; i < rc.launches.size(); ++i) {
        const Launch& la = rc.launches[i];
        os << "static __attribute__((noinline)) void r" << r << "_" << i << "() { p" << la.prog << "::" << progs_[la.prog].kernel << "(";
        for (size_t j = 0; j < la.bufs.size(); ++j) os << (j ? ", " : "") << "RlxPtr{rlx_arena + " << rc.offset.at(la.bufs[j]) << "}";
        os << "); }\n";
      }
      sw << "    case " << slot++ << ": run" << r << "(); break;\n";
      os << "static __attribute__((noinline)) void run" << r << "() {\n  u64_t t0;\n  rlx_read_all(rlx_arena, " << rc.bytes << "u);\n";
      for (size_t i = 0; i < rc.launches.size(); ++i)
        os << "  t0 = rlx_now(); rlx_launch(r" << r << "_" << i << ", " << rc.launches[i].groups << ", "
           << rc.launches[i].local << ", " << (progs_[rc.launches[i].prog].barriers ? "true" : "false")
           << "); rlx_ns[" << i << "] = rlx_now() - t0;\n";
      for (int b : rc.order)
        if (rc.written.count(b)) os << "  rlx_write_all(rlx_arena + " << rc.offset.at(b) << ", " << bufs_[b].size() << "u);\n";
      os << "  rlx_write_all((const unsigned char*)rlx_ns, " << rc.launches.size() * 8 << "u);\n}\n";
      nlaunch_max_ = std::max(nlaunch_max_, rc.launches.size());
    }
    std::ostringstream main;
    main << "static unsigned char rlx_arena[" << arena << "] __attribute__((aligned(128)));\n"
         << "static u64_t rlx_ns[" << std::max<size_t>(nlaunch_max_, 1) << "];\n"
         << "static u64_t rlx_now() { i32_t ts[2] = {0, 0}; rlx_syscall3(113, 1, (i32_t)(__SIZE_TYPE__)ts, 0);"
            " return (u64_t)ts[0] * 1000000000ull + (u64_t)ts[1]; }\n";
    std::string head = main.str();
    std::ostringstream tail;
    tail << "extern \"C\" void _start() {\n  for (;;) {\n    u32_t cmd = 0;\n"
         << "    rlx_read_all((unsigned char*)&cmd, 4);\n    switch (cmd) {\n"
         << sw.str() << "    default: rlx_exit(2);\n    }\n  }\n}\n";
    // the arena is declared before the thunks that address it
    std::string s = os.str();
    size_t at = s.find("struct RlxPtr");
    return s.substr(0, at) + head + s.substr(at) + tail.str();
  }

  void build_and_start() {
    stop();
    in_binary_.clear();
    std::string src = program_source(in_binary_);
    std::string key = hex64(fnv1a64(src + "\n" + build_flags() + "\n" + clang_));
    std::string dir = cache_dir("hexagon");
    std::string bin = dir + "/" + key + ".elf";
    if (::access(bin.c_str(), R_OK) == 0) {
      cache_touch(bin);
    } else {
      std::string cpp = temp_path_for(dir + "/" + key + ".cpp");
      RLX_CHECK(write_file_atomic(cpp, src), "[hexagon] cannot write ", cpp);
      std::string tmp = temp_path_for(bin), log;
      std::vector<std::string> argv = {clang_};
      std::istringstream fl(build_flags());
      for (std::string f; fl >> f;) argv.push_back(f);
      for (const char* f : {"-ffreestanding", "-fno-builtin", "-fno-exceptions", "-fno-rtti", "-nostdlib", "-static",
                            "-fuse-ld=lld", "-Wno-keyword-macro", "-w", "-x", "c++"})
        argv.push_back(f);
      argv.push_back(cpp);
      argv.push_back("-o");
      argv.push_back(tmp);
      int rc = run_tool(argv, log);
      if (rc != 0) {
        if (log.size() > 4000) log = log.substr(0, 4000) + "...";
        fail("[hexagon] clang failed (exit ", rc, ") building ", cpp, ":\n", log);
      }
      ::unlink(cpp.c_str());
      RLX_CHECK(::rename(tmp.c_str(), bin.c_str()) == 0, "[hexagon] cannot place ", bin);
    }
    int in[2], out[2];
    RLX_CHECK(::pipe(in) == 0 && ::pipe(out) == 0, "[hexagon] pipe failed");
    ::fcntl(in[1], F_SETFD, FD_CLOEXEC);
    ::fcntl(out[0], F_SETFD, FD_CLOEXEC);
    pid_ = spawn_process({qemu_, "-cpu", "v67", bin}, in[0], out[1], -1, {});
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1], from_ = out[0];
    RLX_CHECK(pid_ > 0, "[hexagon] cannot start ", qemu_);
  }

  std::string clang_, qemu_;
  std::unique_ptr<codegen::CLikeRenderer> renderer_;
  std::mutex mu_;
  std::vector<std::vector<unsigned char>> bufs_;
  std::vector<Prog> progs_;
  std::map<std::string, int> prog_ids_;
  std::vector<Rec> recs_;
  std::map<int, int> in_binary_;
  mutable size_t nlaunch_max_ = 0;
  std::vector<uint64_t> last_ns_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

}  // namespace

const char* build_flags() { return "--target=hexagon -mcpu=hexagonv68 -O2"; }

std::string toolchain_missing() {
  static std::once_flag once;
  static std::string missing;
  std::call_once(once, [] {
    std::string clang = find_on_path("clang"), out;
    if (clang.empty()) missing += "clang not on PATH; ";
    else if (run_tool({clang, "--print-targets"}, out) != 0 || out.find("hexagon") == std::string::npos)
      missing += "clang has no Hexagon target; ";
    if (find_on_path("ld.lld").empty()) missing += "ld.lld not on PATH; ";
    if (find_on_path("qemu-hexagon").empty()) missing += "qemu-hexagon not on PATH (Debian qemu-user); ";
    if (!missing.empty()) missing.resize(missing.size() - 2);
  });
  return missing;
}

std::unique_ptr<gpu::Api> make_hexagon_api(std::string* why) {
  std::string m = toolchain_missing();
  if (!m.empty()) {
    if (why) *why = m;
    return nullptr;
  }
  return std::make_unique<HexagonApi>(find_on_path("clang"), find_on_path("qemu-hexagon"));
}

gpu::Api* hexagon_api(std::string* why) {
  static std::once_flag once;
  static std::unique_ptr<gpu::Api> api;
  static std::string w;
  std::call_once(once, [] { api = make_hexagon_api(&w); });
  if (why) *why = w;
  return api.get();
}

}  // namespace rlx::hexagon
