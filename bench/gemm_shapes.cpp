// GEMM library choice for the cpu device, on MiniLM's shapes (x[M,K] · W[N,K]ᵀ, row-major):
// OpenBLAS with its own threads, OpenBLAS single-threaded split by rows over our threads (what
// src/backends/cpu/blas.cpp does), and oneDNN dnnl_sgemm (OpenMP). Median of 7 after 2 warm-ups.
// Build: g++ -O2 -std=c++17 bench/gemm_shapes.cpp -o /tmp/gemm_shapes -lopenblas -ldnnl -lpthread
// Run:   OMP_NUM_THREADS=2 /tmp/gemm_shapes 2
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

extern "C" void openblas_set_num_threads(int);

static double median_ms(const std::function<void()>& f) {
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  int nt = argc > 1 ? std::atoi(argv[1]) : 2;
  struct S { int M, N, K; const char* what; };
  std::vector<S> shapes = {{4096, 384, 384, "b32s128 q/k/v/o"}, {4096, 1536, 384, "b32s128 ffn up"},
                           {4096, 384, 1536, "b32s128 ffn down"}, {1024, 1536, 384, "b8s128 ffn up"},
                           {128, 1536, 384, "b8s16 ffn up"}, {16, 384, 384, "b1s16 q/k/v/o"},
                           {16, 1536, 384, "b1s16 ffn up"}};
  std::printf("%-18s %6s %6s %6s | %14s %14s %14s  (GFLOP/s)\n", "shape", "M", "N", "K", "openblas-mt", "openblas-split",
              "dnnl_sgemm");
  for (auto s : shapes) {
    std::vector<float> A(size_t(s.M) * s.K, 0.5f), W(size_t(s.N) * s.K, 0.25f), C(size_t(s.M) * s.N);
    double fl = 2.0 * s.M * s.N * s.K / 1e6;
    openblas_set_num_threads(nt);
    double t1 = median_ms([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.M, s.N, s.K, 1.f, A.data(), s.K, W.data(), s.K, 0.f,
                  C.data(), s.N);
    });
    openblas_set_num_threads(1);
    double t2 = median_ms([&] {
      std::vector<std::thread> th;
      int per = (s.M + nt - 1) / nt;
      for (int i = 0; i < nt; ++i)
        th.emplace_back([&, i] {
          int r0 = i * per, r1 = std::min(s.M, r0 + per);
          if (r1 > r0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, s.N, s.K, 1.f, A.data() + size_t(r0) * s.K,
                        s.K, W.data(), s.K, 0.f, C.data() + size_t(r0) * s.N, s.N);
        });
      for (auto& t : th) t.join();
    });
    double t3 = median_ms([&] {
      dnnl_sgemm('N', 'T', s.M, s.N, s.K, 1.f, A.data(), s.K, W.data(), s.K, 0.f, C.data(), s.N);
    });
    std::printf("%-18s %6d %6d %6d | %14.1f %14.1f %14.1f\n", s.what, s.M, s.N, s.K, fl / t1, fl / t2, fl / t3);
  }
}
