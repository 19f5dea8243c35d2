// Matrix Market (.mtx) coordinate files: reader (real/integer/pattern; general/symmetric/
// skew-symmetric) and writer (real general). Every parse error names its line.
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "formats/file_io.h"
#include "rlx/error.h"
#include "rlx/sparse.h"

namespace rlx::sparse {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool parse_int(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *v = x;
  return true;
}

bool parse_real(const std::string& s, double* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return errno == 0 && *end == '\0';
}

}  // namespace

Coo parse_matrix_market(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string line;
  int64_t ln = 0;
  auto err = [&](const std::string& what) -> Error {
    return Error("[mtx] " + source + ":" + std::to_string(ln) + ": " + what);
  };
  if (!std::getline(in, line)) throw Error("[mtx] " + source + ": empty file");
  ln = 1;
  std::istringstream hs(line);
  std::string banner, object, format, field, symmetry;
  hs >> banner >> object >> format >> field >> symmetry;
  if (banner != "%%MatrixMarket") throw err("missing '%%MatrixMarket' banner");
  object = lower(object);
  format = lower(format);
  field = lower(field);
  symmetry = lower(symmetry);
  if (object != "matrix") throw err("object '" + object + "' is not 'matrix'");
  if (format != "coordinate") throw err("format '" + format + "' not supported (coordinate only)");
  if (field != "real" && field != "integer" && field != "pattern" && field != "double")
    throw err("field '" + field + "' not supported (real, integer, pattern)");
  if (symmetry != "general" && symmetry != "symmetric" && symmetry != "skew-symmetric")
    throw err("symmetry '" + symmetry + "' not supported (general, symmetric, skew-symmetric)");
  const bool pattern = field == "pattern";
  Coo c;
  int64_t nnz = -1, seen = 0;
  while (std::getline(in, line)) {
    ++ln;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t p = line.find_first_not_of(" \t");
    if (p == std::string::npos || line[p] == '%') continue;
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string t; ls >> t;) tok.push_back(t);
    if (nnz < 0) {
      if (tok.size() != 3 || !parse_int(tok[0], &c.rows) || !parse_int(tok[1], &c.cols) || !parse_int(tok[2], &nnz) ||
          c.rows < 0 || c.cols < 0 || nnz < 0)
        throw err("size line must be 'rows cols nnz' (non-negative integers), got '" + line + "'");
      if (symmetry != "general" && c.rows != c.cols) throw err("a " + symmetry + " matrix must be square");
      c.row.reserve(nnz);
      c.col.reserve(nnz);
      c.val.reserve(nnz);
      continue;
    }
    size_t want = pattern ? 2 : 3;
    if (tok.size() != want)
      throw err("entry needs " + std::to_string(want) + " fields ('i j" + (pattern ? "'" : " value'") + "), got '" + line + "'");
    int64_t i, j;
    double v = 1;
    if (!parse_int(tok[0], &i) || !parse_int(tok[1], &j)) throw err("bad index in '" + line + "'");
    if (!pattern && !parse_real(tok[2], &v)) throw err("bad value '" + tok[2] + "'");
    if (i < 1 || i > c.rows || j < 1 || j > c.cols)
      throw err("entry (" + tok[0] + ", " + tok[1] + ") outside the " + std::to_string(c.rows) + " x " +
                std::to_string(c.cols) + " matrix (indices are 1-based)");
    if (++seen > nnz) throw err("more entries than the " + std::to_string(nnz) + " the size line declares");
    if (symmetry != "general" && j > i) throw err("entry above the diagonal in a " + symmetry + " file");
    if (symmetry == "skew-symmetric" && i == j) throw err("diagonal entry in a skew-symmetric file");
    c.add(i - 1, j - 1, v);
    if (symmetry != "general" && i != j) c.add(j - 1, i - 1, symmetry == "symmetric" ? v : -v);
  }
  if (nnz < 0) throw err("missing size line");
  if (seen != nnz) throw err("file ends after " + std::to_string(seen) + " of " + std::to_string(nnz) + " entries");
  return c;
}

Coo read_matrix_market(const std::string& path) { return parse_matrix_market(formats::read_file_bytes(path, "mtx"), path); }

void write_matrix_market(const Csr& a, const std::string& path) {
  a.validate(false);
  std::ofstream f(path);
  RLX_CHECK(f.good(), "[mtx] cannot write '", path, "'");
  f << "%%MatrixMarket matrix coordinate real general\n" << a.rows << " " << a.cols << " " << a.nnz() << "\n";
  f.precision(17);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t k = a.row_ptr.get_int(i); k < a.row_ptr.get_int(i + 1); ++k)
      f << i + 1 << " " << a.col_indices.get_int(k) + 1 << " " << a.values.get(k) << "\n";
  RLX_CHECK(f.good(), "[mtx] write to '", path, "' failed");
}

}  // namespace rlx::sparse
