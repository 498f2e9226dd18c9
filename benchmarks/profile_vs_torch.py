"""Where issue 16's training steps spend their time, onnxnn beside PyTorch eager: one JSON line per workload.

bench_vs_torch.py says how fast each row is; this says why. For its training rows (the same
models, inputs and optimizers; one intra-op thread for both frameworks unless ``--threads`` says
otherwise):

- ``onnxnn.step_ms``: one step (zero_grad, forward, loss, backward, optimizer step), the median of
  interleaved blocks; ``onnxnn.runtime_ms``: the part of it spent inside the runs of compiled
  graphs (onnxruntime sessions and onnxnn's kernels, timed around each call);
  ``onnxnn.python_ms``: the rest, onnxnn's own work (recording, planning, cache lookups, tracing
  the backward, the optimizer's bookkeeping).
- ``onnxnn.runtime_by_phase_ms``: ``runtime_ms`` split into forward (with the loss), backward and
  optimizer by the shares of kernel time onnxnn.profiler attributes to each phase (a node belongs
  to the phase in which it was recorded); ``onnxnn.top_kernels_ms``: the same shares per kernel.
  The profiler's own cost per node (onnxruntime's profiling) is left out by using shares only.
  Nodes that onnxnn's sessions run as compiled loops (runtime/split_sessions.py: small
  convolutions' weight gradients) are timed as the profiler's "kernels" events.
- ``torch.step_ms`` and ``torch.by_phase_ms``: PyTorch's step and its phases timed directly
  (eager runs each op when it is called): forward with the loss, backward, zero_grad with step.
- ``gap_ms``: onnxnn's step minus PyTorch's; ``python_share_of_gap``: ``python_ms / gap_ms``.
  Where onnxnn's Python is a small part of the gap, what remains is kernel time, phase by phase
  beside PyTorch's.

Run: python benchmarks/profile_vs_torch.py [--only NAME ...] [--blocks N] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import nullcontext
from pathlib import Path

import numpy as np

import onnxnn
from onnxnn.import_ import from_onnx
from onnxnn.kernels.executor import CompiledKernelPlan
from onnxnn.profiler import profile, record_function
from onnxnn.runtime.sessions import CompiledSession
from onnxnn.runtime.split_sessions import SplitSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vs_torch import (  # noqa: E402
    FUSED_OPTIMIZERS,
    MLP_BATCHES,
    _imported_resnet18_file,
    _mlp,
    _resnet18,
    _same_weights,
    _small_resnet,
    classifier,
    keep_freed_memory,
)

try:
    import torch
except ImportError:  # onnxnn's side is still profiled
    torch = None

PHASES = ("forward", "backward", "optimizer")


class RuntimeClock:
    """Time spent inside compiled graphs' runs: wraps the runner classes' ``__call__`` (a split session's
    compiled loops count as runtime, its sessions once, inside it)."""

    RUNNERS = (CompiledSession, CompiledKernelPlan, SplitSession)

    def __init__(self):
        self.seconds = 0.0
        self._depth = 0
        self._originals: dict = {}

    def __enter__(self) -> RuntimeClock:
        for runner_class in self.RUNNERS:
            original = self._originals[runner_class] = runner_class.__call__

            def timed(runner, *args, _original=original, **kwargs):
                if self._depth:  # a runner inside a runner: counted once, by the outer one
                    return _original(runner, *args, **kwargs)
                self._depth += 1
                start = time.perf_counter()
                try:
                    return _original(runner, *args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - start
                    self._depth -= 1

            runner_class.__call__ = timed
        return self

    def __exit__(self, *exc_info) -> None:
        for runner_class, original in self._originals.items():
            runner_class.__call__ = original


def _workload(library, build, inputs, labels, optimizer_name: str, train: bool):
    """``step(phase)``: one training step; ``phase(name)`` is a context manager around each part."""
    model, optimizer = classifier(library, build, optimizer_name, train)
    loss_function = library.nn.CrossEntropyLoss()
    x, y = library.from_numpy(inputs.copy()), library.from_numpy(labels.copy())
    parameters = list(model.parameters())

    def step(phase=lambda name: nullcontext()) -> None:
        with phase("optimizer"):
            optimizer.zero_grad()
        with phase("forward"):
            loss = loss_function(model(x), y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            optimizer.step()

    def sync() -> None:
        float(parameters[0].detach().sum())

    return step, sync


class _PhaseTimer:
    """Wall time per phase (for PyTorch eager, whose ops run when called)."""

    def __init__(self):
        self.seconds: Counter = Counter()

    def __call__(self, name: str):
        timer = self

        class _Timed:
            def __enter__(self):
                self.start = time.perf_counter()

            def __exit__(self, *exc_info):
                timer.seconds[name] += time.perf_counter() - self.start

        return _Timed()


def _onnxnn_kernel_shares(step, sync, steps: int) -> tuple[dict, dict]:
    """Shares of kernel time per phase and per kernel, from onnxnn.profiler's node events."""
    with profile() as prof:
        for _ in range(steps):
            step(record_function)
        sync()
    by_phase: Counter = Counter()
    by_kernel: Counter = Counter()
    for event in prof.events():
        if event.kind not in ("onnxruntime", "kernels"):
            continue
        phase = (
            "backward"
            if "onnxnn::backward" in event.scope
            else next((name for name in PHASES if name in event.scope), "other")
        )
        by_phase[phase] += event.duration_ns
        by_kernel[event.args.get("onnxruntime_kernel") or event.name] += event.duration_ns
    total = sum(by_phase.values()) or 1
    return {name: by_phase[name] / total for name in (*PHASES, "other")}, {
        name: duration / total for name, duration in by_kernel.most_common(6)
    }


def profile_workload(build, input_shape, classes: int, optimizer_name: str, blocks: int, train=True) -> dict:
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal(input_shape).astype(np.float32)
    labels = rng.integers(0, classes, input_shape[0]).astype(np.int64)
    step, sync = _workload(onnxnn, build, inputs, labels, optimizer_name, train)
    contenders = {"onnxnn": (step, sync)}
    if torch is not None:
        torch_step, torch_sync = _workload(torch, build, inputs, labels, optimizer_name, train)
        contenders["torch"] = (torch_step, torch_sync)
    for contender_step, contender_sync in contenders.values():
        for _ in range(5):
            contender_step()
        contender_sync()
    start = time.perf_counter()
    step()
    sync()
    calls = max(2, int(0.4 / max(time.perf_counter() - start, 1e-6)))
    samples: dict = {"step": [], "runtime": [], "torch_step": [], **{f"torch_{name}": [] for name in PHASES}}
    for block in range(blocks):
        for name in contenders if block % 2 == 0 else list(contenders)[::-1]:
            contender_step, contender_sync = contenders[name]
            if name == "onnxnn":
                with RuntimeClock() as clock:
                    start = time.perf_counter()
                    for _ in range(calls):
                        contender_step()
                    contender_sync()
                    samples["step"].append((time.perf_counter() - start) / calls)
                samples["runtime"].append(clock.seconds / calls)
            else:
                timer = _PhaseTimer()
                start = time.perf_counter()
                for _ in range(calls):
                    contender_step(timer)
                contender_sync()
                samples["torch_step"].append((time.perf_counter() - start) / calls)
                for phase in PHASES:
                    samples[f"torch_{phase}"].append(timer.seconds[phase] / calls)
    median_ms = {name: statistics.median(values) * 1e3 for name, values in samples.items() if values}
    phase_shares, kernel_shares = _onnxnn_kernel_shares(step, sync, max(3, min(calls, 20)))
    runtime = median_ms["runtime"]
    result = {
        "onnxnn": {
            "step_ms": median_ms["step"],
            "runtime_ms": runtime,
            "python_ms": median_ms["step"] - runtime,
            "runtime_by_phase_ms": {name: share * runtime for name, share in phase_shares.items()},
            "top_kernels_ms": {name: share * runtime for name, share in kernel_shares.items()},
        }
    }
    if torch is not None:
        result["torch"] = {
            "step_ms": median_ms["torch_step"],
            "by_phase_ms": {name: median_ms[f"torch_{name}"] for name in PHASES},
        }
        gap = median_ms["step"] - median_ms["torch_step"]
        result["gap_ms"] = gap
        result["python_share_of_gap"] = (median_ms["step"] - runtime) / gap if gap > 0 else None
    return result


def _imported_resnet18(directory: str):
    """resnet18 exported and loaded back with ``from_onnx`` (onnxnn), or PyTorch's twin holding its weights."""

    def build(library):
        path = _imported_resnet18_file(directory)  # written at the first build, then read
        if library is onnxnn:
            return from_onnx(path)
        twin = _resnet18(torch)
        _same_weights(from_onnx(path), twin)
        return twin

    return build


def _workloads(directory: str) -> dict:
    """Name -> (build, input shape, classes, optimizer, training mode)."""
    return {
        **{f"mlp_adam_b{batch}": (_mlp, (batch, 784), 10, "adam", True) for batch in MLP_BATCHES},
        **{f"mlp_{name.lower()}_b16": (_mlp, (16, 784), 10, name, True) for name in FUSED_OPTIMIZERS},
        "small_resnet_b32": (_small_resnet, (32, 3, 32, 32), 10, "sgd", True),
        # The exported graph is in evaluation form, so PyTorch's twin runs in eval() too (bench_vs_torch).
        "resnet18_imported_b8": (_imported_resnet18(directory), (8, 3, 64, 64), 1000, "sgd", False),
    }


def _rounded(value):
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="+", default=[], help="workloads whose name contains any of these")
    parser.add_argument("--blocks", type=int, default=9, help="interleaved blocks per workload (default 9)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads for both frameworks (default 1)")
    arguments = parser.parse_args()
    allocator = keep_freed_memory()  # PyTorch at its best, as bench_vs_torch.py measures it
    onnxnn.set_num_threads(arguments.threads)
    if torch is not None:
        torch.set_num_threads(arguments.threads)
    with tempfile.TemporaryDirectory() as directory:
        for name, (build, shape, classes, optimizer_name, train) in _workloads(directory).items():
            if arguments.only and not any(part in name for part in arguments.only):
                continue
            result = profile_workload(build, shape, classes, optimizer_name, arguments.blocks, train)
            print(
                json.dumps(_rounded({"workload": name, "threads": arguments.threads, **result, "allocator": allocator}))
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
