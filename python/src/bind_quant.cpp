// rlx._rlx.quantize_onnx: post-training static int8 of an ONNX model (src/formats/onnx/quantize.h),
// behind rlx.quantize.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include "formats/onnx/quantize.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rlx {

void bind_quant(nb::module_& m) {
  m.def(
      "quantize_onnx",
      [](const std::string& in, const std::string& out, const std::string& method, double percentile, bool per_channel,
         int calib_batches, const std::string& calib_file, const std::map<std::string, int64_t>& bind,
         const std::string& device, const std::string& reduce_range, const std::string& keep_float, double budget) {
        onnx::QuantizeOptions o;
        o.method = method, o.percentile = percentile, o.per_channel = per_channel;
        o.calib_batches = calib_batches, o.calib_file = calib_file, o.device = device;
        o.reduce_range = reduce_range, o.keep_float = keep_float, o.budget = budget;
        for (auto& [k, v] : bind) o.bind[k] = v;
        onnx::QuantizeReport r;
        {
          nb::gil_scoped_release nogil;
          r = onnx::quantize_onnx(in, out, o);
        }
        nb::list layers;
        for (auto& l : r.layers) {
          nb::dict d;
          d["name"] = l.name, d["int8"] = l.int8, d["why"] = l.why, d["sqnr_db"] = l.sqnr_db, d["cosine"] = l.cosine;
          d["local_sqnr_db"] = l.local_sqnr_db;
          layers.append(d);
        }
        nb::dict d;
        d["layers"] = layers, d["output_sqnr_db"] = r.output_sqnr_db, d["output_cosine"] = r.output_cosine;
        d["batches"] = r.batches, d["all_int8_cosine"] = r.all_int8_cosine, d["evaluations"] = r.evaluations;
        d["reduce_range"] = r.reduce_range;
        nb::list kept;
        for (auto& k : r.kept_float) kept.append(k);
        d["kept_float"] = kept;
        return d;
      },
      "in_path"_a, "out_path"_a, "method"_a, "percentile"_a, "per_channel"_a, "calib_batches"_a, "calib_file"_a,
      "bind"_a, "device"_a, "reduce_range"_a, "keep_float"_a, "budget"_a);
}

}  // namespace rlx
