// The freestanding runtime every Hexagon program is linked with, as C++ source compiled by
// clang --target=hexagon: Linux syscalls (trap0), the integer/float division helpers clang calls
// (Hexagon has no divide instruction and Debian ships no Hexagon compiler-rt), the libm functions
// the rendered kernels use (computed in double, so f32 results are correctly rounded in practice
// and f64 ones are within a few ulp), and a fiber scheduler: a work-group whose kernel has
// barriers runs one fiber per work-item, each barrier a switch to the next fiber.
#include "backends/hexagon/hexagon.h"

namespace rlx::hexagon {

const char* runtime_source() {
  return R"RT(typedef __INT64_TYPE__ i64_t;
typedef __UINT64_TYPE__ u64_t;
typedef __UINT32_TYPE__ u32_t;
typedef __INT32_TYPE__ i32_t;
typedef __SIZE_TYPE__ size_t;

extern "C" {
i32_t rlx_syscall3(i32_t n, i32_t a, i32_t b, i32_t c) {
  register i32_t r0 __asm__("r0") = a;
  register i32_t r1 __asm__("r1") = b;
  register i32_t r2 __asm__("r2") = c;
  register i32_t r6 __asm__("r6") = n;
  __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r6) : "memory");
  return r0;
}
void* memcpy(void* d, const void* s, size_t n) {
  char* dd = (char*)d; const char* ss = (const char*)s;
  for (size_t i = 0; i < n; ++i) dd[i] = ss[i];
  return d;
}
void* memmove(void* d, const void* s, size_t n) {
  char* dd = (char*)d; const char* ss = (const char*)s;
  if (dd < ss) for (size_t i = 0; i < n; ++i) dd[i] = ss[i];
  else for (size_t i = n; i > 0; --i) dd[i - 1] = ss[i - 1];
  return d;
}
void* memset(void* d, int c, size_t n) {
  char* dd = (char*)d;
  for (size_t i = 0; i < n; ++i) dd[i] = (char)c;
  return d;
}

// ---- integer division (shift-subtract; constant divisors never get here, clang multiplies)
static u64_t rlx_udivmod(u64_t a, u64_t b, u64_t* rem) {
  if (b == 0) { *rem = a; return 0; }
  u64_t q = 0, r = 0;
  for (int i = 63; i >= 0; --i) {
    r = (r << 1) | ((a >> i) & 1);
    if (r >= b) { r -= b; q |= (u64_t)1 << i; }
  }
  *rem = r;
  return q;
}
u64_t __hexagon_udivdi3(u64_t a, u64_t b) { u64_t r; return rlx_udivmod(a, b, &r); }
u64_t __hexagon_umoddi3(u64_t a, u64_t b) { u64_t r; rlx_udivmod(a, b, &r); return r; }
i64_t __hexagon_divdi3(i64_t a, i64_t b) {
  u64_t r, q = rlx_udivmod(a < 0 ? 0 - (u64_t)a : (u64_t)a, b < 0 ? 0 - (u64_t)b : (u64_t)b, &r);
  return (a < 0) != (b < 0) ? (i64_t)(0 - q) : (i64_t)q;
}
i64_t __hexagon_moddi3(i64_t a, i64_t b) {
  u64_t r;
  rlx_udivmod(a < 0 ? 0 - (u64_t)a : (u64_t)a, b < 0 ? 0 - (u64_t)b : (u64_t)b, &r);
  return a < 0 ? (i64_t)(0 - r) : (i64_t)r;
}
u32_t __hexagon_udivsi3(u32_t a, u32_t b) { return (u32_t)__hexagon_udivdi3(a, b); }
u32_t __hexagon_umodsi3(u32_t a, u32_t b) { return (u32_t)__hexagon_umoddi3(a, b); }
i32_t __hexagon_divsi3(i32_t a, i32_t b) { return (i32_t)__hexagon_divdi3(a, b); }
i32_t __hexagon_modsi3(i32_t a, i32_t b) { return (i32_t)__hexagon_moddi3(a, b); }

// ---- floating division, correctly rounded (round to nearest even), by long division of the
// significands; f32 divides in f64 and rounds once more, which is exact for a quotient (53 >= 2*24+2).
static u64_t rlx_dbits(double d) { u64_t u; __builtin_memcpy(&u, &d, 8); return u; }
static double rlx_bitsd(u64_t u) { double d; __builtin_memcpy(&d, &u, 8); return d; }
double __hexagon_divdf3(double a, double b) {
  const u64_t frac = ((u64_t)1 << 52) - 1, hid = (u64_t)1 << 52;
  u64_t ua = rlx_dbits(a), ub = rlx_dbits(b), sign = (ua ^ ub) & ((u64_t)1 << 63);
  int ea = (int)((ua >> 52) & 0x7ff), eb = (int)((ub >> 52) & 0x7ff);
  u64_t ma = ua & frac, mb = ub & frac;
  const u64_t qnan = (u64_t)0x7ff8 << 48, inf = (u64_t)0x7ff << 52;
  if (ea == 0x7ff && ma) return rlx_bitsd(ua | ((u64_t)1 << 51));
  if (eb == 0x7ff && mb) return rlx_bitsd(ub | ((u64_t)1 << 51));
  if (ea == 0x7ff) return rlx_bitsd(eb == 0x7ff ? qnan : sign | inf);
  if (eb == 0x7ff) return rlx_bitsd(sign);
  if (ea == 0 && ma == 0) return rlx_bitsd((eb == 0 && mb == 0) ? qnan : sign);
  if (eb == 0 && mb == 0) return rlx_bitsd(sign | inf);
  if (ea == 0) { while (!(ma & hid)) ma <<= 1, --ea; ++ea; } else ma |= hid;
  if (eb == 0) { while (!(mb & hid)) mb <<= 1, --eb; ++eb; } else mb |= hid;
  int e = ea - eb + 1023;
  if (ma < mb) ma <<= 1, --e;
  u64_t q = 0, r = ma;
  for (int i = 0; i < 55; ++i) { q <<= 1; if (r >= mb) { r -= mb; q |= 1; } r <<= 1; }
  u64_t sticky = r != 0;
  if (e >= 2047) return rlx_bitsd(sign | inf);
  if (e <= 0) {
    int sh = 1 - e;
    if (sh > 60) { sticky |= q != 0; q = 0; }
    else { sticky |= (q & (((u64_t)1 << sh) - 1)) != 0; q >>= sh; }
    e = 1;
  }
  u64_t m = q >> 2, rb = (q >> 1) & 1;
  sticky |= q & 1;
  if (rb && (sticky || (m & 1))) ++m;
  return rlx_bitsd(sign | ((((u64_t)(e - 1)) << 52) + m));
}
float __hexagon_divsf3(float a, float b) { return (float)__hexagon_divdf3((double)a, (double)b); }
}  // extern "C"

// ---- math (double; float overloads round the double result)
#define NAN_F __builtin_nanf("")
#define INF_F __builtin_inff()
static inline bool isnan(double x) { return x != x; }
static inline bool isnan(float x) { return x != x; }
static inline bool rlx_isinf(double x) { return x == __builtin_inf() || x == -__builtin_inf(); }
static inline double fabs(double x) { return rlx_bitsd(rlx_dbits(x) & ~((u64_t)1 << 63)); }
static inline float fabs(float x) { return (float)fabs((double)x); }
static inline double rint(double x) {  // ties to even in the default rounding mode
  const double big = 4503599627370496.0;
  if (!(fabs(x) < big)) return x;
  double r = x >= 0 ? (x + big) - big : (x - big) + big;
  return r == 0 ? (x < 0 ? -0.0 : 0.0) : r;
}
static inline double trunc(double x) {
  if (!(fabs(x) < 4503599627370496.0)) return x;
  double r = (double)(i64_t)x;
  return r == 0 ? (x < 0 ? -0.0 : 0.0) : r;
}
static inline double floor(double x) { double t = trunc(x); return t > x ? t - 1 : t; }
static inline double ceil(double x) { double t = trunc(x); return t < x ? t + 1 : t; }
static inline double ldexp_i(double x, int e) {  // x * 2^e in steps that stay normal
  while (e > 1000) x *= 1.0715086071862673e301, e -= 1000;
  while (e < -1000) x *= 9.3326361850321888e-302, e += 1000;
  return x * rlx_bitsd((u64_t)(e + 1023) << 52);
}
static const double rlx_ifact[24] = {1.0, 1.0, 0.5, 0.16666666666666666, 0.041666666666666664, 0.008333333333333333, 0.001388888888888889, 0.0001984126984126984, 2.48015873015873e-05, 2.7557319223985893e-06, 2.755731922398589e-07, 2.505210838544172e-08, 2.08767569878681e-09, 1.6059043836821613e-10, 1.1470745597729725e-11, 7.647163731819816e-13, 4.779477332387385e-14, 2.8114572543455206e-15, 1.5619206968586225e-16, 8.22063524662433e-18, 4.110317623312165e-19, 1.9572941063391263e-20, 8.896791392450574e-22, 3.8681701706306835e-23};
static const double rlx_iodd[22] = {1.0, 0.3333333333333333, 0.2, 0.14285714285714285, 0.1111111111111111, 0.09090909090909091, 0.07692307692307693, 0.06666666666666667, 0.058823529411764705, 0.05263157894736842, 0.047619047619047616, 0.043478260869565216, 0.04, 0.037037037037037035, 0.034482758620689655, 0.03225806451612903, 0.030303030303030304, 0.02857142857142857, 0.02702702702702703, 0.02564102564102564, 0.024390243902439025, 0.023255813953488372};
static double exp(double x) {
  if (isnan(x)) return x;
  if (x > 709.8) return __builtin_inf();
  if (x < -745.2) return 0.0;
  double k = rint(x * 1.4426950408889634);
  double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  double p = rlx_ifact[13];
  for (int i = 12; i >= 0; --i) p = p * r + rlx_ifact[i];
  return ldexp_i(p, (int)k);
}
static double expm1(double x) {
  if (fabs(x) >= 0.5) return exp(x) - 1.0;
  double s = rlx_ifact[18];
  for (int i = 17; i >= 1; --i) s = s * x + rlx_ifact[i];
  return s * x;
}
static double log(double x) {
  if (isnan(x) || x < 0) return __builtin_nan("");
  if (x == 0) return -__builtin_inf();
  if (rlx_isinf(x)) return x;
  int e = 0;
  if (x < 2.2250738585072014e-308) x *= 4503599627370496.0, e -= 52;
  u64_t u = rlx_dbits(x);
  e += (int)((u >> 52) & 0x7ff) - 1023;
  double m = rlx_bitsd((u & (((u64_t)1 << 52) - 1)) | ((u64_t)1023 << 52));
  if (m > 1.4142135623730951) m *= 0.5, ++e;
  double s = (m - 1.0) / (m + 1.0), s2 = s * s, sum = 0.0, pw = s;
  for (int i = 0; i < 21; ++i) sum += pw * rlx_iodd[i], pw *= s2;
  return 2.0 * sum + e * 6.93147180559945309417e-01;
}
static double sqrt(double x) {
  if (isnan(x) || x < 0) return x == 0 ? x : __builtin_nan("");
  if (x == 0 || rlx_isinf(x)) return x;
  // Newton on 1/sqrt(x) (no division), then y = x * (1/sqrt(x))
  double g = rlx_bitsd(((u64_t)0x5fe6eb50c7b537a9) - (rlx_dbits(x) >> 1));
  for (int i = 0; i < 6; ++i) g = g * (1.5 - 0.5 * x * g * g);
  double y = x * g;
  // one correction step towards the correctly rounded root
  double lo = rlx_bitsd(rlx_dbits(y) - 1), hi = rlx_bitsd(rlx_dbits(y) + 1);
  if (fabs(lo * lo - x) < fabs(y * y - x)) y = lo;
  if (fabs(hi * hi - x) < fabs(y * y - x)) y = hi;
  return y;
}
static double rsqrt(double x) { return 1.0 / sqrt(x); }
static double tanh(double x) {
  if (isnan(x)) return x;
  if (x > 20) return 1.0;
  if (x < -20) return -1.0;
  double e = expm1(2.0 * x);
  return e / (e + 2.0);
}
static double erf(double x) {
  if (isnan(x)) return x;
  double a = fabs(x);
  if (a > 6.0) return x < 0 ? -1.0 : 1.0;
  // erf(a) = 2/sqrt(pi) exp(-a^2) sum a^(2n+1) 2^n / (1*3*...*(2n+1)): positive terms, no cancellation
  double t = a, s = a, a2 = 2.0 * a * a;
  for (int n = 1; n < 400; ++n) {
    t = t * a2 / (2 * n + 1);
    s += t;
    if (t < s * 1e-17) break;
  }
  double r = 1.1283791670955126 * exp(-a * a) * s;
  if (r > 1.0) r = 1.0;
  return x < 0 ? -r : r;
}
static double rlx_sin_poly(double r) {
  double r2 = r * r, s = 0.0;
  for (int i = 21; i >= 3; i -= 2) s = (s + ((i / 2) & 1 ? -rlx_ifact[i] : rlx_ifact[i])) * r2;
  return r + r * s;
}
static double rlx_cos_poly(double r) {
  double r2 = r * r, s = 0.0;
  for (int i = 20; i >= 2; i -= 2) s = (s + ((i / 2) & 1 ? -rlx_ifact[i] : rlx_ifact[i])) * r2;
  return 1.0 + s;
}
static double rlx_trig(double x, int shift) {  // sin(x) for shift 0, cos(x) for shift 1
  if (isnan(x) || rlx_isinf(x)) return __builtin_nan("");
  double k = rint(x * 0.63661977236758134308);
  double r = ((x - k * 1.57079632673412561417e+00) - k * 6.07710050650619224932e-11) - k * 2.02226624879595063154e-21;
  int q = ((int)(i64_t)k + shift) & 3;
  double v = (q & 1) ? rlx_cos_poly(r) : rlx_sin_poly(r);
  return (q & 2) ? -v : v;
}
static double sin(double x) { return rlx_trig(x, 0); }
static double cos(double x) { return rlx_trig(x, 1); }
static double fmod(double a, double b) {
  if (isnan(a) || isnan(b) || rlx_isinf(a) || b == 0) return __builtin_nan("");
  if (rlx_isinf(b)) return a;
  double r = a - trunc(a / b) * b;
  if (r != 0 && (r < 0) != (a < 0)) r += (a < 0 ? -fabs(b) : fabs(b));
  if (fabs(r) >= fabs(b)) r -= (a < 0 ? -fabs(b) : fabs(b));
  return r;
}
static double pow(double a, double b) {
  if (b == 0) return 1.0;
  if (a == 1.0) return 1.0;
  if (isnan(a) || isnan(b)) return __builtin_nan("");
  bool bint = trunc(b) == b, odd = bint && fabs(b) < 9007199254740992.0 && fmod(b, 2.0) != 0;
  if (a == 0) return b < 0 ? (odd ? 1.0 / a : __builtin_inf()) : (odd ? a : 0.0);
  if (rlx_isinf(b)) { double m = fabs(a); return m == 1.0 ? 1.0 : ((m > 1.0) == (b > 0) ? __builtin_inf() : 0.0); }
  if (a < 0) {
    if (!bint) return __builtin_nan("");
    double r = exp(b * log(-a));
    return odd ? -r : r;
  }
  return exp(b * log(a));
}
static inline float floor(float x) { return (float)floor((double)x); }
static inline float ceil(float x) { return (float)ceil((double)x); }
static inline float rint(float x) { return (float)rint((double)x); }
static inline float trunc(float x) { return (float)trunc((double)x); }
static inline float exp(float x) { return (float)exp((double)x); }
static inline float log(float x) { return (float)log((double)x); }
static inline float sqrt(float x) { return (float)sqrt((double)x); }
static inline float rsqrt(float x) { return (float)(1.0 / sqrt((double)x)); }
static inline float tanh(float x) { return (float)tanh((double)x); }
static inline float erf(float x) { return (float)erf((double)x); }
static inline float sin(float x) { return (float)sin((double)x); }
static inline float cos(float x) { return (float)cos((double)x); }
static inline float fmod(float a, float b) { return (float)fmod((double)a, (double)b); }
static inline float pow(float a, float b) { return (float)pow((double)a, (double)b); }
template <class T> static inline T max(T a, T b) { return a > b ? a : b; }
template <class T> static inline T min(T a, T b) { return a < b ? a : b; }

// ---- halves: f16 (round to nearest even) and bf16 as 16-bit patterns
static inline u32_t rlx_fbits(float f) { u32_t u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float rlx_bitsf(u32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline float h2f(unsigned short h) {
  u32_t s = (u32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 31) return rlx_bitsf(s | 0x7f800000u | (m << 13));
  if (e == 0) { float v = (float)m * 5.9604644775390625e-08f; return s ? -v : v; }
  return rlx_bitsf(s | ((e + 112) << 23) | (m << 13));
}
static inline unsigned short f2h(float f) {
  u32_t x = rlx_fbits(f), s = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
  if (e == 255) return (unsigned short)(s | 0x7c00 | (m ? 0x200 : 0));
  int ee = (int)e - 112;
  if (ee >= 31) return (unsigned short)(s | 0x7c00);
  if (ee <= 0) {
    if (ee < -10) return (unsigned short)s;
    m |= 0x800000;
    int sh = 14 - ee;
    u32_t h = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return (unsigned short)(s | h);
  }
  u32_t h = ((u32_t)ee << 10) | (m >> 13), rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return (unsigned short)(s | h);
}
static inline float bf2f(unsigned short b) { return rlx_bitsf((u32_t)b << 16); }
static inline unsigned short f2bf(float f) {
  u32_t x = rlx_fbits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---- work-items: GRP/LID/GID; kernels with barriers run one fiber per work-item
static int rlx_grp, rlx_lid, rlx_local;
#define GRP rlx_grp
#define LID rlx_lid
#define GID (rlx_grp * rlx_local + rlx_lid)
#define BARRIER rlx_barrier()
struct RlxCtx { u64_t r[7]; u32_t sp; u32_t pad; };
extern "C" void rlx_swap(RlxCtx* from, RlxCtx* to);
__asm__(".text\n.globl rlx_swap\n.type rlx_swap,@function\n.p2align 4\nrlx_swap:\n"
        "  memd(r0+#0) = r17:16\n  memd(r0+#8) = r19:18\n  memd(r0+#16) = r21:20\n"
        "  memd(r0+#24) = r23:22\n  memd(r0+#32) = r25:24\n  memd(r0+#40) = r27:26\n"
        "  memd(r0+#48) = r31:30\n  memw(r0+#56) = r29\n"
        "  r17:16 = memd(r1+#0)\n  r19:18 = memd(r1+#8)\n  r21:20 = memd(r1+#16)\n"
        "  r23:22 = memd(r1+#24)\n  r25:24 = memd(r1+#32)\n  r27:26 = memd(r1+#40)\n"
        "  r31:30 = memd(r1+#48)\n  r29 = memw(r1+#56)\n  jumpr r31\n"
        ".size rlx_swap, .-rlx_swap\n");
enum { kRlxMaxItems = 1024, kRlxStack = 8192 };
static RlxCtx rlx_sched, rlx_ctx[kRlxMaxItems];
static unsigned char rlx_done[kRlxMaxItems];
static unsigned char rlx_stacks[kRlxMaxItems][kRlxStack] __attribute__((aligned(16)));
static void (*rlx_fn)(void);
static int rlx_cur;
static void rlx_barrier(void) { rlx_swap(&rlx_ctx[rlx_cur], &rlx_sched); }
static void rlx_fiber_entry(void) {
  rlx_fn();
  rlx_done[rlx_cur] = 1;
  rlx_swap(&rlx_ctx[rlx_cur], &rlx_sched);
  for (;;) {}
}
static void rlx_exit(int code) { rlx_syscall3(93, code, 0, 0); for (;;) {} }
static void rlx_launch(void (*fn)(void), int groups, int local, bool barriers) {
  rlx_local = local;
  rlx_fn = fn;
  if (barriers && local > kRlxMaxItems) rlx_exit(3);
  for (int g = 0; g < groups; ++g) {
    rlx_grp = g;
    if (!barriers) {
      for (int l = 0; l < local; ++l) rlx_lid = l, fn();
      continue;
    }
    for (int l = 0; l < local; ++l) {
      rlx_done[l] = 0;
      for (int j = 0; j < 7; ++j) rlx_ctx[l].r[j] = 0;
      rlx_ctx[l].r[6] = (u64_t)(u32_t)(__SIZE_TYPE__)&rlx_fiber_entry << 32;  // r31 (lr); r30 (fp) = 0
      rlx_ctx[l].sp = (u32_t)(__SIZE_TYPE__)(rlx_stacks[l] + kRlxStack - 16);
    }
    int alive = local;
    while (alive > 0)
      for (int l = 0; l < local; ++l) {
        if (rlx_done[l]) continue;
        rlx_lid = l, rlx_cur = l;
        rlx_swap(&rlx_sched, &rlx_ctx[l]);
        alive -= rlx_done[l];
      }
  }
}
static void rlx_read_all(unsigned char* p, u32_t n) {
  while (n > 0) {
    i32_t r = rlx_syscall3(63, 0, (i32_t)(__SIZE_TYPE__)p, n > (1u << 20) ? (1u << 20) : (i32_t)n);
    if (r <= 0) rlx_exit(r == 0 ? 0 : 4);
    p += r, n -= (u32_t)r;
  }
}
static void rlx_write_all(const unsigned char* p, u32_t n) {
  while (n > 0) {
    i32_t r = rlx_syscall3(64, 1, (i32_t)(__SIZE_TYPE__)p, n > (1u << 20) ? (1u << 20) : (i32_t)n);
    if (r <= 0) rlx_exit(5);
    p += r, n -= (u32_t)r;
  }
}
)RT";
}

}  // namespace rlx::hexagon
