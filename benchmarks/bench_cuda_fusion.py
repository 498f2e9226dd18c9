"""Elementwise chains on a GPU: the kernels executor's fused CuPy kernels against the same executor
node by node and against raw onnxruntime CUDA sessions, one JSON line per workload and size.

Workloads (float32, recorded with onnxnn's Tensor API, so each is the graph a model records):

- ``gelu_tanh``: GELU's tanh form written out, ``0.5 x (1 + tanh(0.79788 (x + 0.044715 x^3)))``
  (9 nodes, one input).
- ``silu_backward``: SiLU's gradient from the saved input, ``g s (1 + x (1 - s))``, s = sigmoid(x)
  (6 nodes, two inputs).
- ``bias_residual_relu``: ``relu(x + bias + residual)``, a residual block's end (3 nodes; the bias
  broadcast over rows).
- ``adam_update``: one Adam step written out for a weight: the new moments (plan outputs, so they
  stay out of the group that computes the weight) and the weight (14 nodes, four inputs, three
  outputs).

The contenders, in one process, on the same device arrays:

- ``onnxnn``: ``CompiledKernelPlan(plan, cupy)``, the kernels executor with its fusion (what
  ``set_executor("kernels")`` runs on "cuda");
- ``nodes``: the same with ``fuse_elementwise=False``: one CuPy call per node;
- ``onnxruntime``: the plan's ONNX model (``build_model``) in an ``InferenceSession`` on the CUDA
  provider with onnxnn's provider options, run with io_binding: inputs bound once as OrtValues on
  the GPU, outputs bound to the GPU (the best raw onnxruntime does; its graph optimizations on).

Each call's time covers the whole computation: blocks of calls end with a device synchronization
(bench_vs_torch's interleaved blocks). ``ratio_onnxnn_to_X`` is the median over blocks of the fused
plan's time over X's (below 1: fusion is faster), with quartiles. ``max_abs_difference`` compares the fused
results with onnxruntime's.

``api_*``: the same workload as a user runs it, tensors on "cuda" recorded and computed every call,
under ``set_executor("kernels")`` against ``set_executor("onnxruntime")`` (whose sessions replay a
repeated structure as a CUDA graph).

Run: python benchmarks/bench_cuda_fusion.py [--only NAME ...] [--sizes N ...] [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime

import onnxnn
from onnxnn.ir.device_arrays import execution_provider
from onnxnn.ir.model_building import build_model
from onnxnn.ir.plan import plan as _plan
from onnxnn.kernels import CompiledKernelPlan, array_module
from onnxnn.runtime.realization import realize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vs_torch import _interleaved  # noqa: E402

SIZES = (1 << 12, 1 << 16, 1 << 20, 1 << 24)
ROW = 1024  # elements per row: the bias of bias_residual_relu has this many


def _gelu_tanh(tensors):
    (x,) = tensors
    return [x * 0.5 * (((x + x * x * x * 0.044715) * 0.7978845608).tanh() + 1)]


def _silu_backward(tensors):
    g, x = tensors
    s = x.sigmoid()
    return [g * s * (x * (1 - s) + 1)]


def _bias_residual_relu(tensors):
    x, bias, residual = tensors
    return [(x + bias + residual).relu()]


def _adam_update(tensors):
    weight, gradient, first, second = tensors
    first = first * 0.9 + gradient * 0.1
    second = second * 0.999 + gradient * gradient * 0.001
    return [weight - (first / 0.1) * 1e-3 / ((second / 0.001).sqrt() + 1e-8), first, second]


WORKLOADS = {
    "gelu_tanh": (_gelu_tanh, ("x",)),
    "silu_backward": (_silu_backward, ("x", "x")),
    "bias_residual_relu": (_bias_residual_relu, ("x", "bias", "x")),
    "adam_update": (_adam_update, ("x", "x", "x", "positive")),
}


def _arrays(kinds, size: int, rng) -> list:
    shape = (max(1, size // ROW), min(size, ROW))
    arrays = []
    for kind in kinds:
        if kind == "bias":
            arrays.append(rng.standard_normal(shape[1:]).astype(np.float32))
        elif kind == "positive":
            arrays.append(rng.uniform(0.1, 1.0, shape).astype(np.float32))
        else:
            arrays.append(rng.standard_normal(shape).astype(np.float32))
    return arrays


def _onnxruntime_runner(plan, device_inputs: list, cupy):
    model = build_model(plan)
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=list(execution_provider(onnxnn.device("cuda")))
    )
    if session.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"onnxruntime placed the graph on {session.get_providers()}")
    binding = session.io_binding()
    names = [graph_input.name for graph_input in session.get_inputs()]
    values = [onnxruntime.OrtValue.ortvalue_from_numpy(cupy.asnumpy(array), "cuda", 0) for array in device_inputs]
    for name, value in zip(names, values):
        binding.bind_ortvalue_input(name, value)
    for graph_output in session.get_outputs():
        binding.bind_output(graph_output.name, "cuda")

    def run():
        session.run_with_iobinding(binding)

    def results() -> list:
        return [value.numpy() for value in binding.get_outputs()]

    return run, results


def run_workload(name: str, size: int, cupy, blocks: int, block_seconds: float) -> dict:
    build, kinds = WORKLOADS[name]
    host = _arrays(kinds, size, np.random.default_rng(size))
    outputs = build([onnxnn.from_numpy(array) for array in host])
    plan = _plan([tensor._value for tensor in outputs])
    device_inputs = [cupy.asarray(value.data) for value in plan.inputs]
    fused = CompiledKernelPlan(plan, cupy)
    nodes = CompiledKernelPlan(plan, cupy, fuse_elementwise=False)
    run_onnxruntime, onnxruntime_results = _onnxruntime_runner(plan, device_inputs, cupy)
    synchronize = cupy.cuda.Device().synchronize
    contenders = {
        "onnxnn": (lambda: fused(device_inputs), synchronize),
        "nodes": (lambda: nodes(device_inputs), synchronize),
        "onnxruntime": (run_onnxruntime, synchronize),
    }
    for run, _ in contenders.values():
        for _ in range(3):  # NVRTC compiles the fused kernels, onnxruntime allocates
            run()
    synchronize()
    difference = max(
        float(np.max(np.abs(cupy.asnumpy(mine).astype(np.float64) - theirs), initial=0.0))
        for mine, theirs in zip(fused(device_inputs), onnxruntime_results())
    )
    row = {
        "workload": name,
        "elements": size,
        "nodes": len(plan.nodes),
        "fused_steps": len(fused.steps),
        "max_abs_difference": difference,
    }
    row.update(_interleaved(contenders, blocks, block_seconds))
    row.update(_through_the_api(build, host, blocks, block_seconds, synchronize))
    return row


def _through_the_api(build, host: list, blocks: int, block_seconds: float, synchronize) -> dict:
    """The workload as a user runs it: tensors on "cuda", recorded and computed each call, under
    ``set_executor("kernels")`` (the fused CuPy plan) and ``set_executor("onnxruntime")`` (onnxnn's
    sessions, which replay a repeated structure as a CUDA graph)."""
    tensors = [onnxnn.from_numpy(array).to("cuda") for array in host]

    def computed(executor: str):
        def call():
            with onnxnn.set_executor(executor):
                realize([tensor._value for tensor in build(tensors)])

        return call

    contenders = {"onnxnn": (computed("kernels"), synchronize), "onnxruntime": (computed("onnxruntime"), synchronize)}
    for call, _ in contenders.values():
        for _ in range(4):  # onnxnn's sessions start replaying a CUDA graph from the third run
            call()
    timed = _interleaved(contenders, blocks, block_seconds)
    return {
        "api_kernels_ms": timed["onnxnn_ms"],
        "api_onnxruntime_ms": timed["onnxruntime_ms"],
        "api_ratio_kernels_to_onnxruntime": timed["ratio_onnxnn_to_onnxruntime"],
        "api_ratio_kernels_to_onnxruntime_quartiles": timed["ratio_onnxnn_to_onnxruntime_quartiles"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", default=[], help="workloads whose name contains any of these")
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES), help="elements per input")
    parser.add_argument("--quick", action="store_true", help="fewer and shorter blocks (a rough figure)")
    settings = parser.parse_args()
    if not onnxnn.cuda.is_available():
        parser.error("needs a GPU: onnxnn.cuda.is_available() is False (no GPU, or onnxruntime's CUDA provider)")
    try:
        cupy = array_module("cuda")
    except RuntimeError as error:
        parser.error(str(error))
    blocks, block_seconds = (5, 0.05) if settings.quick else (9, 0.15)
    for name in WORKLOADS:
        if settings.only and not any(part in name for part in settings.only):
            continue
        for size in settings.sizes:
            print(json.dumps(run_workload(name, size, cupy, blocks, block_seconds)), flush=True)


if __name__ == "__main__":
    main()
