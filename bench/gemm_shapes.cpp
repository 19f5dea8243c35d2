// GEMM library choice for the cpu device, on MiniLM's shapes (x[M,K] · W[N,K]ᵀ, row-major):
// OpenBLAS with its own threads, OpenBLAS single-threaded split by rows over our threads (the old
// src/backends/cpu/blas.cpp path), oneDNN dnnl_sgemm (OpenMP), and RLX's own packed AVX2 micro-kernel
// (src/backends/cpu/gemm_avx2.cpp, weight packed once as the cpu executable does) on our pool.
// Median of 31 after 3 warm-ups; also checks the RLX result against OpenBLAS.
// Build: g++ -O3 -std=c++20 -Isrc -fno-trapping-math bench/gemm_shapes.cpp src/backends/cpu/gemm_avx2.cpp \
//          src/backends/cpu/parallel.cpp -o /tmp/gemm_shapes -lopenblas -ldnnl -lpthread
// Run:   OMP_NUM_THREADS=2 RLX_NUM_THREADS=2 /tmp/gemm_shapes 2
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <thread>
#include <vector>
#include <cmath>

#include "backends/cpu/gemm_avx2.h"

extern "C" void openblas_set_num_threads(int);

// With 1 thread the clock is the thread's CPU time (robust on a loaded shared machine); else wall time.
static bool g_cpu_clock = false;
static double now_ms() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median_ms(const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < 31; ++i) {
    double a = now_ms();
    f();
    t.push_back(now_ms() - a);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  int nt = argc > 1 ? std::atoi(argv[1]) : 2;
  g_cpu_clock = nt == 1;
  struct S { int M, N, K; const char* what; };
  std::vector<S> shapes = {{4096, 384, 384, "b32s128 q/k/v/o"}, {4096, 1536, 384, "b32s128 ffn up"},
                           {4096, 384, 1536, "b32s128 ffn down"}, {1024, 1536, 384, "b8s128 ffn up"},
                           {128, 1536, 384, "b8s16 ffn up"}, {16, 384, 384, "b1s16 q/k/v/o"},
                           {16, 1536, 384, "b1s16 ffn up"}, {4096, 1152, 384, "b32s128 qkv merged"},
                           {37, 50, 77, "odd"}};
  std::printf("%-18s %6s %6s %6s | %14s %14s %14s %14s (GFLOP/s)\n", "shape", "M", "N", "K", "openblas-mt", "openblas-split",
              "dnnl_sgemm", "rlx-avx2");
  for (auto s : shapes) {
    std::vector<float> A(size_t(s.M) * s.K), W(size_t(s.N) * s.K), C(size_t(s.M) * s.N), C2(size_t(s.M) * s.N);
    for (size_t i = 0; i < A.size(); ++i) A[i] = float((i * 7919) % 1000) / 1000.f - 0.5f;
    for (size_t i = 0; i < W.size(); ++i) W[i] = float((i * 104729) % 997) / 997.f - 0.5f;
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
    std::vector<float> Wp(size_t(rlx::cpu::packed_b_size(s.K, s.N)));
    rlx::cpu::pack_b(true, W.data(), s.K, s.K, s.N, Wp.data());
    double t4 = median_ms([&] { rlx::cpu::gemm_packed(s.M, s.N, s.K, A.data(), s.K, Wp.data(), C2.data(), s.N, nullptr); });
    double err = 0;
    for (size_t i = 0; i < C.size(); ++i) err = std::max(err, double(std::fabs(C[i] - C2[i])));
    std::printf("%-18s %6d %6d %6d | %14.1f %14.1f %14.1f %14.1f  max|diff| %.2g\n", s.what, s.M, s.N, s.K, fl / t1,
                fl / t2, fl / t3, fl / t4, err);
  }
}
