// Whole-file reads and atomic writes shared by the format readers/writers.
#pragma once
#include <string>
#include <string_view>

namespace rlx::formats {

// Reads the whole file; throws "[<tag>] <path>: cannot open: <strerror>" and the like.
std::string read_file_bytes(const std::string& path, const char* tag);
// Writes to "<path>.tmp.<pid>", flushes, then renames over `path`; on any failure the temporary
// is removed and an error "[<tag>] <path>: ..." is thrown, leaving `path` untouched.
void write_file_atomic(const std::string& path, std::string_view bytes, const char* tag);

}  // namespace rlx::formats
