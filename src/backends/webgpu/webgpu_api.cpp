// `webgpu`: the gpu::Api of src/backends/portable over webgpu.h, executed by wgpu-native. Kernels
// are WGSL from src/codegen/wgsl.cpp, compiled by wgpu's shader compiler (naga) into the native
// API (Vulkan here: lavapipe). The library is dlopen'ed (RLX_WGPU_LIB, else the one bundled by
// pip `wgpu`, found at configure time or by asking python3), so nothing links against it.
// WebGPU command buffers are single-use: a recording keeps the pipelines and bind groups and
// encodes one compute pass (a dispatch per launch; WebGPU orders dispatches and makes each one's
// writes visible to the next) on every submit. Downloads go through a MAP_READ staging buffer.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>

#include "backends/portable/api.h"
#include "runtime/disk_cache.h"  // fnv1a64
#include "runtime/subprocess.h"

#if RLX_HAVE_WEBGPU_H
#include "wgpu.h"  // includes webgpu.h; both from the wgpu wheel's resources folder

namespace rlx::gpu {

namespace {

#define RLX_WGPU_FNS(X)                                                                                                \
  X(wgpuCreateInstance) X(wgpuInstanceRequestAdapter) X(wgpuInstanceProcessEvents) X(wgpuInstanceRelease)            \
  X(wgpuAdapterRequestDevice) X(wgpuAdapterGetInfo) X(wgpuAdapterInfoFreeMembers) X(wgpuAdapterGetLimits)             \
  X(wgpuAdapterHasFeature) X(wgpuAdapterRelease) X(wgpuDeviceGetQueue) X(wgpuDeviceCreateBuffer) X(wgpuBufferRelease) \
  X(wgpuBufferDestroy) X(wgpuBufferMapAsync) X(wgpuBufferGetConstMappedRange) X(wgpuBufferUnmap)                      \
  X(wgpuDeviceCreateShaderModule) X(wgpuShaderModuleRelease) X(wgpuDeviceCreateBindGroupLayout)                        \
  X(wgpuDeviceCreatePipelineLayout) X(wgpuDeviceCreateComputePipeline) X(wgpuDeviceCreateBindGroup)                    \
  X(wgpuBindGroupRelease) X(wgpuDeviceCreateCommandEncoder) X(wgpuCommandEncoderBeginComputePass)                      \
  X(wgpuComputePassEncoderSetPipeline) X(wgpuComputePassEncoderSetBindGroup)                                           \
  X(wgpuComputePassEncoderDispatchWorkgroups) X(wgpuComputePassEncoderEnd) X(wgpuComputePassEncoderRelease)            \
  X(wgpuCommandEncoderCopyBufferToBuffer) X(wgpuCommandEncoderFinish) X(wgpuCommandEncoderRelease)                     \
  X(wgpuCommandBufferRelease) X(wgpuQueueSubmit) X(wgpuQueueWriteBuffer) X(wgpuDevicePoll) X(wgpuGetVersion)

struct Fns {
#define RLX_WGPU_PTR(n) decltype(&::n) n = nullptr;
  RLX_WGPU_FNS(RLX_WGPU_PTR)
#undef RLX_WGPU_PTR
};

WGPUStringView sv(const std::string& s) { return WGPUStringView{s.data(), s.size()}; }
std::string str(WGPUStringView v) { return v.data ? std::string(v.data, v.length == WGPU_STRLEN ? std::strlen(v.data) : v.length) : ""; }

class WebGpuApi : public Api {
 public:
  Fns f;
  WGPUInstance inst = nullptr;
  WGPUAdapter adapter = nullptr;
  WGPUDevice dev = nullptr;
  WGPUQueue queue = nullptr;
  std::string desc, error;  // error: the last uncaptured validation error
  std::unique_ptr<codegen::CLikeRenderer> r = codegen::make_wgsl_renderer();
  struct Buf {
    WGPUBuffer buf;
    size_t bytes;
  };
  std::map<int, Buf> bufs;
  int next_buf = 0;
  struct Pipeline {
    WGPUComputePipeline pipe;
    WGPUBindGroupLayout bgl;
  };
  std::vector<Pipeline> pipes;
  std::map<uint64_t, int> prog_cache;
  struct Rec {
    std::vector<Launch> launches;
    std::vector<WGPUBindGroup> groups;
  };
  std::map<int, Rec> recs;
  int next_rec = 0;

  ~WebGpuApi() override {
    for (auto& [id, rc] : recs)
      for (auto g : rc.groups) f.wgpuBindGroupRelease(g);
    for (auto& [id, b] : bufs) f.wgpuBufferRelease(b.buf);
  }
  std::string name() const override { return "webgpu"; }
  std::string device() const override { return desc; }
  const codegen::CLikeRenderer& renderer() const override { return *r; }

  void check(const char* what) {
    if (error.empty()) return;
    std::string e = error;
    error.clear();
    fail("[webgpu] ", what, ": ", e);
  }
  void wait() { f.wgpuDevicePoll(dev, 1, nullptr); }

  int buffer(size_t bytes) override {
    bytes = (std::max<size_t>(bytes, 4) + 3) / 4 * 4;
    WGPUBufferDescriptor d = WGPU_BUFFER_DESCRIPTOR_INIT;
    d.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopyDst | WGPUBufferUsage_CopySrc;
    d.size = bytes;
    WGPUBuffer b = f.wgpuDeviceCreateBuffer(dev, &d);  // WebGPU zero-initializes new buffers
    check("buffer");
    RLX_CHECK(b, "[webgpu] cannot allocate a buffer of ", bytes, " bytes");
    bufs[next_buf] = {b, bytes};
    return next_buf++;
  }
  void free_buffer(int id) override {
    auto it = bufs.find(id);
    if (it == bufs.end()) return;
    f.wgpuBufferRelease(it->second.buf);
    bufs.erase(it);
  }
  void upload(int id, const void* src, size_t bytes) override {
    const Buf& b = bufs.at(id);
    size_t whole = bytes / 4 * 4;
    if (whole) f.wgpuQueueWriteBuffer(queue, b.buf, 0, src, whole);
    if (whole < bytes) {  // writes are whole words: pad the tail
      uint8_t tail[4] = {0, 0, 0, 0};
      std::memcpy(tail, static_cast<const uint8_t*>(src) + whole, bytes - whole);
      f.wgpuQueueWriteBuffer(queue, b.buf, whole, tail, 4);
    }
    check("upload");
  }
  void download(int id, void* dst, size_t bytes) override {
    const Buf& b = bufs.at(id);
    size_t n = (bytes + 3) / 4 * 4;
    WGPUBufferDescriptor d = WGPU_BUFFER_DESCRIPTOR_INIT;
    d.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    d.size = n;
    WGPUBuffer staging = f.wgpuDeviceCreateBuffer(dev, &d);
    WGPUCommandEncoder enc = f.wgpuDeviceCreateCommandEncoder(dev, nullptr);
    f.wgpuCommandEncoderCopyBufferToBuffer(enc, b.buf, 0, staging, 0, n);
    WGPUCommandBuffer cb = f.wgpuCommandEncoderFinish(enc, nullptr);
    f.wgpuQueueSubmit(queue, 1, &cb);
    f.wgpuCommandBufferRelease(cb);
    f.wgpuCommandEncoderRelease(enc);
    struct Done {
      bool done = false;
      WGPUMapAsyncStatus status = WGPUMapAsyncStatus_Error;
      std::string msg;
    } done;
    WGPUBufferMapCallbackInfo ci = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
    ci.mode = WGPUCallbackMode_AllowProcessEvents;
    ci.callback = [](WGPUMapAsyncStatus st, WGPUStringView m, void* u, void*) {
      auto* d = static_cast<Done*>(u);
      d->done = true, d->status = st, d->msg = str(m);
    };
    ci.userdata1 = &done;
    f.wgpuBufferMapAsync(staging, WGPUMapMode_Read, 0, n, ci);
    for (int i = 0; !done.done && i < 1000000; ++i) {
      wait();
      f.wgpuInstanceProcessEvents(inst);
    }
    RLX_CHECK(done.done && done.status == WGPUMapAsyncStatus_Success, "[webgpu] reading a buffer back failed: ", done.msg);
    std::memcpy(dst, f.wgpuBufferGetConstMappedRange(staging, 0, n), bytes);
    f.wgpuBufferUnmap(staging);
    f.wgpuBufferRelease(staging);
    check("download");
  }

  int program(const codegen::RenderedKernel& k) override {
    uint64_t h = fnv1a64(k.source);
    if (auto it = prog_cache.find(h); it != prog_cache.end()) return it->second;
    WGPUShaderSourceWGSL src = WGPU_SHADER_SOURCE_WGSL_INIT;
    src.code = sv(k.source);
    WGPUShaderModuleDescriptor md = WGPU_SHADER_MODULE_DESCRIPTOR_INIT;
    md.nextInChain = &src.chain;
    md.label = sv(k.name);
    WGPUShaderModule mod = f.wgpuDeviceCreateShaderModule(dev, &md);
    if (!error.empty()) {
      std::string e = error;
      error.clear();
      fail("[webgpu] WGSL of ", k.name, " rejected: ", e, "\n", k.source);
    }
    std::vector<WGPUBindGroupLayoutEntry> le(k.args.size());
    for (size_t i = 0; i < le.size(); ++i) {
      le[i] = WGPU_BIND_GROUP_LAYOUT_ENTRY_INIT;
      le[i].binding = static_cast<uint32_t>(i);
      le[i].visibility = WGPUShaderStage_Compute;
      le[i].buffer.type = k.args[i].written ? WGPUBufferBindingType_Storage : WGPUBufferBindingType_ReadOnlyStorage;
    }
    WGPUBindGroupLayoutDescriptor ld = WGPU_BIND_GROUP_LAYOUT_DESCRIPTOR_INIT;
    ld.entryCount = le.size();
    ld.entries = le.data();
    Pipeline p{};
    p.bgl = f.wgpuDeviceCreateBindGroupLayout(dev, &ld);
    WGPUPipelineLayoutDescriptor pd = WGPU_PIPELINE_LAYOUT_DESCRIPTOR_INIT;
    pd.bindGroupLayoutCount = 1;
    pd.bindGroupLayouts = &p.bgl;
    WGPUPipelineLayout layout = f.wgpuDeviceCreatePipelineLayout(dev, &pd);
    WGPUComputePipelineDescriptor cd = WGPU_COMPUTE_PIPELINE_DESCRIPTOR_INIT;
    cd.layout = layout;
    cd.compute.module = mod;
    cd.compute.entryPoint = WGPUStringView{"main", 4};
    p.pipe = f.wgpuDeviceCreateComputePipeline(dev, &cd);
    f.wgpuShaderModuleRelease(mod);
    if (!error.empty()) {
      std::string e = error;
      error.clear();
      fail("[webgpu] pipeline for ", k.name, " rejected: ", e, "\n", k.source);
    }
    pipes.push_back(p);
    return prog_cache[h] = static_cast<int>(pipes.size() - 1);
  }

  int record(const std::vector<Launch>& ls) override {
    Rec rc;
    rc.launches = ls;
    for (auto& l : ls) {
      std::vector<WGPUBindGroupEntry> e(l.bufs.size());
      for (size_t i = 0; i < e.size(); ++i) {
        e[i] = WGPU_BIND_GROUP_ENTRY_INIT;
        e[i].binding = static_cast<uint32_t>(i);
        e[i].buffer = bufs.at(l.bufs[i]).buf;
        e[i].offset = 0;
        e[i].size = bufs.at(l.bufs[i]).bytes;
      }
      WGPUBindGroupDescriptor bd = WGPU_BIND_GROUP_DESCRIPTOR_INIT;
      bd.layout = pipes.at(static_cast<size_t>(l.prog)).bgl;
      bd.entryCount = e.size();
      bd.entries = e.data();
      rc.groups.push_back(f.wgpuDeviceCreateBindGroup(dev, &bd));
      check("bind group");
    }
    recs[next_rec] = std::move(rc);
    return next_rec++;
  }
  void free_recording(int id) override {
    auto it = recs.find(id);
    if (it == recs.end()) return;
    for (auto g : it->second.groups) f.wgpuBindGroupRelease(g);
    recs.erase(it);
  }
  void submit(int id) override {
    const Rec& rc = recs.at(id);
    WGPUCommandEncoder enc = f.wgpuDeviceCreateCommandEncoder(dev, nullptr);
    WGPUComputePassEncoder pass = f.wgpuCommandEncoderBeginComputePass(enc, nullptr);
    for (size_t i = 0; i < rc.launches.size(); ++i) {
      const Launch& l = rc.launches[i];
      f.wgpuComputePassEncoderSetPipeline(pass, pipes.at(static_cast<size_t>(l.prog)).pipe);
      f.wgpuComputePassEncoderSetBindGroup(pass, 0, rc.groups[i], 0, nullptr);
      uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(l.groups, 65535));
      uint32_t gy = static_cast<uint32_t>((l.groups + gx - 1) / gx);
      f.wgpuComputePassEncoderDispatchWorkgroups(pass, gx, gy, 1);
    }
    f.wgpuComputePassEncoderEnd(pass);
    f.wgpuComputePassEncoderRelease(pass);
    WGPUCommandBuffer cb = f.wgpuCommandEncoderFinish(enc, nullptr);
    f.wgpuQueueSubmit(queue, 1, &cb);
    f.wgpuCommandBufferRelease(cb);
    f.wgpuCommandEncoderRelease(enc);
    wait();
    check("submit");
  }
};

// The library: RLX_WGPU_LIB, else the wheel's copy found at configure time, else ask python3.
std::string find_library() {
  if (const char* e = std::getenv("RLX_WGPU_LIB"); e && *e) return e;
  struct stat st;
#ifdef RLX_WGPU_DEFAULT_LIB
  if (stat(RLX_WGPU_DEFAULT_LIB, &st) == 0) return RLX_WGPU_DEFAULT_LIB;
#endif
  std::string out = python_package_dir("wgpu");
  if (!out.empty()) out += "/resources/libwgpu_native-release.so";
  if (!out.empty() && stat(out.c_str(), &st) == 0) return out;
  return "libwgpu_native.so";
}

}  // namespace

std::unique_ptr<Api> make_webgpu_api(std::string* why) {
  if (!std::getenv("XDG_RUNTIME_DIR")) {  // the Mesa loader complains on stderr without one
    std::string d = "/tmp/rlx-xdg-" + std::to_string(getuid());
    mkdir(d.c_str(), 0700);
    setenv("XDG_RUNTIME_DIR", d.c_str(), 0);
  }
  std::string lib = find_library();
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *why = "no driver: wgpu-native not found (" + lib + "; pip install wgpu==0.32.0, or set RLX_WGPU_LIB)";
    return nullptr;
  }
  auto a = std::make_unique<WebGpuApi>();
#define RLX_WGPU_LOAD(n) a->f.n = reinterpret_cast<decltype(&::n)>(dlsym(h, #n));
  RLX_WGPU_FNS(RLX_WGPU_LOAD)
#undef RLX_WGPU_LOAD
#define RLX_WGPU_HAS(n) if (!a->f.n) { *why = std::string("no driver: ") + lib + " lacks " #n; return nullptr; }
  RLX_WGPU_FNS(RLX_WGPU_HAS)
#undef RLX_WGPU_HAS
  auto& f = a->f;
  a->inst = f.wgpuCreateInstance(nullptr);
  if (!a->inst) {
    *why = "no driver: wgpuCreateInstance failed";
    return nullptr;
  }
  struct Got {
    bool done = false;
    void* obj = nullptr;
    std::string msg;
  };
  Got ga;
  WGPURequestAdapterOptions ao = WGPU_REQUEST_ADAPTER_OPTIONS_INIT;
  ao.powerPreference = WGPUPowerPreference_HighPerformance;
  WGPURequestAdapterCallbackInfo aci = WGPU_REQUEST_ADAPTER_CALLBACK_INFO_INIT;
  aci.mode = WGPUCallbackMode_AllowProcessEvents;
  aci.callback = [](WGPURequestAdapterStatus st, WGPUAdapter ad, WGPUStringView m, void* u, void*) {
    auto* g = static_cast<Got*>(u);
    g->done = true, g->obj = st == WGPURequestAdapterStatus_Success ? ad : nullptr, g->msg = str(m);
  };
  aci.userdata1 = &ga;
  f.wgpuInstanceRequestAdapter(a->inst, &ao, aci);
  for (int i = 0; !ga.done && i < 1000; ++i) f.wgpuInstanceProcessEvents(a->inst);
  if (!ga.obj) {
    *why = "no hardware: wgpu-native found no adapter (" + (ga.msg.empty() ? std::string("none offered") : ga.msg) +
           "; install mesa-vulkan-drivers for lavapipe)";
    return nullptr;
  }
  a->adapter = static_cast<WGPUAdapter>(ga.obj);
  WGPUAdapterInfo info = WGPU_ADAPTER_INFO_INIT;
  f.wgpuAdapterGetInfo(a->adapter, &info);
  static const char* kBackend[] = {"undefined", "null", "WebGPU", "D3D11", "D3D12", "Metal", "Vulkan", "OpenGL", "OpenGLES"};
  std::string backend = info.backendType < 9 ? kBackend[info.backendType] : "?";
  std::string adapter = str(info.device);
  std::string driver = str(info.description);
  bool cpu_adapter = info.adapterType == WGPUAdapterType_CPU;
  f.wgpuAdapterInfoFreeMembers(info);
  // Ask for what the adapter allows (the WebGPU defaults cap storage buffers at 8 per stage).
  WGPULimits lim = WGPU_LIMITS_INIT;
  f.wgpuAdapterGetLimits(a->adapter, &lim);
  WGPUDeviceDescriptor dd = WGPU_DEVICE_DESCRIPTOR_INIT;
  dd.requiredLimits = &lim;
  dd.uncapturedErrorCallbackInfo.callback = [](WGPUDevice const*, WGPUErrorType, WGPUStringView m, void* u, void*) {
    auto* api = static_cast<WebGpuApi*>(u);
    api->error += (api->error.empty() ? "" : "; ") + str(m);
  };
  dd.uncapturedErrorCallbackInfo.userdata1 = a.get();
  Got gd;
  WGPURequestDeviceCallbackInfo dci = WGPU_REQUEST_DEVICE_CALLBACK_INFO_INIT;
  dci.mode = WGPUCallbackMode_AllowProcessEvents;
  dci.callback = [](WGPURequestDeviceStatus st, WGPUDevice d, WGPUStringView m, void* u, void*) {
    auto* g = static_cast<Got*>(u);
    g->done = true, g->obj = st == WGPURequestDeviceStatus_Success ? d : nullptr, g->msg = str(m);
  };
  dci.userdata1 = &gd;
  f.wgpuAdapterRequestDevice(a->adapter, &dd, dci);
  for (int i = 0; !gd.done && i < 1000; ++i) f.wgpuInstanceProcessEvents(a->inst);
  if (!gd.obj) {
    *why = "no hardware: wgpu-native could not open " + adapter + " (" + gd.msg + ")";
    return nullptr;
  }
  a->dev = static_cast<WGPUDevice>(gd.obj);
  a->queue = f.wgpuDeviceGetQueue(a->dev);
  a->features.fp16 = f.wgpuAdapterHasFeature(a->adapter, WGPUFeatureName_ShaderF16);
  a->features.subgroup_size = f.wgpuAdapterHasFeature(a->adapter, WGPUFeatureName_Subgroups) ? -1 : 0;
  uint32_t v = f.wgpuGetVersion();
  char ver[64];
  std::snprintf(ver, sizeof ver, "%u.%u.%u.%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
  a->desc = "wgpu-native " + std::string(ver) + ", " + adapter + " (" + backend + (driver.empty() ? "" : ", " + driver) + ")";
  choose_gemm(*a->r, cpu_adapter);
  return a;
}

}  // namespace rlx::gpu

#else  // built without webgpu.h

namespace rlx::gpu {
std::unique_ptr<Api> make_webgpu_api(std::string* why) {
  *why = "no driver: built without webgpu.h (pip install wgpu==0.32.0 before configuring, then re-run cmake)";
  return nullptr;
}
}  // namespace rlx::gpu

#endif
