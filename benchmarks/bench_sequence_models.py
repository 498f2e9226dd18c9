"""Sequence models against raw onnxruntime sessions of their exported graphs and against PyTorch.

Two cases (issue 13):

- ``LSTM``: ``nn.LSTM(256, 256, num_layers=2)``, input ``(64, 32, 256)`` (sequence 64, batch 32).
- ``TransformerEncoderLayer``: ``nn.TransformerEncoderLayer(256, 8, batch_first=True, dropout=0.0)``
  (PyTorch's default feedforward width, 2048), input ``(16, 128, 256)`` (batch 16, sequence 128).
  Dropout is 0 so that every training step below does the same work (an exported training step
  would otherwise draw its dropout mask once, while recording).

For each, side by side in one process, in alternating rounds (so that load from other processes
falls on all alike), medians of per-call times and of per-round ratios:

- ``forward``: ``module(x).numpy()`` under no_grad in eval mode on onnxnn's onnxruntime executor
  (recording, planning, the session cache, feeding), against ``session.run`` of the graph
  ``onnxnn.export.to_onnx`` exported for it (``raw_onnxruntime``, weights as initializers) and,
  when PyTorch is installed, against PyTorch eager on the same weights (copied via numpy).
- ``training_step``: forward, MSE loss, ``zero_grad``, ``backward``, Adam ``step``, as written in
  PyTorch, against PyTorch's same step and against ``session.run`` of the graph
  ``training_step_to_onnx`` exports for the same step (its state fed back each call): the
  like-for-like onnxruntime baseline; a forward graph alone is not one.
- ``training_step_loss_read_first``: the same step with ``loss.item()`` before ``backward()`` (as
  a loop that logs its loss does, and examples/char_language_model.py): onnxnn then runs the
  forward as a graph of its own and records the backward over computed values, which moves where
  its depth bound (``MAX_PENDING_DEPTH``) splits an unrolled recurrence's pending graph.

Every input is new per call (a repeated one may be served from onnxnn's result cache). Each
library uses its own default thread count. A sanity check prints the largest forward difference
between onnxnn, the raw session and PyTorch.

What it showed (2026-12-05, 2 CPU cores; 5 alternating rounds; ``python
benchmarks/bench_sequence_models.py``). nn.LSTM records one ONNX LSTM node per layer for inference
and the unrolled steps, one fused cell node each way, for a forward that will be differentiated:

| case | measure | onnxnn ms | / raw onnxruntime | / PyTorch |
|---|---|---|---|---|
| LSTM 2x256, seq 64, batch 32 | forward | 26.9 | 1.01 | 0.74 |
| | training step | 147 | 1.09 (to the exported training step, 137 ms) | 1.27 |
| | loss read first | 160 | | 1.47 |
| TransformerEncoderLayer, seq 128, batch 16 | forward | 38.6 | 0.93 | 0.86 |
| | training step | 129 | 1.03 (to the exported training step, 125 ms) | 0.91 |
| | loss read first | 130 | | 0.89 |

Each timed call follows an untimed one of the same contender: PyTorch's threads spin on after its
call, and onnxnn's call timed right after them took 1.2-1.5x its time (this table's forward rows
read 1.45 and 1.22 against the raw session before).

Run: python benchmarks/bench_sequence_models.py [rounds] [name-substring] [--measures forward,...]
     [--lstm-sequence N]   (default 5 rounds, every case and measure, the LSTM at sequence 64)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import onnxruntime

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx, training_step_to_onnx

try:  # PyTorch is optional: without it the PyTorch columns are left out
    import torch
except ImportError:
    torch = None


def _lstm(library_nn):
    """A 2-layer LSTM returning its output sequence (what the loss reads), built with ``library_nn``."""

    class LSTMOutput(library_nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = library_nn.LSTM(256, 256, num_layers=2)

        def forward(self, x):
            return self.lstm(x)[0]

    return LSTMOutput()


def _encoder_layer(library_nn):
    return library_nn.TransformerEncoderLayer(256, 8, dropout=0.0, batch_first=True)


CASES = [
    # name, module factory over a library's nn (onnxnn.nn or torch.nn), input shape
    ("LSTM_2x256_seq64_batch32", _lstm, (64, 32, 256)),
    ("TransformerEncoderLayer_d256_h8_seq128_batch16", _encoder_layer, (16, 128, 256)),
]


def _session(proto) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    # Its pool spins within a run only, as onnxnn's do: one left spinning after its call takes the
    # cores from the next contender's (bench_vs_torch.py's sessions say the same).
    options.add_session_config_entry("session.force_spinning_stop", "1")
    return onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _cycle(items):
    """A function returning the items in turn."""
    state = {"index": 0}

    def next_item():
        state["index"] = (state["index"] + 1) % len(items)
        return items[state["index"]]

    return next_item


def _compare(functions: dict, rounds: int, baseline: str) -> dict:
    """Times every function of ``functions`` once per round, in turn (each after an untimed call of its
    own), after one warm-up call each;
    returns the median milliseconds per call and the median per-round ratio of onnxnn's time to
    each other function's (``onnxnn_over_<name>``)."""
    for function in functions.values():
        function()
    times = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            # An untimed call first: the previous contender's threads may still be spinning (PyTorch's
            # pool does after each call), and a timed call right after them ran 1.2-1.5x its time.
            function()
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    result = {f"{name}_ms": statistics.median(values) * 1e3 for name, values in times.items()}
    for name in functions:
        if name != baseline:
            result[f"{baseline}_over_{name}"] = statistics.median(
                ours / theirs for ours, theirs in zip(times[baseline], times[name])
            )
    return result


def _torch_twin(build, module):
    """The same module built with torch.nn, holding ``module``'s weights (copied via numpy)."""
    twin = build(torch.nn)
    twin.load_state_dict(
        {name: torch.from_numpy(np.array(tensor.numpy())) for name, tensor in module.state_dict().items()}
    )
    return twin


def bench_forward(build, shape, rounds: int) -> dict:
    module = build(nn)
    module.eval()
    inputs = [onnxnn.randn(*shape) for _ in range(4)]
    next_input, next_array = _cycle(inputs), _cycle([x.numpy() for x in inputs])
    session = _session(to_onnx(module, inputs[0], input_names=["x"]))

    def ours():
        with onnxnn.no_grad():
            module(next_input()).numpy()

    def raw():
        session.run(None, {"x": next_array()})

    functions = {"onnxnn": ours, "raw_onnxruntime": raw}
    check = {}
    with onnxnn.no_grad():
        expected = module(inputs[0]).numpy()
    check["raw_onnxruntime"] = float(np.abs(session.run(None, {"x": inputs[0].numpy()})[0] - expected).max())
    if torch is not None:
        twin = _torch_twin(build, module)
        twin.eval()
        torch_inputs = [torch.from_numpy(np.array(x.numpy())) for x in inputs]
        next_torch_input = _cycle(torch_inputs)

        def theirs():
            with torch.no_grad():
                twin(next_torch_input())

        functions["torch"] = theirs
        with torch.no_grad():
            check["torch"] = float(np.abs(twin(torch_inputs[0]).numpy() - expected).max())
    result = _compare(functions, rounds, "onnxnn")
    result["max_abs_difference"] = check
    return result


def bench_training_step(build, shape, rounds: int, read_loss_first: bool, with_raw: bool = True) -> dict:
    module = build(nn)
    module.train()
    x = onnxnn.randn(*shape)
    with onnxnn.no_grad():
        target = onnxnn.randn(*module(x).shape)
    optimizer = onnxnn.optim.Adam(module.parameters(), lr=1e-3)

    def ours():
        loss = F.mse_loss(module(x), target)
        if read_loss_first:
            loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # The step runs when optimizer.step() realizes the updates.

    functions = {"onnxnn": ours}
    if with_raw:
        proto, signature = training_step_to_onnx(module, F.mse_loss, optimizer, (x, target))
        session = _session(proto)
        output_names = [output.name for output in session.get_outputs()]
        state = dict(signature.initial_state)
        batch = {"input": x.numpy(), "target": target.numpy()}

        def raw():
            nonlocal state
            outputs = dict(zip(output_names, session.run(None, {**state, **batch})))
            state = {name: outputs[next_name] for name, next_name in signature.state.items()}

        functions["raw_onnxruntime_training_step"] = raw
    if torch is not None:
        twin = _torch_twin(build, module)
        twin.train()
        torch_x, torch_target = torch.from_numpy(np.array(x.numpy())), torch.from_numpy(np.array(target.numpy()))
        torch_optimizer = torch.optim.Adam(twin.parameters(), lr=1e-3)

        def theirs():
            loss = torch.nn.functional.mse_loss(twin(torch_x), torch_target)
            if read_loss_first:
                loss.item()
            torch_optimizer.zero_grad()
            loss.backward()
            torch_optimizer.step()

        functions["torch"] = theirs
    return _compare(functions, rounds, "onnxnn")


def _table(results: dict) -> str:
    columns = [
        "onnxnn_ms",
        "raw_onnxruntime_ms",
        "raw_onnxruntime_training_step_ms",
        "torch_ms",
        "onnxnn_over_raw_onnxruntime",
        "onnxnn_over_raw_onnxruntime_training_step",
        "onnxnn_over_torch",
    ]
    headers = [
        "case",
        "measure",
        "onnxnn ms",
        "raw ORT ms",
        "raw ORT step ms",
        "torch ms",
        "/raw ORT",
        "/raw ORT step",
        "/torch",
    ]
    rows = [headers]
    for case, measures in results.items():
        for measure, values in measures.items():
            if not isinstance(values, dict):
                continue
            rows.append([case, measure] + [f"{values[c]:.2f}" if c in values else "-" for c in columns])
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rounds", nargs="?", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("only", nargs="?", default="", help="run the cases whose name contains this")
    parser.add_argument(
        "--measures",
        default="forward,training_step,training_step_loss_read_first",
        help="comma-separated measures to run (default: all three)",
    )
    parser.add_argument(
        "--lstm-sequence", type=int, default=64, help="the LSTM's sequence length (default 64, issue 13's size)"
    )
    arguments = parser.parse_args()
    measures = arguments.measures.split(",")
    onnxnn.manual_seed(0)
    results = {}
    with onnxnn.set_executor("onnxruntime"):
        for name, build, shape in CASES:
            if build is _lstm and arguments.lstm_sequence != shape[0]:
                name = name.replace(f"seq{shape[0]}", f"seq{arguments.lstm_sequence}")
                shape = (arguments.lstm_sequence,) + shape[1:]
            if arguments.only not in name:
                continue
            results[name] = {"input": list(shape)}
            for measure in measures:
                if measure == "forward":
                    results[name][measure] = bench_forward(build, shape, arguments.rounds)
                else:
                    read_first = measure == "training_step_loss_read_first"
                    results[name][measure] = bench_training_step(
                        build, shape, arguments.rounds, read_first, with_raw=not read_first
                    )
                # One line per finished measure, so a long run that is stopped keeps what it measured.
                print(json.dumps({name: {measure: results[name][measure]}}), file=sys.stderr, flush=True)
    print(_table(results))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
