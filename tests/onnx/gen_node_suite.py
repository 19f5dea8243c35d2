#!/usr/bin/env python3
"""Materializes the ONNX backend node test suite shipped (as generators) in the pip `onnx` wheel.

Recent wheels no longer carry onnx/backend/test/data/node; they carry the case generators in
onnx.backend.test.case.node. This writes the usual layout (model.onnx + test_data_set_N/{input,output}_K.pb)
to OUT and a suite.json naming the source and version. If the wheel does ship data/node, it is copied.
Usage: gen_node_suite.py OUT
"""
import json
import os
import shutil
import sys


def main() -> int:
    out = sys.argv[1]
    import onnx
    from onnx import numpy_helper, TensorProto

    stamp = os.path.join(out, "suite.json")
    if os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f).get("version") == onnx.__version__:
                return 0  # already generated for this wheel
    shipped = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    if os.path.isdir(shipped):
        shutil.copytree(shipped, out, dirs_exist_ok=True)
        source = "pip onnx wheel: onnx/backend/test/data/node"
    else:
        from onnx.backend.test.case import node as node_cases
        import numpy as np

        def write(path, value, vi):
            t = vi.type
            if t.HasField("sequence_type"):
                proto = numpy_helper.from_list(value, vi.name)
            elif t.HasField("optional_type"):
                proto = numpy_helper.from_optional(value, vi.name)
            elif t.HasField("map_type"):
                proto = numpy_helper.from_dict(value, vi.name)
            elif isinstance(value, TensorProto):
                proto = value
            else:
                proto = numpy_helper.from_array(np.asarray(value), vi.name)
            with open(path, "wb") as f:
                f.write(proto.SerializeToString())

        for case in node_cases.collect_testcases():
            d = os.path.join(out, case.name)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "model.onnx"), "wb") as f:
                f.write(case.model.SerializeToString())
            for i, (ins, outs) in enumerate(case.data_sets):
                ds = os.path.join(d, f"test_data_set_{i}")
                os.makedirs(ds, exist_ok=True)
                for j, v in enumerate(ins):
                    write(os.path.join(ds, f"input_{j}.pb"), v, case.model.graph.input[j])
                for j, v in enumerate(outs):
                    write(os.path.join(ds, f"output_{j}.pb"), v, case.model.graph.output[j])
            if case.rtol != 1e-3 or case.atol != 1e-7:
                with open(os.path.join(d, "tolerance.json"), "w") as f:
                    json.dump({"rtol": case.rtol, "atol": case.atol}, f)
        source = "pip onnx wheel: onnx.backend.test.case.node generators"
    with open(stamp, "w") as f:
        json.dump({"source": source, "version": onnx.__version__}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
