// Gaussian-splatting bindings: the render and loss graph builders (src/splat/pipeline.h) and the
// .ply reader/writer. The numpy-facing `rlx.splat.rasterize` is python/rlx/splat.py on top of them.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "splat/ply.h"
#include "splat/pipeline.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rlx {

namespace {

using F32In = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu, float>;

nb::object f32_numpy(const Tensor& src) {
  auto* keep = new Tensor(src.clone());
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(keep->shape().begin(), keep->shape().end());
  return nb::ndarray<nb::numpy, float>(keep->data<float>(), shape.size(), shape.data(), owner).cast();
}

Tensor f32_tensor(const F32In& a) {
  std::vector<int64_t> shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  Tensor t(DType::f32, shape);
  if (t.nbytes()) std::memcpy(t.raw(), a.data(), t.nbytes());
  return t;
}

splat::RenderOptions options(int64_t width, int64_t height, int sh_degree, const std::string& dtype) {
  splat::RenderOptions o;
  o.width = width;
  o.height = height;
  o.sh_degree = sh_degree;
  RLX_CHECK(dtype == "f32" || dtype == "f64", "[python] splat: dtype must be 'f32' or 'f64', got '", dtype, "'");
  o.dtype = dtype == "f32" ? DType::f32 : DType::f64;
  return o;
}

}  // namespace

void bind_splat(nb::module_& m) {
  m.def("splat_render_graph",
        [](int64_t n, int64_t k, int64_t width, int64_t height, int sh_degree, const std::string& dtype, bool offset2d) {
          return splat::render_graph(n, k, options(width, height, sh_degree, dtype), offset2d);
        },
        "n"_a, "k"_a, "width"_a, "height"_a, "sh_degree"_a = 3, "dtype"_a = "f32", "offset2d"_a = false);
  m.def("splat_loss_graph",
        [](int64_t n, int64_t k, int64_t width, int64_t height, int sh_degree, const std::string& dtype) {
          return splat::loss_graph(n, k, options(width, height, sh_degree, dtype));
        },
        "n"_a, "k"_a, "width"_a, "height"_a, "sh_degree"_a = 3, "dtype"_a = "f32");
  m.def("splat_read_ply", [](const std::string& path) {
    splat::Scene s = splat::read_ply(path);
    nb::list l;
    for (auto& t : s.params()) l.append(f32_numpy(t));
    return l;
  }, "path"_a);
  m.def("splat_write_ply",
        [](const std::string& path, const F32In& means, const F32In& log_scales, const F32In& quats,
           const F32In& opacity_logits, const F32In& sh) {
          splat::Scene s{f32_tensor(means), f32_tensor(log_scales), f32_tensor(quats), f32_tensor(opacity_logits),
                         f32_tensor(sh)};
          const int64_t n = s.size();
          using D = std::vector<int64_t>;
          const bool ok = n > 0 && s.log_scales.shape() == D{n, 3} && s.quats.shape() == D{n, 4} &&
                          s.opacity_logits.shape() == D{n} && s.sh.rank() == 3 && s.sh.shape()[0] == n &&
                          s.sh.shape()[2] == 3;
          RLX_CHECK(ok, "[python] splat.write_ply: expected means [N,3], log_scales [N,3], quats [N,4], "
                        "opacity_logits [N], sh [N,K,3]");
          splat::write_ply(path, s);
        },
        "path"_a, "means"_a, "log_scales"_a, "quats"_a, "opacity_logits"_a, "sh"_a);
}

}  // namespace rlx
