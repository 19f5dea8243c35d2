// The board half of a generated Cortex-M project: the vector table and reset handler (startup.c), a
// linker script per board, the semihosting main.c that streams input records from a file through
// the model into an output file, and the Makefile (firmware, QEMU run, host build, sizes).
#include "codegen/cortexm/cortexm.h"

namespace rlx::cortexm {

namespace {

// newlib's rdimon crt0 (_start) clears .bss, sets up semihosting stdio and argv, calls main and
// exits through semihosting, so QEMU's exit status is main's return value.
const char* kStartup = R"C(/* startup.c: vector table and reset handler (newlib rdimon crt0 does the rest). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
extern void _start(void);
extern uint32_t __StackTop;
void Reset_Handler(void);
static void Default_Handler(void) {
  for (;;) {
  }
}
/* The heap: from the end of .bss to 8 KB below the top of RAM. This replaces librdimon's weak
   _sbrk, whose limit comes from QEMU's SYS_HEAPINFO answer for the region at address 0 (on the
   mps3-an547 that is the ITCM holding the code, not the RAM). */
extern char end;
void* _sbrk(ptrdiff_t incr) {
  static char* heap = &end;
  char* limit = (char*)((uintptr_t)&__StackTop - 8192u);
  if (incr > limit - heap) {
    errno = ENOMEM;
    return (void*)-1;
  }
  char* prev = heap;
  heap += incr;
  return prev;
}
void Reset_Handler(void) {
  /* CP10/CP11 full access: the FPU (and MVE on the M55) before any float or vector instruction */
  *(volatile uint32_t*)0xE000ED88 |= 0xFu << 20;
  __asm volatile("dsb\n isb");
  _start();
}
__attribute__((section(".isr_vector"), used)) const void* const rlx_vectors[16] = {
    &__StackTop, (const void*)Reset_Handler, (const void*)Default_Handler, (const void*)Default_Handler,
    (const void*)Default_Handler, (const void*)Default_Handler, (const void*)Default_Handler, 0, 0, 0, 0,
    (const void*)Default_Handler, (const void*)Default_Handler, 0, (const void*)Default_Handler,
    (const void*)Default_Handler};
)C";

std::string linker(const char* flash_origin, const char* flash_len, const char* ram_origin, const char* ram_len) {
  return std::string("/* link.ld: code and constants in FLASH, data/bss/heap/stack in RAM. QEMU's ELF loader\n"
                     "   writes .data straight to RAM, so there is no copy loop. */\n"
                     "MEMORY { FLASH (rx) : ORIGIN = ") + flash_origin + ", LENGTH = " + flash_len +
         "\n         RAM (rwx)  : ORIGIN = " + ram_origin + ", LENGTH = " + ram_len + " }\n" + R"L(ENTRY(Reset_Handler)
SECTIONS {
  .isr_vector : { KEEP(*(.isr_vector)) } > FLASH
  .text : { *(.text*) KEEP(*(.init)) KEEP(*(.fini)) } > FLASH
  .rodata : { *(.rodata*)
            . = ALIGN(4); __preinit_array_start = .; KEEP(*(.preinit_array)) __preinit_array_end = .;
            __init_array_start = .; KEEP(*(SORT(.init_array.*))) KEEP(*(.init_array)) __init_array_end = .;
            __fini_array_start = .; KEEP(*(.fini_array)) __fini_array_end = .; } > FLASH
  .ARM.exidx : { __exidx_start = .; *(.ARM.exidx*) __exidx_end = .; } > FLASH
  .data : { *(.data*) } > RAM
  .bss (NOLOAD) : { __bss_start__ = .; *(.bss*) *(COMMON) . = ALIGN(8); __bss_end__ = .; } > RAM
  end = .; _end = .; __end__ = .;
  __stack = ORIGIN(RAM) + LENGTH(RAM); __StackTop = __stack;
}
)L";
}

// Records: each holds every input's bytes in graph order; the outputs of each go to the output file
// in the same way. SysTick (processor clock) brackets each run; with QEMU's -icount the count is
// emulated time, converted to instructions by a calibration loop of known length.
const char* kMain = R"C(/* main.c: stream records from argv[1] (default input.bin) through the model to argv[2]
   (default output.bin) over semihosting; print the record count and SysTick ticks. */
#include <stdio.h>
#include "model.h"

#if defined(__arm__)
#define RLX_SYST_CSR (*(volatile uint32_t*)0xE000E010)
#define RLX_SYST_RVR (*(volatile uint32_t*)0xE000E014)
#define RLX_SYST_CVR (*(volatile uint32_t*)0xE000E018)
static void rlx_tick_start(void) {
  RLX_SYST_RVR = 0xFFFFFFu;
  RLX_SYST_CVR = 0;
  RLX_SYST_CSR = 5; /* enable, processor clock, no interrupt */
}
static uint32_t rlx_ticks(void) { return RLX_SYST_CVR; }
static uint32_t rlx_elapsed(uint32_t t0, uint32_t t1) { return (t0 - t1) & 0xFFFFFFu; }
/* 2 instructions per iteration (subs, bne): ticks per instruction for the -icount conversion */
static uint32_t rlx_calibrate(uint32_t iters) {
  uint32_t t0 = rlx_ticks();
  __asm volatile("1: subs %0, %0, #1\n bne 1b" : "+r"(iters) : : "cc");
  return rlx_elapsed(t0, rlx_ticks());
}
#else
static void rlx_tick_start(void) {}
static uint32_t rlx_ticks(void) { return 0; }
static uint32_t rlx_elapsed(uint32_t t0, uint32_t t1) { return t1 - t0; }
static uint32_t rlx_calibrate(uint32_t iters) { return iters * 0; }
#endif

int main(int argc, char** argv) {
  const char* in = argc > 2 ? argv[1] : "input.bin";
  const char* out = argc > 2 ? argv[2] : "output.bin";
  FILE* fi = fopen(in, "rb");
  FILE* fo = fopen(out, "wb");
  if (!fi || !fo) {
    printf("[cortexm] cannot open %s or %s\n", in, out);
    return 2;
  }
  rlx_tick_start();
  unsigned long records = 0;
  unsigned long long ticks = 0;
  for (;;) {
    int i;
    size_t got = 0;
    for (i = 0; i < RLX_NUM_INPUTS; ++i) {
      got = fread(rlx_inputs[i], 1, rlx_input_bytes[i], fi);
      if (got != rlx_input_bytes[i]) break;
    }
    if (i == 0 && got == 0) break; /* end of the input file */
    if (i < RLX_NUM_INPUTS) {
      printf("[cortexm] record %lu: input %d is short (%u of %u bytes)\n", records, i, (unsigned)got,
             (unsigned)rlx_input_bytes[i]);
      return 3;
    }
    uint32_t t0 = rlx_ticks();
    rlx_model_run();
    ticks += rlx_elapsed(t0, rlx_ticks());
    for (i = 0; i < RLX_NUM_OUTPUTS; ++i)
      if (fwrite(rlx_outputs[i], 1, rlx_output_bytes[i], fo) != rlx_output_bytes[i]) {
        printf("[cortexm] cannot write %s\n", out);
        return 4;
      }
    ++records;
  }
  fclose(fi);
  if (fclose(fo) != 0) return 4;
  uint32_t cal = rlx_calibrate(1000000u);
  /* newlib nano's printf has no %llu: the 64-bit tick total as two 32-bit halves */
  printf("rlx-cortexm records=%lu ticks_hi=%lu ticks_lo=%lu calib_ticks=%lu calib_instructions=2000000\n", records,
         (unsigned long)(ticks >> 32), (unsigned long)(ticks & 0xFFFFFFFFu), (unsigned long)cal);
  return 0;
}
)C";

std::string makefile(const BoardInfo& b) {
  return std::string("# Makefile of an RLX-generated Cortex-M project (board ") + b.name + ": " + b.core + ", QEMU " +
         b.machine + ").\n"
         "#   make            firmware model.elf (arm-none-eabi-gcc, newlib nano + rdimon semihosting)\n"
         "#   make run        IN=input.bin OUT=output.bin through qemu-system-arm (ICOUNT=1: -icount shift=0)\n"
         "#   make host       the same model and main.c for this machine (model_host IN OUT)\n"
         "#   make size       section sizes of model.elf\n"
         "CC = arm-none-eabi-gcc\nQEMU = qemu-system-arm\nMACHINE = " + b.machine + "\nCPU = " + b.cflags + "\n" +
         R"M(CFLAGS = $(CPU) -O2 -g -std=c99 -Wall -Wextra -ffp-contract=off -ffunction-sections -fdata-sections
LDFLAGS = --specs=nano.specs --specs=rdimon.specs -T link.ld -Wl,--gc-sections
SRC = startup.c main.c model.c
IN ?= input.bin
OUT ?= output.bin
ICOUNT ?= 0
QFLAGS = -M $(MACHINE) -nographic -monitor none -serial none $(if $(filter 1,$(ICOUNT)),-icount shift=0,)

all: model.elf
model.elf: $(SRC) model.h rlx_kernels.h link.ld
	$(CC) $(CFLAGS) $(SRC) $(LDFLAGS) -o $@ -lc -lrdimon
run: model.elf
	$(QEMU) $(QFLAGS) -semihosting-config enable=on,target=native,arg=model.elf,arg=$(IN),arg=$(OUT) -kernel model.elf
host: model_host
model_host: main.c model.c model.h rlx_kernels.h
	cc -O2 -std=c99 -Wall -Wextra -ffp-contract=off main.c model.c -o $@
size: model.elf
	arm-none-eabi-size -A model.elf
clean:
	rm -f model.elf model_host
.PHONY: all run host size clean
)M";
}

}  // namespace

std::map<std::string, std::string> board_files(Board b) {
  const BoardInfo& bi = board_info(b);
  std::map<std::string, std::string> f;
  f["startup.c"] = kStartup;
  f["main.c"] = kMain;
  f["Makefile"] = makefile(bi);
  // mps2-an386: 4 MB SSRAM1 at 0 (code), 4 MB SSRAM2/3 at 0x20000000. mps3-an547: 512 KB ITCM at 0,
  // 512 KB DTCM at 0x20000000.
  f["link.ld"] = b == Board::M4 ? linker("0x00000000", "4M", "0x20000000", "4M")
                                : linker("0x00000000", "512K", "0x20000000", "512K");
  return f;
}

}  // namespace rlx::cortexm
