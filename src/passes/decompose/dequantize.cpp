// Decomposition of `dequantize` (packed GGML blocks u8 [N, row_bytes] -> f32 [N, k]) into integer
// and float primitives, so every device that has gather, div, rem and f32 arithmetic can run GGUF
// weights: the bytes are reshaped to [N, blocks, block_bytes], each element's bit fields
// (quant/fields.h) are gathered along the byte axis with constant index vectors and cut out with
// div/rem by powers of two, and the f16 scales are rebuilt from their bits (sign, exponent,
// mantissa) with exact f32 products. Values equal the reference dequantizer's bit for bit where
// the device's f32 multiply and add are IEEE (no contraction).
#include "passes/decompose/common.h"
#include "quant/fields.h"

#include <cmath>

namespace rlx {

using namespace decomp;

namespace {

struct Ctx {
  Builder& b;
  ValueId w;  // i32 [N, nb, block_bytes]
  Ints shape;  // [N, nb, elems]
};

ValueId i32_vector(Builder& b, const std::vector<int32_t>& v) {
  Tensor t(DType::i32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = v[i];
  return b.constant(t);
}
ValueId per_element(Ctx& c, const std::vector<int32_t>& v) { return broadcast_to(c.b, i32_vector(c.b, v), c.shape, true); }
bool all_equal(const std::vector<int32_t>& v, int32_t x) {
  for (auto e : v)
    if (e != x) return false;
  return true;
}

// (w[byte] >> shift) & (2^width - 1) of each element's part, [N, nb, elems] i32.
ValueId part(Ctx& c, const std::vector<quant::BitField>& f, bool hi) {
  std::vector<int32_t> byte, div, mod;
  for (auto& e : f) {
    const quant::BitPart& p = hi ? e.hi : e.lo;
    byte.push_back(p.width ? p.byte : 0);
    div.push_back(1 << p.shift);
    mod.push_back(1 << p.width);
  }
  ValueId g = c.b.op1(OpKind::Gather, {c.w, i32_vector(c.b, byte)}, {{"axis", int64_t{2}}});
  if (!all_equal(div, 1)) g = c.b.div(g, per_element(c, div));
  if (!all_equal(mod, 256)) g = c.b.op1(OpKind::Rem, {g, per_element(c, mod)});
  return g;
}

// The fields' integer values as f32 [N, nb, elems].
ValueId field(Ctx& c, const std::vector<quant::BitField>& f) {
  ValueId v = part(c, f, false);
  bool has_hi = false;
  std::vector<int32_t> mul, half, bits, sub;
  for (auto& e : f) {
    has_hi |= e.hi.width > 0;
    mul.push_back(1 << e.lo.width);
    int n = e.lo.width + e.hi.width;
    // Two's complement of n bits: (v + 2^(n-1)) mod 2^n - 2^(n-1); then the offset.
    half.push_back(e.sign ? 1 << (n - 1) : 0);
    bits.push_back(1 << n);
    sub.push_back((e.sign ? 1 << (n - 1) : 0) + e.offset);
  }
  if (has_hi) v = c.b.add(v, c.b.mul(part(c, f, true), per_element(c, mul)));
  if (!all_equal(half, 0)) v = c.b.op1(OpKind::Rem, {c.b.add(v, per_element(c, half)), per_element(c, bits)});
  if (!all_equal(sub, 0)) v = c.b.sub(v, per_element(c, sub));
  return c.b.convert(v, DType::f32);
}

// The little-endian f16 at `byte` of every block, as f32 [N, nb] (exact: an 11-bit mantissa times
// a power of two; exponent 31 reads as infinity).
ValueId f16_at(Ctx& c, int byte) {
  Builder& b = c.b;
  Ints n = {c.shape[0], c.shape[1]};
  auto byte_at = [&](int i) {
    return b.reshape(slice(b, c.w, {0, 0, i}, {n[0], n[1], i + 1}), to_shape(n));
  };
  auto k = [&](int32_t x) { return broadcast_to(b, b.scalar(x, DType::i32), n, true); };
  ValueId bits = b.add(byte_at(byte), b.mul(byte_at(byte + 1), k(256)));
  ValueId sign = b.div(bits, k(32768));
  ValueId expo = b.op1(OpKind::Rem, {b.div(bits, k(1024)), k(32)});
  ValueId mant = b.op1(OpKind::Rem, {bits, k(1024)});
  Tensor pow2(DType::f32, {32});
  std::vector<int32_t> implicit(32, 1024);
  implicit[0] = 0;
  for (int e = 0; e < 32; ++e)
    pow2.data<float>()[e] = e == 31 ? INFINITY : std::ldexp(1.0f, (e == 0 ? 1 : e) - 25);
  ValueId lead = b.op1(OpKind::Gather, {i32_vector(b, implicit), expo}, {{"axis", int64_t{0}}});
  ValueId scale = b.op1(OpKind::Gather, {b.constant(pow2), expo}, {{"axis", int64_t{0}}});
  ValueId sgn = b.sub(k(1), b.mul(sign, k(2)));
  ValueId m = b.convert(b.mul(b.add(mant, lead), sgn), DType::f32);
  return b.mul(m, scale);
}

ValueId per_block(Ctx& c, ValueId v) { return c.b.broadcast_in_dim(v, to_shape(c.shape), {0, 1}); }

}  // namespace

std::vector<int32_t> decompose_dequantize(Builder& b, const Node& n, const std::vector<int32_t>& in) {
  const std::string& type = attr_str(n, "type");
  const quant::TypeTraits* tr = quant::type_traits_by_name(type);
  quant::BlockFields f;
  RLX_CHECK(tr && quant::block_fields(tr->type, &f), "[decompose] dequantize: no decomposition for ", type,
            " (its block scale is not an f16)");
  Ints wd = dims_of(b, in[0]);
  int64_t k = attr_int(n, "k"), nb = k / f.elems;
  Ctx c{b, b.reshape(b.convert(in[0], DType::i32), to_shape({wd[0], nb, f.block_bytes})), {wd[0], nb, f.elems}};
  ValueId d = per_block(c, f16_at(c, f.d_byte));
  ValueId ds = f.scale.empty() ? d : b.mul(d, field(c, f.scale));
  ValueId y = b.mul(ds, field(c, f.q));
  if (f.min_mode == quant::BlockFields::Min::Add) y = b.add(y, per_block(c, f16_at(c, f.min_byte)));
  if (f.min_mode == quant::BlockFields::Min::SubScaled)
    y = b.sub(y, b.mul(per_block(c, f16_at(c, f.min_byte)), field(c, f.min)));
  return {b.reshape(y, to_shape({wd[0], k}))};
}

}  // namespace rlx
