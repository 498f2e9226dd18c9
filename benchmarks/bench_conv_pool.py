"""Convolution and pooling layers against raw onnxruntime sessions of the same exported graphs.

For each layer: ``forward`` is one call ``layer(x).numpy()`` under no_grad on the onnxruntime
executor (recording, planning, the session cache, feeding) against ``session.run`` of the graph
``onnxnn.export.to_onnx`` exported for it; ``training_step`` is one step of forward, MSE loss,
backward and SGD (momentum 0.9) in onnxnn against ``session.run`` of the graph
``training_step_to_onnx`` exported for the same step (its state fed back each time), over one
fixed batch in both. Both are
measured side by side in one process and printed as JSON with their ratios (onnxnn / raw).

Target (issue 12): forward within 1.1x of the raw session.
Run: python benchmarks/bench_conv_pool.py [rounds]   (default 9 alternating rounds; medians reported)
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import onnxruntime

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx, training_step_to_onnx

LAYERS = [
    # name, layer factory, input shape
    ("Conv2d_3x3_32to32", lambda: nn.Conv2d(32, 32, 3, padding=1), (8, 32, 32, 32)),
    ("Conv2d_reflect_3x3", lambda: nn.Conv2d(16, 16, 3, padding=1, padding_mode="reflect"), (8, 16, 32, 32)),
    ("Conv1d_k5_64to64", lambda: nn.Conv1d(64, 64, 5, padding=2), (16, 64, 128)),
    ("ConvTranspose2d_s2", lambda: nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), (8, 32, 16, 16)),
    ("MaxPool2d_3s2", lambda: nn.MaxPool2d(3, stride=2, padding=1), (8, 32, 32, 32)),
    ("AvgPool2d_2", lambda: nn.AvgPool2d(2), (8, 32, 32, 32)),
    ("AdaptiveAvgPool2d_1", lambda: nn.AdaptiveAvgPool2d(1), (8, 64, 16, 16)),
    ("AdaptiveMaxPool2d_uneven", lambda: nn.AdaptiveMaxPool2d((5, 5)), (8, 32, 16, 16)),
]


# Intra-op threads of the raw sessions; None: onnxruntime's default. Set with onnxnn's (bench_layers --threads).
SESSION_THREADS: list = [None]


def _session(proto):
    options = onnxruntime.SessionOptions()
    if SESSION_THREADS[0] is not None:
        options.intra_op_num_threads = SESSION_THREADS[0]
    return onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _compare(ours, raw, rounds: int) -> dict:
    """Per-call times of ``ours`` and ``raw`` in alternating rounds (so that load from other processes
    falls on both alike); the medians, and the median of the per-round ratios."""
    ours(), raw()
    repeats = _repeats(raw)
    ours_times, raw_times = [], []
    for _ in range(rounds):
        for function, times in ((ours, ours_times), (raw, raw_times)):
            start = time.perf_counter()
            for _ in range(repeats):
                function()
            times.append((time.perf_counter() - start) / repeats)
    return {
        "onnxnn_ms": statistics.median(ours_times) * 1e3,
        "raw_onnxruntime_ms": statistics.median(raw_times) * 1e3,
        "ratio": statistics.median(o / r for o, r in zip(ours_times, raw_times)),
    }


def _repeats(function) -> int:
    """Enough calls for about 0.1 s per round."""
    start = time.perf_counter()
    function()
    return max(3, int(0.1 / max(time.perf_counter() - start, 1e-6)))


def _cycle(items):
    """A function returning the items in turn (a new input per call: a repeated one may be served
    from onnxnn's result cache)."""
    state = {"index": 0}

    def next_item():
        state["index"] = (state["index"] + 1) % len(items)
        return items[state["index"]]

    return next_item


def bench_forward(build, shape, rounds: int) -> dict:
    layer = build().eval()
    inputs = [onnxnn.randn(*shape) for _ in range(4)]
    next_input, next_array = _cycle(inputs), _cycle([x.numpy() for x in inputs])
    session = _session(to_onnx(layer, inputs[0], input_names=["x"], output_names=["y"]))

    def ours():
        with onnxnn.no_grad():
            layer(next_input()).numpy()

    def raw():
        session.run(None, {"x": next_array()})

    return _compare(ours, raw, rounds)


def bench_training_step(build, shape, rounds: int) -> dict:
    layer = build().train()
    x = onnxnn.randn(*shape)
    with onnxnn.no_grad():
        target = onnxnn.randn(*layer(x).shape)
    if not list(layer.parameters()):
        return {}
    optimizer = onnxnn.optim.SGD(layer.parameters(), lr=0.01, momentum=0.9)
    proto, signature = training_step_to_onnx(layer, F.mse_loss, optimizer, (x, target))
    session = _session(proto)
    output_names = [output.name for output in session.get_outputs()]
    state = dict(signature.initial_state)
    batch = {"input": x.numpy(), "target": target.numpy()}

    def ours():
        # The step runs when optimizer.step() realizes the updates; loss.item() is left out: after
        # the step it runs the forward pass again (the loss is not among the step's outputs).
        loss = F.mse_loss(layer(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def raw():
        nonlocal state
        outputs = dict(zip(output_names, session.run(None, {**state, **batch})))
        state = {name: outputs[next_name] for name, next_name in signature.state.items()}

    return _compare(ours, raw, rounds)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    onnxnn.manual_seed(0)
    results = {}
    with onnxnn.set_executor("onnxruntime"):
        for name, build, shape in LAYERS:
            results[name] = {
                "input": list(shape),
                "forward": bench_forward(build, shape, rounds),
                "training_step": bench_training_step(build, shape, rounds),
            }
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
