// Builds the op table from ops.def: names, levels, arity, dtype sets, attribute schemas, rules,
// groups, tolerance classes and VJP names; checks the table's consistency at compile time.
#include <cstdlib>
#include <iterator>
#include <sstream>
#include <string_view>

#include "rlx/builder.h"
#include "rlx/graph.h"

namespace rlx {

// Shape rules (shape_rules.cpp) and decompositions (src/passes/decompose/*.cpp).
#define RLX_OP(E, N, L, MI, MA, NO, DT, AT, INF, DEC, GRP, TOL, VJP)                               \
  std::string INF(const std::vector<ValueType>&, const Attrs&, std::vector<ValueType>&);           \
  std::vector<int32_t> DEC(Builder&, const Node&, const std::vector<int32_t>&);
#include "ops.def"
#undef RLX_OP

std::vector<int32_t> nodecomp(Builder&, const Node& n, const std::vector<int32_t>&) {
  fail("[ir] op '", op_name(n.op), "' has no decomposition");
}

namespace {

// ---- compile-time checks over the rows of ops.def --------------------------------------------
struct Row {
  std::string_view name, infer, decomp, vjp;
  Level level;
  OpGroup group;
};
constexpr Row kRows[] = {
#define RLX_OP(E, N, L, MI, MA, NO, DT, AT, INF, DEC, GRP, TOL, VJP) {#E, #INF, #DEC, #VJP, Level::L, OpGroup::GRP},
#include "ops.def"
#undef RLX_OP
};
static_assert(std::size(kRows) == static_cast<size_t>(kNumOps));

constexpr bool elementwise_rule(std::string_view r) {
  return r == "infer_unary" || r == "infer_binary" || r == "infer_compare" || r == "infer_select" ||
         r == "infer_convert" || r == "infer_to_bool" || r == "infer_complex_part";
}
// The fusers treat a MIR Elementwise op as "output shape = broadcast of the inputs, one value per element".
constexpr bool elementwise_rows_have_elementwise_rules() {
  for (const Row& r : kRows)
    if (r.level == Level::Mir && r.group == OpGroup::Elementwise && !elementwise_rule(r.infer)) return false;
  return true;
}
static_assert(elementwise_rows_have_elementwise_rules(), "ops.def: a MIR Elementwise op needs an elementwise shape rule");
// MIR ops are primitives (no decomposition). A HIR op decomposes, or is native-only (`nodecomp`:
// devices without a kernel for it report it at dispatch).
constexpr bool mir_ops_have_no_decomposition() {
  for (const Row& r : kRows)
    if (r.level == Level::Mir && r.decomp != "nodecomp") return false;
  return true;
}
static_assert(mir_ops_have_no_decomposition(), "ops.def: a MIR op has no decomposition");
// An op with a decomposition is differentiated through it (`decomposed`) or stops the gradient
// (`nondiff`); a primitive or native-only op names its rule (or nondiff/pending).
constexpr bool vjp_column_matches_decomposition() {
  for (const Row& r : kRows) {
    bool decomposes = r.decomp != "nodecomp";
    if (decomposes && r.vjp != "decomposed" && r.vjp != "nondiff") return false;
    if (!decomposes && r.vjp == "decomposed") return false;
  }
  return true;
}
static_assert(vjp_column_matches_decomposition(),
              "ops.def: VJP column is `decomposed` (or nondiff) exactly for ops with a decomposition");

DTypeSet dtype_rule(const char* r) {
  std::string s = r;
  if (s == "kAll") return DTypeSet::all();
  if (s == "kNumeric") return DTypeSet::numeric();
  if (s == "kReal") return DTypeSet::real();
  if (s == "kFloats") return DTypeSet::floats();
  if (s == "kFloatComplex") return DTypeSet::floats() | DTypeSet::of({DType::c64});
  if (s == "kComplex") return DTypeSet::of({DType::c64});
  if (s == "kBool") return DTypeSet::of({DType::boolean});
  if (s == "kBoolInt") return DTypeSet::ints() | DTypeSet::of({DType::boolean});
  if (s == "kRealBool") return DTypeSet::real() | DTypeSet::of({DType::boolean});
  if (s == "kLinalg") return DTypeSet::of({DType::f32, DType::f64});
  if (s == "kLinalgC") return DTypeSet::of({DType::f32, DType::f64, DType::c64});
  if (s == "kF32") return DTypeSet::of({DType::f32});
  if (s == "kI32") return DTypeSet::of({DType::i32});
  if (s == "kQuant8") return DTypeSet::of({DType::i8, DType::u8});
  if (s == "kQuantInt") return DTypeSet::of({DType::i8, DType::u8, DType::i32});
  std::abort();  // a typo in ops.def: caught by the first test run
}

std::vector<double> parse_floats(const std::string& s) {
  std::vector<double> r;
  std::string body = s.substr(1, s.size() - 2);
  std::stringstream ss(body);
  std::string item;
  while (std::getline(ss, item, ',')) r.push_back(std::strtod(item.c_str(), nullptr));
  return r;
}

std::vector<AttrSpec> parse_schema(const std::string& schema) {
  std::vector<AttrSpec> out;
  std::stringstream ss(schema);
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (item.empty()) continue;
    AttrSpec a;
    auto colon = item.find(':');
    auto eq = item.find('=');
    a.name = item.substr(0, colon);
    a.kind = parse_attr_kind(item.substr(colon + 1, eq == std::string::npos ? std::string::npos : eq - colon - 1));
    if (eq != std::string::npos) {
      std::string d = item.substr(eq + 1);
      a.has_default = true;
      switch (a.kind) {
        case AttrKind::Int: a.def = Attr(static_cast<int64_t>(std::strtoll(d.c_str(), nullptr, 10))); break;
        case AttrKind::Float: a.def = Attr(std::strtod(d.c_str(), nullptr)); break;
        case AttrKind::Str: a.def = Attr(d); break;
        case AttrKind::Ints: {
          std::vector<int64_t> v;
          for (double x : parse_floats(d)) v.push_back(static_cast<int64_t>(x));
          a.def = Attr(v);
          break;
        }
        case AttrKind::Floats: a.def = Attr(parse_floats(d)); break;
        case AttrKind::DTypeK: {
          DType t;
          if (!parse_dtype(d, &t)) std::abort();
          a.def = Attr(t);
          break;
        }
        default: std::abort();
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> t;
#define RLX_OP(E, N, L, MI, MA, NO, DT, AT, INF, DEC, GRP, TOL, VJP)                               \
  t.push_back(OpInfo{OpKind::E, N, Level::L, MI, MA, NO, dtype_rule(#DT), parse_schema(AT), &INF,  \
                     (&DEC == &nodecomp) ? nullptr : &DEC, OpGroup::GRP, ToleranceClass::TOL, #VJP});
#include "ops.def"
#undef RLX_OP
  return t;
}

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> t = build_table();
  return t;
}

}  // namespace

int num_ops() { return static_cast<int>(table().size()); }
const OpInfo& op_info(OpKind k) { return table()[static_cast<size_t>(k)]; }
std::string_view op_name(OpKind k) { return op_info(k).name; }

bool op_by_name(std::string_view name, OpKind* out) {
  for (auto& i : table()) {
    if (i.name == name) {
      *out = i.kind;
      return true;
    }
  }
  return false;
}

bool is_elementwise(OpKind k) {
  const auto& i = op_info(k);
  return i.level == Level::Mir && i.group == OpGroup::Elementwise;
}

std::string_view op_group_name(OpGroup g) {
  static constexpr std::string_view kNames[] = {"source",   "elementwise", "reduction",     "contraction",
                                                "window",   "scan",        "sort",          "movement",
                                                "normalization", "attention", "quant",      "linalg",
                                                "sparse",   "splatting",   "autodiff",      "collective"};
  static_assert(std::size(kNames) == static_cast<size_t>(OpGroup::Collective) + 1);
  return kNames[static_cast<int>(g)];
}

bool is_linalg(OpKind k) { return op_info(k).group == OpGroup::LinearAlgebra; }
bool is_collective(OpKind k) { return op_info(k).group == OpGroup::Collective; }

static const char* kAttrKindNames[] = {"int", "float", "str", "ints", "floats", "dims", "dtype", "tensor"};

AttrKind parse_attr_kind(std::string_view s) {
  for (int i = 0; i < 8; ++i)
    if (s == kAttrKindNames[i]) return static_cast<AttrKind>(i);
  std::abort();
}
std::string_view attr_kind_name(AttrKind k) { return kAttrKindNames[static_cast<int>(k)]; }

const Attr* find_attr(OpKind k, const Attrs& a, const char* name) {
  auto it = a.find(name);
  if (it != a.end()) return &it->second;
  for (auto& s : op_info(k).attrs)
    if (s.name == name && s.has_default) return &s.def;
  return nullptr;
}

template <class T>
static const T& get_attr(const Node& n, const char* name) {
  const Attr* a = find_attr(n.op, n.attrs, name);
  RLX_CHECK(a != nullptr, "[ir] ", op_name(n.op), " '", n.name, "': missing attribute '", name, "'");
  const T* p = std::get_if<T>(&a->v);
  RLX_CHECK(p != nullptr, "[ir] ", op_name(n.op), " '", n.name, "': attribute '", name, "' has the wrong kind");
  return *p;
}

int64_t attr_int(const Node& n, const char* name) { return get_attr<int64_t>(n, name); }
double attr_float(const Node& n, const char* name) {
  const Attr* a = find_attr(n.op, n.attrs, name);
  if (a && std::holds_alternative<int64_t>(a->v)) return static_cast<double>(std::get<int64_t>(a->v));
  return get_attr<double>(n, name);
}
const std::string& attr_str(const Node& n, const char* name) { return get_attr<std::string>(n, name); }
const std::vector<int64_t>& attr_ints(const Node& n, const char* name) { return get_attr<std::vector<int64_t>>(n, name); }
const std::vector<double>& attr_floats(const Node& n, const char* name) { return get_attr<std::vector<double>>(n, name); }
const Shape& attr_dims(const Node& n, const char* name) { return get_attr<Shape>(n, name); }
DType attr_dtype(const Node& n, const char* name) { return get_attr<DType>(n, name); }
const Tensor& attr_tensor(const Node& n, const char* name) { return get_attr<Tensor>(n, name); }

}  // namespace rlx
