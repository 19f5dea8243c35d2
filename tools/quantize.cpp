// `rlx quantize`: post-training static int8 quantization of an ONNX model into a QDQ model, with a
// per-layer error table (src/formats/onnx/quantize.h).
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "formats/onnx/quantize.h"
#include "progress.h"

namespace rlx::cli {

int cmd_quantize(const Args& a) {
  onnx::QuantizeOptions o;
  std::string model = a.positional.at(0), calib = a.get("calib"), out = a.get("out");
  o.method = a.get("method");
  o.percentile = a.number("percentile");
  o.per_channel = a.has("per-channel");
  o.reduce_range = a.get("reduce-range");
  o.keep_float = a.get("keep-float");
  o.budget = a.number("budget");
  o.device = a.get("device");
  o.bind = bindings(a);
  char* end = nullptr;
  long n = std::strtol(calib.c_str(), &end, 10);
  if (!calib.empty() && end && *end == '\0') {
    if (n < 1) usage_fail("quantize: --calib N needs N >= 1");
    o.calib_batches = static_cast<int>(n);
  } else {
    o.calib_file = calib;
  }
  bool quiet = a.has("quiet");
  Progress prog("calibrating", quiet);
  o.progress = [&](int done, int total) { prog.update(static_cast<size_t>(done), static_cast<size_t>(total)); };
  onnx::QuantizeReport r = onnx::quantize_onnx(model, out, o);
  prog.done();
  std::printf("%-40s %-6s %9s %10s %9s  %s\n", "layer", "path", "local dB", "SQNR dB", "cosine", "note");
  int q8 = 0;
  for (auto& l : r.layers) {
    q8 += l.int8;
    if (l.sqnr_db == 0 && l.cosine == 0)
      std::printf("%-40s %-6s %9s %10s %9s  %s\n", l.name.c_str(), "float", "-", "-", "-", l.why.c_str());
    else
      std::printf("%-40s %-6s %9.2f %10.2f %9.6f  %s\n", l.name.c_str(), l.int8 ? "int8" : "float", l.local_sqnr_db,
                  l.sqnr_db, l.cosine, l.why.c_str());
  }
  if (o.keep_float == "auto")
    std::printf("keep-float auto: %zu layer(s) in float for output cosine >= %.4f (all int8: %.6f; %d models evaluated)\n",
                r.kept_float.size(), o.budget, r.all_int8_cosine, r.evaluations);
  std::printf("output: SQNR %.2f dB, cosine %.6f vs float (%d calibration batches, %s%s%s)\n", r.output_sqnr_db,
              r.output_cosine, r.batches, o.method.c_str(), o.per_channel ? ", per-channel weights" : "",
              r.reduce_range ? ", 7-bit weights" : "");
  std::printf("wrote %s: %d of %zu MatMul/Gemm layers in int8\n", out.c_str(), q8, r.layers.size());
  return 0;
}

}  // namespace rlx::cli
