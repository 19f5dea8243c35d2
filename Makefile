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

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	PYTHONPATH=$(BUILD)/python $(PY) -m pytest tests/python -q

ops-doc: build
	$(BUILD)/bin/rlx ops --write docs/ops.md --quiet

clean:
	rm -rf $(BUILD)
