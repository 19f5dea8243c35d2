// Sparse on the H200, RLX side: cuSPARSE SpMV/SpMM and the device-resident CG of
// src/backends/cuda/sparse_cusparse.cpp on the 2-D Poisson matrix (5-point, m x m grid), plus the
// cpu kernels on the same inputs. Writes one JSON row per line to argv[1] (bench/h200_sparse_cupy.py
// adds the CuPy rows and writes the results file).
//   h200_sparse OUT.jsonl [m=1000] [reps=200]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "backends/cuda/sparse_cusparse.h"
#include "rlx/sparse.h"

using namespace rlx;

static sparse::Csr poisson2d(int64_t m, DType dt) { return sparse::poisson2d(m).to_csr(dt, DType::i32); }

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: h200_sparse OUT.jsonl [m] [reps]\n");
    return 2;
  }
  const int64_t m = argc > 2 ? std::atoll(argv[2]) : 1000;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 200;
  std::string why = cuda::sparse::cusparse_probe();
  if (!why.empty()) {
    std::fprintf(stderr, "cuda sparse unavailable: %s\n", why.c_str());
    return 1;
  }
  std::ofstream out(argv[1]);
  for (DType dt : {DType::f64, DType::f32}) {
    const char* dn = dt == DType::f64 ? "f64" : "f32";
    sparse::Csr a = poisson2d(m, dt);
    const int64_t n = a.rows;
    cuda::sparse::DeviceCsr d(a);
    // Correctness of one product against the host.
    Tensor x(dt, {n});
    for (int64_t i = 0; i < n; ++i) x.set(i, std::sin(0.001 * static_cast<double>(i)));
    Tensor y = d.spmv(x);
    double err = 0, mx = 0;
    for (int64_t i = 0; i < n; ++i) {
      double acc = 0;
      for (int64_t k = a.row_ptr.get_int(i); k < a.row_ptr.get_int(i + 1); ++k)
        acc += a.values.get(k) * x.get(a.col_indices.get_int(k));
      err = std::max(err, std::fabs(acc - y.get(i)));
      mx = std::max(mx, std::fabs(acc));
    }
    double ms = d.time_spmv(reps);
    std::printf("rlx cusparse spmv %s n=%lld nnz=%lld: %.4f ms (%.1f GFLOP/s) max rel err %.2e\n", dn,
                static_cast<long long>(n), static_cast<long long>(a.nnz()), ms, 2.0 * a.nnz() / ms / 1e6, err / mx);
    out << "{\"system\":\"rlx\",\"variant\":\"cuSPARSE SpMV (DeviceCsr)\",\"workload\":\"spmv poisson2d " << m << "x" << m
        << "\",\"dtype\":\"" << dn << "\",\"ms\":" << ms << ",\"gflops\":" << 2.0 * a.nnz() / ms / 1e6
        << ",\"max_rel_err\":" << err / mx << "}\n";
    for (int64_t k : {8, 32}) {
      double mk = d.time_spmm(k, std::max(10, reps / 10));
      std::printf("rlx cusparse spmm %s k=%lld: %.4f ms (%.1f GFLOP/s)\n", dn, static_cast<long long>(k), mk,
                  2.0 * a.nnz() * k / mk / 1e6);
      out << "{\"system\":\"rlx\",\"variant\":\"cuSPARSE SpMM (DeviceCsr)\",\"workload\":\"spmm poisson2d " << m << "x"
          << m << " k=" << k << "\",\"dtype\":\"" << dn << "\",\"ms\":" << mk
          << ",\"gflops\":" << 2.0 * a.nnz() * k / mk / 1e6 << "}\n";
    }
    Tensor b(dt, {n});
    for (int64_t i = 0; i < n; ++i) b.set(i, std::cos(0.37 * static_cast<double>(i)));
    const double tol = dt == DType::f64 ? 1e-6 : 1e-4;
    d.cg(b, tol, 50);  // warm-up (NVRTC compile of the CG kernels)
    std::vector<double> t;
    cuda::sparse::DeviceCsr::CgResult r;
    for (int i = 0; i < 3; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      r = d.cg(b, tol);
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    std::printf("rlx cuda cg %s rtol=%g: %lld iterations, true residual %.2e, %.1f ms wall (%.1f ms device)\n", dn, tol,
                static_cast<long long>(r.iterations), r.residual, t[1], r.solve_ms);
    out << "{\"system\":\"rlx\",\"variant\":\"device-resident CG (cuSPARSE SpMV + NVRTC kernels)\",\"workload\":\"cg "
           "poisson2d "
        << m << "x" << m << "\",\"dtype\":\"" << dn << "\",\"rtol\":" << tol << ",\"ms\":" << t[1]
        << ",\"device_ms\":" << r.solve_ms << ",\"iterations\":" << r.iterations << ",\"true_residual\":" << r.residual
        << ",\"timing\":\"wall, incl. b upload and x download, median of 3\"}\n";
  }
  std::printf("wrote %s\n", argv[1]);
  return 0;
}
