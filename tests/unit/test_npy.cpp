// .npy / .npz reading and writing: round trips, hand-written foreign files, and corrupt input.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "rlx/npy.h"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rlx_npy_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_bytes(const std::string& p, const std::string& bytes) const {
    std::ofstream f(p, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  // Files left in the directory (to check that failed writes leave nothing behind).
  std::vector<std::string> listing() const {
    std::vector<std::string> r;
    for (auto& e : fs::directory_iterator(dir_)) r.push_back(e.path().filename().string());
    return r;
  }
  fs::path dir_;
};

// A .npy file with a hand-written header, as another writer (or another machine) would make it.
std::string npy_bytes(const std::string& header_dict, const std::string& data, int major = 1) {
  std::string h = header_dict;
  size_t pre = major == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  uint32_t n = static_cast<uint32_t>(h.size());
  for (size_t i = 0; i < pre - 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + h + data;
}

template <class T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class T>
std::string big_endian_bytes(const std::vector<T>& v) {
  std::string s = raw_bytes(v);
  for (size_t i = 0; i < s.size(); i += sizeof(T)) std::reverse(s.begin() + i, s.begin() + i + sizeof(T));
  return s;
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  if (a.nbytes()) {
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  }
}

Tensor sample(DType dt, std::vector<int64_t> shape) {
  Tensor t(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::c64) t.setc(i, {i * 0.5 - 3, -1.0 * i});
    else if (dt == DType::boolean) t.set(i, i % 3 == 0);
    else t.set(i, static_cast<double>((i * 7) % 23) - (dtype_class(dt) == DClass::kUnsigned ? 0 : 11));
  }
  return t;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_F(NpyTest, RoundTripEveryDtype) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto dt = static_cast<DType>(i);
    if (dt == DType::bf16) continue;
    Tensor t = sample(dt, {3, 5});
    std::string p = path(std::string(dtype_name(dt)) + ".npy");
    write_npy(p, t);
    SCOPED_TRACE(std::string(dtype_name(dt)));
    expect_same(read_npy(p), t);
  }
}

TEST_F(NpyTest, ZeroDimAndEmpty) {
  Tensor s = sample(DType::f64, {});
  write_npy(path("s.npy"), s);
  Tensor back = read_npy(path("s.npy"));
  EXPECT_EQ(back.rank(), 0);
  expect_same(back, s);
  for (auto shape : std::vector<std::vector<int64_t>>{{0}, {2, 0, 3}, {0, 0}}) {
    Tensor e(DType::i32, shape);
    write_npy(path("e.npy"), e);
    expect_same(read_npy(path("e.npy")), e);
  }
  // numpy spells a 1-d shape "(4,)": our header must say exactly that.
  std::string bytes = serialize_npy(sample(DType::f32, {4}));
  EXPECT_NE(bytes.find("'shape': (4,)"), std::string::npos) << bytes;
  EXPECT_EQ(bytes.size() % 64, (4 * 4) % 64);  // data starts 64-byte aligned
}

TEST_F(NpyTest, FortranOrderIsTransposed) {
  // A 2x3 matrix [[0,1,2],[3,4,5]] stored column-major: 0 3 1 4 2 5.
  std::vector<int32_t> col = {0, 3, 1, 4, 2, 5};
  write_bytes(path("f.npy"), npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", raw_bytes(col)));
  Tensor t = read_npy(path("f.npy"));
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.get_int(i), i);
  // Rank 3, shape (2,3,4): fortran element (i,j,k) sits at i + 2j + 6k.
  std::vector<double> f3(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) f3[i + 2 * j + 6 * k] = 100 * i + 10 * j + k;
  write_bytes(path("f3.npy"),
              npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 4), }", raw_bytes(f3)));
  Tensor t3 = read_npy(path("f3.npy"));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(t3.get(i * 12 + j * 4 + k), 100 * i + 10 * j + k);
}

TEST_F(NpyTest, BigEndianAndVersions) {
  std::vector<float> f = {1.5f, -2.25f, 3e10f};
  write_bytes(path("be.npy"), npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", big_endian_bytes(f)));
  Tensor t = read_npy(path("be.npy"));
  ASSERT_EQ(t.dtype(), DType::f32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.data<float>()[i], f[i]);

  std::vector<int64_t> l = {1, -2, int64_t{1} << 40};
  write_bytes(path("be8.npy"), npy_bytes("{'descr': '>i8', 'fortran_order': False, 'shape': (3,)}", big_endian_bytes(l), 2));
  Tensor t8 = read_npy(path("be8.npy"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t8.get_int(i), l[i]);

  // Complex: each float half is swapped on its own.
  std::vector<float> c = {1, 2, -3, 4};
  write_bytes(path("bec.npy"), npy_bytes("{'descr': '>c8', 'fortran_order': False, 'shape': (2,), }", big_endian_bytes(c), 3));
  Tensor tc = read_npy(path("bec.npy"));
  ASSERT_EQ(tc.dtype(), DType::c64);
  EXPECT_EQ(tc.getc(1), std::complex<double>(-3, 4));

  // '=' (native), double-quoted keys and a big-endian fortran-ordered i2 combined.
  std::vector<int16_t> s = {0, 3, 1, 4, 2, 5};
  write_bytes(path("mix.npy"), npy_bytes("{\"shape\": (2, 3), \"fortran_order\": True, \"descr\": \">i2\"}", big_endian_bytes(s)));
  Tensor ts = read_npy(path("mix.npy"));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ts.get_int(i), i);
  write_bytes(path("nat.npy"), npy_bytes("{'descr': '=u1', 'fortran_order': False, 'shape': (2,), }", "\x07\x09"));
  EXPECT_EQ(read_npy(path("nat.npy")).get_int(1), 9);
}

TEST_F(NpyTest, Bf16AndUnknownDtypesAreNamed) {
  Tensor b(DType::bf16, {2});
  std::string m = message_of([&] { write_npy(path("b.npy"), b); });
  EXPECT_NE(m.find("[npy] bf16 has no numpy dtype; convert to f32 first"), std::string::npos) << m;
  EXPECT_FALSE(fs::exists(path("b.npy")));
  m = message_of([&] { write_npz(path("b.npz"), {{"a", Tensor(DType::f32, {1})}, {"b", b}}); });
  EXPECT_NE(m.find("bf16 has no numpy dtype"), std::string::npos) << m;
  EXPECT_TRUE(listing().empty());

  // (u2/u4/u8 are real dtypes; a unicode-string array is unknown.)
  write_bytes(path("u4.npy"), npy_bytes("{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", "abcd"));
  m = message_of([&] { read_npy(path("u4.npy")); });
  EXPECT_NE(m.find("'<U1'"), std::string::npos) << m;
  EXPECT_NE(m.find(path("u4.npy")), std::string::npos) << m;
}

TEST_F(NpyTest, NpzRoundTripKeepsOrder) {
  std::vector<std::pair<std::string, Tensor>> arrays = {
      {"zeta", sample(DType::f32, {2, 2})}, {"alpha", sample(DType::i64, {3})},
      {"scalar", sample(DType::f16, {})},   {"empty", Tensor(DType::u8, {0, 4})},
      {"flags", sample(DType::boolean, {5})}};
  write_npz(path("a.npz"), arrays);
  auto back = read_npz_ordered(path("a.npz"));
  ASSERT_EQ(back.size(), arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ(back[i].first, arrays[i].first);
    expect_same(back[i].second, arrays[i].second);
  }
  auto m = read_npz(path("a.npz"));
  ASSERT_EQ(m.size(), 5u);
  expect_same(m.at("alpha"), arrays[1].second);
  // Empty archive.
  write_npz(path("none.npz"), {});
  EXPECT_TRUE(read_npz(path("none.npz")).empty());
}

TEST_F(NpyTest, NpzDeflatedEntries) {
  // Build a zip by hand with a deflated entry (as np.savez_compressed does) and a stored one.
  Tensor big = sample(DType::f32, {64, 16});
  Tensor small = sample(DType::i8, {7});
  struct Entry {
    std::string name, raw;
    bool deflate;
  };
  std::vector<Entry> entries = {{"w.npy", serialize_npy(big), true}, {"b.npy", serialize_npy(small), false}};
  std::string zip, central;
  auto put = [](std::string& s, uint32_t v, int n) {
    for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  for (auto& e : entries) {
    std::string data = e.raw;
    if (e.deflate) {
      z_stream zs{};
      ASSERT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
      data.assign(deflateBound(&zs, e.raw.size()), '\0');
      zs.next_in = reinterpret_cast<Bytef*>(e.raw.data());
      zs.avail_in = static_cast<uInt>(e.raw.size());
      zs.next_out = reinterpret_cast<Bytef*>(data.data());
      zs.avail_out = static_cast<uInt>(data.size());
      ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
      data.resize(zs.total_out);
      deflateEnd(&zs);
      ASSERT_LT(data.size(), e.raw.size());
    }
    uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(e.raw.data()),
                                               static_cast<uInt>(e.raw.size())));
    uint32_t off = static_cast<uint32_t>(zip.size());
    uint16_t method = e.deflate ? 8 : 0;
    put(zip, 0x04034b50, 4);
    put(zip, 20, 2);
    put(zip, 0, 2);
    put(zip, method, 2);
    put(zip, 0, 4);
    put(zip, crc, 4);
    put(zip, static_cast<uint32_t>(data.size()), 4);
    put(zip, static_cast<uint32_t>(e.raw.size()), 4);
    put(zip, static_cast<uint32_t>(e.name.size()), 2);
    put(zip, 0, 2);
    zip += e.name + data;
    put(central, 0x02014b50, 4);
    put(central, 20, 2);
    put(central, 20, 2);
    put(central, 0, 2);
    put(central, method, 2);
    put(central, 0, 4);
    put(central, crc, 4);
    put(central, static_cast<uint32_t>(data.size()), 4);
    put(central, static_cast<uint32_t>(e.raw.size()), 4);
    put(central, static_cast<uint32_t>(e.name.size()), 2);
    for (int i = 0; i < 4; ++i) put(central, 0, 2);  // extra, comment, disk, internal
    put(central, 0, 4);
    put(central, off, 4);
    central += e.name;
  }
  uint32_t cd_off = static_cast<uint32_t>(zip.size());
  zip += central;
  put(zip, 0x06054b50, 4);
  put(zip, 0, 4);
  put(zip, 2, 2);
  put(zip, 2, 2);
  put(zip, static_cast<uint32_t>(central.size()), 4);
  put(zip, cd_off, 4);
  put(zip, 0, 2);
  write_bytes(path("c.npz"), zip);
  auto back = read_npz_ordered(path("c.npz"));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].first, "w");
  EXPECT_EQ(back[1].first, "b");
  expect_same(back[0].second, big);
  expect_same(back[1].second, small);

  // Flip a byte inside the deflated stream: either inflate or the CRC must object.
  std::string bad = zip;
  bad[30 + 5 + 40] ^= 0x5a;
  write_bytes(path("bad.npz"), bad);
  std::string m = message_of([&] { read_npz(path("bad.npz")); });
  EXPECT_NE(m.find("[npy] " + path("bad.npz")), std::string::npos) << m;
  EXPECT_NE(m.find("'w.npy'"), std::string::npos) << m;
}

TEST_F(NpyTest, CorruptFilesGiveErrors) {
  std::string good = serialize_npy(sample(DType::f32, {4, 4}));
  const std::string hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  struct Case {
    const char* name;
    std::string bytes;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"empty", "", "bad magic"},
      {"magic", "\x93NUMPZ\x01\x00\x10\x00", "bad magic"},
      {"version", npy_bytes(hdr, std::string(16, '\0'), 4), "version 4"},
      {"header_len", good.substr(0, 40), "truncated header"},
      {"data", good.substr(0, good.size() - 1), "truncated data"},
      {"not_dict", npy_bytes("[1, 2]", ""), "not a dict"},
      {"unterminated", npy_bytes("{'descr': '<f4", ""), "malformed header"},
      {"no_shape", npy_bytes("{'descr': '<f4', 'fortran_order': False}", ""), "'shape'"},
      {"neg_shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", ""), "non-negative"},
      {"huge_shape",
       npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 8)}", "12345678"),
       "truncated data"},
      {"overflow_int", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", ""),
       "too large"},
      {"structured", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "abcd"),
       "structured"},
      {"fortran_kind", npy_bytes("{'descr': '<f4', 'fortran_order': 1, 'shape': (1,)}", "abcd"), "fortran_order"},
      {"deep", npy_bytes(std::string(200, '(') + std::string(200, ')'), ""), "too deep"},
      {"bad_order", npy_bytes("{'descr': '|f4', 'fortran_order': False, 'shape': (1,)}", "abcd"), "'|f4'"},
  };
  for (auto& c : cases) {
    std::string p = path(std::string(c.name) + ".npy");
    write_bytes(p, c.bytes);
    std::string m = message_of([&] { read_npy(p); });
    EXPECT_NE(m.find("[npy] " + p + ":"), std::string::npos) << c.name << ": " << m;
    EXPECT_NE(m.find(c.expect), std::string::npos) << c.name << ": " << m;
  }
  // Every truncation of a valid file fails cleanly (never crashes or over-reads; ASan checks the latter).
  for (size_t n = 0; n < good.size(); n += 7) EXPECT_THROW(parse_npy(good.data(), n, "cut"), Error) << n;
  EXPECT_NE(message_of([&] { read_npy(path("missing.npy")); }).find("cannot open"), std::string::npos);
}

TEST_F(NpyTest, CorruptNpzGiveErrors) {
  write_npz(path("ok.npz"), {{"a", sample(DType::f32, {3})}, {"b", sample(DType::i16, {2, 2})}});
  std::string zip;
  {
    std::ifstream f(path("ok.npz"), std::ios::binary);
    zip.assign(std::istreambuf_iterator<char>(f), {});
  }
  auto expect_error = [&](const std::string& name, const std::string& bytes, const std::string& what) {
    std::string p = path(name + ".npz");
    write_bytes(p, bytes);
    std::string m = message_of([&] { read_npz(p); });
    EXPECT_NE(m.find("[npy] " + p), std::string::npos) << name << ": " << m;
    EXPECT_NE(m.find(what), std::string::npos) << name << ": " << m;
  };
  expect_error("short", "PK", "not a zip");
  expect_error("no_end", std::string(100, 'x'), "no end-of-central-directory");
  expect_error("cut_end", zip.substr(0, zip.size() - 10), "not a zip");
  std::string crc = zip;
  crc[30 + 5 + 70] ^= 1;  // a byte inside the first entry's data
  expect_error("crc", crc, "CRC-32 mismatch");
  std::string cd = zip;
  size_t end = zip.size() - 22;
  cd[end + 19] = static_cast<char>(0x7f);  // central directory offset far out of range
  expect_error("cd_off", cd, "truncated zip");
  std::string z64 = zip;
  for (int i = 12; i < 20; ++i) z64[end + i] = static_cast<char>(0xff);
  expect_error("zip64", z64, "zip64");
  std::string method = zip;
  size_t cd_off = static_cast<unsigned char>(zip[end + 16]) | (static_cast<unsigned char>(zip[end + 17]) << 8);
  method[cd_off + 10] = 12;  // bzip2
  expect_error("method", method, "compression method 12");
  std::string dup = zip;
  size_t second_name = zip.find("b.npy", cd_off);
  dup[second_name] = 'a';
  expect_error("dup", dup, "duplicate entry 'a'");
  // Truncations anywhere: never a crash.
  for (size_t n = 0; n < zip.size(); n += 5) EXPECT_THROW(parse_npz(zip.data(), n, "cut"), Error) << n;
}

TEST_F(NpyTest, FailedWriteLeavesNothing) {
  write_npy(path("keep.npy"), sample(DType::f32, {2}));
  // Writing into a directory that does not exist fails without side effects.
  std::string m = message_of([&] { write_npy(path("nodir/x.npy"), sample(DType::f32, {2})); });
  EXPECT_NE(m.find("[npy] " + path("nodir/x.npy")), std::string::npos) << m;
  // A failed write over an existing file keeps the old contents.
  m = message_of([&] { write_npy(path("keep.npy"), Tensor(DType::bf16, {3})); });
  EXPECT_NE(m.find("bf16"), std::string::npos);
  expect_same(read_npy(path("keep.npy")), sample(DType::f32, {2}));
  EXPECT_EQ(listing(), std::vector<std::string>{"keep.npy"});
}
