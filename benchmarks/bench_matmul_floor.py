"""The floor of the MLP training rows (issue 16): the step's eight matrix products alone, printed as JSON.

An Adam step of the MLP 784-512-512-10 at batch N multiplies three forward products, three weight
gradients and two input gradients (the first layer's input takes none): 2 N 668,672 x 3 - 2 N 784 x
512 flops. ``mlp_adam_bN`` compares onnxnn's whole step with PyTorch's; at large batches both are
mostly these products, so the ratio cannot fall below (onnxnn's products) / (PyTorch's step). This
times the same eight products, one intra-op thread each, in interleaved rounds: in onnxruntime (one
session of eight MatMul nodes: the kernels onnxnn's sessions run), ``torch.mm`` (when torch is
installed) and numpy's BLAS, and prints each one's milliseconds, GFLOP/s and the ratio
onnxruntime / torch. Divide onnxruntime's time by ``mlp_adam_bN``'s torch step time for the floor.
``--threads N`` gives every contender N threads instead (the session's pool spinning within its
runs only, as onnxnn's sessions do; numpy left out), for the floor of ``bench_vs_torch.py``'s
default-threads rows.

Run: python benchmarks/bench_matmul_floor.py [--batches 256 1024] [--rounds 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

try:
    import torch
except ImportError:  # the onnxruntime and numpy columns need no torch
    torch = None


def products(batch: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The (left, right) shapes of the step's products: forward, weight gradients, input gradients."""
    forward = [((batch, 784), (784, 512)), ((batch, 512), (512, 512)), ((batch, 512), (512, 10))]
    weight_gradients = [((512, batch), (batch, 784)), ((512, batch), (batch, 512)), ((10, batch), (batch, 512))]
    input_gradients = [((batch, 10), (10, 512)), ((batch, 512), (512, 512))]
    return forward + weight_gradients + input_gradients


def _session(shapes: list, threads: int) -> onnxruntime.InferenceSession:
    inputs, nodes, outputs = [], [], []
    for index, (left, right) in enumerate(shapes):
        inputs += [
            helper.make_tensor_value_info(f"a{index}", TensorProto.FLOAT, list(left)),
            helper.make_tensor_value_info(f"b{index}", TensorProto.FLOAT, list(right)),
        ]
        nodes.append(helper.make_node("MatMul", [f"a{index}", f"b{index}"], [f"y{index}"]))
        outputs.append(helper.make_tensor_value_info(f"y{index}", TensorProto.FLOAT, [left[0], right[1]]))
    model = helper.make_model(
        helper.make_graph(nodes, "products", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 10
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.force_spinning_stop", "1")
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def bench(batch: int, rounds: int, threads: int = 1) -> dict:
    shapes = products(batch)
    generator = np.random.default_rng(0)
    arrays = [(generator.standard_normal(a, np.float32), generator.standard_normal(b, np.float32)) for a, b in shapes]
    flops = sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b in arrays)
    session = _session(shapes, threads)
    feeds = {name: array for index, pair in enumerate(arrays) for name, array in zip((f"a{index}", f"b{index}"), pair)}
    contenders = {"onnxruntime": lambda: session.run(None, feeds)}
    if threads == 1:
        # On more threads numpy's BLAS workers keep spinning long after its block, on the cores the
        # next contender's threads need.
        contenders["numpy"] = lambda: [a @ b for a, b in arrays]
    if torch is not None:
        tensors = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in arrays]
        contenders["torch"] = lambda: [torch.mm(a, b) for a, b in tensors]
    times: dict = {name: [] for name in contenders}
    for call in contenders.values():
        call()  # warm-up: session buffers, BLAS threads' first touch
    repeats = max(2, 4096 // batch)
    for _ in range(rounds):
        for name, call in contenders.items():  # interleaved: drifting load falls on all alike
            call()  # untimed: the last contender's threads may still spin for a while after its block
            start = time.perf_counter()
            for _ in range(repeats):
                call()
            times[name].append((time.perf_counter() - start) / repeats)
    report: dict = {"workload": "mlp_step_products", "batch": batch, "mflop": round(flops / 1e6, 1), "threads": threads}
    for name, samples in times.items():
        seconds = statistics.median(samples)
        report[f"{name}_ms"] = seconds * 1e3
        report[f"{name}_gflops"] = flops / seconds / 1e9
    if "torch" in times:
        ratios = [ours / theirs for ours, theirs in zip(times["onnxruntime"], times["torch"])]
        report["ratio_onnxruntime_to_torch"] = statistics.median(ratios)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args()
    if torch is not None:
        torch.set_num_threads(arguments.threads)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(arguments.threads)  # numpy's BLAS too, where threadpoolctl is installed
    except ImportError:
        pass
    for batch in arguments.batches:
        print(json.dumps(bench(batch, arguments.rounds, arguments.threads)))


if __name__ == "__main__":
    main()
