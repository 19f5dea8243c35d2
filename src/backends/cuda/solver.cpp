// cuSOLVER steps (solver.h). Our row-major matrices are column-major transposes; for cholesky the
// pre kernel writes the full symmetric (A+Aᵀ)/2, potrf factors its column-major lower triangle, and
// the post kernel moves that factor into row-major lower (zeros above) and NaN-fills every matrix
// whose info is nonzero: the error policy of docs/linalg.md.
#include "backends/cuda/solver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <tuple>

#include "rlx/error.h"

namespace rlx::cuda {

namespace {

using Handle = struct cusolverDnContext*;
using Status = int;
constexpr int kFillLower = 0;  // CUBLAS_FILL_MODE_LOWER

struct Solver {
  Handle h = nullptr;
  std::string error;
  Status (*create)(Handle*) = nullptr;
  Status (*set_stream)(Handle, CUstream) = nullptr;
  Status (*spotrf_buf)(Handle, int, int, float*, int, int*) = nullptr;
  Status (*dpotrf_buf)(Handle, int, int, double*, int, int*) = nullptr;
  Status (*spotrf)(Handle, int, int, float*, int, float*, int, int*) = nullptr;
  Status (*dpotrf)(Handle, int, int, double*, int, double*, int, int*) = nullptr;
  Status (*spotrf_b)(Handle, int, int, float**, int, int*, int) = nullptr;
  Status (*dpotrf_b)(Handle, int, int, double**, int, int*, int) = nullptr;
};

template <class F>
bool sym(void* lib, F*& f, const char* name, std::string* err) {
  f = reinterpret_cast<F*>(dlsym(lib, name));
  if (!f && err->empty()) *err = std::string("libcusolver has no ") + name;
  return f != nullptr;
}

Solver& solver() {
  static Solver s;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char* d = std::getenv("RLX_CUDA_LIB_DIR")) names.push_back(std::string(d) + "/libcusolver.so.12");
    for (const char* n : {"libcusolver.so.12", "libcusolver.so.11", "libcusolver.so",
                          "/usr/local/cuda/lib64/libcusolver.so.12", "/usr/local/cuda/lib64/libcusolver.so"})
      names.push_back(n);
    void* lib = nullptr;
    for (auto& n : names)
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      s.error = "cuSOLVER (libcusolver.so.12) not found; set RLX_CUDA_LIB_DIR";
      return;
    }
    sym(lib, s.create, "cusolverDnCreate", &s.error), sym(lib, s.set_stream, "cusolverDnSetStream", &s.error);
    sym(lib, s.spotrf_buf, "cusolverDnSpotrf_bufferSize", &s.error);
    sym(lib, s.dpotrf_buf, "cusolverDnDpotrf_bufferSize", &s.error);
    sym(lib, s.spotrf, "cusolverDnSpotrf", &s.error), sym(lib, s.dpotrf, "cusolverDnDpotrf", &s.error);
    sym(lib, s.spotrf_b, "cusolverDnSpotrfBatched", &s.error);
    sym(lib, s.dpotrf_b, "cusolverDnDpotrfBatched", &s.error);
  });
  return s;
}

Handle handle() {
  Solver& s = solver();
  RLX_CHECK(s.error.empty(), "[cuda] ", s.error);
  static std::once_flag once;
  static Status rc = 0;
  std::call_once(once, [&] { rc = s.create(&s.h); });
  RLX_CHECK(rc == 0 && s.h, "[cuda] cusolverDnCreate failed (status ", rc, ")");
  return s.h;
}

void check_status(Status st, const char* what) { RLX_CHECK(st == 0, "[cuda] ", what, " failed (cuSOLVER status ", st, ")"); }

// Grid-stride loops over the n(n+1)/2 pairs (i >= j) of every matrix: one thread owns a pair, so the
// kernels are safe in place.
std::string pair_loop(int64_t n, int64_t batch) {
  std::ostringstream c;
  int64_t pairs = n * (n + 1) / 2;
  c << "  const long long total = " << pairs * batch << "LL;\n"
    << "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {\n"
    << "    long long b = t / " << pairs << "LL, p = t % " << pairs << "LL;\n"
    << "    int i = (int)((sqrt(8.0 * (double)p + 1.0) - 1.0) * 0.5);\n"
    << "    while ((long long)i * (i + 1) / 2 > p) --i;\n"
    << "    while ((long long)(i + 1) * (i + 2) / 2 <= p) ++i;\n"
    << "    int j = (int)(p - (long long)i * (i + 1) / 2);\n"
    << "    long long base = b * " << n * n << "LL, lo = base + (long long)i * " << n << " + j, up = base + (long long)j * "
    << n << " + i;\n";
  return c.str();
}

KernelSource kernel(const std::string& body, int num_params, int64_t work) {
  KernelSource ks;
  ks.code = body;
  ks.block = 256;
  ks.grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((work + 255) / 256, 65535)));
  ks.num_params = num_params;
  return ks;
}

}  // namespace

std::string solver_probe() { return solver().error; }

bool solver_has(OpKind op) { return op == OpKind::Cholesky; }

std::pair<KernelSource, KernelSource> solver_kernels(OpKind op, const std::vector<ValueType>& in) {
  RLX_CHECK(solver_has(op), "[cuda] no cuSOLVER plan for ", op_name(op));
  auto d = static_dims(in[0].shape);
  int64_t n_ = d.back(), batch_ = 1;
  for (size_t i = 0; i + 2 < d.size(); ++i) batch_ *= d[i];
  const char* T = in[0].dtype == DType::f32 ? "float" : "double";
  int64_t work = batch_ * n_ * (n_ + 1) / 2;
  // pre: L = full symmetric (A + Aᵀ)/2
  std::ostringstream pre;
  pre << "extern \"C\" __global__ void rlx_kernel(const " << T << "* a, " << T << "* l, int* info) {\n"
      << pair_loop(n_, batch_) << "    " << T << " v = (" << T << ")0.5 * (a[lo] + a[up]);\n"
      << "    l[lo] = v; l[up] = v;\n  }\n}\n";
  KernelSource pre_k = kernel(pre.str(), 3, work);
  // post: the column-major lower factor sits in row-major upper; move it down, zero above, NaN on failure
  std::ostringstream post;
  post << "extern \"C\" __global__ void rlx_kernel(const " << T << "* a, " << T << "* l, int* info) {\n"
       << pair_loop(n_, batch_) << "    " << T << " v = l[up];\n"
       << "    if (info[b] != 0) { v = (" << T << ")__int_as_float(0x7fc00000); l[lo] = v; l[up] = v; continue; }\n"
       << "    l[lo] = v; if (i != j) l[up] = (" << T << ")0;\n  }\n}\n";
  KernelSource post_k = kernel(post.str(), 3, work);
  return {pre_k, post_k};
}

SolverPlan::SolverPlan(OpKind op, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                       std::vector<CUdeviceptr> ptrs)
    : op_(op), dt_(in[0].dtype), ptrs_(std::move(ptrs)) {
  RLX_CHECK(solver_has(op), "[cuda] no cuSOLVER plan for ", op_name(op));
  RLX_CHECK(dt_ == DType::f32 || dt_ == DType::f64, "[cuda] ", op_name(op), ": f32 or f64 only");
  auto d = static_dims(in[0].shape);
  n_ = d.back();
  for (size_t i = 0; i + 2 < d.size(); ++i) batch_ *= d[i];
  std::tie(pre_, post_) = solver_kernels(op, in);
  Solver& s = solver();
  Handle h = handle();
  int n = static_cast<int>(n_);
  if (batch_ > 1) {
    std::vector<CUdeviceptr> ptr_host(batch_);
    size_t es = dt_ == DType::f32 ? 4 : 8;
    for (int64_t b = 0; b < batch_; ++b) ptr_host[b] = ptrs_[1] + static_cast<CUdeviceptr>(b * n_ * n_ * es);
    ptr_array_ = DeviceBlock(ptr_host.size() * sizeof(CUdeviceptr));
    Api& a = api();
    check(a.cuMemcpyHtoDAsync(ptr_array_.ptr, ptr_host.data(), ptr_host.size() * sizeof(CUdeviceptr), nullptr),
          "cholesky pointer array");
    check(a.cuStreamSynchronize(nullptr), "cholesky pointer array");
  } else {
    if (dt_ == DType::f32)
      check_status(s.spotrf_buf(h, kFillLower, n, reinterpret_cast<float*>(ptrs_[1]), n, &lwork_), "potrf_bufferSize");
    else
      check_status(s.dpotrf_buf(h, kFillLower, n, reinterpret_cast<double*>(ptrs_[1]), n, &lwork_), "potrf_bufferSize");
    workspace_ = DeviceBlock(std::max<size_t>(16, static_cast<size_t>(lwork_) * (dt_ == DType::f32 ? 4 : 8)));
  }
}

SolverPlan::~SolverPlan() = default;

void SolverPlan::run(CUstream stream) {
  Solver& s = solver();
  Handle h = handle();
  check_status(s.set_stream(h, stream), "cusolverDnSetStream");
  int n = static_cast<int>(n_);
  int* info = reinterpret_cast<int*>(ptrs_[2]);
  if (batch_ > 1) {
    if (dt_ == DType::f32)
      check_status(s.spotrf_b(h, kFillLower, n, reinterpret_cast<float**>(ptr_array_.ptr), n, info, static_cast<int>(batch_)),
                   "potrfBatched");
    else
      check_status(s.dpotrf_b(h, kFillLower, n, reinterpret_cast<double**>(ptr_array_.ptr), n, info, static_cast<int>(batch_)),
                   "potrfBatched");
  } else if (dt_ == DType::f32) {
    check_status(s.spotrf(h, kFillLower, n, reinterpret_cast<float*>(ptrs_[1]), n, reinterpret_cast<float*>(workspace_.ptr),
                          lwork_, info), "potrf");
  } else {
    check_status(s.dpotrf(h, kFillLower, n, reinterpret_cast<double*>(ptrs_[1]), n, reinterpret_cast<double*>(workspace_.ptr),
                          lwork_, info), "potrf");
  }
}

std::string SolverPlan::label() const {
  return std::string("[cusolver ") + (batch_ > 1 ? "potrfBatched " : "potrf ") + std::string(dtype_name(dt_)) + " " +
         std::to_string(batch_) + "x" + std::to_string(n_) + "]";
}

}  // namespace rlx::cuda
