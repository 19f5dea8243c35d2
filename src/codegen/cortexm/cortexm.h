// The Cortex-M code generator: a scheduled LIR program (int8 qlinear, qconv, i8 pooling, affine quantize/dequantize,
// f32 elementwise, views) becomes a self-contained C project — model.c/.h (kernels, weights as
// const arrays in flash, one static arena at the memory planner's offsets), rlx_kernels.h, startup.c,
// a linker script for the board, a main.c that streams records through semihosting, a Makefile.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "rlx/lir.h"

namespace rlx::cortexm {

enum class Board { M4, M55 };

struct BoardInfo {
  const char* name;     // "m4"
  const char* machine;  // qemu-system-arm -M
  const char* cflags;   // arm-none-eabi-gcc CPU flags
  const char* core;     // "Cortex-M4 (DSP SMLAD)"
};
const BoardInfo& board_info(Board b);
// "m4" | "m55"; false for anything else.
bool parse_board(const std::string& s, Board* b);

struct Project {
  std::map<std::string, std::string> files;  // name -> contents
  int64_t const_bytes = 0;  // weights, biases and parameter tables in flash (.rodata)
  int64_t arena_bytes = 0;  // the planned arena (RAM, .bss)
  int64_t scratch_bytes = 0;  // qconv's im2col row (RAM, .bss)
  int64_t io_bytes = 0;     // input and output buffers (RAM, .bss)
  int kernels = 0;
  std::string summary() const;  // one line: board, kernels, flash and RAM bytes
};

// Throws rlx::Error "[cortexm] ..." naming the kernel when one has no Cortex-M C kernel.
Project generate_project(const LirProgram& p, Board b);
void write_project(const Project& proj, const std::string& dir);

const char* kernels_header();                                 // rlx_kernels.h (kernels_source.cpp)
std::map<std::string, std::string> board_files(Board b);      // startup.c, link.ld, main.c, Makefile

}  // namespace rlx::cortexm
