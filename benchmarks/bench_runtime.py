"""Runtime overheads, measured side by side in one process, printed as JSON.

- record_us_per_op: microseconds to record one op (no computation happens at record time).
- realization: a 10-node graph realized through the session cache against calling the very same
  onnxruntime session directly with the same inputs; the difference is onnxnn's overhead
  (planning, the structural cache key, feeding and storing results).
- training_loop: a 1,000-step tiny training loop (forward, backward, update) per step.

Targets (issue 2): recording under 5 us per op; cached realization adds under 30 us.
Run: python benchmarks/bench_runtime.py
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np

import onnxnn
from onnxnn.ir.executors import executor as executor_named
from onnxnn.runtime import realization as executor


def _per_call_us(function, repeats: int, rounds: int = 7) -> float:
    """Median over rounds of the mean time per call, in microseconds."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            function()
        samples.append((time.perf_counter() - start) / repeats * 1e6)
    return statistics.median(samples)


def bench_recording() -> dict:
    x, y = onnxnn.randn(16, 16), onnxnn.randn(16, 16)
    w = onnxnn.randn(16, 16, requires_grad=True)
    return {
        "add_no_grad": _per_call_us(lambda: x + y, 20_000),
        "mul_with_grad": _per_call_us(lambda: w * x, 20_000),
        "add_python_scalar": _per_call_us(lambda: x + 1.5, 20_000),
        "numpy_add_same_shape_for_scale": _per_call_us(lambda: np.add(x._value.data, y._value.data), 20_000),
    }


def _ten_node_graph(a):
    for index in range(10):
        a = a * 1.0001 if index % 2 else a + 0.5
    return a


def bench_realization() -> dict:
    # Pinned to onnxruntime: this measures what realizing adds to the very session it runs ("auto"
    # may time onnxnn's kernels against it and keep them for a graph this small).
    with onnxnn.set_executor("onnxruntime"):
        return _bench_realization()


def _bench_realization() -> dict:
    a = onnxnn.randn(16, 16)
    _ten_node_graph(a).numpy()  # compile once
    pending = _ten_node_graph(a)
    plan = executor.plan([pending._value])
    compiled = executor_named("onnxruntime").compile(plan)
    feeds = {name: value.data for name, value in zip(compiled.input_names, plan.inputs)}
    session = compiled.session
    output_names = compiled.output_names
    batch = 2000

    def realize_recorded() -> float:
        # Graphs are recorded first, then only their realization is timed.
        graphs = [_ten_node_graph(a)._value for _ in range(batch)]
        start = time.perf_counter()
        for value in graphs:
            executor.realize((value,))
        return (time.perf_counter() - start) / batch * 1e6

    def record_only() -> float:
        start = time.perf_counter()
        for _ in range(batch):
            _ten_node_graph(a)
        return (time.perf_counter() - start) / batch * 1e6

    def direct_session() -> float:
        start = time.perf_counter()
        for _ in range(batch):
            session.run(output_names, feeds)
        return (time.perf_counter() - start) / batch * 1e6

    rounds = {"record": [], "realize": [], "direct": []}
    for _ in range(7):  # interleaved, so machine noise hits all three alike
        rounds["record"].append(record_only())
        rounds["realize"].append(realize_recorded())
        rounds["direct"].append(direct_session())
    record, realize, direct = (statistics.median(rounds[k]) for k in ("record", "realize", "direct"))
    return {
        "nodes": len(plan.nodes),
        "record_us": record,
        "realize_us": realize,
        "direct_onnxruntime_session_run_us": direct,
        "realization_overhead_us": realize - direct,
        "ratio_realize_to_direct_run": realize / direct,
    }


def bench_training_loop(steps: int = 1000) -> dict:
    onnxnn.manual_seed(0)
    x = onnxnn.randn(64, 8)
    y = x @ onnxnn.randn(8, 1) + 0.5
    weight = onnxnn.zeros(8, 1, requires_grad=True)
    bias = onnxnn.zeros(1, requires_grad=True)

    def step():
        loss = ((x @ weight + bias - y) ** 2).mean()
        loss.backward()
        with onnxnn.no_grad():
            weight.sub_(0.05 * weight.grad)
            bias.sub_(0.05 * bias.grad)
        weight.grad = None
        bias.grad = None
        return loss

    for _ in range(5):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss = loss.item()
    elapsed = time.perf_counter() - start
    return {
        "steps": steps,
        "us_per_step": elapsed / steps * 1e6,
        "final_loss": loss,
        "sessions_compiled": executor.cache_info()["sessions"],
    }


def main() -> None:
    result = {
        "record_us_per_op": bench_recording(),
        "realization": bench_realization(),
        "training_loop": bench_training_loop(),
        "targets": {"record_us_per_op": 5.0, "realization_overhead_us": 30.0},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
