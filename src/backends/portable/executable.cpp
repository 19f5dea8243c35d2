// The portable GPU executable, shared by vulkan, opengl and gpu (OpenCL): at compile time every
// LIR buffer gets a device buffer (views alias their base), constants are uploaded, each kernel
// is rendered by the API's renderer and built, and the whole schedule is recorded once. A run
// uploads the inputs, submits the recording, and downloads the outputs.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/portable/api.h"
#include "backends/portable/backend.h"
#include "backends/webgpu/page.h"
#include "runtime/disk_cache.h"  // write_file_atomic
#include "runtime/backend.h"

namespace rlx::gpu {

namespace {

// Device copies round up to whole 8-byte words: GLSL addresses narrow dtypes through uint words.
size_t padded(int64_t bytes) { return static_cast<size_t>((std::max<int64_t>(bytes, 1) + 7) / 8 * 8); }

class GpuExecutable : public Executable {
 public:
  GpuExecutable(Api& api, const LirProgram& p) : api_(api), p_(p) {
    auto t0 = std::chrono::steady_clock::now();
    const auto& r = api_.renderer();
    page_ = !page_path_.empty() && api_.name() == "webgpu";
    dev_.assign(p_.buffers.size(), -1);
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const LirBuffer& lb = p_.buffers[b];
      if (lb.kind == BufferKind::View) continue;
      dev_[b] = api_.buffer(padded(lb.bytes()) + (guard_ ? kGuard : 0));
      owned_.push_back(dev_[b]);
      if (guard_) {  // RLX_GPU_GUARD=1: a canary after every buffer catches out-of-bounds writes
        std::vector<unsigned char> g(padded(lb.bytes()) + kGuard, 0xAB);
        api_.upload(dev_[b], g.data(), g.size());
        owned_bytes_.push_back(padded(lb.bytes()));
      }
      if (lb.kind == BufferKind::Const && lb.value.nbytes()) api_.upload(dev_[b], lb.value.raw(), lb.value.nbytes());
    }
    for (size_t b = 0; b < p_.buffers.size(); ++b)  // views after their bases (bases precede them)
      if (p_.buffers[b].kind == BufferKind::View) dev_[b] = dev_[p_.buffers[b].view_of];
    std::vector<Api::Launch> launches;
    for (size_t i = 0; i < p_.kernels.size(); ++i) {
      const LirKernel& k = p_.kernels[i];
      std::vector<ValueType> in, out;
      std::vector<int> bufs;
      for (int b : k.in) in.push_back(p_.buffers[b].type), bufs.push_back(dev_[b]);
      for (int b : k.out) out.push_back(p_.buffers[b].type), bufs.push_back(dev_[b]);
      if (numel(out[0].shape) == 0) continue;
      codegen::RenderedKernel rk = r.render(k, in, out, "k" + std::to_string(i));
      if (std::getenv("RLX_DUMP_KERNELS")) std::fprintf(stderr, "// %s: %s\n%s\n", api_.name().c_str(), k.label().c_str(), rk.source.c_str());
      launches.push_back({api_.program(rk), rk.groups, rk.local, bufs});
      labels_.push_back(k.label());
      if (page_) page_kernel(rk, launches.back());
    }
    rec_ = api_.record(launches);
    compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  ~GpuExecutable() override {
    api_.free_recording(rec_);
    for (int b : owned_) api_.free_buffer(b);
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == p_.inputs.size(), "[", api_.name(), "] expected ", p_.inputs.size(), " inputs, got ",
              inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const LirBuffer& lb = p_.buffers[p_.inputs[i]];
      RLX_CHECK(inputs[i].dtype() == lb.type.dtype && inputs[i].numel() == numel(lb.type.shape), "[", api_.name(),
                "] input ", i, " ('", lb.name, "') must be ", dtype_name(lb.type.dtype), shape_str(lb.type.shape));
      if (inputs[i].nbytes()) api_.upload(dev_[p_.inputs[i]], inputs[i].raw(), inputs[i].nbytes());
    }
    if (page_) write_page(inputs);
    api_.submit(rec_);
    for (size_t i = 0; guard_ && i < owned_bytes_.size(); ++i) {
      std::vector<unsigned char> g(owned_bytes_[i] + kGuard);
      api_.download(owned_[i], g.data(), g.size());
      for (size_t j = owned_bytes_[i]; j < g.size(); ++j)
        RLX_CHECK(g[j] == 0xAB, "[", api_.name(), "] out-of-bounds write past device buffer ", i, " (kernels: ",
                  [&] { std::string s; for (auto& l : labels_) s += l + " "; return s; }(), ")");
    }
    std::vector<Tensor> outs;
    for (int b : p_.outputs) {
      const LirBuffer& lb = p_.buffers[b];
      Tensor t(lb.type.dtype, static_dims(lb.type.shape));
      if (t.nbytes()) api_.download(dev_[b], t.raw(), t.nbytes());
      outs.push_back(t);
    }
    return outs;
  }

  std::string profile() const override {
    std::ostringstream os;
    os << api_.name() << " (" << api_.device() << "): " << labels_.size() << " kernels, built in " << compile_ms_ << " ms\n";
    if (std::string t = api_.timing(rec_); !t.empty()) os << t << "\n";
    return os.str();
  }

 private:
  // RLX_WEBGPU_PAGE=FILE (webgpu): the first run also writes a browser page of the program
  // (backends/webgpu/page.h): its WGSL kernels, schedule, constants and that run's inputs.
  std::string page_path_ = [] { const char* e = std::getenv("RLX_WEBGPU_PAGE"); return e ? std::string(e) : ""; }();
  bool page_ = false;
  std::map<int, int> page_buf_, page_prog_;
  std::vector<PageKernel> page_kernels_;
  std::vector<PageLaunch> page_launches_;
  int page_index(int handle) {
    auto it = page_buf_.find(handle);
    if (it != page_buf_.end()) return it->second;
    int n = static_cast<int>(page_buf_.size());
    page_buf_[handle] = n;
    return n;
  }
  void page_kernel(const codegen::RenderedKernel& rk, const Api::Launch& l) {
    auto it = page_prog_.find(l.prog);
    if (it == page_prog_.end()) {
      PageKernel pk{rk.source, {}};
      for (auto& a : rk.args) pk.written.push_back(a.written);
      page_kernels_.push_back(pk);
      it = page_prog_.emplace(l.prog, static_cast<int>(page_kernels_.size() - 1)).first;
    }
    PageLaunch pl{it->second, l.groups, {}};
    for (int b : l.bufs) pl.bufs.push_back(page_index(b));
    page_launches_.push_back(pl);
  }
  void write_page(const std::vector<Tensor>& inputs) {
    page_ = false;  // once
    std::vector<PageBuffer> bufs(page_buf_.size());
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const LirBuffer& lb = p_.buffers[b];
      auto it = page_buf_.find(dev_[b]);
      if (lb.kind == BufferKind::View || it == page_buf_.end()) continue;
      bufs[static_cast<size_t>(it->second)].bytes = padded(lb.bytes());
      if (lb.kind == BufferKind::Const && lb.value.nbytes())
        bufs[static_cast<size_t>(it->second)].init.assign(static_cast<const char*>(lb.value.raw()), lb.value.nbytes());
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      if (auto it = page_buf_.find(dev_[p_.inputs[i]]); it != page_buf_.end() && inputs[i].nbytes())
        bufs[static_cast<size_t>(it->second)].init.assign(static_cast<const char*>(inputs[i].raw()), inputs[i].nbytes());
    std::vector<PageOutput> outs;
    for (int b : p_.outputs) {
      const LirBuffer& lb = p_.buffers[b];
      int idx = page_index(dev_[b]);
      if (static_cast<size_t>(idx) >= bufs.size()) bufs.resize(static_cast<size_t>(idx) + 1), bufs.back().bytes = padded(lb.bytes());
      outs.push_back({idx, static_cast<size_t>(lb.bytes()), std::string(dtype_name(lb.type.dtype)) + shape_str(lb.type.shape)});
    }
    RLX_CHECK(write_file_atomic(page_path_, webgpu_page("program with " + std::to_string(page_launches_.size()) + " launches",
                                                        bufs, page_kernels_, page_launches_, outs)),
              "[webgpu] cannot write the page ", page_path_);
  }
  Api& api_;
  LirProgram p_;
  std::vector<int> dev_, owned_;
  std::vector<std::string> labels_;
  int rec_ = -1;
  double compile_ms_ = 0;
  static constexpr size_t kGuard = 64;
  bool guard_ = std::getenv("RLX_GPU_GUARD") != nullptr;
  std::vector<size_t> owned_bytes_;
};

}  // namespace

std::unique_ptr<Executable> make_portable_executable(Api& api, const LirProgram& p) {
  return std::make_unique<GpuExecutable>(api, p);
}

Api* api_for(const std::string& device, std::string* why) {
  static std::mutex mu;
  static std::map<std::string, std::pair<std::unique_ptr<Api>, std::string>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it == cache.end()) {
    std::string w;
    std::unique_ptr<Api> a;
    try {
      if (device == "vulkan") a = make_vulkan_api(&w);
      else if (device == "opengl") a = make_opengl_api(&w);
      else if (device == "gpu") a = make_opencl_api(&w);
      else if (device == "webgpu") a = make_webgpu_api(&w);
      else if (device == "directx") a = make_directx_api(&w);
      else if (device == "metal") {
        const char* e = std::getenv("RLX_METAL_SHIM");
        if (e && std::string(e) == "1") a = make_metal_shim_api(&w);
#if RLX_HAVE_METAL
        else a = make_metal_api(&w);
#else
        else w = "no hardware: needs an Apple GPU (the Metal host executor is built on Apple platforms only); "
                 "RLX_METAL_SHIM=1 runs the MSL kernels as C++ on the host CPU against a Metal shim";
#endif
      }
      else w = "not a portable GPU device";
    } catch (const std::exception& e) {
      a.reset();
      w = e.what();
    }
    it = cache.emplace(device, std::make_pair(std::move(a), w)).first;
  }
  if (why) *why = it->second.second;
  return it->second.first.get();
}

}  // namespace rlx::gpu

namespace rlx {

std::unique_ptr<Executable> gpu::PortableBackend::compile(const LirProgram& p) const {
  std::string why;
  gpu::Api* api = gpu::api_for(name_, &why);
  if (!api) fail("[", name_, "] cannot execute here: ", why);
  return std::make_unique<gpu::GpuExecutable>(*api, p);
}

}  // namespace rlx
