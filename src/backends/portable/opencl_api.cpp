// `gpu`: OpenCL through the ICD loader (libOpenCL.so.1, dlopen'ed): the first GPU or accelerator
// device of any platform, else the first device at all (a CPU runtime such as PoCL);
// RLX_OPENCL_PLATFORM=<substring> restricts the platforms. Programs are built from OpenCL C 1.2 source;
// PoCL caches its JIT output in ~/.cache/pocl, so only the first build of a kernel is slow.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>

#include <cstdlib>
#include <map>

#include "backends/portable/api.h"
#include "runtime/disk_cache.h"  // fnv1a64

namespace rlx::gpu {

namespace {

struct ClFns {
#define RLX_CL(name) decltype(&::name) name = nullptr;
#define RLX_CL_LIST(X)                                                                                                 \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext)                     \
  X(clCreateCommandQueue) X(clCreateBuffer) X(clReleaseMemObject) X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer)       \
  X(clEnqueueFillBuffer) X(clCreateProgramWithSource) X(clBuildProgram) X(clGetProgramBuildInfo) X(clCreateKernel)     \
  X(clSetKernelArg) X(clEnqueueNDRangeKernel) X(clFinish)
  RLX_CL_LIST(RLX_CL)
#undef RLX_CL
};

void check(cl_int e, const char* what) {
  if (e != CL_SUCCESS) fail("[gpu] ", what, " failed (OpenCL error ", e, ")");
}

class OpenClApi : public Api {
 public:
  ClFns f;
  cl_context ctx = nullptr;
  cl_command_queue q = nullptr;
  cl_device_id dev = nullptr;
  std::string desc;
  std::unique_ptr<codegen::CLikeRenderer> r = codegen::make_opencl_renderer();
  std::map<int, cl_mem> bufs;
  std::map<uint64_t, int> prog_cache;
  std::vector<cl_kernel> kernels;
  std::map<int, std::vector<Launch>> recs;
  int next_buf = 0, next_rec = 0;

  std::string name() const override { return "gpu"; }
  std::string device() const override { return desc; }
  const codegen::CLikeRenderer& renderer() const override { return *r; }

  int buffer(size_t bytes) override {
    cl_int e;
    cl_mem m = f.clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, nullptr, &e);
    check(e, "clCreateBuffer");
    unsigned char zero = 0;
    check(f.clEnqueueFillBuffer(q, m, &zero, 1, 0, bytes, 0, nullptr, nullptr), "clEnqueueFillBuffer");
    bufs[next_buf] = m;
    return next_buf++;
  }
  void free_buffer(int b) override {
    f.clReleaseMemObject(bufs.at(b));
    bufs.erase(b);
  }
  void upload(int b, const void* src, size_t n) override {
    check(f.clEnqueueWriteBuffer(q, bufs.at(b), CL_TRUE, 0, n, src, 0, nullptr, nullptr), "clEnqueueWriteBuffer");
  }
  void download(int b, void* dst, size_t n) override {
    check(f.clEnqueueReadBuffer(q, bufs.at(b), CL_TRUE, 0, n, dst, 0, nullptr, nullptr), "clEnqueueReadBuffer");
  }
  int program(const codegen::RenderedKernel& k) override {
    uint64_t h = fnv1a64(k.source + k.name);
    if (auto it = prog_cache.find(h); it != prog_cache.end()) return it->second;
    const char* src = k.source.c_str();
    cl_int e;
    cl_program p = f.clCreateProgramWithSource(ctx, 1, &src, nullptr, &e);
    check(e, "clCreateProgramWithSource");
    if (f.clBuildProgram(p, 1, &dev, "-cl-std=CL1.2", nullptr, nullptr) != CL_SUCCESS) {
      size_t n = 0;
      f.clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      f.clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      fail("[gpu] OpenCL build of ", k.name, " failed:\n", log, "\n--- source ---\n", k.source);
    }
    cl_kernel kr = f.clCreateKernel(p, k.name.c_str(), &e);
    check(e, "clCreateKernel");
    kernels.push_back(kr);
    return prog_cache[h] = static_cast<int>(kernels.size() - 1);
  }
  int record(const std::vector<Launch>& l) override {
    recs[next_rec] = l;
    return next_rec++;
  }
  void free_recording(int rec) override { recs.erase(rec); }
  void submit(int rec) override {
    for (auto& l : recs.at(rec)) {
      cl_kernel k = kernels.at(static_cast<size_t>(l.prog));
      for (size_t i = 0; i < l.bufs.size(); ++i)
        check(f.clSetKernelArg(k, static_cast<cl_uint>(i), sizeof(cl_mem), &bufs.at(l.bufs[i])), "clSetKernelArg");
      size_t local = static_cast<size_t>(l.local), global = static_cast<size_t>(l.groups) * local;
      check(f.clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr, nullptr), "clEnqueueNDRangeKernel");
    }
    check(f.clFinish(q), "clFinish");
  }
};

}  // namespace

std::unique_ptr<Api> make_opencl_api(std::string* why) {
  void* h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *why = "no driver: OpenCL ICD loader libOpenCL.so.1 not found (apt install ocl-icd-libopencl1 pocl-opencl-icd)";
    return nullptr;
  }
  auto a = std::make_unique<OpenClApi>();
#define RLX_CL(name)                                                              \
  a->f.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name));               \
  if (!a->f.name) {                                                               \
    *why = "no driver: libOpenCL.so.1 lacks " #name;                              \
    return nullptr;                                                               \
  }
  RLX_CL_LIST(RLX_CL)
#undef RLX_CL
  cl_uint np = 0;
  if (a->f.clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
    *why = "no driver: the OpenCL loader found no platform (no ICD installed; apt install pocl-opencl-icd)";
    return nullptr;
  }
  std::vector<cl_platform_id> ps(np);
  a->f.clGetPlatformIDs(np, ps.data(), nullptr);
  const char* want = std::getenv("RLX_OPENCL_PLATFORM");
  for (cl_device_type type : {cl_device_type(CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR), cl_device_type(CL_DEVICE_TYPE_ALL)})
  for (auto p : ps) {
    char pname[256] = {0}, dname[256] = {0};
    a->f.clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof pname, pname, nullptr);
    if (want && std::string(pname).find(want) == std::string::npos) continue;
    cl_device_id d;
    cl_uint nd = 0;
    if (a->f.clGetDeviceIDs(p, type, 1, &d, &nd) != CL_SUCCESS || nd == 0) continue;
    a->f.clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof dname, dname, nullptr);
    cl_int e;
    a->ctx = a->f.clCreateContext(nullptr, 1, &d, nullptr, nullptr, &e);
    if (e != CL_SUCCESS) continue;
    a->q = a->f.clCreateCommandQueue(a->ctx, d, 0, &e);
    if (e != CL_SUCCESS) continue;
    a->dev = d;
    a->desc = std::string(pname) + ": " + dname;
    size_t n = 0;
    a->f.clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, nullptr, &n);
    std::string ext(n, '\0');
    a->f.clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, ext.data(), nullptr);
    char profile[64] = {0};
    a->f.clGetDeviceInfo(d, CL_DEVICE_PROFILE, sizeof profile, profile, nullptr);
    cl_device_fp_config fp64 = 0;
    a->f.clGetDeviceInfo(d, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, nullptr);
    auto has = [&](const char* e) { return (" " + ext + " ").find(std::string(" ") + e + " ") != std::string::npos; };
    a->features.fp64 = fp64 != 0 || has("cl_khr_fp64");
    a->features.fp16 = has("cl_khr_fp16");
    a->features.int64 = std::string(profile) == "FULL_PROFILE" || has("cles_khr_int64");  // long is optional only in EMBEDDED
    a->features.int8 = true;  // char arithmetic and storage are core OpenCL C
    choose_gemm(*a->r, false);  // PoCL runs work-item loops around barriers: tiles pay off there too
    a->features.subgroup_size = has("cl_khr_subgroups") || has("cl_intel_subgroups") ? -1 : 0;
    return a;
  }
  *why = "no hardware: no OpenCL platform offers a usable device";
  return nullptr;
}

}  // namespace rlx::gpu
