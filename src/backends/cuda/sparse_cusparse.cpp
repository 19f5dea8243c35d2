// cuSPARSE SpMV/SpMM and a device-resident CG (see sparse_cusparse.h). libcusparse is loaded with
// dlopen; the few entry points and enum values used are declared here from cusparse.h (CUDA 13).
#include "backends/cuda/sparse_cusparse.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_util.h"

namespace rlx::cuda::sparse {

namespace {

using Status = int;
using Handle = void*;
using SpMat = void*;
using DnVec = void*;
using DnMat = void*;
constexpr int kIndex32 = 2, kIndex64 = 3, kBaseZero = 0, kOpN = 0, kOpT = 1, kSpmvDefault = 0, kSpmmDefault = 0,
              kOrderRow = 2, kR32F = 0, kR64F = 1;

struct Cusparse {
  Status (*create)(Handle*);
  Status (*set_stream)(Handle, CUstream);
  Status (*create_csr)(SpMat*, int64_t, int64_t, int64_t, void*, void*, void*, int, int, int, int);
  Status (*destroy_spmat)(SpMat);
  Status (*create_dnvec)(DnVec*, int64_t, void*, int);
  Status (*dnvec_set)(DnVec, void*);
  Status (*destroy_dnvec)(DnVec);
  Status (*create_dnmat)(DnMat*, int64_t, int64_t, int64_t, void*, int, int);
  Status (*destroy_dnmat)(DnMat);
  Status (*spmv_buffer)(Handle, int, const void*, SpMat, DnVec, const void*, DnVec, int, int, size_t*);
  Status (*spmv)(Handle, int, const void*, SpMat, DnVec, const void*, DnVec, int, int, void*);
  Status (*spmm_buffer)(Handle, int, int, const void*, SpMat, DnMat, const void*, DnMat, int, int, size_t*);
  Status (*spmm)(Handle, int, int, const void*, SpMat, DnMat, const void*, DnMat, int, int, void*);
  std::string error;
};

const Cusparse& lib() {
  static Cusparse c = [] {
    Cusparse s{};
    std::vector<std::string> names = {"libcusparse.so.12", "libcusparse.so.13", "libcusparse.so"};
    std::vector<std::string> dirs = {""};
    if (const char* d = std::getenv("RLX_CUDA_LIB_DIR")) dirs.insert(dirs.begin(), std::string(d) + "/");
    dirs.push_back("/usr/local/cuda/lib64/");
    void* h = nullptr;
    for (auto& d : dirs)
      for (auto& n : names)
        if (!h) h = dlopen((d + n).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      s.error = "libcusparse.so not found (set RLX_CUDA_LIB_DIR)";
      return s;
    }
    std::string miss;
    auto get = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(h, name));
      if (!f && miss.empty()) miss = name;
    };
    get(s.create, "cusparseCreate");
    get(s.set_stream, "cusparseSetStream");
    get(s.create_csr, "cusparseCreateCsr");
    get(s.destroy_spmat, "cusparseDestroySpMat");
    get(s.create_dnvec, "cusparseCreateDnVec");
    get(s.dnvec_set, "cusparseDnVecSetValues");
    get(s.destroy_dnvec, "cusparseDestroyDnVec");
    get(s.create_dnmat, "cusparseCreateDnMat");
    get(s.destroy_dnmat, "cusparseDestroyDnMat");
    get(s.spmv_buffer, "cusparseSpMV_bufferSize");
    get(s.spmv, "cusparseSpMV");
    get(s.spmm_buffer, "cusparseSpMM_bufferSize");
    get(s.spmm, "cusparseSpMM");
    if (!miss.empty()) s.error = "libcusparse lacks " + miss;
    return s;
  }();
  return c;
}

void ck(Status s, const char* what) { RLX_CHECK(s == 0, "[cuda] ", what, ": cuSPARSE status ", s); }

// Device memory owned by one DeviceCsr.
struct Buf {
  CUdeviceptr p = 0;
  size_t bytes = 0;
  void alloc(size_t b) {
    bytes = b;
    check(api().cuMemAlloc(&p, b ? b : 1), "cuMemAlloc");
  }
  ~Buf() {
    if (p) api().cuMemFree(p);
  }
  void reset(size_t b) {
    if (p) api().cuMemFree(p);
    p = 0;
    alloc(b);
  }
  void* v() const { return reinterpret_cast<void*>(p); }
};

// The CG kernels (T = float or double; scalars in double): s = {rz, pq, rr, beta, stop2, done, iters}.
std::string cg_source(const char* t, const char* body, const char* params) {
  return std::string("typedef ") + t + " T;\n" +
         "__device__ inline double warp_sum(double v) { for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o); return v; }\n"
         "__device__ inline void block_add(double v, double* dst) {\n"
         "  __shared__ double sh[32]; v = warp_sum(v); int l = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
         "  if (l == 0) sh[w] = v; __syncthreads();\n"
         "  if (w == 0) { v = l < (blockDim.x >> 5) ? sh[l] : 0.0; v = warp_sum(v); if (l == 0) atomicAdd(dst, v); }\n"
         "}\n"
         "extern \"C\" __global__ void rlx_kernel(" + params + ") {\n" + body + "}\n";
}

const char* kDot =
    "  double acc = 0; for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)\n"
    "    acc += (double)a[i] * (double)b[i];\n"
    "  block_add(acc, s + slot);\n";
const char* kUpdate =
    "  if (s[5] != 0) return; double alpha = s[0] / s[1]; double acc = 0;\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {\n"
    "    x[i] += (T)(alpha * p[i]); T ri = r[i] - (T)(alpha * q[i]); r[i] = ri; acc += (double)ri * ri; }\n"
    "  block_add(acc, s + 2);\n";
const char* kFinish =
    "  if (s[5] != 0) return; if (!(s[1] > 0)) { s[5] = 2; return; }\n"
    "  s[6] += 1; s[3] = s[2] / s[0]; s[0] = s[2]; if (s[2] <= s[4] || s[6] >= maxiter) s[5] = 1;\n";
const char* kDirection =
    "  if (s[5] != 0) return; double beta = s[3];\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)\n"
    "    p[i] = r[i] + (T)(beta * p[i]);\n";

const char* const kParams[4] = {"long long n, const T* a, const T* b, double* s, int slot",
                                "long long n, T* x, T* r, const T* p, const T* q, double* s", "double* s, double maxiter",
                                "long long n, T* p, const T* r, double* s"};

CUfunction kernel(bool f64, const char* body, const char* params) {
  KernelSource ks;
  ks.code = cg_source(f64 ? "double" : "float", body, params);
  return load_function(ks);
}

}  // namespace

std::vector<std::string> cg_kernel_sources(bool f64) {
  const char* bodies[4] = {kDot, kUpdate, kFinish, kDirection};
  std::vector<std::string> r;
  for (int i = 0; i < 4; ++i) r.push_back(cg_source(f64 ? "double" : "float", bodies[i], kParams[i]));
  return r;
}

std::string cusparse_probe() {
  if (!lib().error.empty()) return lib().error;
  Probe p = probe();
  return p.ok ? "" : p.reason;
}

struct DeviceCsr::Impl {
  int64_t rows = 0, cols = 0, nnz = 0;
  bool f64 = true;
  int vt = kR64F;
  size_t es = 8;
  Buf val, col, rp, work;
  SpMat mat = nullptr;
  Handle h = nullptr;
  CUstream stream = nullptr;

  ~Impl() {
    if (mat) lib().destroy_spmat(mat);
  }
  // One product into device buffers x -> y (y = op(A) x), vectors or row-major [., k] matrices.
  void product(CUdeviceptr x, CUdeviceptr y, int64_t k, bool t) {
    const Cusparse& c = lib();
    double one = 1, zero = 0;
    float onef = 1, zerof = 0;
    const void* alpha = f64 ? static_cast<const void*>(&one) : &onef;
    const void* beta = f64 ? static_cast<const void*>(&zero) : &zerof;
    const int64_t xin = t ? rows : cols, yout = t ? cols : rows;
    size_t need = 0;
    if (k == 0) {
      DnVec vx, vy;
      ck(c.create_dnvec(&vx, xin, reinterpret_cast<void*>(x), vt), "cusparseCreateDnVec");
      ck(c.create_dnvec(&vy, yout, reinterpret_cast<void*>(y), vt), "cusparseCreateDnVec");
      ck(c.spmv_buffer(h, t ? kOpT : kOpN, alpha, mat, vx, beta, vy, vt, kSpmvDefault, &need), "cusparseSpMV_bufferSize");
      if (need > work.bytes) work.reset(need);
      ck(c.spmv(h, t ? kOpT : kOpN, alpha, mat, vx, beta, vy, vt, kSpmvDefault, work.v()), "cusparseSpMV");
      c.destroy_dnvec(vx);
      c.destroy_dnvec(vy);
    } else {
      DnMat mx, my;
      ck(c.create_dnmat(&mx, xin, k, k, reinterpret_cast<void*>(x), vt, kOrderRow), "cusparseCreateDnMat");
      ck(c.create_dnmat(&my, yout, k, k, reinterpret_cast<void*>(y), vt, kOrderRow), "cusparseCreateDnMat");
      ck(c.spmm_buffer(h, t ? kOpT : kOpN, kOpN, alpha, mat, mx, beta, my, vt, kSpmmDefault, &need),
         "cusparseSpMM_bufferSize");
      if (need > work.bytes) work.reset(need);
      ck(c.spmm(h, t ? kOpT : kOpN, kOpN, alpha, mat, mx, beta, my, vt, kSpmmDefault, work.v()), "cusparseSpMM");
      c.destroy_dnmat(mx);
      c.destroy_dnmat(my);
    }
  }
};

namespace {
Handle shared_handle(CUstream* stream) {
  static std::mutex mu;
  static Handle h = nullptr;
  static CUstream s = nullptr;
  std::lock_guard<std::mutex> g(mu);
  if (!h) {
    check(api().cuStreamCreate(&s, 0), "cuStreamCreate");
    ck(lib().create(&h), "cusparseCreate");
    ck(lib().set_stream(h, s), "cusparseSetStream");
  }
  *stream = s;
  return h;
}
}  // namespace

DeviceCsr::DeviceCsr(const rlx::sparse::Csr& a) : impl_(std::make_unique<Impl>()), host_(a) {
  RLX_CHECK(lib().error.empty(), "[cuda] sparse: ", lib().error);
  a.validate(false);
  Impl& m = *impl_;
  Api& d = api();
  m.h = shared_handle(&m.stream);
  m.rows = a.rows;
  m.cols = a.cols;
  m.nnz = a.nnz();
  m.f64 = a.dtype() == DType::f64;
  m.vt = m.f64 ? kR64F : kR32F;
  m.es = m.f64 ? 8 : 4;
  const size_t is = a.index_dtype() == DType::i64 ? 8 : 4;
  m.val.alloc(a.values.nbytes());
  m.col.alloc(a.col_indices.nbytes());
  m.rp.alloc(a.row_ptr.nbytes());
  check(d.cuMemcpyHtoDAsync(m.val.p, a.values.raw(), a.values.nbytes(), m.stream), "upload values");
  check(d.cuMemcpyHtoDAsync(m.col.p, a.col_indices.raw(), a.col_indices.nbytes(), m.stream), "upload col");
  check(d.cuMemcpyHtoDAsync(m.rp.p, a.row_ptr.raw(), a.row_ptr.nbytes(), m.stream), "upload row_ptr");
  check(d.cuStreamSynchronize(m.stream), "upload");
  const int it = is == 8 ? kIndex64 : kIndex32;
  ck(lib().create_csr(&m.mat, m.rows, m.cols, m.nnz, m.rp.v(), m.col.v(), m.val.v(), it, it, kBaseZero, m.vt),
     "cusparseCreateCsr");
}

DeviceCsr::~DeviceCsr() = default;

namespace {
Tensor run_product(DeviceCsr::Impl& m, const Tensor& x, int64_t k, bool t) {
  Api& d = api();
  const int64_t xin = t ? m.rows : m.cols, yout = t ? m.cols : m.rows, kk = std::max<int64_t>(k, 1);
  RLX_CHECK(x.dtype() == (m.f64 ? DType::f64 : DType::f32) && x.numel() == xin * kk, "[cuda] sparse product: x is ",
            dtype_name(x.dtype()), " with ", x.numel(), " elements, expected ", xin * kk);
  Buf bx, by;
  bx.alloc(x.nbytes());
  by.alloc(static_cast<size_t>(yout * kk) * m.es);
  check(d.cuMemcpyHtoDAsync(bx.p, x.raw(), x.nbytes(), m.stream), "upload x");
  m.product(bx.p, by.p, k, t);
  Tensor y(x.dtype(), k == 0 ? std::vector<int64_t>{yout} : std::vector<int64_t>{yout, k});
  check(d.cuMemcpyDtoHAsync(y.raw(), by.p, y.nbytes(), m.stream), "download y");
  check(d.cuStreamSynchronize(m.stream), "sparse product");
  return y;
}

double time_products(DeviceCsr::Impl& m, int64_t k, int reps) {
  Api& d = api();
  const int64_t kk = std::max<int64_t>(k, 1);
  Buf bx, by;
  bx.alloc(static_cast<size_t>(m.cols * kk) * m.es);
  by.alloc(static_cast<size_t>(m.rows * kk) * m.es);
  check(d.cuMemsetD8Async(bx.p, 0, bx.bytes, m.stream), "memset");
  for (int i = 0; i < 3; ++i) m.product(bx.p, by.p, k, false);
  CUevent e0, e1;
  check(d.cuEventCreate(&e0, 0), "cuEventCreate");
  check(d.cuEventCreate(&e1, 0), "cuEventCreate");
  check(d.cuEventRecord(e0, m.stream), "cuEventRecord");
  for (int i = 0; i < reps; ++i) m.product(bx.p, by.p, k, false);
  check(d.cuEventRecord(e1, m.stream), "cuEventRecord");
  check(d.cuEventSynchronize(e1), "cuEventSynchronize");
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
  d.cuEventDestroy(e0);
  d.cuEventDestroy(e1);
  return ms / reps;
}
}  // namespace

Tensor DeviceCsr::spmv(const Tensor& x, bool t) { return run_product(*impl_, x, 0, t); }
Tensor DeviceCsr::spmm(const Tensor& x, bool t) {
  RLX_CHECK(x.rank() == 2, "[cuda] spmm: X must be 2-D");
  return run_product(*impl_, x, x.shape()[1], t);
}
double DeviceCsr::time_spmv(int reps) { return time_products(*impl_, 0, reps); }
double DeviceCsr::time_spmm(int64_t k, int reps) { return time_products(*impl_, k, reps); }

DeviceCsr::CgResult DeviceCsr::cg(const Tensor& b, double tol, int64_t maxiter) {
  Impl& m = *impl_;
  Api& d = api();
  RLX_CHECK(m.rows == m.cols, "[cuda] cg: A must be square");
  RLX_CHECK(b.dtype() == (m.f64 ? DType::f64 : DType::f32) && b.numel() == m.rows, "[cuda] cg: b must be ",
            m.f64 ? "f64" : "f32", " [", m.rows, "]");
  const long long n = m.rows;
  if (maxiter <= 0) maxiter = 10 * n;
  double bn = 0;
  for (int64_t i = 0; i < n; ++i) bn += b.get(i) * b.get(i);
  bn = std::sqrt(bn);
  CgResult res;
  res.x = Tensor(b.dtype(), {n});
  if (bn == 0) return res;
  Buf x, r, p, q, s;
  for (Buf* v : {&x, &r, &p, &q}) v->alloc(static_cast<size_t>(n) * m.es);
  s.alloc(8 * sizeof(double));
  check(d.cuMemsetD8Async(x.p, 0, x.bytes, m.stream), "memset x");
  check(d.cuMemcpyHtoDAsync(r.p, b.raw(), b.nbytes(), m.stream), "upload b");
  check(d.cuMemcpyDtoDAsync(p.p, r.p, r.bytes, m.stream), "copy r");
  // s = {rz, pq, rr, beta, stop2, done, iters, maxiter}
  double s0[8] = {bn * bn, 0, 0, 0, tol * tol * bn * bn, 0, 0, static_cast<double>(maxiter)};
  check(d.cuMemcpyHtoDAsync(s.p, s0, sizeof s0, m.stream), "upload scalars");
  CUfunction fdot = kernel(m.f64, kDot, kParams[0]);
  CUfunction fupd = kernel(m.f64, kUpdate, kParams[1]);
  CUfunction ffin = kernel(m.f64, kFinish, kParams[2]);
  CUfunction fdir = kernel(m.f64, kDirection, kParams[3]);
  const unsigned block = 256, grid = static_cast<unsigned>(std::min<long long>((n + block - 1) / block, 132 * 8));
  CUdeviceptr sp = s.p;
  int slot_pq = 1;
  double maxd = static_cast<double>(maxiter);
  auto launch = [&](CUfunction f, unsigned g, void** args) {
    check(d.cuLaunchKernel(f, g, 1, 1, g == 1 ? 1 : block, 1, 1, 0, m.stream, args, nullptr), "cg kernel");
  };
  CUevent e0, e1;
  check(d.cuEventCreate(&e0, 0), "cuEventCreate");
  check(d.cuEventCreate(&e1, 0), "cuEventCreate");
  check(d.cuEventRecord(e0, m.stream), "cuEventRecord");
  double host_s[8] = {};
  for (int64_t it = 0; it < maxiter;) {
    const int chunk = 16;  // iterations between convergence reads; later ones are no-ops once done
    for (int c = 0; c < chunk; ++c) {
      m.product(p.p, q.p, 0, false);
      check(d.cuMemsetD8Async(s.p + sizeof(double), 0, 2 * sizeof(double), m.stream), "memset pq rr");
      void* a_dot[] = {const_cast<long long*>(&n), &p.p, &q.p, &sp, &slot_pq};
      launch(fdot, grid, a_dot);
      void* a_upd[] = {const_cast<long long*>(&n), &x.p, &r.p, &p.p, &q.p, &sp};
      launch(fupd, grid, a_upd);
      void* a_fin[] = {&sp, &maxd};
      launch(ffin, 1, a_fin);
      void* a_dir[] = {const_cast<long long*>(&n), &p.p, &r.p, &sp};
      launch(fdir, grid, a_dir);
    }
    it += chunk;
    check(d.cuMemcpyDtoHAsync(host_s, s.p, sizeof host_s, m.stream), "read scalars");
    check(d.cuStreamSynchronize(m.stream), "cg");
    if (host_s[5] != 0) break;
  }
  check(d.cuEventRecord(e1, m.stream), "cuEventRecord");
  check(d.cuEventSynchronize(e1), "cuEventSynchronize");
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
  d.cuEventDestroy(e0);
  d.cuEventDestroy(e1);
  res.solve_ms = ms;
  res.iterations = static_cast<int64_t>(host_s[6]);
  check(d.cuMemcpyDtoHAsync(res.x.raw(), x.p, res.x.nbytes(), m.stream), "download x");
  check(d.cuStreamSynchronize(m.stream), "cg");
  // True residual on the host, in double.
  double rr = 0;
  const auto& A = host_;
  for (int64_t i = 0; i < n; ++i) {
    double acc = 0;
    for (int64_t k = A.row_ptr.get_int(i); k < A.row_ptr.get_int(i + 1); ++k)
      acc += A.values.get(k) * res.x.get(A.col_indices.get_int(k));
    double e = b.get(i) - acc;
    rr += e * e;
  }
  res.residual = std::sqrt(rr) / bn;
  return res;
}

}  // namespace rlx::cuda::sparse
