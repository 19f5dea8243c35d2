// Op kinds and their table entries, generated from src/ir/ops.def (the build places a copy at
// <build>/include/rlx/ops.def, next to this header on the include path).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/shape.h"
#include "rlx/tensor.h"

namespace rlx {

enum class OpKind : uint16_t {
#define RLX_OP(E, N, L, MI, MA, NO, DT, AT, INF, DEC, GRP, TOL, VJP) E,
#include "rlx/ops.def"
#undef RLX_OP
};
inline constexpr int kNumOps = 0
#define RLX_OP(E, N, L, MI, MA, NO, DT, AT, INF, DEC, GRP, TOL, VJP) +1
#include "rlx/ops.def"
#undef RLX_OP
    ;
int num_ops();

enum class Level : uint8_t { Hir, Mir };
// What kind of computation an op is (the group column of ops.def).
enum class OpGroup : uint8_t {
  Source, Elementwise, Reduction, Contraction, Window, Scan, Sort, Movement, Normalization, Attention, Quant,
  LinearAlgebra, Sparse, Splatting, Autodiff, Collective
};
std::string_view op_group_name(OpGroup g);
// How far a device may stray from the reference interpreter (the tolerance column of ops.def;
// per-dtype bounds in src/conformance/harness.cpp).
enum class ToleranceClass : uint8_t { Rounded, Transcendental, Accumulating };

enum class AttrKind : uint8_t { Int, Float, Str, Ints, Floats, Dims, DTypeK, TensorK };

struct Attr {
  std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>, Shape, DType,
               Tensor>
      v;
  Attr() = default;
  Attr(int64_t x) : v(x) {}  // NOLINT
  Attr(int x) : v(static_cast<int64_t>(x)) {}  // NOLINT
  Attr(double x) : v(x) {}  // NOLINT
  Attr(const char* s) : v(std::string(s)) {}  // NOLINT
  Attr(std::string s) : v(std::move(s)) {}  // NOLINT
  Attr(std::vector<int64_t> x) : v(std::move(x)) {}  // NOLINT
  Attr(std::vector<double> x) : v(std::move(x)) {}  // NOLINT
  Attr(Shape x) : v(std::move(x)) {}  // NOLINT
  Attr(DType x) : v(x) {}  // NOLINT
  Attr(Tensor x) : v(std::move(x)) {}  // NOLINT
  AttrKind kind() const { return static_cast<AttrKind>(v.index()); }
};
using Attrs = std::map<std::string, Attr>;

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool has_default = false;
  Attr def;
};

struct Node;
struct Graph;
class Builder;
struct ValueType {
  DType dtype = DType::f32;
  Shape shape;
};
// Shape/dtype rule: fills `out` or returns an error message (empty string on success).
using InferFn = std::string (*)(const std::vector<ValueType>& in, const Attrs& attrs,
                                std::vector<ValueType>& out);
// Decomposition: emits MIR (or simpler HIR) for node `n` into builder `b`; returns the outputs.
using DecompFn = std::vector<int32_t> (*)(Builder& b, const Node& n, const std::vector<int32_t>& in);

struct OpInfo {
  OpKind kind;
  std::string_view name;
  Level level;
  int min_inputs, max_inputs, num_outputs;
  DTypeSet dtypes;  // accepted dtypes of input 0
  std::vector<AttrSpec> attrs;
  InferFn infer;
  DecompFn decompose;  // nullptr for primitives
  OpGroup group;
  ToleranceClass tolerance;
  std::string_view vjp;  // the VJP column: a rule name in src/autodiff/vjp_rules.cpp, or nondiff/decomposed/pending
};

const OpInfo& op_info(OpKind k);
bool op_by_name(std::string_view name, OpKind* out);
std::string_view op_name(OpKind k);
AttrKind parse_attr_kind(std::string_view s);
std::string_view attr_kind_name(AttrKind k);
// MIR primitives of group Elementwise (unary, binary, compare, select, convert): the fusable ones.
bool is_elementwise(OpKind k);
// The dense linear-algebra primitives (the `linear algebra` block of ops.def, cholesky..matrix_exp):
// library kernels a device claims one by one, never implied by "every MIR primitive".
bool is_linalg(OpKind k);
// Collective ops (group Collective: all_reduce, all_gather, ..., send, recv); they talk to other ranks.
bool is_collective(OpKind k);

// Attribute access with the op table's defaults and clear errors.
int64_t attr_int(const Node& n, const char* name);
double attr_float(const Node& n, const char* name);
const std::string& attr_str(const Node& n, const char* name);
const std::vector<int64_t>& attr_ints(const Node& n, const char* name);
const std::vector<double>& attr_floats(const Node& n, const char* name);
const Shape& attr_dims(const Node& n, const char* name);
DType attr_dtype(const Node& n, const char* name);
const Tensor& attr_tensor(const Node& n, const char* name);
// Same over a bare attribute map (shape rules see only attrs); defaults come from `k`'s schema.
const Attr* find_attr(OpKind k, const Attrs& a, const char* name);

}  // namespace rlx
