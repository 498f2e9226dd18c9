"""Sessions run in turn in one process: an onnxruntime thread pool that spins after its run slows the next.

onnxruntime gives each session its own pool of intra-op threads, which by default keep spinning for
a while after their work instead of sleeping. Sessions that run in turn on every core (two models,
a model and its preprocessing, an evaluation between training steps, the parts of one step) then
fight: each pool spins on the cores the other session's run needs. onnxnn's sessions spin within a
run and stop at its end (``session.force_spinning_stop``, runtime/sessions.py).

This times, on every core, raw onnxruntime sessions of the exported MLP (784-512-512-10, batch 64)
and small ResNet (batch 32) of bench_vs_torch.py under three settings of their pools: onnxruntime's
default (``spin_after_runs``), spinning within runs only (``spin_within_runs``) and no spinning
(``no_spinning``); and the same models called through onnxnn (``onnxnn``: ``module(x).numpy()``
under ``no_grad``). Workloads: ``alone_mlp`` and ``alone_cnn`` (one model, milliseconds per call)
and ``in_turn`` (a round of one call of each, milliseconds per round).

A pool left spinning would slow whichever contender ran next in the same process, so each setting
runs in a process of its own (medians of blocks), the settings alternating in rounds; each row
gives every setting's median over the rounds and its ratio to ``spin_after_runs`` (the median of
per-round ratios, with their range). On one core the pools have no threads to spin.

Run: python benchmarks/bench_sessions_in_turn.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import onnxruntime

import onnxnn
from onnxnn.onnx import to_onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runtime import _per_call_us  # noqa: E402
from bench_vs_torch import _calibrated_calls, _cores, _mlp, _small_resnet  # noqa: E402

# Each raw setting's session config entries (onnxruntime's default spins after runs); "onnxnn" is
# onnxnn's own sessions.
SETTINGS = {
    "spin_after_runs": {},
    "spin_within_runs": {"session.force_spinning_stop": "1"},
    "no_spinning": {"session.intra_op.allow_spinning": "0"},
    "onnxnn": None,
}
WORKLOADS = ("alone_mlp", "alone_cnn", "in_turn")
BLOCKS, BLOCK_SECONDS = 7, 0.2


def _model(build, input_shape):
    """(the module in eval mode, its input array, its export)."""
    onnxnn.manual_seed(0)
    module = build(onnxnn).eval()
    example = onnxnn.randn(*input_shape)
    array = example.numpy()
    array.setflags(write=False)
    return module, array, to_onnx(module, example, input_names=["x"], output_names=["y"])


def _caller(model, entries: dict | None):
    """One call of ``model`` through a raw session with ``entries``, or through onnxnn (None)."""
    module, array, proto = model
    if entries is None:

        def through_onnxnn():
            with onnxnn.no_grad():
                return module(onnxnn.from_numpy(array)).numpy()

        return through_onnxnn
    options = onnxruntime.SessionOptions()
    for key, value in entries.items():
        options.add_session_config_entry(key, value)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, {"x": array})


def _milliseconds(call) -> float:
    """The median over blocks of ``call``'s time, in milliseconds."""
    for _ in range(5):
        call()
    return _per_call_us(call, _calibrated_calls(call, lambda: None, BLOCK_SECONDS), BLOCKS) / 1e3


def _measure(setting: str) -> dict:
    """This process's timings of every workload under ``setting``."""
    onnxnn.set_num_threads(_cores())
    mlp, cnn = (
        _caller(model, SETTINGS[setting]) for model in (_model(_mlp, (64, 784)), _model(_small_resnet, (32, 3, 32, 32)))
    )
    return {
        "alone_mlp": _milliseconds(mlp),
        "alone_cnn": _milliseconds(cnn),
        "in_turn": _milliseconds(lambda: (mlp(), cnn())),
    }


def _in_a_process(setting: str) -> dict:
    completed = subprocess.run(
        [sys.executable, __file__, "--setting", setting], capture_output=True, text=True, check=True
    )
    return json.loads(completed.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--setting", choices=list(SETTINGS), help=argparse.SUPPRESS)  # one child's
    arguments = parser.parse_args()
    if arguments.setting is not None:
        print(json.dumps(_measure(arguments.setting)))
        return
    names = list(SETTINGS)
    rounds: list[dict] = []
    for index in range(arguments.rounds):
        rounds.append({name: _in_a_process(name) for name in (names if index % 2 == 0 else names[::-1])})
    for workload in WORKLOADS:
        row: dict = {"workload": workload, "threads": _cores(), "rounds": arguments.rounds}
        for name in names:
            row[f"{name}_ms"] = statistics.median(measured[name][workload] for measured in rounds)
        for name in names[1:]:
            ratios = [measured[name][workload] / measured["spin_after_runs"][workload] for measured in rounds]
            row[f"ratio_{name}_to_spin_after_runs"] = statistics.median(ratios)
            row[f"ratio_{name}_to_spin_after_runs_range"] = [min(ratios), max(ratios)]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
