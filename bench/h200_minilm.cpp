// RLX side of the H200 MiniLM benchmark (bench/h200_minilm.py drives it and runs the peers).
// Builds a MiniLM-L6-shaped BERT encoder (6 layers, hidden 384, 12 heads, FFN 1536, erf-GELU) from
// the seeded weights the Python script wrote, compiles it for cuda per (dtype, batch), times
//   rlx/device:      the kernel schedule alone (ids and hidden states stay on the GPU; graph replay)
//   rlx/end-to-end:  CompiledModel::run (ids uploaded, hidden states downloaded to the host)
// and writes the rows plus each configuration's output (.npy) for the parity check. Every
// executable comes from the public pipeline (CompiledModel::executable(): shape specialization,
// verification, the device's LIR schedule), driven through Executable's resident API.
// RLX_BENCH_DEVICE=vulkan|opengl|gpu runs the same model on a portable GPU device instead: only the
// end-to-end rows then (those executors have no device-event timer), tagged with the device.
// Usage: h200_minilm WEIGHTS_DIR OUT_DIR [batches=1,32,128] [dtypes=f32,f16] [iters=100]
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench_util.h"
#include "rlx/builder.h"
#include "rlx/npy.h"
#include "rlx/session.h"
#include "runtime/backend.h"

using namespace rlx;

namespace {

using rlx_bench::pct;
using rlx_bench::split;

constexpr int64_t kSeq = 128, kHidden = 384, kHeads = 12, kLayers = 6;

Tensor as(const Tensor& t, DType dt) {
  if (t.dtype() == dt) return t;
  Tensor r(dt, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) r.set(i, t.get(i));
  return r;
}

struct Weights {
  std::string dir;
  Tensor get(const std::string& n, DType dt) const { return as(read_npy(dir + "/" + n + ".npy"), dt); }
};

Graph build(const Weights& w, DType dt, int64_t B) {
  Graph g;
  Builder b(g);
  auto c = [&](const std::string& n) { return b.constant(w.get(n, dt)); };
  auto ids = b.input("input_ids", DType::i64, {B, kSeq});
  auto x = b.op1(OpKind::Embedding, {c("word_embeddings"), ids});
  x = b.add(b.add(x, c("position_embeddings")), c("token_type_embeddings"));
  x = b.layer_norm(x, c("emb_ln_g"), c("emb_ln_b"), 1e-12);
  auto heads = [&](ValueId t) { return b.transpose(b.reshape(t, {B, kSeq, kHeads, kHidden / kHeads}), {0, 2, 1, 3}); };
  for (int l = 0; l < kLayers; ++l) {
    std::string p = "l" + std::to_string(l) + "_";
    auto q = heads(b.linear(x, c(p + "wq"), c(p + "bq")));
    auto k = heads(b.linear(x, c(p + "wk"), c(p + "bk")));
    auto v = heads(b.linear(x, c(p + "wv"), c(p + "bv")));
    auto a = b.reshape(b.transpose(b.attention(q, k, v), {0, 2, 1, 3}), {B, kSeq, kHidden});
    x = b.layer_norm(b.add(x, b.linear(a, c(p + "wo"), c(p + "bo"))), c(p + "ln1_g"), c(p + "ln1_b"), 1e-12);
    auto f = b.linear(b.linear(x, c(p + "w1"), c(p + "b1"), "gelu"), c(p + "w2"), c(p + "b2"));
    x = b.layer_norm(b.add(x, f), c(p + "ln2_g"), c(p + "ln2_b"), 1e-12);
  }
  b.output(x);
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: h200_minilm WEIGHTS_DIR OUT_DIR [batches] [dtypes] [iters]\n");
    return 2;
  }
  Weights w{argv[1]};
  std::string out = argv[2];
  auto batches = split(argc > 3 ? argv[3] : "1,32,128");
  auto dtypes = split(argc > 4 ? argv[4] : "f32,f16");
  int iters = argc > 5 ? std::atoi(argv[5]) : 100;
  const char* dev_env = std::getenv("RLX_BENCH_DEVICE");
  const std::string device = dev_env && *dev_env ? dev_env : "cuda";
  std::ofstream rows(out + "/rlx_rows" + (device == "cuda" ? std::string() : "_" + device) + ".jsonl");
  try {
    for (auto& dn : dtypes) {
      DType dt;
      if (!parse_dtype(dn, &dt)) throw std::runtime_error("bad dtype " + dn);
      for (auto& bs : batches) {
        int64_t B = std::stoll(bs);
        Tensor ids = read_npy(w.dir + "/input_ids_b" + bs + ".npy");
        auto t0 = std::chrono::steady_clock::now();
        Graph g = build(w, dt, B);
        CompileOptions co;
        co.device = device;
        CompiledModel model(g, co);  // the graph is kept for the variants' and the profile's models
        Executable& exe = model.executable();
        auto res = model.run({ids});
        double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const bool cu = device == "cuda";
        write_npy(out + "/rlx_out_" + (cu ? "" : device + "_") + dn + "_b" + bs + ".npy", as(res[0], DType::f32));
        if (!cu) {  // a portable GPU device: end-to-end only
          for (int i = 0; i < 3; ++i) model.run({ids});
          std::vector<double> e2e;
          for (int i = 0; i < std::max(10, iters / 4); ++i) {
            auto s = std::chrono::steady_clock::now();
            model.run({ids});
            e2e.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
          }
          double p50 = pct(e2e, 0.5);
          std::printf("rlx %s %s b%s: end-to-end p50 %.3f ms p90 %.3f | compile + first run %.1f s\n", device.c_str(),
                      dn.c_str(), bs.c_str(), p50, pct(e2e, 0.9), compile_s);
          char line[512];
          std::snprintf(line, sizeof line,
                        "{\"system\": \"rlx\", \"variant\": \"end-to-end host I/O\", \"method\": \"wall-host-io\", "
                        "\"device\": \"%s\", \"workload\": \"minilm-l6 encoder (random weights)\", \"dtype\": \"%s\", "
                        "\"batch\": %lld, \"seq\": %lld, \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"throughput\": %.1f, "
                        "\"unit\": \"seq/s\", \"peak_rss_mb\": null}\n",
                        device.c_str(), dn.c_str(), static_cast<long long>(B), static_cast<long long>(kSeq), p50,
                        pct(e2e, 0.9), B / (p50 / 1000.0));
          rows << line;
          rows.flush();
          continue;
        }
        exe.resident_upload({ids});
        auto dev = exe.resident_time_each(20, iters);
        std::vector<double> e2e;
        for (int i = 0; i < std::max(10, iters / 4); ++i) {
          auto s = std::chrono::steady_clock::now();
          model.run({ids});
          e2e.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
        }
        std::printf("rlx cuda %s b%s: device p50 %.3f ms p90 %.3f | end-to-end p50 %.3f ms | compile %.1f s | %s\n",
                    dn.c_str(), bs.c_str(), pct(dev, 0.5), pct(dev, 0.9), pct(e2e, 0.5), compile_s,
                    exe.summary().c_str());
        char line[512];
        struct Timed {
          const char *variant, *method;
          const std::vector<double>& v;
        };
        for (auto [variant, method, v] :
             {Timed{"device-resident, CUDA graph", "cuda-events", dev}, Timed{"end-to-end host I/O", "wall-host-io", e2e}}) {
          double p50 = pct(v, 0.5);
          std::snprintf(line, sizeof line,
                        "{\"system\": \"rlx\", \"variant\": \"%s\", \"method\": \"%s\", \"device\": \"cuda\", \"workload\": "
                        "\"minilm-l6 encoder (random weights)\", \"dtype\": \"%s\", \"batch\": %lld, \"seq\": %lld, "
                        "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"throughput\": %.1f, \"unit\": \"seq/s\", "
                        "\"peak_rss_mb\": null}\n",
                        variant, method, dn.c_str(), static_cast<long long>(B), static_cast<long long>(kSeq), p50, pct(v, 0.9),
                        B / (p50 / 1000.0));
          rows << line;
        }
        rows.flush();
        // RLX_BENCH_VARIANTS="ENV=V;ENV=V,ENV2=V2": the same model compiled again under
        // each setting (e.g. RLX_CUDA_OWN_GEMM=0 for cuBLASLt only), device p50 printed (not in the rows).
        if (const char* vs = std::getenv("RLX_BENCH_VARIANTS")) {
          std::stringstream all(vs);
          std::string var;
          while (std::getline(all, var, ';')) {
            auto kvs = split(var);
            for (auto& kv : kvs) setenv(kv.substr(0, kv.find('=')).c_str(), kv.substr(kv.find('=') + 1).c_str(), 1);
            CompiledModel vmodel(g, co);
            Executable& vexe = vmodel.executable();
            auto vres = vmodel.run({ids});
            double err = 0;
            for (int64_t i = 0; i < res[0].numel(); ++i) err = std::max(err, std::abs(vres[0].get(i) - res[0].get(i)));
            vexe.resident_upload({ids});
            auto vdev = vexe.resident_time_each(20, iters);
            std::printf("  variant [%s] %s b%s: device p50 %.3f ms p90 %.3f | max |d| vs default %.3g | %s\n", var.c_str(),
                        dn.c_str(), bs.c_str(), pct(vdev, 0.5), pct(vdev, 0.9), err, vexe.summary().c_str());
            for (auto& kv : kvs) unsetenv(kv.substr(0, kv.find('=')).c_str());
          }
        }
        if (dt == DType::f16 || B == 32) {  // per-kernel profile of eager runs, for the report
          setenv("RLX_PROFILE", "1", 1);
          CompiledModel pmodel(g, co);
          for (int i = 0; i < 5; ++i) pmodel.run({ids});
          unsetenv("RLX_PROFILE");
          std::ofstream pf(out + "/rlx_profile_" + dn + "_b" + bs + ".txt");
          pf << exe.summary() << "\n" << pmodel.profile();
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h200_minilm: %s\n", e.what());
    return 1;
  }
  return 0;
}
