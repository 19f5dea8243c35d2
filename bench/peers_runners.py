"""The child side of bench/peers.py: how each system loads the shared model and runs each workload.

Every runner gets the paths of the one seeded model (bench/peers_model.py), the token inputs and the
timing settings, and returns rows {workload, batch, seq, variant, p50_ms, p90_ms, n} plus outputs to
check. Timing is the same everywhere: `timed()` wraps one call (MiniLM: inputs in, embedding out as
a host numpy array; MNIST: one SGD step including reading the loss back as a Python float) with
time.perf_counter, after warm-up calls that also absorb any compilation. RLX's children are its own
drivers (bench/minilm_cpu_rlx.cpp, `rlx train-mnist --bench-steps`), which time the same call in C++.
A runner raises Unavailable (with the reason) for a workload it cannot run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from peers_model import GRAPH_NAME, encoder, prepare, static_onnx  # noqa: E402

THREADS = int(os.environ.get("RLX_BENCH_THREADS") or os.cpu_count() or 1)


class Unavailable(Exception):
    """This system cannot run this workload here; the message is the reason listed in the results."""


def timed(fn, warmup, runs, budget_s):
    """Warm-up calls (at least one), then up to `runs` timed calls (at least 3; fewer than `runs` when a
    call is slow enough that `runs` of them would pass budget_s). Returns p50, p90 (ms) and the number timed."""
    per = 0.0
    for _ in range(max(1, warmup)):  # the last warm-up call's time sizes N (the first ones compile)
        t0 = time.perf_counter()
        fn()
        per = time.perf_counter() - t0
    n = max(3, min(runs, int(budget_s / max(per, 1e-6))))
    ts = []
    for _ in range(n):
        a = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - a) * 1e3)
    return float(np.percentile(ts, 50)), float(np.percentile(ts, 90)), n


def predicted_too_slow(rows, b, s, cfg, outs):
    """True (and a reason in outs["skipped"]) when the previous, smaller cell's time per token predicts
    a call longer than cfg["max_call_s"]: such a cell would take minutes of warm-up and timed calls."""
    if not rows:
        return False
    last = rows[-1]
    est = last["p50_ms"] / (last["batch"] * last["seq"]) * b * s / 1e3
    if est <= cfg["max_call_s"]:
        return False
    outs.setdefault("skipped", {})[f"minilm_{b}x{s}"] = (
        f"not timed: b{last['batch']}x{last['seq']} took {last['p50_ms']:.0f} ms, so one b{b}x{s} call is "
        f"predicted at ~{est:.0f} s (> --max-call-s {cfg['max_call_s']:.0f})")
    return True


# ---- MiniLM: framework adapters for peers_model.encoder --------------------------------------------

def _torch_adapter():
    import torch
    import torch.nn.functional as tf

    class F:
        shape = staticmethod(lambda t: tuple(t.shape))
        take = staticmethod(lambda tab, ids: tf.embedding(ids, tab))
        layer_norm = staticmethod(lambda x, g, b, eps: tf.layer_norm(x, (x.shape[-1],), g, b, eps))
        to_float = staticmethod(lambda m: m.to(torch.float32))
        reshape = staticmethod(lambda x, s: x.reshape(s))
        transpose = staticmethod(lambda x, p: x.permute(p))
        attention = staticmethod(lambda q, k, v, bias, scale: tf.scaled_dot_product_attention(q, k, v, attn_mask=bias,
                                                                                              scale=scale))
        gelu = staticmethod(tf.gelu)
        sum = staticmethod(lambda x, ax, keepdims=False: x.sum(ax, keepdim=keepdims))
        maximum = staticmethod(lambda x, c: x.clamp(min=c))
        sqrt = staticmethod(torch.sqrt)
    return F


def _tf_adapter():
    import tensorflow as tf

    def _ln(x, g, b, eps):
        mu, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mu) * tf.math.rsqrt(var + eps) * g + b

    def _attn(q, k, v, bias, scale):
        return tf.matmul(tf.nn.softmax(tf.matmul(q, k, transpose_b=True) * scale + bias, axis=-1), v)

    class F:
        shape = staticmethod(lambda t: tuple(t.shape))
        take = staticmethod(lambda tab, ids: tf.gather(tab, ids))
        layer_norm = staticmethod(_ln)
        to_float = staticmethod(lambda m: tf.cast(m, tf.float32))
        reshape = staticmethod(tf.reshape)
        transpose = staticmethod(lambda x, p: tf.transpose(x, p))
        attention = staticmethod(_attn)
        gelu = staticmethod(lambda x: tf.nn.gelu(x, approximate=False))
        sum = staticmethod(lambda x, ax, keepdims=False: tf.reduce_sum(x, ax, keepdims=keepdims))
        maximum = staticmethod(tf.maximum)
        sqrt = staticmethod(tf.sqrt)
    return F


def _jax_adapter():
    import jax
    import jax.numpy as jnp

    def _ln(x, g, b, eps):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + eps) * g + b

    class F:
        shape = staticmethod(lambda t: tuple(t.shape))
        take = staticmethod(lambda tab, ids: jnp.take(tab, ids, axis=0))
        layer_norm = staticmethod(_ln)
        to_float = staticmethod(lambda m: m.astype(jnp.float32))
        reshape = staticmethod(jnp.reshape)
        transpose = staticmethod(jnp.transpose)
        attention = staticmethod(lambda q, k, v, bias, scale: jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) * scale + bias,
                                                                            axis=-1) @ v)
        gelu = staticmethod(lambda x: jax.nn.gelu(x, approximate=False))
        sum = staticmethod(lambda x, ax, keepdims=False: jnp.sum(x, ax, keepdims=keepdims))
        maximum = staticmethod(jnp.maximum)
        sqrt = staticmethod(jnp.sqrt)
    return F


def _mlx_adapter():
    import mlx.core as mx
    import mlx.nn as nn

    class F:
        shape = staticmethod(lambda t: tuple(t.shape))
        take = staticmethod(lambda tab, ids: mx.take(tab, ids, axis=0))
        layer_norm = staticmethod(lambda x, g, b, eps: mx.fast.layer_norm(x, g, b, eps))
        to_float = staticmethod(lambda m: m.astype(mx.float32))
        reshape = staticmethod(mx.reshape)
        transpose = staticmethod(mx.transpose)
        attention = staticmethod(lambda q, k, v, bias, scale: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale,
                                                                                                  mask=bias))
        gelu = staticmethod(nn.gelu)
        sum = staticmethod(lambda x, ax, keepdims=False: mx.sum(x, ax, keepdims=keepdims))
        maximum = staticmethod(mx.maximum)
        sqrt = staticmethod(mx.sqrt)
    return F


def _tinygrad_adapter():
    from tinygrad import Tensor

    class F:
        shape = staticmethod(lambda t: tuple(t.shape))
        take = staticmethod(lambda tab, ids: tab[ids])
        layer_norm = staticmethod(lambda x, g, b, eps: x.layernorm(eps=eps) * g + b)
        to_float = staticmethod(lambda m: m.float())
        reshape = staticmethod(lambda x, s: x.reshape(s))
        transpose = staticmethod(lambda x, p: x.permute(p))
        attention = staticmethod(lambda q, k, v, bias, scale: ((q @ k.transpose(-1, -2)) * scale + bias).softmax(-1) @ v)
        gelu = staticmethod(lambda x: 0.5 * x * (1.0 + (x * (1.0 / np.sqrt(2.0))).erf()))
        sum = staticmethod(lambda x, ax, keepdims=False: x.sum(ax, keepdim=keepdims))
        maximum = staticmethod(lambda x, c: x.maximum(c))
        sqrt = staticmethod(lambda x: x.sqrt())
    del Tensor
    return F


def minilm_framework(system, variant, paths, inputs, cfg):
    """PyTorch (eager, torch.compile), TensorFlow (tf.function, XLA), JAX (jit), MLX (compile), tinygrad (TinyJit)."""
    w = dict(np.load(paths["npz"]))
    rows, outs = [], {}
    if system == "pytorch":
        import torch
        torch.set_num_threads(THREADS)
        F, W = _torch_adapter(), prepare(w, torch.from_numpy)
        fn = (lambda i, m: encoder(F, W, i, m))
        if variant == "compile":
            fn = torch.compile(fn, dynamic=False)
        conv, run = torch.from_numpy, fn
        ctx = torch.inference_mode()
        ctx.__enter__()
        call = lambda i, m: run(i, m).numpy()  # noqa: E731
    elif system == "tensorflow":
        import tensorflow as tf
        F, W = _tf_adapter(), prepare(w, tf.constant)
        fn = tf.function(lambda i, m: encoder(F, W, i, m), jit_compile=(variant == "xla"))
        conv, call = tf.constant, (lambda i, m: fn(i, m).numpy())
    elif system == "jax":
        import jax
        import jax.numpy as jnp
        F, W = _jax_adapter(), prepare(w, jnp.asarray)
        fn = jax.jit(lambda W_, i, m: encoder(F, W_, i, m))
        conv, call = jnp.asarray, (lambda i, m: np.asarray(fn(W, i, m)))
    elif system == "mlx":
        import mlx.core as mx
        mx.set_default_device(mx.cpu)
        F, W = _mlx_adapter(), prepare(w, mx.array)
        fn = mx.compile(lambda i, m: encoder(F, W, i, m))
        conv = mx.array
        call = lambda i, m: np.array(fn(i, m))  # noqa: E731  (np.array evaluates the lazy graph)
    elif system == "tinygrad":
        from tinygrad import Tensor, TinyJit
        F, W = _tinygrad_adapter(), prepare(w, lambda a: Tensor(a).realize())
        conv = lambda a: Tensor(a.astype(np.int32)).realize()  # noqa: E731
        jits = {}

        def call(i, m):
            j = jits.setdefault(i.shape, TinyJit(lambda i_, m_: encoder(F, W, i_, m_).realize()))
            return j(i, m).numpy()
    else:
        raise Unavailable(f"no MiniLM runner for {system}")
    for (b, s), (ids, mask) in inputs.items():
        if predicted_too_slow(rows, b, s, cfg, outs):
            continue
        ti, tm = conv(ids), conv(mask)
        p50, p90, n = timed(lambda: call(ti, tm), cfg["warmup"], cfg["runs"], cfg["budget_s"])
        outs[f"{b}x{s}"] = np.asarray(call(ti, tm))
        rows.append(dict(batch=b, seq=s, p50_ms=p50, p90_ms=p90, n=n))
        print(f"  {system}/{variant} b{b} s{s}: p50 {p50:.2f} ms", file=sys.stderr, flush=True)
    return rows, outs


def minilm_onnx(system, variant, paths, inputs, cfg):
    """ONNX Runtime, OpenVINO, IREE, TVM: each imports the same ONNX file (static shapes per cell
    for the compilers that specialize: OpenVINO reshape, IREE and TVM a static copy)."""
    rows, outs = [], {}
    cache = cfg["cache"]
    for (b, s), (ids, mask) in inputs.items():
        if predicted_too_slow(rows, b, s, cfg, outs):
            continue
        feed = {"input_ids": ids, "attention_mask": mask}
        if system == "onnxruntime":
            import onnxruntime as ort
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.intra_op_num_threads, so.inter_op_num_threads = THREADS, 1
            # spinning workers wait for CPUs other processes hold on a shared host (10x slower here)
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            sess = ort.InferenceSession(paths["onnx"], so, providers=["CPUExecutionProvider"])
            call = lambda: sess.run(None, feed)[0]  # noqa: E731
        elif system == "openvino":
            import openvino as ov
            core = ov.Core()
            model = core.read_model(paths["onnx"])
            model.reshape({"input_ids": [b, s], "attention_mask": [b, s]})
            cm = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": THREADS, "PERFORMANCE_HINT": "LATENCY",
                                                   "INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": False})
            req = cm.create_infer_request()
            call = lambda: req.infer(feed)[cm.output(0)].copy()  # noqa: E731
        elif system == "iree":
            call = _iree_minilm(paths, cache, b, s, ids, mask)
        elif system == "tvm":
            call = _tvm_minilm(paths, cache, b, s, ids, mask)
        else:
            raise Unavailable(f"no ONNX runner for {system}")
        p50, p90, n = timed(call, cfg["warmup"], cfg["runs"], cfg["budget_s"])
        outs[f"{b}x{s}"] = np.asarray(call())
        rows.append(dict(batch=b, seq=s, p50_ms=p50, p90_ms=p90, n=n))
        print(f"  {system}/{variant} b{b} s{s}: p50 {p50:.2f} ms", file=sys.stderr, flush=True)
    return rows, outs


def _iree_minilm(paths, cache, b, s, ids, mask):
    import iree.compiler as ic
    import iree.runtime as ir

    vmfb = os.path.join(cache, f"iree_minilm_{b}x{s}.vmfb")
    if not os.path.exists(vmfb):  # compiled once, reused by later rounds
        src = static_onnx(paths, os.path.join(cache, f"minilm_{b}x{s}.onnx"), b, s)
        mlir = os.path.join(cache, f"minilm_{b}x{s}.mlir")
        importer = os.path.join(os.path.dirname(sys.executable), "iree-import-onnx")
        r = subprocess.run([importer, src, "-o", mlir], capture_output=True, text=True)
        if r.returncode:
            raise Unavailable("iree-import-onnx failed: " + (r.stderr or r.stdout)[-300:])
        ic.compile_file(mlir, output_file=vmfb + ".tmp", target_backends=["llvm-cpu"],
                        extra_args=["--iree-llvmcpu-target-cpu=host"])
        os.replace(vmfb + ".tmp", vmfb)
    ir.flags.parse_flags(f"--task_topology_max_group_count={THREADS}")
    mod = ir.load_vm_flatbuffer_file(vmfb, driver="local-task")
    fn = mod[GRAPH_NAME]  # iree-import-onnx names the function after the ONNX graph
    return lambda: fn(ids, mask).to_host()


def _tvm_minilm(paths, cache, b, s, ids, mask):
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    lib = os.path.join(cache, f"tvm_minilm_{b}x{s}.so")
    from tvm.target import codegen
    target = tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu()})
    if not os.path.exists(lib):
        m = onnx.load(static_onnx(paths, os.path.join(cache, f"minilm_{b}x{s}.onnx"), b, s))
        mod = from_onnx(m, shape_dict={"input_ids": [b, s], "attention_mask": [b, s]}, keep_params_in_input=False)
        mod = relax.transform.DecomposeOpsForInference()(mod)
        ex = tvm.compile(mod, target=target)
        ex.export_library(lib + ".tmp.so")
        os.replace(lib + ".tmp.so", lib)
    ex = tvm.runtime.load_module(lib)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    ti, tm = tvm.runtime.tensor(ids) if hasattr(tvm.runtime, "tensor") else tvm.nd.array(ids), \
        tvm.runtime.tensor(mask) if hasattr(tvm.runtime, "tensor") else tvm.nd.array(mask)

    def call():
        out = vm["main"](ti, tm)
        return (out[0] if isinstance(out, (list, tuple)) or hasattr(out, "__getitem__") and not hasattr(out, "numpy")
                else out).numpy()
    return call


def minilm_rlx(variant, paths, inputs, cfg):
    """RLX's MiniLM driver (bench/minilm_cpu_rlx.cpp): the BERT builder on the HF directory, or
    (variant onnx-import) the same ONNX file through RLX's importer."""
    npz = os.path.join(cfg["tmp"], "rlx_inputs.npz")
    np.savez(npz, **{f"{k}_{b}x{s}": a for (b, s), (ids, mask) in inputs.items()
                     for k, a in (("ids", ids), ("mask", mask))})
    out = os.path.join(cfg["tmp"], f"rlx_{variant}")
    cmd = [cfg["rlx_bench_bin"], paths["hf"], npz, out, str(cfg["warmup"]), str(cfg["runs"])]
    if variant == "onnx-import":
        cmd.append(paths["onnx"])
    r = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(r.stderr[-4000:])
    if r.returncode:
        raise Unavailable(f"rlx_bench_minilm_cpu exited {r.returncode}: {r.stderr[-300:]}")
    with open(out + ".json") as f:
        doc = json.load(f)
    rows = [dict(batch=x["batch"], seq=x["seq"], p50_ms=x["p50_ms"], p90_ms=x["p90_ms"], n=cfg["runs"])
            for x in doc["rows"]]
    return rows, dict(np.load(out + ".npz"))
