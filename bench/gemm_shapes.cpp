// GEMM speed on the cpu device's shapes: OpenBLAS (cblas_sgemm, its own threads) vs RLX's own packed
// AVX2 GEMM (src/backends/cpu/gemm_avx2.cpp) on our pool.
//  - MiniLM Linear shapes x[M,K]·W[N,K]ᵀ: "rlx packed" has the weight packed once (as the cpu executable
//    does), "rlx gemm_f32" packs it on every call (the general entry point).
//  - MLP training shapes (784-128-10 and 784-512-512-10, batch 128 and 1024): forward X·W, weight
//    gradient Xᵀ·dY (trans_a) and input gradient dY·Wᵀ (trans_b), through gemm_f32 vs cblas_sgemm with the
//    same transposes.
// With 1 thread the clock is the thread's CPU time (robust on a loaded shared machine); with more,
// wall time, or with a "cpu" suffix (e.g. "2cpu") the process's CPU time, i.e. GFLOP per CPU-second
// of all threads together (what a loaded machine makes measurable: duplicated work and spinning show
// up, descheduling does not). Median of many runs after warm-ups; every result is checked against
// OpenBLAS.
// Build (one line): g++ -O3 -std=c++20 -Isrc -fno-trapping-math bench/gemm_shapes.cpp
//          src/backends/cpu/gemm_avx2.cpp src/backends/cpu/parallel.cpp -o /tmp/gemm_shapes -lopenblas -lpthread
// Run:   RLX_NUM_THREADS=1 /tmp/gemm_shapes 1      (CPU time, 1 thread)
//        RLX_NUM_THREADS=2 /tmp/gemm_shapes 2      (wall time, 2 threads)
//        RLX_NUM_THREADS=2 /tmp/gemm_shapes 2cpu   (process CPU time, 2 threads)
//        optional 2nd argument: a substring of the shape names to run only those.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/gemm_avx2.h"

extern "C" void openblas_set_num_threads(int);

static bool g_cpu_clock = false, g_proc_clock = false;
static double now_ms() {
  if (g_cpu_clock || g_proc_clock) {
    timespec ts;
    clock_gettime(g_proc_clock ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median time of f: 3 warm-ups, then at least 15 runs and about 0.4 s (at most 401 runs).
static double median_ms(const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  double total = 0;
  while (t.size() < 401 && (t.size() < 15 || total < 400)) {
    double a = now_ms();
    f();
    t.push_back(now_ms() - a);
    total += t.back();
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static std::vector<float> fill(size_t n, unsigned seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float((i * 7919 + seed * 104729) % 1000) / 1000.f - 0.5f;
  return v;
}

static double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

static double load_avg() {
  double l = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

int main(int argc, char** argv) {
  const int nt = argc > 1 ? std::atoi(argv[1]) : 2;
  const std::string only = argc > 2 ? argv[2] : "";
  g_cpu_clock = nt == 1;
  g_proc_clock = nt > 1 && argc > 1 && std::strstr(argv[1], "cpu");
  openblas_set_num_threads(nt);
  std::printf("# %d thread(s), %s; GFLOP/s; load average at start %.2f\n", nt,
              g_cpu_clock ? "thread CPU time" : g_proc_clock ? "process CPU time (all threads)" : "wall time",
              load_avg());
  std::printf("%-22s %5s %5s %5s %2s | %9s %11s %11s | %8s %5s\n", "shape", "M", "N", "K", "op", "openblas",
              "rlx packed", "rlx gemm_f32", "max|diff|", "load");

  struct L { int M, N, K; const char* what; };
  const std::vector<L> linear = {{4096, 384, 384, "b32s128 q/k/v/o"},     {4096, 1536, 384, "b32s128 ffn up"},
                                 {4096, 384, 1536, "b32s128 ffn down"},   {4096, 1152, 384, "b32s128 qkv merged"},
                                 {1024, 1536, 384, "b8s128 ffn up"},      {1024, 384, 1536, "b8s128 ffn down"},
                                 {128, 1536, 384, "b8s16 ffn up"},        {128, 384, 384, "b8s16 q/k/v/o"},
                                 {16, 384, 384, "b1s16 q/k/v/o"},         {16, 1536, 384, "b1s16 ffn up"},
                                 {37, 50, 77, "odd"}};
  for (const L& s : linear) {
    if (!only.empty() && std::string(s.what).find(only) == std::string::npos) continue;
    auto A = fill(size_t(s.M) * s.K, 1), W = fill(size_t(s.N) * s.K, 2);
    std::vector<float> C(size_t(s.M) * s.N), C2(C.size()), C3(C.size());
    const double mflop = 2.0 * s.M * s.N * s.K / 1e6;
    double t1 = median_ms([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.M, s.N, s.K, 1.f, A.data(), s.K, W.data(), s.K, 0.f,
                  C.data(), s.N);
    });
    const size_t np = size_t(rlx::cpu::packed_b_size(s.K, s.N));
    float* Wp = static_cast<float*>(std::aligned_alloc(64, (np * sizeof(float) + 63) / 64 * 64));
    rlx::cpu::pack_b(true, W.data(), s.K, s.K, s.N, Wp);
    double t2 = median_ms([&] { rlx::cpu::gemm_packed(s.M, s.N, s.K, A.data(), s.K, Wp, C2.data(), s.N, nullptr); });
    double t3 = median_ms([&] {
      rlx::cpu::gemm_f32(false, true, s.M, s.N, s.K, A.data(), s.K, W.data(), s.K, C3.data(), s.N);
    });
    std::free(Wp);
    std::printf("%-22s %5d %5d %5d %2s | %9.1f %11.1f %11.1f | %8.1e %5.2f\n", s.what, s.M, s.N, s.K, "NT", mflop / t1,
                mflop / t2, mflop / t3, std::max(max_diff(C, C2), max_diff(C, C3)), load_avg());
  }

  // Training: per layer [in -> out] at batch B: forward X[B,in]·W[in,out] (NN), weight gradient
  // Xᵀ·dY = [in,B]·[B,out] (TN), input gradient dY·Wᵀ = [B,out]·[out,in] (NT, not for the first layer).
  struct T { int M, N, K; bool ta, tb; std::string what; };
  std::vector<T> train;
  for (int B : {128, 1024})
    for (std::vector<int> dims : {std::vector<int>{784, 128, 10}, std::vector<int>{784, 512, 512, 10}}) {
      std::string net = dims.size() == 3 ? "mlp1" : "mlp2";
      for (size_t l = 0; l + 1 < dims.size(); ++l) {
        int in = dims[l], out = dims[l + 1];
        std::string tag = net + " b" + std::to_string(B) + " L" + std::to_string(l + 1);
        train.push_back({B, out, in, false, false, tag + " fwd"});
        train.push_back({in, out, B, true, false, tag + " dW"});
        if (l > 0) train.push_back({B, in, out, false, true, tag + " dX"});
      }
    }
  for (const T& s : train) {
    if (!only.empty() && s.what.find(only) == std::string::npos) continue;
    // Stored operands: A is [M,K] or (ta) [K,M]; B is [K,N] or (tb) [N,K].
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    auto A = fill(size_t(s.M) * s.K, 3), Bm = fill(size_t(s.K) * s.N, 4);
    std::vector<float> C(size_t(s.M) * s.N), C3(C.size());
    const double mflop = 2.0 * s.M * s.N * s.K / 1e6;
    double t1 = median_ms([&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.M, s.N, s.K,
                  1.f, A.data(), lda, Bm.data(), ldb, 0.f, C.data(), s.N);
    });
    double t3 = median_ms([&] {
      rlx::cpu::gemm_f32(s.ta, s.tb, s.M, s.N, s.K, A.data(), lda, Bm.data(), ldb, C3.data(), s.N);
    });
    std::printf("%-22s %5d %5d %5d %c%c | %9.1f %11s %11.1f | %8.1e %5.2f\n", s.what.c_str(), s.M, s.N, s.K,
                s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', mflop / t1, "-", mflop / t3, max_diff(C, C3), load_avg());
  }
}
