// Shape rules of the gaussian-splatting ops (splat_project, splat_sh, splat_rasterize and their
// gradient ops); see ops.def and docs/splatting.md.
#include <string>

#include "rlx/graph.h"

namespace rlx {

namespace {

// v has rank r, dims[i] equal to want[i] where want[i] >= 0 (static), any dim where want[i] == -1;
// returns the dims in `got`.
bool has_shape(const ValueType& v, std::vector<int64_t> want) {
  if (v.shape.size() != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == -2) continue;  // any, possibly symbolic
    if (!v.shape[i].is_static()) return false;
    if (want[i] >= 0 && v.shape[i].v != want[i]) return false;
  }
  return true;
}

bool is(const ValueType& v, DType t, const Shape& s) { return v.dtype == t && v.shape == s; }

std::string check_size_attrs(OpKind k, const Attrs& a, int64_t* w, int64_t* h) {
  const Attr* wa = find_attr(k, a, "width");
  const Attr* ha = find_attr(k, a, "height");
  const auto* wp = wa ? std::get_if<int64_t>(&wa->v) : nullptr;
  const auto* hp = ha ? std::get_if<int64_t>(&ha->v) : nullptr;
  if (!wp || !hp) return "needs attributes width and height (int)";
  if (*wp <= 0 || *hp <= 0 || *wp > 65536 || *hp > 65536)
    return "image size " + std::to_string(*wp) + "x" + std::to_string(*hp) + " is outside 1..65536";
  *w = *wp;
  *h = *hp;
  return "";
}

std::string same_float(const std::vector<ValueType>& in, std::initializer_list<int> idx) {
  for (int i : idx)
    if (in[i].dtype != in[0].dtype)
      return "input " + std::to_string(i) + " is " + std::string(dtype_name(in[i].dtype)) + ", expected " + std::string(dtype_name(in[0].dtype));
  return "";
}

// The projection's inputs: means [N,3], log_scales [N,3], quats [N,4], opacities [N], viewmat [4,4], K [3,3].
std::string check_project_inputs(const std::vector<ValueType>& in, Dim* n) {
  if (!has_shape(in[0], {-2, 3})) return "means must be [N,3]";
  *n = in[0].shape[0];
  if (in[1].shape != Shape{*n, 3}) return "log_scales must be [N,3] like means";
  if (in[2].shape != Shape{*n, 4}) return "quats must be [N,4] (w,x,y,z)";
  if (in[3].shape != Shape{*n}) return "opacities must be [N]";
  if (!has_shape(in[4], {4, 4})) return "viewmat must be [4,4]";
  if (!has_shape(in[5], {3, 3})) return "K must be [3,3]";
  return same_float(in, {1, 2, 3, 4, 5});
}

}  // namespace

std::string infer_splat_project(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t w, h;
  std::string e = check_size_attrs(OpKind::SplatProject, a, &w, &h);
  if (!e.empty()) return e;
  Dim n;
  if (!(e = check_project_inputs(in, &n)).empty()) return e;
  DType t = in[0].dtype;
  o = {ValueType{t, Shape{n, 2}}, ValueType{t, Shape{n, 3}}, ValueType{t, Shape{n}}, ValueType{DType::i32, Shape{n, 2}}};
  return "";
}

std::string infer_splat_project_grad(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t w, h;
  std::string e = check_size_attrs(OpKind::SplatProjectGrad, a, &w, &h);
  if (!e.empty()) return e;
  Dim n;
  if (!(e = check_project_inputs(in, &n)).empty()) return e;
  DType t = in[0].dtype;
  if (!is(in[6], DType::i32, Shape{n, 2})) return "radii must be i32 [N,2]";
  if (!is(in[7], t, Shape{n, 2})) return "v_means2d must be [N,2]";
  if (!is(in[8], t, Shape{n, 3})) return "v_conics must be [N,3]";
  if (!is(in[9], t, Shape{n})) return "v_depths must be [N]";
  o = {in[0], in[1], in[2], in[4]};
  return "";
}

std::string infer_splat_sh(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  const Attr* da = find_attr(OpKind::SplatSh, a, "degree");
  const auto* d = da ? std::get_if<int64_t>(&da->v) : nullptr;
  if (!d || *d < 0 || *d > 3) return "degree must be 0..3";
  if (!has_shape(in[0], {-2, 3})) return "dirs must be [N,3]";
  if (!has_shape(in[1], {-2, -1, -1}) || in[1].shape[0] != in[0].shape[0])
    return "coefficients must be [N,K,C] with N as dirs";
  int64_t need = (*d + 1) * (*d + 1);
  if (in[1].shape[1].v < need)
    return "degree " + std::to_string(*d) + " needs K >= " + std::to_string(need) + " coefficients, got " +
           std::to_string(in[1].shape[1].v);
  if (in[1].dtype != in[0].dtype) return "coefficients must have the dtype of dirs";
  o = {ValueType{in[0].dtype, Shape{in[0].shape[0], in[1].shape[2]}}};
  return "";
}

namespace {
std::string check_raster_inputs(OpKind k, const std::vector<ValueType>& in, const Attrs& a, int64_t* w, int64_t* h,
                                Dim* n, Dim* c) {
  std::string e = check_size_attrs(k, a, w, h);
  if (!e.empty()) return e;
  const Attr* ta = find_attr(k, a, "tile");
  const auto* tp = ta ? std::get_if<int64_t>(&ta->v) : nullptr;
  if (!tp || *tp < 1 || *tp > 64) return "tile must be 1..64";
  if (!has_shape(in[0], {-2, 2})) return "means2d must be [N,2]";
  *n = in[0].shape[0];
  if (in[1].shape != Shape{*n, 3}) return "conics must be [N,3]";
  if (!has_shape(in[2], {-2, -1}) || in[2].shape[0] != *n) return "colors must be [N,C]";
  *c = in[2].shape[1];
  if (in[3].shape != Shape{*n}) return "opacities must be [N]";
  if (in[4].shape != Shape{*n}) return "depths must be [N]";
  if (!is(in[5], DType::i32, Shape{*n, 2})) return "radii must be i32 [N,2]";
  if (in[6].shape != Shape{*c}) return "background must be [C]";
  return same_float(in, {1, 2, 3, 4, 6});
}
}  // namespace

std::string infer_splat_rasterize(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t w, h;
  Dim n, c;
  std::string e = check_raster_inputs(OpKind::SplatRasterize, in, a, &w, &h, &n, &c);
  if (!e.empty()) return e;
  o = {ValueType{in[0].dtype, Shape{h, w, c}}, ValueType{in[0].dtype, Shape{h, w}}};
  return "";
}

std::string infer_splat_rasterize_grad(const std::vector<ValueType>& in, const Attrs& a, std::vector<ValueType>& o) {
  int64_t w, h;
  Dim n, c;
  std::string e = check_raster_inputs(OpKind::SplatRasterizeGrad, in, a, &w, &h, &n, &c);
  if (!e.empty()) return e;
  if (!is(in[7], in[0].dtype, Shape{h, w, c})) return "v_image must be [H,W,C]";
  if (!is(in[8], in[0].dtype, Shape{h, w})) return "v_alpha must be [H,W]";
  o = {in[0], in[1], in[2], in[3], in[6]};
  return "";
}

}  // namespace rlx
