// safetensors: round trips over every dtype, zero-copy reads, metadata, and malformed files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "rlx/safetensors.h"

using namespace rlx;
namespace fs = std::filesystem;

namespace {

class SafeTensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rlx_st_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  // A file with a hand-written header and data section.
  std::string raw_file(const std::string& header, const std::string& data, int64_t claimed = -1) {
    std::string out;
    uint64_t n = claimed < 0 ? header.size() : static_cast<uint64_t>(claimed);
    for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
    out += header + data;
    std::string p = path("raw.safetensors");
    std::ofstream(p, std::ios::binary).write(out.data(), static_cast<std::streamsize>(out.size()));
    return p;
  }
  void expect_error(const std::string& p, const std::string& needle) {
    try {
      SafeTensors::open(p);
      FAIL() << "no error, expected: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[safetensors]"), std::string::npos) << e.what();
    }
  }
  fs::path dir_;
};

TEST_F(SafeTensorsTest, RoundTripEveryDType) {
  std::vector<std::pair<std::string, Tensor>> ts;
  DType all[] = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::c64, DType::i8,
                 DType::u8,  DType::i16, DType::i32,  DType::i64, DType::boolean};
  for (DType dt : all) {
    Tensor t(dt, {2, 3});
    for (int64_t i = 0; i < 6; ++i) t.set(i, dt == DType::boolean ? (i % 2) : static_cast<double>(i + 1));
    ts.push_back({"w." + std::string(dtype_name(dt)), t});
  }
  ts.push_back({"empty", Tensor(DType::f32, {0, 4})});
  ts.push_back({"scalar", Tensor::from<double>(DType::f32, {}, {3.5})});
  write_safetensors(path("a.safetensors"), ts, {{"format", "pt"}, {"who", "rlx"}});
  SafeTensors st = SafeTensors::open(path("a.safetensors"));
  EXPECT_EQ(st.names().size(), ts.size());
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.metadata().at("who"), "rlx");
  EXPECT_FALSE(st.has("nope"));
  for (auto& [name, t] : ts) {
    ASSERT_TRUE(st.has(name)) << name;
    Tensor r = st.get(name);
    EXPECT_EQ(r.dtype(), t.dtype()) << name;
    EXPECT_EQ(r.shape(), t.shape()) << name;
    ASSERT_EQ(r.nbytes(), t.nbytes());
    if (t.nbytes()) {
      EXPECT_EQ(std::memcmp(r.raw(), t.raw(), t.nbytes()), 0) << name;
    }
  }
  EXPECT_EQ(st.dtype_str("w.bf16"), "BF16");
  EXPECT_EQ(st.shape("w.i64"), (std::vector<int64_t>{2, 3}));
}

TEST_F(SafeTensorsTest, TensorsOutliveTheFileObject) {
  write_safetensors(path("b.safetensors"), {{"x", Tensor::from<float>(DType::f32, {3}, {1, 2, 3})}});
  Tensor x;
  { x = SafeTensors::open(path("b.safetensors")).get("x"); }
  EXPECT_EQ(x.get(2), 3.0);  // the mapping is kept alive by the tensor
  Tensor y = SafeTensors::open(path("b.safetensors")).get("x");
  y.data<float>()[0] = 42;  // copy-on-write: the file is untouched
  EXPECT_EQ(SafeTensors::open(path("b.safetensors")).get("x").get(0), 1.0);
}

TEST_F(SafeTensorsTest, ReadsHandWrittenForeignFile) {
  // Unpadded header, so the data section is misaligned: get() must still return correct values.
  float v[2] = {1.5f, -2.0f};
  std::string data(reinterpret_cast<const char*>(v), 8);
  std::string p = raw_file(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}})", data);
  SafeTensors st = SafeTensors::open(p);
  Tensor b = st.get("b");
  EXPECT_EQ(b.get(0), 1.5);
  EXPECT_EQ(b.get(1), -2.0);
}

TEST_F(SafeTensorsTest, UnsupportedDTypeListedButRefused) {
  std::string p = raw_file(R"({"u":{"dtype":"U32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  SafeTensors st = SafeTensors::open(p);
  EXPECT_TRUE(st.has("u"));
  EXPECT_THROW(st.get("u"), Error);
}

TEST_F(SafeTensorsTest, MalformedFiles) {
  std::string d8(8, '\0');
  expect_error(raw_file("{not json", d8), "not valid JSON");
  expect_error(raw_file("[1,2]", d8), "JSON object");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", d8), "past the data section");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d8), "F32 shape [3] needs 12");
  // A byte count past 2^64 names the shape as written, not a wrapped product.
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})", d8),
               "F32 shape [4294967296,4294967296,4] needs more than 2^64 bytes");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})", d8),
               "F32 shape [4611686018427387904] needs more than 2^64 bytes");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", d8),
               "overlap");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", d8), "begin");
  expect_error(raw_file(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", d8), "unknown dtype");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", d8), "non-negative");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1]}})", d8), "data_offsets");
  expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", d8), "unknown field");
  expect_error(raw_file(R"({"__metadata__":{"k":1}})", d8), "not a string");
  expect_error(raw_file(R"({})", "", 1000), "exceeds the file");
  std::string p = path("short.safetensors");
  std::ofstream(p, std::ios::binary).write("abc", 3);
  expect_error(p, "too short");
  expect_error(path("missing.safetensors"), "cannot open");
  // A real file cut short: offsets now point past the end.
  write_safetensors(path("c.safetensors"), {{"x", Tensor(DType::f32, {64})}});
  fs::resize_file(path("c.safetensors"), fs::file_size(path("c.safetensors")) - 10);
  expect_error(path("c.safetensors"), "truncated");
}

TEST_F(SafeTensorsTest, WriterRefusesDuplicatesAndLeavesNothing) {
  Tensor t(DType::f32, {1});
  EXPECT_THROW(write_safetensors(path("d.safetensors"), {{"x", t}, {"x", t}}), Error);
  EXPECT_FALSE(fs::exists(path("d.safetensors")));
}

}  // namespace
