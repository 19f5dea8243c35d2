// One rten operator -> ONNX node(s). rten operators are ONNX operators whose attributes live in typed
// flatbuffers tables; this rewrites those tables back into ONNX attributes (opset 18), so the ONNX
// importer's converters do the real work. Where the two type systems differ (rten has no bool and no
// int64), casts keep every value in rten's types: bool and int64 results are cast to Int32 at once.
#ifdef RLX_HAVE_RTEN
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "formats/rten/translate.h"

namespace rlx::rten {

namespace {

using ::onnx::AttributeProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

void set_i(NodeProto* n, const char* k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}
void set_f(NodeProto* n, const char* k, double v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}
void set_s(NodeProto* n, const char* k, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::STRING);
  a->set_s(v);
}
template <class Vec>
void set_ints(NodeProto* n, const char* k, const Vec* v, size_t limit = SIZE_MAX) {
  if (!v) return;
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(AttributeProto::INTS);
  size_t i = 0;
  for (auto x : *v)
    if (i++ < limit) a->add_ints(static_cast<int64_t>(x));
}

// auto_pad + pads, the way rten stores them (Same = SAME_UPPER; NotSet = explicit pads, none = zeros).
// `spatial` (pools: the kernel rank; 0 = unknown): rten-convert writes its all-zero default [0,0,0,0]
// whatever the rank, which we resize to the 2 x rank zeros ONNX expects.
template <class A>
void set_pads(NodeProto* n, const A* a, size_t spatial = 0) {
  if (a->auto_pad() == fb::AutoPad::Same) {
    set_s(n, "auto_pad", "SAME_UPPER");
    return;
  }
  auto* p = a->pads();
  bool zeros = p && std::all_of(p->begin(), p->end(), [](uint32_t v) { return v == 0; });
  if (p && spatial && zeros && p->size() != 2 * spatial) {
    auto* at = n->add_attribute();
    at->set_name("pads");
    at->set_type(AttributeProto::INTS);
    for (size_t i = 0; i < 2 * spatial; ++i) at->add_ints(0);
    return;
  }
  set_ints(n, "pads", p);
}

const char* reduction(fb::ScatterReduction r) {
  switch (r) {
    case fb::ScatterReduction::None: return "none";
    case fb::ScatterReduction::Add: return "add";
    case fb::ScatterReduction::Mul: return "mul";
    case fb::ScatterReduction::Min: return "min";
    case fb::ScatterReduction::Max: return "max";
  }
  return nullptr;
}

// rten operators whose ONNX counterparts return bool (`bool_out`) or int64 (`i64_out`): cast to Int32.
bool bool_out(fb::OperatorType t) {
  using T = fb::OperatorType;
  switch (t) {
    case T::Equal: case T::Greater: case T::GreaterOrEqual: case T::Less: case T::LessOrEqual:
    case T::Not: case T::And: case T::Or: case T::Xor: case T::IsNaN: case T::IsInf:
      return true;
    default: return false;
  }
}
bool i64_out(fb::OperatorType t, size_t k) {
  using T = fb::OperatorType;
  switch (t) {
    case T::Shape: case T::Size: case T::ArgMax: case T::ArgMin: case T::NonZero: case T::NonMaxSuppression:
      return k == 0;
    case T::TopK: return k == 1;
    default: return false;
  }
}

}  // namespace

void Translator::translate_op(const fb::OperatorNode* op, const std::string& name, std::vector<std::string> ins,
                              std::vector<std::string> outs, ::onnx::GraphProto* gp, int depth) {
  using T = fb::OperatorType;
  using A = fb::OperatorAttrs;
  const T type = op->type();
  const char* op_name = fb::EnumNameOperatorType(type);
  std::string who = "operator '" + name + "'";
  if (!op_name || !*op_name) error(who + ": unknown operator type " + std::to_string(static_cast<int>(type)));
  who = "operator '" + name + "' (" + op_name + ")";
  const A at = op->attrs_type();
  if (at != A::NONE && (!fb::EnumNameOperatorAttrs(at) || !*fb::EnumNameOperatorAttrs(at)))
    error(who + ": unknown attribute table type " + std::to_string(static_cast<int>(at)));
  if (at != A::NONE && !op->attrs()) error(who + ": attribute table missing");

  // Inputs ONNX wants as bool.
  switch (type) {
    case T::Where: if (!ins.empty()) ins[0] = as_bool(ins[0], gp); break;
    case T::Not: case T::And: case T::Or: case T::Xor:
      for (auto& v : ins) v = as_bool(v, gp);
      break;
    case T::If: if (!ins.empty()) ins[0] = as_bool(ins[0], gp); break;
    case T::Loop: if (ins.size() > 1) ins[1] = as_bool(ins[1], gp); break;
    default: break;
  }
  // Every Reduce* takes its axes as input 1 at opset 18; rten may store them as an attribute.
  const fb::ReduceMeanAttrs* red = op->attrs_as_ReduceMeanAttrs();
  if (red && red->axes()) {
    if (ins.size() > 1 && !ins[1].empty()) error(who + ": axes given both as attribute and as input");
    auto* t = gp->add_initializer();
    t->set_name(fresh(name.empty() ? "rten_axes" : name + "_axes"));
    t->set_data_type(TensorProto::INT64);
    t->add_dims(red->axes()->size());
    for (int32_t x : *red->axes()) t->add_int64_data(x);
    ins.resize(2);
    ins[1] = t->name();
  }

  NodeProto* n = gp->add_node();
  n->set_op_type(op_name);
  n->set_name(name);
  for (auto& v : ins) n->add_input(v);
  std::vector<std::pair<std::string, std::string>> post;  // (ONNX output, rten output) needing a cast
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].empty() && (bool_out(type) || i64_out(type, k))) {
      std::string tmp = fresh(outs[k] + (bool_out(type) ? "_bool" : "_i64"));
      post.emplace_back(tmp, outs[k]);
      n->add_output(tmp);
    } else {
      n->add_output(outs[k]);
    }
  }

  switch (at) {
    case A::NONE: break;
    case A::ArgMaxAttrs: {
      auto* a = op->attrs_as_ArgMaxAttrs();
      set_i(n, "axis", a->axis());
      set_i(n, "keepdims", a->keep_dims());
      break;
    }
    case A::AveragePoolAttrs: {
      auto* a = op->attrs_as_AveragePoolAttrs();
      set_ints(n, "kernel_shape", a->kernel_size());
      set_pads(n, a, a->kernel_size() ? a->kernel_size()->size() : 0);
      set_ints(n, "strides", a->strides(), a->kernel_size() ? a->kernel_size()->size() : SIZE_MAX);  // rten-convert pads 1-D strides to 2
      set_i(n, "count_include_pad", a->count_include_pad());
      set_i(n, "ceil_mode", a->ceil_mode());
      break;
    }
    case A::BatchNormalizationAttrs: set_f(n, "epsilon", op->attrs_as_BatchNormalizationAttrs()->epsilon()); break;
    case A::CastAttrs: {
      int et = onnx_elem_type(op->attrs_as_CastAttrs()->to());
      if (et < 0) error(who + ": unknown target dtype");
      set_i(n, "to", et);
      break;
    }
    case A::ConcatAttrs: set_i(n, "axis", op->attrs_as_ConcatAttrs()->axis()); break;
    case A::ConstantOfShapeAttrs: {
      auto* a = op->attrs_as_ConstantOfShapeAttrs();
      auto* attr = n->add_attribute();
      attr->set_name("value");
      attr->set_type(AttributeProto::TENSOR);
      TensorProto* t = attr->mutable_t();
      t->add_dims(1);
      if (auto* i = a->value_as_IntScalar()) {
        t->set_data_type(TensorProto::INT32);
        t->add_int32_data(i->value());
      } else if (auto* f = a->value_as_FloatScalar()) {
        t->set_data_type(TensorProto::FLOAT);
        t->add_float_data(f->value());
      } else {
        error(who + ": fill value missing or of unknown kind");
      }
      break;
    }
    case A::ConvAttrs: {
      auto* a = op->attrs_as_ConvAttrs();
      set_pads(n, a);
      set_i(n, "group", a->groups());
      set_ints(n, "strides", a->strides());
      set_ints(n, "dilations", a->dilations());
      break;
    }
    case A::ConvTransposeAttrs: {
      auto* a = op->attrs_as_ConvTransposeAttrs();
      set_ints(n, "strides", a->strides());
      set_pads(n, a);
      set_i(n, "group", a->groups());
      set_ints(n, "output_padding", a->output_padding());
      break;
    }
    case A::FlattenAttrs: set_i(n, "axis", op->attrs_as_FlattenAttrs()->axis()); break;
    case A::GatherAttrs: set_i(n, "axis", op->attrs_as_GatherAttrs()->axis()); break;
    case A::GemmAttrs: {
      auto* a = op->attrs_as_GemmAttrs();
      set_f(n, "alpha", a->alpha());
      set_f(n, "beta", a->beta());
      set_i(n, "transA", a->transpose_a());
      set_i(n, "transB", a->transpose_b());
      break;
    }
    case A::GRUAttrs: {
      auto* a = op->attrs_as_GRUAttrs();
      const char* dir = fb::EnumNameRNNDirection(a->direction());
      if (!dir || !*dir) error(who + ": unknown direction");
      set_s(n, "direction", a->direction() == fb::RNNDirection::Forward ? "forward"
                            : a->direction() == fb::RNNDirection::Reverse ? "reverse" : "bidirectional");
      set_i(n, "hidden_size", a->hidden_size());
      set_i(n, "linear_before_reset", a->linear_before_reset());
      break;
    }
    case A::LeakyReluAttrs: set_f(n, "alpha", op->attrs_as_LeakyReluAttrs()->alpha()); break;
    case A::LSTMAttrs: {
      auto* a = op->attrs_as_LSTMAttrs();
      const char* dir = fb::EnumNameRNNDirection(a->direction());
      if (!dir || !*dir) error(who + ": unknown direction");
      set_s(n, "direction", a->direction() == fb::RNNDirection::Forward ? "forward"
                            : a->direction() == fb::RNNDirection::Reverse ? "reverse" : "bidirectional");
      set_i(n, "hidden_size", a->hidden_size());
      break;
    }
    case A::MaxPoolAttrs: {
      auto* a = op->attrs_as_MaxPoolAttrs();
      set_ints(n, "kernel_shape", a->kernel_size());
      set_pads(n, a, a->kernel_size() ? a->kernel_size()->size() : 0);
      set_ints(n, "strides", a->strides(), a->kernel_size() ? a->kernel_size()->size() : SIZE_MAX);  // rten-convert pads 1-D strides to 2
      set_i(n, "ceil_mode", a->ceil_mode());
      break;
    }
    case A::ReduceMeanAttrs: set_i(n, "keepdims", red->keep_dims()); break;  // axes: input 1, above
    case A::ReshapeAttrs: set_i(n, "allowzero", op->attrs_as_ReshapeAttrs()->allow_zero()); break;
    case A::ResizeAttrs: {
      auto* a = op->attrs_as_ResizeAttrs();
      static const char* modes[] = {"nearest", "linear"};
      static const char* ctm[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"};
      static const char* nm[] = {"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"};
      auto m = static_cast<size_t>(a->mode()), c = static_cast<size_t>(a->coord_mode()),
           r = static_cast<size_t>(a->nearest_mode());
      if (m > 1 || c > 3 || r > 3) error(who + ": unknown resize mode");
      set_s(n, "mode", modes[m]);
      set_s(n, "coordinate_transformation_mode", ctm[c]);
      set_s(n, "nearest_mode", nm[r]);
      break;
    }
    case A::SplitAttrs: {
      auto* a = op->attrs_as_SplitAttrs();
      set_i(n, "axis", a->axis());
      if (a->num_outputs().has_value()) set_i(n, "num_outputs", a->num_outputs().value());
      break;
    }
    case A::SoftmaxAttrs: set_i(n, "axis", op->attrs_as_SoftmaxAttrs()->axis()); break;
    case A::TransposeAttrs: set_ints(n, "perm", op->attrs_as_TransposeAttrs()->perm()); break;
    case A::ModAttrs: set_i(n, "fmod", op->attrs_as_ModAttrs()->fmod()); break;
    case A::ScatterElementsAttrs: {
      auto* a = op->attrs_as_ScatterElementsAttrs();
      const char* r = reduction(a->reduction());
      if (!r) error(who + ": unknown reduction");
      set_i(n, "axis", a->axis());
      set_s(n, "reduction", r);
      break;
    }
    case A::OneHotAttrs: set_i(n, "axis", op->attrs_as_OneHotAttrs()->axis()); break;
    case A::TopKAttrs: {
      auto* a = op->attrs_as_TopKAttrs();
      set_i(n, "axis", a->axis());
      set_i(n, "largest", a->largest());
      set_i(n, "sorted", a->sorted());
      break;
    }
    case A::HardSigmoidAttrs: {
      auto* a = op->attrs_as_HardSigmoidAttrs();
      set_f(n, "alpha", a->alpha());
      set_f(n, "beta", a->beta());
      break;
    }
    case A::TriluAttrs: set_i(n, "upper", op->attrs_as_TriluAttrs()->upper()); break;
    case A::ScatterNDAttrs: {
      const char* r = reduction(op->attrs_as_ScatterNDAttrs()->reduction());
      if (!r) error(who + ": unknown reduction");
      set_s(n, "reduction", r);
      break;
    }
    case A::NonMaxSuppressionAttrs:
      set_i(n, "center_point_box", op->attrs_as_NonMaxSuppressionAttrs()->box_order() == fb::NMSBoxOrder::CenterWidthHeight);
      break;
    case A::LayerNormalizationAttrs: {
      auto* a = op->attrs_as_LayerNormalizationAttrs();
      set_i(n, "axis", a->axis());
      set_f(n, "epsilon", a->epsilon());
      break;
    }
    case A::RandomUniformAttrs: {
      auto* a = op->attrs_as_RandomUniformAttrs();
      set_ints(n, "shape", a->shape());
      set_f(n, "high", a->high());
      set_f(n, "low", a->low());
      if (a->seed().has_value()) set_f(n, "seed", a->seed().value());
      break;
    }
    case A::RandomUniformLikeAttrs: {
      auto* a = op->attrs_as_RandomUniformLikeAttrs();
      set_f(n, "high", a->high());
      set_f(n, "low", a->low());
      if (a->seed().has_value()) set_f(n, "seed", a->seed().value());
      break;
    }
    case A::RandomNormalAttrs: {
      auto* a = op->attrs_as_RandomNormalAttrs();
      set_ints(n, "shape", a->shape());
      set_f(n, "mean", a->mean());
      set_f(n, "scale", a->scale());
      if (a->seed().has_value()) set_f(n, "seed", a->seed().value());
      break;
    }
    case A::RandomNormalLikeAttrs: {
      auto* a = op->attrs_as_RandomNormalLikeAttrs();
      set_f(n, "mean", a->mean());
      set_f(n, "scale", a->scale());
      if (a->seed().has_value()) set_f(n, "seed", a->seed().value());
      break;
    }
    case A::EluAttrs: set_f(n, "alpha", op->attrs_as_EluAttrs()->alpha()); break;
    case A::GatherNDAttrs: set_i(n, "batch_dims", op->attrs_as_GatherNDAttrs()->batch_dims()); break;
    case A::GeluAttrs:
      set_s(n, "approximate", op->attrs_as_GeluAttrs()->approximate() == fb::GeluApproximation::Tanh ? "tanh" : "none");
      break;
    case A::EinsumAttrs: {
      auto* e = op->attrs_as_EinsumAttrs()->equation();
      if (!e) error(who + ": equation missing");
      set_s(n, "equation", e->str());
      break;
    }
    case A::IfAttrs: {
      auto* a = op->attrs_as_IfAttrs();
      if (!a->then_branch() || !a->else_branch()) error(who + ": branch missing");
      for (int b = 0; b < 2; ++b) {
        auto* attr = n->add_attribute();
        attr->set_name(b ? "else_branch" : "then_branch");
        attr->set_type(AttributeProto::GRAPH);
        attr->mutable_g()->set_name(name + (b ? "_else" : "_then"));
        graph(b ? a->else_branch() : a->then_branch(), attr->mutable_g(), depth + 1, who + (b ? " else" : " then"));
      }
      break;
    }
    case A::LoopAttrs: {
      auto* a = op->attrs_as_LoopAttrs();
      if (!a->body()) error(who + ": body missing");
      auto* attr = n->add_attribute();
      attr->set_name("body");
      attr->set_type(AttributeProto::GRAPH);
      attr->mutable_g()->set_name(name + "_body");
      graph(a->body(), attr->mutable_g(), depth + 1, who + " body");
      break;
    }
    case A::PadAttrs: {
      static const char* modes[] = {"constant", "reflect", "edge", "wrap"};
      auto m = static_cast<size_t>(op->attrs_as_PadAttrs()->mode());
      if (m > 3) error(who + ": unknown pad mode");
      set_s(n, "mode", modes[m]);
      break;
    }
    case A::DequantizeLinearAttrs: set_i(n, "axis", op->attrs_as_DequantizeLinearAttrs()->axis()); break;
    case A::QuantizeLinearAttrs: {
      auto* a = op->attrs_as_QuantizeLinearAttrs();
      set_i(n, "axis", a->axis());
      if (a->output_dtype().has_value()) {
        int et = onnx_elem_type(a->output_dtype().value());
        if (et < 0) error(who + ": unknown output dtype");
        set_i(n, "output_dtype", et);
      }
      break;
    }
    case A::DepthToSpaceAttrs: {
      auto* a = op->attrs_as_DepthToSpaceAttrs();
      set_i(n, "blocksize", a->block_size());
      set_s(n, "mode", a->mode() == fb::DepthToSpaceMode::CRD ? "CRD" : "DCR");
      break;
    }
    case A::CastLikeAttrs: break;
    case A::ShapeAttrs: {
      auto* a = op->attrs_as_ShapeAttrs();
      if (a->start().has_value()) set_i(n, "start", a->start().value());
      if (a->end().has_value()) set_i(n, "end", a->end().value());
      break;
    }
    case A::DropoutAttrs: {
      auto* a = op->attrs_as_DropoutAttrs();
      if (a->seed().has_value()) set_i(n, "seed", a->seed().value());
      break;
    }
    case A::EyeLikeAttrs: {
      auto* a = op->attrs_as_EyeLikeAttrs();
      if (a->dtype().has_value()) {
        int et = onnx_elem_type(a->dtype().value());
        if (et < 0) error(who + ": unknown dtype");
        set_i(n, "dtype", et);
      }
      set_i(n, "k", a->k());
      break;
    }
    case A::IsInfAttrs: break;
    case A::GridSampleAttrs: set_i(n, "align_corners", op->attrs_as_GridSampleAttrs()->align_corners()); break;
    case A::STFTAttrs: set_i(n, "onesided", op->attrs_as_STFTAttrs()->onesided()); break;
    case A::SequenceEmptyAttrs:
    case A::ConcatFromSequenceAttrs:
    case A::SplitToSequenceAttrs:
      error(who + ": sequence operators are unsupported");
  }

  for (auto& [tmp, out] : post) {
    NodeProto* c = gp->add_node();
    c->set_op_type("Cast");
    c->add_input(tmp);
    c->add_output(out);
    set_i(c, "to", TensorProto::INT32);
    if (bool_out(type)) bool_[out] = tmp;
  }
}

}  // namespace rlx::rten
#endif  // RLX_HAVE_RTEN
