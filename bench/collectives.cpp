// One rank of bench/collectives.py (run under mpirun -n N): all_reduce(sum, f32) and all_gather
// latency from 8 B to --max-bytes, RLX (a compiled one-node graph on cpu: the op table, dispatch,
// the cpu kernel, the Communicator) next to the same MPI call made directly (an OSU-style loop:
// warm-up, then timed iterations between barriers) on the same buffers, in the same run.
// Rank 0 prints one JSON row per (system, op, size) on stdout.
#define OMPI_SKIP_MPICXX 1  // the C API only (no MPI C++ bindings to link)
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "rlx/builder.h"
#include "rlx/session.h"

using namespace rlx;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Per-iteration times (s), the slowest rank's for each iteration.
template <class F>
std::vector<double> time_loop(int iters, int warmup, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    f();
    double dt = now() - t0, worst = 0;
    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t.push_back(worst);
  }
  std::sort(t.begin(), t.end());
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_bytes = argc > 1 ? std::atoll(argv[1]) : (256ll << 20);
  double budget_s = argc > 2 ? std::atof(argv[2]) : 0.5;  // per (op, size, system)
  dist::set_process(dist::make_mpi());
  dist::Communicator& c = dist::current();
  const int n = c.size(), rank = c.rank();
  std::vector<int64_t> world;
  for (int i = 0; i < n; ++i) world.push_back(i);
  for (const std::string op : {"all_reduce", "all_gather"}) {
    std::vector<int64_t> sizes;  // 8 B, 64 B, ... (x8), and max_bytes itself
    for (int64_t s = 8; s < max_bytes; s *= 8) sizes.push_back(s);
    sizes.push_back(max_bytes);
    for (int64_t bytes : sizes) {
      const int64_t count = bytes / 4;  // f32 elements per rank
      Graph g;
      Builder b(g);
      ValueId x = b.input("x", DType::f32, Shape{count});
      b.output(op == "all_reduce" ? b.op1(OpKind::AllReduce, {x}, {{"groups", world}})
                                  : b.op1(OpKind::AllGather, {x}, {{"groups", world}}));
      CompiledModel m(g, CompileOptions{});
      std::vector<Tensor> in{Tensor(DType::f32, {count})};
      std::vector<Tensor> out{Tensor(DType::f32, {op == "all_reduce" ? count : count * n})};
      for (int64_t i = 0; i < count; ++i) in[0].data<float>()[i] = static_cast<float>(i % 7 + rank);
      auto rlx_call = [&] { m.run_into(in, out); };
      auto mpi_call = [&] {
        if (op == "all_reduce")
          MPI_Allreduce(in[0].raw(), out[0].raw(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else
          MPI_Allgather(in[0].raw(), static_cast<int>(count), MPI_FLOAT, out[0].raw(), static_cast<int>(count), MPI_FLOAT,
                        MPI_COMM_WORLD);
      };
      // Iterations from one probe call, so each (op, size, system) takes about budget_s.
      double t0 = now();
      mpi_call();
      double probe = now() - t0, probe_max = 0;
      MPI_Allreduce(&probe, &probe_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      int iters = static_cast<int>(std::clamp(budget_s / std::max(probe_max, 1e-6), 3.0, 2000.0));
      int warmup = std::max(1, iters / 10);
      for (int sys = 0; sys < 2; ++sys) {
        std::vector<double> t = sys == 0 ? time_loop(iters, warmup, mpi_call) : time_loop(iters, warmup, rlx_call);
        if (rank != 0) continue;
        double p50 = t[t.size() / 2], p90 = t[std::min(t.size() - 1, t.size() * 9 / 10)];
        // Bus bandwidth as nccl-tests define it: all_reduce 2(n-1)/n * S / t, all_gather (n-1)/n * (n S) / t.
        double busbw = op == "all_reduce" ? 2.0 * (n - 1) / n * bytes / p50 : (n - 1.0) / n * n * bytes / p50;
        std::printf("{\"system\": \"%s\", \"variant\": \"%s\", \"device\": \"cpu\", \"workload\": \"%s %lld B x %d ranks\", "
                    "\"dtype\": \"f32\", \"batch\": %d, \"seq\": null, \"p50_ms\": %.6g, \"p90_ms\": %.6g, "
                    "\"throughput\": %.6g, \"unit\": \"GB/s bus bandwidth\", \"peak_rss_mb\": null, \"iters\": %d, \"bytes\": %lld, \"ranks\": %d, \"op\": \"%s\"}\n",
                    sys == 0 ? "openmpi" : "rlx", sys == 0 ? "MPI call in an OSU-style loop" : "compiled graph, cpu, Communicator (mpi)",
                    op.c_str(), static_cast<long long>(bytes), n, n, p50 * 1e3, p90 * 1e3, busbw / 1e9, iters,
                    static_cast<long long>(bytes), n, op.c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
