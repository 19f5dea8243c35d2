// `rlx compile MODEL --device fpga --out DIR [--parallel P]` and `rlx run MODEL --device fpga`: the
// int8 MLP as SystemVerilog (src/codegen/fpga), simulated with Verilator.
#include <cstdio>
#include <iostream>

#include "codegen/fpga/fpga.h"
#include "commands.h"
#include "rlx/npy.h"

namespace rlx::cli {

int compile_fpga(const Graph& g, const Args& a) {
  if (!a.has("out")) usage_fail("compile --device fpga needs --out DIR (the project is written there)");
  fpga::Options o;
  o.parallel = static_cast<int>(a.integer("parallel"));
  fpga::Model m = fpga::plan_mlp(g);
  std::vector<int> P = fpga::layer_parallelism(m, o);
  std::string dir = a.get("out");
  fpga::write_project(m, dir, o);
  std::printf("fpga: %zu layers, input %lld bytes, output %lld x %s\n", m.layers.size(),
              static_cast<long long>(m.in_features()), static_cast<long long>(m.out_features()),
              m.layers.back().int_out ? "int8" : "i32 (f32 epilogue on the host)");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const fpga::Layer& L = m.layers[i];
    long long G = (L.N + P[i] - 1) / P[i];
    std::printf("  layer %zu '%s': %lld -> %lld%s, P %d, %lld groups x %lld cycles, weight ROM %lld x %d bits\n", i,
                L.name.c_str(), static_cast<long long>(L.K), static_cast<long long>(L.N), L.relu ? " relu" : "", P[i], G,
                static_cast<long long>(L.K), G * L.K, P[i] * L.wbits);
  }
  std::string miss = fpga::missing_tools();
  std::printf("wrote %s (make -C %s run ROWS=N IN=bytes.bin: simulate; make synth-xilinx / synth-ice40: Yosys)%s%s\n",
              dir.c_str(), dir.c_str(), miss.empty() ? "" : "; note: ", miss.c_str());
  return 0;
}

int run_fpga(const Graph& g, const std::map<std::string, Tensor>& inputs, const Args& a) {
  if (inputs.size() != 1) usage_fail("run --device fpga takes one --input (the model's input), got ", inputs.size());
  fpga::Options o;
  o.parallel = static_cast<int>(a.integer("parallel"));
  fpga::SimStats st;
  Tensor y = fpga::run_mlp(g, inputs.begin()->second, o, &st);
  std::string name = fpga::plan_mlp(g).output;
  std::fprintf(stderr,
               "[fpga] %lld images in %lld cycles (Verilator, %s); latency %lld cycles (first), %lld (max); %.1f cycles "
               "per image in steady state; project %s\n",
               static_cast<long long>(st.images), static_cast<long long>(st.cycles),
               st.cached ? "cached build" : "built now", static_cast<long long>(st.latency_first),
               static_cast<long long>(st.latency_max), st.interval, st.dir.c_str());
  std::cout << name << " = " << y.str(8) << "\n";
  std::string out = a.get("output");
  if (!out.empty()) {
    if (out.size() > 4 && out.compare(out.size() - 4, 4, ".npy") == 0) write_npy(out, y);
    else write_npz(out, {{name, y}});
    std::cout << "wrote 1 array to " << out << "\n";
  }
  return 0;
}

}  // namespace rlx::cli
