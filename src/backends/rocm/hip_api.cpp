// The HIP runtime executor: libamdhip64 is dlopen'ed (so the build needs no ROCm and `rlx devices`
// can say what is missing). A program's kernels are rendered by render_hip, built in one hipcc run
// for the GPU's gcnArchName (cached under cache_dir("rocm")), loaded with hipModuleLoadData and
// launched in order with hipModuleLaunchKernel; every LIR buffer has its own device allocation.
#include <dlfcn.h>

#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "backends/rocm/rocm.h"
#include "runtime/backend.h"
#include "runtime/disk_cache.h"

namespace rlx::rocm {

namespace {

using hipError_t = int;
struct Hip {
  void* lib = nullptr;
  hipError_t (*hipInit)(unsigned);
  hipError_t (*hipGetDeviceCount)(int*);
  hipError_t (*hipDeviceGetName)(char*, int, int);
  hipError_t (*hipMalloc)(void**, size_t);
  hipError_t (*hipFree)(void*);
  hipError_t (*hipMemset)(void*, int, size_t);
  hipError_t (*hipMemcpyHtoD)(void*, const void*, size_t);
  hipError_t (*hipMemcpyDtoH)(void*, void*, size_t);
  hipError_t (*hipModuleLoadData)(void**, const void*);
  hipError_t (*hipModuleGetFunction)(void**, void*, const char*);
  hipError_t (*hipModuleLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                                      void**, void**);
  hipError_t (*hipDeviceSynchronize)();
  std::string arch;
};

template <class F>
bool sym(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

// Loads the runtime and counts devices once; `why` says what is missing.
Hip* hip(std::string* why, int* status) {
  static std::once_flag once;
  static Hip h;
  static std::string w;
  static int st = 1;
  std::call_once(once, [] {
    for (const char* n : {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"})
      if ((h.lib = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h.lib) {
      w = "no HIP runtime (libamdhip64.so not found; Debian libamdhip64-5)";
      return;
    }
    bool ok = sym(h.lib, "hipInit", h.hipInit) && sym(h.lib, "hipGetDeviceCount", h.hipGetDeviceCount) &&
              sym(h.lib, "hipDeviceGetName", h.hipDeviceGetName) && sym(h.lib, "hipMalloc", h.hipMalloc) &&
              sym(h.lib, "hipFree", h.hipFree) && sym(h.lib, "hipMemset", h.hipMemset) &&
              sym(h.lib, "hipMemcpyHtoD", h.hipMemcpyHtoD) && sym(h.lib, "hipMemcpyDtoH", h.hipMemcpyDtoH) &&
              sym(h.lib, "hipModuleLoadData", h.hipModuleLoadData) &&
              sym(h.lib, "hipModuleGetFunction", h.hipModuleGetFunction) &&
              sym(h.lib, "hipModuleLaunchKernel", h.hipModuleLaunchKernel) &&
              sym(h.lib, "hipDeviceSynchronize", h.hipDeviceSynchronize);
    if (!ok) {
      w = "libamdhip64 lacks a symbol the executor needs";
      return;
    }
    int n = 0;
    hipError_t e = h.hipInit(0);
    if (e == 0) e = h.hipGetDeviceCount(&n);
    if (e != 0 || n <= 0) {
      st = 2;
      w = "no AMD GPU (libamdhip64 loaded; hipInit/hipGetDeviceCount: error " + std::to_string(e) + ", " +
          std::to_string(n) + " devices)";
      return;
    }
    char name[256] = {0};
    h.hipDeviceGetName(name, sizeof name, 0);
    // gcnArchName through the environment's override or the name's gfx id (hipDeviceProp_t's
    // layout changes between ROCm releases, so it is not read from the struct)
    const char* a = std::getenv("RLX_ROCM_ARCH");
    h.arch = a && *a ? a : "gfx90a";
    st = 0;
    w = std::string(name) + " (" + h.arch + ")";
  });
  if (why) *why = w;
  if (status) *status = st;
  return st == 0 ? &h : nullptr;
}

void check(hipError_t e, const char* what) {
  if (e != 0) fail("[rocm] ", what, " failed: HIP error ", e);
}

class HipExecutable : public Executable {
 public:
  HipExecutable(Hip& h, const LirProgram& p) : h_(h), p_(p) {
    kernels_ = render_hip(p_);
    std::vector<std::string> srcs;
    for (auto& k : kernels_) srcs.push_back(k.source);
    std::string src = hip_batch(srcs);
    std::string path = cache_dir("rocm") + "/" + hex64(fnv1a64(src + h_.arch)) + ".hsaco";
    if (!std::ifstream(path).good()) {
      std::string err = hipcc_compile(src, h_.arch, path);
      RLX_CHECK(err.empty(), "[rocm] ", err);
    }
    std::ifstream f(path, std::ios::binary);
    std::string image((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    check(h_.hipModuleLoadData(&module_, image.data()), "hipModuleLoadData");
    for (size_t i = 0; i < kernels_.size(); ++i) {
      void* fn = nullptr;
      check(h_.hipModuleGetFunction(&fn, module_, ("rlx_kernel_" + std::to_string(i)).c_str()), "hipModuleGetFunction");
      fns_.push_back(fn);
      void* s = nullptr;
      if (kernels_[i].scratch_bytes) {
        check(h_.hipMalloc(&s, kernels_[i].scratch_bytes), "hipMalloc");
        check(h_.hipMemset(s, 0, kernels_[i].scratch_bytes), "hipMemset");
      }
      scratch_.push_back(s);
    }
    dev_.assign(p_.buffers.size(), nullptr);
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      const LirBuffer& lb = p_.buffers[b];
      if (lb.kind == BufferKind::View) continue;
      size_t n = std::max<size_t>(static_cast<size_t>(lb.bytes()), 1);
      check(h_.hipMalloc(&dev_[b], n), "hipMalloc");
      check(h_.hipMemset(dev_[b], 0, n), "hipMemset");
      if (lb.kind == BufferKind::Const && lb.value.nbytes())
        check(h_.hipMemcpyHtoD(dev_[b], lb.value.raw(), lb.value.nbytes()), "hipMemcpyHtoD");
    }
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      if (p_.buffers[b].kind == BufferKind::View) dev_[b] = dev_[p_.buffers[b].view_of];
  }
  ~HipExecutable() override {
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      if (p_.buffers[b].kind != BufferKind::View && dev_[b]) h_.hipFree(dev_[b]);
    for (void* s : scratch_)
      if (s) h_.hipFree(s);
  }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override {
    RLX_CHECK(inputs.size() == p_.inputs.size(), "[rocm] expected ", p_.inputs.size(), " inputs, got ", inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].nbytes()) check(h_.hipMemcpyHtoD(dev_[p_.inputs[i]], inputs[i].raw(), inputs[i].nbytes()), "hipMemcpyHtoD");
    size_t ki = 0;
    for (auto& k : p_.kernels) {
      if (numel(p_.buffers[k.out[0]].type.shape) == 0) continue;
      const HipKernel& hk = kernels_[ki];
      std::vector<void*> ptrs;
      for (int b : k.in) ptrs.push_back(dev_[b]);
      for (int b : k.out) ptrs.push_back(dev_[b]);
      if (hk.scratch_bytes) ptrs.push_back(scratch_[ki]);  // the kernel leaves it zero-filled again
      std::vector<void*> args;
      for (auto& p : ptrs) args.push_back(&p);
      check(h_.hipModuleLaunchKernel(fns_[ki], hk.grid, hk.grid_y, 1, hk.block, 1, 1, hk.smem, nullptr, args.data(), nullptr),
            "hipModuleLaunchKernel");
      ++ki;
    }
    check(h_.hipDeviceSynchronize(), "hipDeviceSynchronize");
    std::vector<Tensor> outs;
    for (int b : p_.outputs) {
      const LirBuffer& lb = p_.buffers[b];
      Tensor t(lb.type.dtype, static_dims(lb.type.shape));
      if (t.nbytes()) check(h_.hipMemcpyDtoH(t.raw(), dev_[b], t.nbytes()), "hipMemcpyDtoH");
      outs.push_back(t);
    }
    return outs;
  }

 private:
  Hip& h_;
  LirProgram p_;
  std::vector<HipKernel> kernels_;
  void* module_ = nullptr;
  std::vector<void*> fns_, dev_, scratch_;
};

}  // namespace

int hip_runtime_probe(std::string* why) {
  int st = 1;
  hip(why, &st);
  return st;
}

}  // namespace rlx::rocm

namespace rlx {

std::unique_ptr<Executable> make_rocm_executable(const LirProgram& p) {
  std::string why;
  int st = 1;
  rocm::Hip* h = rocm::hip(&why, &st);
  if (!h) fail("[rocm] cannot execute here: ", why);
  return std::make_unique<rocm::HipExecutable>(*h, p);
}

}  // namespace rlx
