// The .rten reader (src/formats/rten): models built here with the flatbuffers builder for the same schema,
// run on cpu against hand-computed values; malformed files (truncated, corrupt, cyclic, out-of-range
// indices, bad headers) must fail with an "[rten]" error, never crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "formats/rten/rten.h"
#include "rlx/session.h"

#ifdef RLX_HAVE_RTEN
#include "rten_generated.h"

namespace {

namespace fb = rlx::rten_fb;
using rlx::Tensor;

rlx::CompileOptions cpu() {
  rlx::CompileOptions o;
  o.device = "cpu";
  return o;
}

// Builds one rten graph; finish() writes the version-2 layout (or version 1: the bare flatbuffer).
struct RtenBuilder {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Node>> nodes;
  std::string tensor_data;

  uint32_t add(const std::string& name, fb::NodeKind k, flatbuffers::Offset<void> body) {
    nodes.push_back(fb::CreateNode(b, name.empty() ? 0 : b.CreateString(name), k, body));
    return static_cast<uint32_t>(nodes.size() - 1);
  }
  uint32_t value(const std::string& name, std::vector<uint32_t> dims, flatbuffers::Optional<fb::DataType> dt) {
    std::vector<flatbuffers::Offset<fb::Dim>> ds;
    for (auto d : dims) ds.push_back(fb::CreateDim(b, d));
    auto shape = b.CreateVector(ds);
    return add(name, fb::NodeKind::ValueNode, fb::CreateValueNode(b, shape, dt).Union());
  }
  uint32_t const_inline(const std::string& name, std::vector<uint32_t> dims, const std::vector<float>& v) {
    auto shape = b.CreateVector(dims);
    auto data = fb::CreateFloatData(b, b.CreateVector(v));
    return add(name, fb::NodeKind::ConstantNode,
               fb::CreateConstantNode(b, shape, fb::ConstantData::FloatData, data.Union(), fb::ConstantDataType::Float32).Union());
  }
  uint32_t const_segment(const std::string& name, std::vector<uint32_t> dims, const std::vector<float>& v) {
    while (tensor_data.size() % 64) tensor_data.push_back('\0');
    uint64_t off = tensor_data.size();
    tensor_data.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    auto shape = b.CreateVector(dims);
    return add(name, fb::NodeKind::ConstantNode,
               fb::CreateConstantNode(b, shape, fb::ConstantData::NONE, 0, fb::ConstantDataType::Float32, off).Union());
  }
  uint32_t op(const std::string& name, fb::OperatorType t, std::vector<int32_t> ins, std::vector<int32_t> outs,
              fb::OperatorAttrs at = fb::OperatorAttrs::NONE, flatbuffers::Offset<void> attrs = 0) {
    auto i = b.CreateVector(ins), o = b.CreateVector(outs);
    return add(name, fb::NodeKind::OperatorNode, fb::CreateOperatorNode(b, t, at, attrs, i, o).Union());
  }
  std::string finish(std::vector<uint32_t> inputs, std::vector<uint32_t> outputs, bool v2 = true) {
    auto g = fb::CreateGraph(b, b.CreateVector(nodes), b.CreateVector(inputs), b.CreateVector(outputs));
    b.Finish(fb::CreateModel(b, 1, g));
    std::string model(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
    if (!v2) return model;
    std::string f(32, '\0');
    auto put = [&](size_t at, uint64_t v, int n) {
      for (int i = 0; i < n; ++i) f[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
    };
    std::memcpy(f.data(), "RTEN", 4);
    put(4, 2, 4);
    put(8, 32, 8);
    put(16, model.size(), 8);
    f += model;
    while (f.size() % 64) f.push_back('\0');
    put(24, f.size(), 8);
    return f + tensor_data;
  }
};

// y = x @ w + b, x f32[2,3]; w [3,2] in the tensor-data segment (v2) or inline (v1); b inline.
const std::vector<float> kW = {1, 2, 3, 4, 5, 6}, kB = {0.5f, -1};
std::string matmul_add(bool v2) {
  RtenBuilder r;
  uint32_t x = r.value("x", {2, 3}, fb::DataType::Float);
  uint32_t w = v2 ? r.const_segment("w", {3, 2}, kW) : r.const_inline("w", {3, 2}, kW);
  uint32_t bias = r.const_inline("b", {2}, kB);
  uint32_t m = r.value("m", {}, flatbuffers::nullopt), y = r.value("y", {2, 2}, fb::DataType::Float);
  // Operators out of order on purpose: the reader sorts them.
  r.op("add", fb::OperatorType::Add, {static_cast<int32_t>(m), static_cast<int32_t>(bias)}, {static_cast<int32_t>(y)});
  r.op("mm", fb::OperatorType::MatMul, {static_cast<int32_t>(x), static_cast<int32_t>(w)}, {static_cast<int32_t>(m)});
  return r.finish({x}, {y}, v2);
}

void expect_matmul_add(const std::string& bytes) {
  rlx::Graph g = rlx::rten::import_rten(bytes, "test.rten");
  rlx::CompiledModel cm(std::move(g), cpu());
  Tensor x = Tensor::from<float>(rlx::DType::f32, {2, 3}, {1, 0, -1, 2, 3, 0.5f});
  auto outs = cm.run(std::vector<Tensor>{x});
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_EQ(outs[0].shape(), (std::vector<int64_t>{2, 2}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double want = kB[j];
      for (int k = 0; k < 3; ++k) want += x.get(i * 3 + k) * kW[k * 2 + j];
      EXPECT_NEAR(outs[0].get(i * 2 + j), want, 1e-5) << i << "," << j;
    }
}

std::string error_of(const std::string& bytes) {
  try {
    rlx::rten::import_rten(bytes, "bad.rten");
  } catch (const rlx::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Rten, RunsVersion2WithTensorSegment) { expect_matmul_add(matmul_add(true)); }
TEST(Rten, RunsVersion1Inline) { expect_matmul_add(matmul_add(false)); }

TEST(Rten, ComparisonsYieldInt32LikeRten) {
  // c = x < 0 (rten: Int32 0/1); y = Where(c, -x, x) = |x|.
  RtenBuilder r;
  uint32_t x = r.value("x", {4}, fb::DataType::Float);
  uint32_t z = r.const_inline("z", {}, {0.f});
  uint32_t c = r.value("c", {}, flatbuffers::nullopt), n = r.value("n", {}, flatbuffers::nullopt);
  uint32_t y = r.value("y", {}, flatbuffers::nullopt);
  auto I = [](uint32_t v) { return static_cast<int32_t>(v); };
  r.op("lt", fb::OperatorType::Less, {I(x), I(z)}, {I(c)});
  r.op("neg", fb::OperatorType::Neg, {I(x)}, {I(n)});
  r.op("sel", fb::OperatorType::Where, {I(c), I(n), I(x)}, {I(y)});
  rlx::Graph g = rlx::rten::import_rten(r.finish({x}, {c, y}), "cmp.rten");
  rlx::CompiledModel cm(std::move(g), cpu());
  auto outs = cm.run(std::vector<Tensor>{Tensor::from<float>(rlx::DType::f32, {4}, {-2, 3, 0, -0.5f})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].dtype(), rlx::DType::i32);
  std::vector<int64_t> lt = {1, 0, 0, 1};
  std::vector<double> ab = {2, 3, 0, 0.5};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(outs[0].get_int(i), lt[i]);
    EXPECT_EQ(outs[1].get(i), ab[i]);
  }
}

TEST(Rten, AttributesReachTheOnnxConverters) {
  // Softmax over axis 0 of a [2,2] input: columns sum to 1.
  RtenBuilder r;
  uint32_t x = r.value("x", {2, 2}, fb::DataType::Float), y = r.value("y", {}, flatbuffers::nullopt);
  auto attrs = fb::CreateSoftmaxAttrs(r.b, 0);
  r.op("sm", fb::OperatorType::Softmax, {static_cast<int32_t>(x)}, {static_cast<int32_t>(y)},
       fb::OperatorAttrs::SoftmaxAttrs, attrs.Union());
  rlx::CompiledModel cm(rlx::rten::import_rten(r.finish({x}, {y}), "sm.rten"), cpu());
  auto out = cm.run(std::vector<Tensor>{Tensor::from<float>(rlx::DType::f32, {2, 2}, {0, 5, 1, -5})})[0];
  EXPECT_NEAR(out.get(0) + out.get(2), 1.0, 1e-6);
  EXPECT_NEAR(out.get(1) + out.get(3), 1.0, 1e-6);
  EXPECT_NEAR(out.get(2), std::exp(1.0) / (1 + std::exp(1.0)), 1e-6);
}

TEST(Rten, CycleIsAClearError) {
  RtenBuilder r;
  uint32_t x = r.value("x", {2}, fb::DataType::Float);
  uint32_t a = r.value("a", {}, flatbuffers::nullopt), b = r.value("b", {}, flatbuffers::nullopt);
  uint32_t y = r.value("y", {}, flatbuffers::nullopt);
  auto I = [](uint32_t v) { return static_cast<int32_t>(v); };
  r.op("p", fb::OperatorType::Add, {I(x), I(b)}, {I(a)});
  r.op("q", fb::OperatorType::Relu, {I(a)}, {I(b)});
  r.op("out", fb::OperatorType::Relu, {I(b)}, {I(y)});
  std::string e = error_of(r.finish({x}, {y}));
  EXPECT_NE(e.find("[rten] bad.rten"), std::string::npos) << e;
  EXPECT_NE(e.find("cycle"), std::string::npos) << e;
  EXPECT_NE(e.find("'p'"), std::string::npos) << e;
}

TEST(Rten, BadIndicesAndKindsAreClearErrors) {
  {
    RtenBuilder r;
    uint32_t x = r.value("x", {2}, fb::DataType::Float), y = r.value("y", {}, flatbuffers::nullopt);
    r.op("relu", fb::OperatorType::Relu, {77}, {static_cast<int32_t>(y)});
    EXPECT_NE(error_of(r.finish({x}, {y})).find("input index 77 out of range"), std::string::npos);
  }
  {
    RtenBuilder r;
    uint32_t x = r.value("x", {2}, fb::DataType::Float), y = r.value("y", {}, flatbuffers::nullopt);
    r.op("relu", static_cast<fb::OperatorType>(250), {static_cast<int32_t>(x)}, {static_cast<int32_t>(y)});
    EXPECT_NE(error_of(r.finish({x}, {y})).find("unknown operator type 250"), std::string::npos);
  }
  {
    RtenBuilder r;  // an input without dtype
    uint32_t x = r.value("x", {2}, flatbuffers::nullopt), y = r.value("y", {}, flatbuffers::nullopt);
    r.op("relu", fb::OperatorType::Relu, {static_cast<int32_t>(x)}, {static_cast<int32_t>(y)});
    EXPECT_NE(error_of(r.finish({x}, {y})).find("graph input 'x' declares no dtype"), std::string::npos);
  }
  {
    RtenBuilder r;  // a value nobody produces
    uint32_t x = r.value("x", {2}, fb::DataType::Float), ghost = r.value("ghost", {}, flatbuffers::nullopt);
    uint32_t y = r.value("y", {}, flatbuffers::nullopt);
    r.op("add", fb::OperatorType::Add, {static_cast<int32_t>(x), static_cast<int32_t>(ghost)}, {static_cast<int32_t>(y)});
    EXPECT_NE(error_of(r.finish({x}, {y})).find("neither a graph input"), std::string::npos);
  }
}

TEST(Rten, HeaderAndSegmentErrors) {
  std::string good = matmul_add(true);
  std::string v3 = good;
  v3[4] = 3;
  EXPECT_NE(error_of(v3).find("unsupported file version 3"), std::string::npos);
  EXPECT_NE(error_of("RTEN").find("truncated header"), std::string::npos);
  EXPECT_NE(error_of("").find("empty file"), std::string::npos);
  // Tensor data cut short: the segment no longer holds w.
  std::string cut = good.substr(0, good.size() - 4);
  EXPECT_NE(error_of(cut).find("exceeds the tensor-data segment"), std::string::npos) << error_of(cut);
  EXPECT_NE(error_of(std::string(100, 'x')).find("failed verification"), std::string::npos) << error_of(std::string(100, 'x'));
}

// Every prefix of a valid file fails with an [rten] error; random byte flips import or fail cleanly.
TEST(Rten, TruncatedAndCorruptBytesNeverCrash) {
  for (bool v2 : {true, false}) {
    std::string good = matmul_add(v2);
    for (size_t n = 0; n < good.size(); ++n) {
      std::string e = error_of(good.substr(0, n));
      ASSERT_EQ(e.rfind("[rten] bad.rten", 0), 0u) << "prefix " << n << " of " << good.size() << ": '" << e << "'";
    }
    std::mt19937 rng(7);
    int ok = 0, failed = 0;
    for (int it = 0; it < 1500; ++it) {
      std::string s = good;
      int flips = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < flips; ++k) s[rng() % s.size()] = static_cast<char>(rng() & 0xff);
      try {
        rlx::rten::import_rten(s, "bad.rten");
        ++ok;
      } catch (const rlx::Error&) {
        ++failed;
      }
    }
    EXPECT_GT(failed, 0);
    EXPECT_EQ(ok + failed, 1500);
  }
}

TEST(Rten, CommittedSeedsImport) {
  // tests/fuzz/corpus/rten holds rten-convert outputs (v1 and v2) of small ONNX models.
  for (const char* name : {"mlp.rten", "mlp_v1.rten", "conv.rten", "shape_ops.rten", "where_v1.rten"}) {
    std::string p = std::string(RLX_SOURCE_DIR) + "/tests/fuzz/corpus/rten/" + name;
    EXPECT_NO_THROW(rlx::rten::load_rten(p)) << name;
    EXPECT_NE(rlx::rten::inspect_rten(p).find("op histogram"), std::string::npos);
  }
}

#else

TEST(Rten, UnavailableBuildSaysWhy) {
  EXPECT_FALSE(rlx::rten::available());
  try {
    rlx::rten::import_rten("RTEN", "x.rten");
    FAIL() << "expected an error";
  } catch (const rlx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("flatc"), std::string::npos) << e.what();
  }
}

#endif

// Inputs that once crashed a fuzz target (tests/fuzz/regressions) must now fail with a clear,
// format-tagged error: never a library exception escaping as an internal error.
TEST(Rten, FuzzRegressionsFailCleanly) {
  namespace fs = std::filesystem;
  int seen = 0;
  for (auto& e : fs::directory_iterator(std::string(RLX_SOURCE_DIR) + "/tests/fuzz/regressions")) {
    if (e.path().extension() != ".rten") continue;
    ++seen;
    try {
      rlx::rten::load_rten(e.path().string());
    } catch (const rlx::Error& err) {
      EXPECT_NE(std::string(err.what()).find('['), std::string::npos) << e.path() << ": " << err.what();
    }
  }
  EXPECT_GE(seen, 1);
}
