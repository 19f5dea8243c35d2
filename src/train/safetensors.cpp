// Minimal safetensors writer/reader for checkpoints (header: u64 LE length + JSON; then bytes).
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "train/train.h"

namespace rlx::train {

namespace {
const char* st_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::f64: return "F64";
    case DType::i8: return "I8";
    case DType::u8: return "U8";
    case DType::i16: return "I16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::boolean: return "BOOL";
    default: fail("[safetensors] dtype ", dtype_name(t), " has no safetensors name");
  }
}
DType from_st(const std::string& s, const std::string& path) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8, DType::u8, DType::i16, DType::i32,
                  DType::i64, DType::boolean})
    if (s == st_dtype(t)) return t;
  fail("[safetensors] ", path, ": unsupported dtype '", s, "'");
}
}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::vector<std::pair<std::string, std::string>>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  size_t off = 0;
  for (auto& [n, t] : tensors) {
    h[n] = {{"dtype", st_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {off, off + t.nbytes()}}};
    off += t.nbytes();
  }
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    RLX_CHECK(f.good(), "[safetensors] cannot write '", path, "'");
    uint64_t n = hs.size();
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(n >> (8 * i));
    f.write(reinterpret_cast<const char*>(le), 8);
    f.write(hs.data(), static_cast<std::streamsize>(hs.size()));
    for (auto& [nm, t] : tensors) f.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    RLX_CHECK(f.good(), "[safetensors] write to '", path, "' failed");
  }
  RLX_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "[safetensors] cannot rename onto '", path, "'");
}

std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path,
                                                             std::vector<std::pair<std::string, std::string>>* meta) {
  std::ifstream f(path, std::ios::binary);
  RLX_CHECK(f.good(), "[safetensors] cannot open '", path, "'");
  f.seekg(0, std::ios::end);
  uint64_t size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  unsigned char le[8];
  f.read(reinterpret_cast<char*>(le), 8);
  RLX_CHECK(f.good(), "[safetensors] ", path, ": too short");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{le[i]} << (8 * i);
  RLX_CHECK(n <= size - 8 && n < (1u << 28), "[safetensors] ", path, ": bad header length ", n);
  std::string hs(n, '\0');
  f.read(hs.data(), static_cast<std::streamsize>(n));
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(hs);
  } catch (const std::exception& e) {
    fail("[safetensors] ", path, ": bad header JSON: ", e.what());
  }
  RLX_CHECK(h.is_object(), "[safetensors] ", path, ": header is not an object");
  uint64_t base = 8 + n, data_size = size - base;
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [k, v] : h.items()) {
    if (k == "__metadata__") {
      if (meta && v.is_object())
        for (auto& [mk, mv] : v.items()) meta->push_back({mk, mv.is_string() ? mv.get<std::string>() : mv.dump()});
      continue;
    }
    try {
      DType dt = from_st(v.at("dtype").get<std::string>(), path);
      auto shape = v.at("shape").get<std::vector<int64_t>>();
      auto offs = v.at("data_offsets").get<std::vector<uint64_t>>();
      for (auto d : shape) RLX_CHECK(d >= 0, "negative dim");
      Tensor t(dt, shape);
      RLX_CHECK(offs.size() == 2 && offs[0] <= offs[1] && offs[1] <= data_size && offs[1] - offs[0] == t.nbytes(),
                "bad data_offsets");
      f.seekg(static_cast<std::streamoff>(base + offs[0]));
      f.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
      RLX_CHECK(f.good(), "short read");
      out.push_back({k, t});
    } catch (const nlohmann::json::exception& e) {
      fail("[safetensors] ", path, ": tensor '", k, "': ", e.what());
    } catch (const Error& e) {
      fail("[safetensors] ", path, ": tensor '", k, "': ", e.what());
    }
  }
  return out;
}

}  // namespace rlx::train
