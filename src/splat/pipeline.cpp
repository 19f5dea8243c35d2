// The splatting pipeline as a graph: opacity = sigmoid(logit), project, SH color on the view
// direction (gsplat: dirs = means - camera center, color = max(SH + 0.5, 0)), rasterize.
#include "splat/pipeline.h"

#include <algorithm>
#include <cmath>

#include "rlx/builder.h"
#include "rlx/session.h"

namespace rlx::splat {

Tensor Camera::viewmat(DType dt) const {
  Tensor t(dt, {4, 4});
  for (int i = 0; i < 16; ++i) t.set(i, view[i]);
  return t;
}
Tensor Camera::intrinsics(DType dt) const {
  return Tensor::from<double>(dt, {3, 3}, {fx, 0, cx, 0, fy, cy, 0, 0, 1});
}
Tensor Camera::center(DType dt) const {
  // c = -R^T t for the row-major [R | t]
  Tensor c(dt, {3});
  for (int j = 0; j < 3; ++j) c.set(j, -(view[0 * 4 + j] * view[3] + view[1 * 4 + j] * view[7] + view[2 * 4 + j] * view[11]));
  return c;
}

int Scene::sh_degree() const {
  int64_t k = sh.defined() && sh.rank() == 3 ? sh.shape()[1] : 1;
  int d = 0;
  while (d < 3 && (d + 2) * (d + 2) <= k) ++d;
  return d;
}

Scene Scene::from_params(const std::vector<Tensor>& p) {
  RLX_CHECK(p.size() == 5, "[splat] a scene has 5 parameter tensors, got ", p.size());
  return Scene{p[0], p[1], p[2], p[3], p[4]};
}

namespace {
struct Built {
  ValueId image, alpha;
};

Built emit_render(Builder& b, int64_t n, int64_t k, const RenderOptions& o, bool offset2d, std::vector<ValueId>* ins) {
  const DType t = o.dtype;
  ValueId means = b.input("means", t, {n, 3}), ls = b.input("log_scales", t, {n, 3}), q = b.input("quats", t, {n, 4});
  ValueId ol = b.input("opacity_logits", t, {n}), sh = b.input("sh", t, {n, k, 3});
  ValueId view = b.input("viewmat", t, {4, 4}), K = b.input("K", t, {3, 3}), campos = b.input("campos", t, {3});
  ValueId bg = b.input("background", t, {3});
  ValueId off = offset2d ? b.input("offset2d", t, {n, 2}) : -1;
  *ins = {means, ls, q, ol, sh, view, K, campos, bg};
  if (offset2d) ins->push_back(off);
  ValueId opac = b.unary(OpKind::Logistic, ol);
  Attrs pa{{"width", o.width}, {"height", o.height}, {"near", o.near_plane}, {"far", o.far_plane}, {"eps2d", o.eps2d}};
  auto pr = b.op(OpKind::SplatProject, {means, ls, q, opac, view, K}, pa);
  ValueId m2 = offset2d ? b.add(pr[0], off) : pr[0];
  ValueId dirs = b.sub(means, b.broadcast_in_dim(campos, {n, 3}, {1}));
  int deg = std::min<int>(o.sh_degree, 3);
  while (deg > 0 && (deg + 1) * (deg + 1) > k) --deg;
  ValueId col = b.op1(OpKind::SplatSh, {dirs, sh}, {{"degree", int64_t{deg}}});
  col = b.max(b.add(col, b.scalar(0.5, t)), b.scalar(0.0, t));
  Attrs ra{{"width", o.width}, {"height", o.height}, {"tile", o.tile}};
  auto img = b.op(OpKind::SplatRasterize, {m2, pr[1], col, opac, pr[2], pr[3], bg}, ra);
  return {img[0], img[1]};
}
}  // namespace

Graph render_graph(int64_t n, int64_t k, const RenderOptions& o, bool offset2d) {
  Graph g;
  g.name = "splat_render";
  Builder b(g);
  std::vector<ValueId> ins;
  Built r = emit_render(b, n, k, o, offset2d, &ins);
  b.output(r.image);
  b.output(r.alpha);
  return g;
}

Graph loss_graph(int64_t n, int64_t k, const RenderOptions& o) {
  Graph g;
  g.name = "splat_loss";
  Builder b(g);
  std::vector<ValueId> ins;
  Built r = emit_render(b, n, k, o, true, &ins);
  ValueId target = b.input("target", o.dtype, {o.height, o.width, 3});
  ValueId d = b.unary(OpKind::Abs, b.sub(r.image, target));
  ValueId sum = b.reduce(OpKind::ReduceSum, d, {0, 1, 2}, false);
  ValueId loss = b.mul(sum, b.scalar(1.0 / static_cast<double>(o.height * o.width * 3), o.dtype));
  b.output(loss);
  b.output(r.image);
  return g;
}

Tensor render(const Scene& s, const Camera& cam, const double bg[3], const RenderOptions& o0, const std::string& device,
              Tensor* alpha) {
  RenderOptions o = o0;
  o.width = cam.width;
  o.height = cam.height;
  const int64_t n = s.size(), k = s.sh.shape()[1];
  CompileOptions co;
  co.device = device;
  CompiledModel m(render_graph(n, k, o), co);
  Tensor bgt = Tensor::from<double>(o.dtype, {3}, {bg[0], bg[1], bg[2]});
  auto out = m.run({s.means, s.log_scales, s.quats, s.opacity_logits, s.sh, cam.viewmat(o.dtype),
                    cam.intrinsics(o.dtype), cam.center(o.dtype), bgt});
  if (alpha) *alpha = out[1];
  return out[0];
}

double psnr(const Tensor& a, const Tensor& b) {
  RLX_CHECK(a.numel() == b.numel() && a.numel() > 0, "[splat] psnr: images differ in size");
  double se = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = std::clamp(a.get(i), 0.0, 1.0), y = std::clamp(b.get(i), 0.0, 1.0);
    se += (x - y) * (x - y);
  }
  double mse = se / static_cast<double>(a.numel());
  return mse <= 0 ? 99.0 : -10.0 * std::log10(mse);
}

}  // namespace rlx::splat
