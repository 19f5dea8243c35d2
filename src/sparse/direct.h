// Sparse direct solves of op(A) X = B through SuiteSparse (KLU, UMFPACK, CHOLMOD) or a dense LU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rlx::sparse {

// A is CSR [n, n] with i64 indices and f64 values; B and X are [n, nrhs] row-major. Returns "" on
// success, else why (singular, not positive definite, unknown method); X is then NaN-filled.
std::string direct_solve(const std::string& method, int64_t n, const int64_t* rp, const int64_t* col,
                         const double* val, const double* b, int64_t nrhs, double* x, bool transpose);

// Methods compiled into this build, e.g. {"klu", "umfpack", "cholmod", "dense"}.
std::vector<std::string> direct_solve_methods();

}  // namespace rlx::sparse
