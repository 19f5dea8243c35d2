// GEMM speed on the cpu device's shapes: OpenBLAS (cblas_sgemm, its own threads) vs RLX's own packed
// GEMM (src/backends/cpu/gemm_avx2.cpp) on our pool, with its AVX2 6x16 tiles and, where the host has
// AVX-512, its AVX-512 12x32 tiles (gemm_avx512.cpp) side by side (gemm_*_with picks the family).
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
// Build (one line): g++ -O3 -std=c++20 -Isrc -Iinclude -fno-trapping-math bench/gemm_shapes.cpp
//          src/backends/cpu/gemm_avx2.cpp src/backends/cpu/gemm_avx512.cpp src/backends/cpu/gemm_narrow.cpp
//          src/backends/cpu/parallel.cpp src/backends/cpu/isa.cpp -o /tmp/gemm_shapes -lopenblas -lpthread
// Run:   RLX_NUM_THREADS=1 /tmp/gemm_shapes 1      (CPU time, 1 thread)
//        RLX_NUM_THREADS=2 /tmp/gemm_shapes 2      (wall time, 2 threads)
//        RLX_NUM_THREADS=2 /tmp/gemm_shapes 2cpu   (process CPU time, 2 threads)
//        optional 2nd argument: a substring of the shape names to run only those.
//        OpenBLAS 0.3.21 picks its kernels by CPU model and falls back to SSE3 ("Prescott") on models it
//        does not know (Intel family 6 model 207): OPENBLAS_CORETYPE=SkylakeX gives it its AVX-512 kernels.
// The last section ("step mlp1 b128" ...; filter "step" runs only it) times one SGD
// step's GEMMs in the step's order with the step's fused epilogues (bias+ReLU, bias, the ReLU mask,
// the SGD update) on distinct buffers, with GEMM_STEP_GAP_MS (default 1) of single-threaded busy work
// between steps (the loss head; the pool's workers fall asleep meanwhile, as in the step); per GEMM
// the median of its own time, and the median step sum.
// The "bmm" section times the general contractions (matmul, batched dot_general) on the OpenBLAS
// route and on RLX's (src/backends/cpu/gemm.cpp), each as the kernel runs them.
// GEMM_MASK_ROWS=1 applies the mask as a rows_done pass (the old way) instead of GemmEpi::mask.
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
#include "backends/cpu/parallel.h"

extern "C" void openblas_set_num_threads(int);

static bool g_cpu_clock = false, g_proc_clock = false;
static bool g_mask_rows = std::getenv("GEMM_MASK_ROWS") && std::atoi(std::getenv("GEMM_MASK_ROWS"));
static double g_gap_ms = std::getenv("GEMM_STEP_GAP_MS") ? std::atof(std::getenv("GEMM_STEP_GAP_MS")) : 1.0;
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
  using rlx::cpu::CpuIsa;
  const bool has512 = rlx::cpu::cpu_isa_host() >= CpuIsa::Avx512;  // else the avx512 columns read "-"
  std::printf("# columns: rlx packed (weight packed once) and rlx gemm_f32 (packed per call), each with the AVX2\n"
              "# and the AVX-512 kernels (host: %s)\n", rlx::cpu::cpu_isa_features().c_str());
  std::printf("%-22s %5s %5s %5s %2s | %8s | %6s %6s | %6s %6s | %8s %5s\n", "shape", "M", "N", "K", "op", "openblas",
              "packed", "avx512", "f32", "avx512", "max|diff|", "load");
  std::printf("%-22s %5s %5s %5s %2s | %8s | %6s %6s | %6s %6s |\n", "", "", "", "", "", "", "avx2", "", "avx2", "");
  auto col = [](bool on, double v) {  // an AVX-512 column: "-" without AVX-512
    char b[16];
    if (on) std::snprintf(b, sizeof b, "%6.1f", v);
    else std::snprintf(b, sizeof b, "%6s", "-");
    return std::string(b);
  };

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
    double tp[2] = {}, tf[2] = {}, diff = 0;
    for (int l = 0; l < (has512 ? 2 : 1); ++l) {
      const CpuIsa isa = l ? CpuIsa::Avx512 : CpuIsa::Avx2;
      tp[l] = median_ms([&] { rlx::cpu::gemm_packed_with(isa, s.M, s.N, s.K, A.data(), s.K, Wp, C2.data(), s.N, nullptr); });
      tf[l] = median_ms([&] {
        rlx::cpu::gemm_f32_with(isa, false, true, s.M, s.N, s.K, A.data(), s.K, W.data(), s.K, C3.data(), s.N);
      });
      diff = std::max({diff, max_diff(C, C2), max_diff(C, C3)});
    }
    std::free(Wp);
    std::printf("%-22s %5d %5d %5d %2s | %8.1f | %6.1f %s | %6.1f %s | %8.1e %5.2f\n", s.what, s.M, s.N, s.K, "NT",
                mflop / t1, mflop / tp[0], col(has512, mflop / tp[1]).c_str(), mflop / tf[0], col(has512, mflop / tf[1]).c_str(), diff,
                load_avg());
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
    if (only == "step" || (!only.empty() && s.what.find(only) == std::string::npos)) continue;
    // Stored operands: A is [M,K] or (ta) [K,M]; B is [K,N] or (tb) [N,K].
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    auto A = fill(size_t(s.M) * s.K, 3), Bm = fill(size_t(s.K) * s.N, 4);
    std::vector<float> C(size_t(s.M) * s.N), C3(C.size());
    const double mflop = 2.0 * s.M * s.N * s.K / 1e6;
    double t1 = median_ms([&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.M, s.N, s.K,
                  1.f, A.data(), lda, Bm.data(), ldb, 0.f, C.data(), s.N);
    });
    double tf[2] = {}, diff = 0;
    for (int l = 0; l < (has512 ? 2 : 1); ++l) {
      const CpuIsa isa = l ? CpuIsa::Avx512 : CpuIsa::Avx2;
      tf[l] = median_ms([&] {
        rlx::cpu::gemm_f32_with(isa, s.ta, s.tb, s.M, s.N, s.K, A.data(), lda, Bm.data(), ldb, C3.data(), s.N);
      });
      diff = std::max(diff, max_diff(C, C3));
    }
    std::printf("%-22s %5d %5d %5d %c%c | %8.1f | %6s %6s | %6.1f %s | %8.1e %5.2f\n", s.what.c_str(), s.M, s.N, s.K,
                s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', mflop / t1, "-", "-", mflop / tf[0], col(has512, mflop / tf[1]).c_str(), diff,
                load_avg());
  }

  // One SGD step's GEMMs in the step's order with its fused epilogues (forward
  // bias+ReLU / bias, the backward ReLU mask as rows_done, the SGD update as residual W with alpha
  // -lr), on distinct buffers as in the step (so operands come from L2/L3 as they do there), 1 ms of
  // other work between steps. Per GEMM: median over the steps of its own time; "sum" is the median
  // step total of the GEMMs. Run with filter "step" (or a net name, e.g. "mlp2 b128").
  for (int B : {128, 1024})
    for (std::vector<int> dims : {std::vector<int>{784, 128, 10}, std::vector<int>{784, 512, 512, 10}}) {
      const std::string net = std::string(dims.size() == 3 ? "mlp1" : "mlp2") + " b" + std::to_string(B);
      if (!only.empty() && only != "step" && std::string("step " + net).find(only) == std::string::npos) continue;
      const size_t L = dims.size() - 1;
      std::vector<std::vector<float>> W(L), Wn(L), bias(L), h(L + 1), dh(L + 1);
      h[0] = fill(size_t(B) * dims[0], 5);
      for (size_t l = 0; l < L; ++l) {
        W[l] = fill(size_t(dims[l]) * dims[l + 1], 6 + unsigned(l));
        for (auto& x : W[l]) x *= 0.1f;
        Wn[l].resize(W[l].size());
        bias[l] = fill(size_t(dims[l + 1]), 9);
        h[l + 1].resize(size_t(B) * dims[l + 1]);
        dh[l + 1].resize(h[l + 1].size());
      }
      dh[L] = fill(size_t(B) * dims[L], 12);
      struct MaskCtx { const float* mask; float* C; int64_t n; };
      auto mask_rows = [](void* p, int64_t r0, int64_t r1) {
        auto& m = *static_cast<MaskCtx*>(p);
        const float* __restrict mk = m.mask + r0 * m.n;
        float* __restrict c = m.C + r0 * m.n;
        for (int64_t i = 0, e = (r1 - r0) * m.n; i < e; ++i) c[i] = mk[i] > 0.f ? c[i] : 0.f;
      };
      struct G { std::string what; double mflop; std::function<void()> run; std::vector<double> ms; };
      std::vector<G> gs;
      std::vector<MaskCtx> mctx(L + 1);
      for (size_t l = 0; l < L; ++l) {  // forward
        const int K = dims[l], N = dims[l + 1];
        gs.push_back({"L" + std::to_string(l + 1) + " fwd" + (l + 1 < L ? "+bias+relu" : "+bias"),
                      2.0 * B * N * K / 1e6, [&, l, K, N] {
                        rlx::cpu::GemmEpi e;
                        e.bias = bias[l].data();
                        if (l + 1 < L) e.act = rlx::cpu::GemmAct::Relu;
                        rlx::cpu::gemm_f32(false, false, B, N, K, h[l].data(), K, W[l].data(), N, h[l + 1].data(), N,
                                           0.f, true, &e);
                      }, {}});
      }
      for (size_t l = L; l-- > 0;) {  // backward: dW (SGD) then dX (ReLU mask)
        const int M = dims[l], N = dims[l + 1];
        gs.push_back({"L" + std::to_string(l + 1) + " dW+sgd", 2.0 * M * N * B / 1e6, [&, l, M, N] {
                        rlx::cpu::GemmEpi e;
                        e.residual = W[l].data();
                        e.ldr = N;
                        rlx::cpu::gemm_f32(true, false, M, N, B, h[l].data(), M, dh[l + 1].data(), N, Wn[l].data(), N,
                                           0.f, true, &e, -0.01f);
                      }, {}});
        if (l == 0) continue;
        gs.push_back({"L" + std::to_string(l + 1) + " dX+mask", 2.0 * B * M * N / 1e6, [&, l, M, N] {
                        mctx[l] = {h[l].data(), dh[l].data(), M};
                        rlx::cpu::GemmEpi e;
                        if (g_mask_rows) {  // the old way: a pass over each finished row block
                          e.rows_done = mask_rows;
                          e.ctx = &mctx[l];
                        } else {
                          e.mask = h[l].data();
                          e.ldm = M;
                        }
                        rlx::cpu::gemm_f32(false, true, B, M, N, dh[l + 1].data(), N, W[l].data(), N, dh[l].data(), M,
                                           0.f, true, &e);
                      }, {}});
      }
      std::vector<double> total;
      const int steps = B == 128 ? 400 : 60;
      for (int it = 0; it < steps + 5; ++it) {
        double sum = 0;
        for (G& g : gs) {
          double a = now_ms();
          g.run();
          double t = now_ms() - a;
          sum += t;
          if (it >= 5) g.ms.push_back(t);
        }
        if (it >= 5) total.push_back(sum);
        const double spin = now_ms();  // the loss head and other small kernels: ~1 ms on one thread
        while (now_ms() - spin < (g_cpu_clock || g_proc_clock ? 0.0 : g_gap_ms)) {
        }
      }
      auto med = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      double mflop_all = 0;
      for (G& g : gs) {
        const double m = med(g.ms);
        mflop_all += g.mflop;
        std::printf("step %-12s %-16s %8.1f MFLOP %8.3f ms %7.1f GFLOP/s\n", net.c_str(), g.what.c_str(), g.mflop, m,
                    g.mflop / m);
      }
      const double m = med(total);
      std::printf("step %-12s %-16s %8.1f MFLOP %8.3f ms %7.1f GFLOP/s  (load %.2f)\n", net.c_str(), "sum", mflop_all, m,
                  mflop_all / m, load_avg());
    }

  // The general contractions (matmul, batched dot_general: C[b] = A[b]·B[b], NN, nothing packed
  // ahead), the way the cpu kernels run them (src/backends/cpu/gemm.cpp): "openblas" is the
  // OpenBLAS route (RLX_GEMM=blas: one cblas_sgemm per batch element, OpenBLAS on one thread with
  // M split over our pool from 10 MFLOP, else on the calling thread), "rlx" the default route
  // (gemm_f32; batch elements under 10 MFLOP split over the pool, each on one thread). Run with
  // filter "bmm".
  struct BM { int B, M, N, K; const char* what; };
  const std::vector<BM> bmm = {{12, 128, 128, 64, "bmm attn s128 QK"}, {12, 128, 64, 128, "bmm attn s128 PV"},
                               {96, 128, 128, 32, "bmm b8 heads QK"},   {8, 16, 16, 64, "bmm tiny"},
                               {1, 512, 512, 512, "bmm matmul 512"},    {1, 1024, 1024, 1024, "bmm matmul 1024"},
                               {1, 8, 4096, 1024, "bmm matmul M8"},     {1, 32, 4096, 1024, "bmm matmul M32"},
                               {1, 64, 4096, 1024, "bmm matmul M64"},   {1, 128, 1024, 1024, "bmm matmul M128"},
                               {1, 16, 384, 384, "bmm matmul M16 small"},     {4, 256, 768, 768, "bmm batched 256"}};
  for (const BM& s : bmm) {
    if (!only.empty() && std::string(s.what).find(only) == std::string::npos) continue;
    auto A = fill(size_t(s.B) * s.M * s.K, 13), Bm = fill(size_t(s.B) * s.K * s.N, 14);
    std::vector<float> C(size_t(s.B) * s.M * s.N), C3(C.size());
    const double mflop = 2.0 * s.B * s.M * s.N * s.K / 1e6, one = 2.0 * s.M * s.N * s.K;
    openblas_set_num_threads(1);
    const size_t a_sz = size_t(s.M) * s.K, b_sz = size_t(s.K) * s.N, c_sz = size_t(s.M) * s.N;
    double t1 = median_ms([&] {
      for (int b = 0; b < s.B; ++b) {
        const float *a = A.data() + b * a_sz, *bb = Bm.data() + b * b_sz;
        float* c = C.data() + b * c_sz;
        if (one < 1e7 || nt == 1) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.M, s.N, s.K, 1.f, a, s.K, bb, s.N, 0.f, c, s.N);
          continue;
        }
        rlx::cpu::parallel_for(s.M, 16, [&](int64_t r0, int64_t r1) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(r1 - r0), s.N, s.K, 1.f, a + r0 * s.K, s.K, bb, s.N,
                      0.f, c + r0 * s.N, s.N);
        });
      }
    });
    double t2 = median_ms([&] {
      if (s.B > 1 && one < 1e7) {
        rlx::cpu::parallel_for(s.B, 1, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b)
            rlx::cpu::gemm_f32(false, false, s.M, s.N, s.K, A.data() + b * a_sz, s.K, Bm.data() + b * b_sz, s.N,
                               C3.data() + b * c_sz, s.N, 0.f, false);
        });
        return;
      }
      for (int b = 0; b < s.B; ++b)
        rlx::cpu::gemm_f32(false, false, s.M, s.N, s.K, A.data() + b * a_sz, s.K, Bm.data() + b * b_sz, s.N,
                           C3.data() + b * c_sz, s.N);
    });
    openblas_set_num_threads(nt);
    std::printf("%-22s B=%-3d %5d %5d %5d NN | openblas %6.1f | rlx %6.1f | %8.1e %5.2f\n", s.what, s.B, s.M, s.N, s.K,
                mflop / t1, mflop / t2, max_diff(C, C3), load_avg());
  }
}
