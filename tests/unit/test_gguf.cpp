// GGUF reader: metadata of every value type, tensor infos, alignment, validation errors, and the
// reference dequantizers against gguf's numpy dequantize (tests/models/qwen3/quant_blocks.gguf).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "quant/blocks.h"
#include "rlx/gguf.h"

using namespace rlx;

namespace {

std::string data(const std::string& f) { return std::string(RLX_SOURCE_DIR) + "/tests/models/qwen3/" + f; }

// A tiny GGUF writer for crafting valid and broken files in memory.
struct Bytes {
  std::string b;
  template <class T>
  Bytes& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
    return *this;
  }
};

// v3 file: all scalar kinds + a string array + a nested array, and one F32 [2,3] tensor.
std::string sample_file(uint32_t version = 3, uint64_t alignment = 32) {
  Bytes h;
  h.put<uint32_t>(0x46554747).put<uint32_t>(version).put<uint64_t>(1).put<uint64_t>(16);
  h.str("general.architecture").put<uint32_t>(8).str("test");
  h.str("general.alignment").put<uint32_t>(4).put<uint32_t>(static_cast<uint32_t>(alignment));
  h.str("k.u8").put<uint32_t>(0).put<uint8_t>(200);
  h.str("k.i8").put<uint32_t>(1).put<int8_t>(-5);
  h.str("k.u16").put<uint32_t>(2).put<uint16_t>(60000);
  h.str("k.i16").put<uint32_t>(3).put<int16_t>(-300);
  h.str("k.u32").put<uint32_t>(4).put<uint32_t>(4000000000u);
  h.str("k.i32").put<uint32_t>(5).put<int32_t>(-70000);
  h.str("k.f32").put<uint32_t>(6).put<float>(1.5f);
  h.str("k.bool").put<uint32_t>(7).put<uint8_t>(1);
  h.str("k.u64").put<uint32_t>(10).put<uint64_t>(uint64_t{1} << 40);
  h.str("k.i64").put<uint32_t>(11).put<int64_t>(-(int64_t{1} << 40));
  h.str("k.f64").put<uint32_t>(12).put<double>(0.25);
  h.str("k.strs").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("a").str("bc");
  h.str("k.nested").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(1).put<uint32_t>(5).put<uint64_t>(2)
      .put<int32_t>(7).put<int32_t>(8);
  h.str("k.empty").put<uint32_t>(9).put<uint32_t>(6).put<uint64_t>(0);
  h.str("w").put<uint32_t>(2).put<uint64_t>(3).put<uint64_t>(2).put<uint32_t>(0).put<uint64_t>(0);
  while (h.b.size() % alignment) h.b.push_back(0);
  for (int i = 0; i < 6; ++i) h.put<float>(static_cast<float>(i));
  return h.b;
}

gguf::File parse(const std::string& s) {
  auto keep = std::make_shared<std::string>(s);
  return gguf::File::parse(keep, reinterpret_cast<const uint8_t*>(keep->data()), keep->size(), "mem.gguf");
}

std::string error_of(const std::string& s) {
  try {
    parse(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Gguf, AllMetadataTypesAndTensor) {
  gguf::File f = parse(sample_file());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_str("general.architecture", ""), "test");
  EXPECT_EQ(f.get_int("k.u8", 0), 200);
  EXPECT_EQ(f.get_int("k.i8", 0), -5);
  EXPECT_EQ(f.get_int("k.u16", 0), 60000);
  EXPECT_EQ(f.get_int("k.i16", 0), -300);
  EXPECT_EQ(f.get_int("k.u32", 0), 4000000000LL);
  EXPECT_EQ(f.get_int("k.i32", 0), -70000);
  EXPECT_DOUBLE_EQ(f.get_float("k.f32", 0), 1.5);
  EXPECT_EQ(f.get_int("k.bool", 0), 1);
  EXPECT_EQ(f.get_int("k.u64", 0), int64_t{1} << 40);
  EXPECT_EQ(f.get_int("k.i64", 0), -(int64_t{1} << 40));
  EXPECT_DOUBLE_EQ(f.get_float("k.f64", 0), 0.25);
  const gguf::Value& s = f.at("k.strs");
  ASSERT_EQ(s.arr.size(), 2u);
  EXPECT_EQ(s.arr[1].as_str(), "bc");
  EXPECT_EQ(f.at("k.nested").arr[0].arr[1].as_int(), 8);
  EXPECT_TRUE(f.at("k.empty").arr.empty());
  EXPECT_EQ(f.metadata().size(), 16u);
  EXPECT_THROW(f.at("missing"), Error);
  ASSERT_EQ(f.tensors().size(), 1u);
  const gguf::TensorInfo* t = f.tensor("w");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{2, 3}));
  Tensor w = f.to_f32("w");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w.get(i), i);
  EXPECT_EQ(f.packed("w").shape(), (std::vector<int64_t>{2, 12}));
}

TEST(Gguf, Version2AndCustomAlignment) {
  gguf::File f = parse(sample_file(2, 64));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.to_f32("w").get(5), 5.0);
}

TEST(Gguf, AlignmentBelowEightIsRejected) {
  // The spec requires a multiple of 8: alignment 2 left f16 data at odd addresses (a fuzzer find).
  for (uint64_t a : {1, 2, 4}) {
    try {
      parse(sample_file(3, a));
      ADD_FAILURE() << "alignment " << a << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("general.alignment"), std::string::npos) << e.what();
    }
  }
}

// Inputs that once crashed the GGUF fuzz target (tests/fuzz/regressions/*.gguf) now fail cleanly.
TEST(Gguf, FuzzRegressionsFailCleanly) {
  int seen = 0;
  for (auto& e : std::filesystem::directory_iterator(std::string(RLX_SOURCE_DIR) + "/tests/fuzz/regressions")) {
    if (e.path().extension() != ".gguf") continue;
    ++seen;
    try {
      gguf::File f = gguf::File::open(e.path().string());
      for (auto& t : f.tensors()) f.to_f32(t.name);
    } catch (const Error& err) {
      EXPECT_EQ(std::string(err.what()).rfind("[gguf]", 0), 0u) << e.path() << ": " << err.what();
    }
  }
  EXPECT_GE(seen, 1);
}

TEST(Gguf, ValidationErrors) {
  std::string good = sample_file();
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_NE(error_of(bad_magic).find("bad magic"), std::string::npos);
  std::string v1 = good;
  v1[4] = 1;
  EXPECT_NE(error_of(v1).find("unsupported GGUF version 1"), std::string::npos);
  // Truncated anywhere: a clear error, never a crash.
  for (size_t n : {size_t{3}, size_t{10}, size_t{30}, size_t{200}, good.size() - 30, good.size() - 1}) {
    std::string e = error_of(good.substr(0, n));
    EXPECT_FALSE(e.empty()) << n;
    EXPECT_EQ(e.rfind("[gguf] mem.gguf", 0), 0u) << e;
  }
  Bytes absurd;
  absurd.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(uint64_t{1} << 60).put<uint64_t>(0);
  EXPECT_NE(error_of(absurd.b).find("absurd tensor count"), std::string::npos);
  Bytes long_str;
  long_str.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).put<uint64_t>(uint64_t{1} << 50);
  EXPECT_NE(error_of(long_str.b).find("absurd string length"), std::string::npos);
  // Tensor offset beyond the file.
  Bytes off;
  off.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(1).put<uint64_t>(0);
  off.str("w").put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(0).put<uint64_t>(1 << 20);
  EXPECT_NE(error_of(off.b).find("outside the file"), std::string::npos);
  Bytes badtype;
  badtype.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(1).put<uint64_t>(0);
  badtype.str("w").put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(77).put<uint64_t>(0);
  EXPECT_NE(error_of(badtype.b).find("unsupported ggml type 77"), std::string::npos);
  EXPECT_THROW(gguf::File::open(data("no-such-file.gguf")), Error);
}

// Every byte prefix and many single-byte corruptions of a valid file fail cleanly or parse.
TEST(Gguf, CorruptionNeverCrashes) {
  std::string good = sample_file();
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(error_of(good.substr(0, n)).empty()) << n;
  for (size_t i = 0; i < good.size(); i += 3) {
    std::string c = good;
    c[i] = static_cast<char>(c[i] ^ 0x5A);
    try {
      parse(c);
    } catch (const Error&) {
    }
  }
}

TEST(Gguf, ModelFileFromGgufWriter) {
  gguf::File f = gguf::File::open(data("tiny-Q8_0.gguf"));
  EXPECT_EQ(f.get_str("general.architecture", ""), "qwen3");
  EXPECT_EQ(f.get_int("qwen3.block_count", 0), 2);
  const gguf::TensorInfo* t = f.tensor("blk.0.ffn_down.weight");
  ASSERT_TRUE(t);
  EXPECT_EQ(quant::type_name(t->type), "Q8_0");
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{64, 128}));
}

// Reference dequantizers vs gguf.quants.dequantize on random blocks of every type it implements.
TEST(Gguf, DequantizersMatchGgufPackage) {
  gguf::File f = gguf::File::open(data("quant_blocks.gguf"));
  int checked = 0;
  for (const char* name : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(f.tensor(name));
    Tensor got = f.to_f32(name), want = f.to_f32(std::string(name) + ".ref");
    ASSERT_EQ(got.shape(), want.shape());
    double err = 0, scale = 1e-6;
    for (int64_t i = 0; i < got.numel(); ++i) {
      err = std::max(err, std::abs(got.get(i) - want.get(i)));
      scale = std::max(scale, std::abs(want.get(i)));
    }
    EXPECT_LE(err / scale, 1e-6) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 12);
}
