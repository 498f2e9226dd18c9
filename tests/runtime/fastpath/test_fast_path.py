"""The fast path is a pure speed-up: with it on or off every result is bitwise the same.

Each workload runs twice from the same seed and empty caches, once with the fast path (backward
replay, straight-line kernel code, identity-keyed reuse) and once without, and every number it
produced (losses, outputs, parameters, gradients, printed text) must match bit for bit. Each
also checks that the fast path really took part when on, and stayed out when off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from example_scripts import EXAMPLES, run_script
from onnx import helper, numpy_helper

import onnxnn
import onnxnn.nn as nn
from onnxnn.import_ import from_onnx
from onnxnn.runtime.fastpath import backward_replay


def _both_ways(workload) -> tuple:
    """``workload()``'s results with the fast path on and off, and the replay counters of each run."""
    results, counters = [], []
    for enabled in (True, False):
        onnxnn.clear_caches()
        onnxnn.manual_seed(0)
        with onnxnn.set_fast_path(enabled):
            results.append(workload())
        counters.append(backward_replay.replay_info())
    onnxnn.clear_caches()
    return results[0], results[1], counters[0], counters[1]


def _assert_bitwise_equal(fast, plain) -> None:
    assert len(fast) == len(plain)
    for index, (a, b) in enumerate(zip(fast, plain)):
        if isinstance(a, str):
            assert a == b, index
            continue
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, index
        assert a.tobytes() == b.tobytes(), f"result {index} differs with the fast path off"


def _training_loop() -> list:
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizers = [
        onnxnn.optim.SGD(model[0].parameters(), lr=0.05, momentum=0.9, nesterov=True),
        onnxnn.optim.Adam(list(model[2].parameters()) + list(model[4].parameters()), lr=0.01),
    ]
    inputs, targets = onnxnn.randn(32, 6), onnxnn.randint(0, 3, (32,))
    losses = []
    for _ in range(12):
        for optimizer in optimizers:
            optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        for optimizer in optimizers:
            optimizer.step()
        losses.append(loss.item())
    return [np.array(losses)] + [parameter.detach().numpy() for parameter in model.parameters()]


def test_a_training_loop_is_bitwise_the_same_with_the_fast_path_off():
    fast, plain, fast_counts, plain_counts = _both_ways(_training_loop)
    _assert_bitwise_equal(fast, plain)
    assert fast_counts["replayed"] > 0, "the fast path never replayed a backward"
    assert plain_counts["traced"] == plain_counts["replayed"] == 0


def _conv_net_proto(rng: np.random.Generator) -> onnx.ModelProto:
    def initializer(name, shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    initializers = [
        initializer("w", (8, 3, 3, 3)),
        initializer("b", (8,)),
        initializer("scale", (8,)),
        initializer("shift", (8,)),
        initializer("mean", (8,)),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "var"),
        initializer("fc_w", (4, 8)),
        initializer("fc_b", (4,)),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_net",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3, 12, 12])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _imported_model() -> list:
    rng = np.random.default_rng(3)
    module = from_onnx(_conv_net_proto(rng))
    batches = [rng.standard_normal((n, 3, 12, 12)).astype(np.float32) for n in (2, 2, 5, 2, 2)]
    results = []
    module.eval()
    with onnxnn.no_grad():
        for batch in batches:  # the same weights run after run: an inference specialization too
            results.append(module(onnxnn.from_numpy(batch)).numpy())
    module.train()
    optimizer = onnxnn.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)
    for batch in batches[:3]:
        optimizer.zero_grad()
        loss = module(onnxnn.from_numpy(batch)).square().mean()
        loss.backward()
        optimizer.step()
        results.append(loss.item())
    return results + [value.detach().numpy() for value in module.state_dict().values()]


def test_an_imported_model_is_bitwise_the_same_with_the_fast_path_off():
    fast, plain, fast_counts, plain_counts = _both_ways(_imported_model)
    _assert_bitwise_equal(fast, plain)
    assert plain_counts["traced"] == 0


NOTE_SCRIPTS = sorted(path.name for path in (EXAMPLES / "modules_note").glob("0*.py"))


def _run_script(path: Path, monkeypatch):
    def workload() -> list:
        output, namespace = run_script(path, monkeypatch)
        arrays = []
        for name, value in sorted(namespace.items()):
            if isinstance(value, onnxnn.Tensor):
                arrays.append(value.detach().cpu().numpy())
            elif isinstance(value, nn.Module):  # (on a machine with a GPU, 03_dynamic_net's is there)
                arrays += [tensor.detach().cpu().numpy() for tensor in value.state_dict().values()]
        return [output] + arrays

    return workload


# 04_training.py trains for 10,000 steps. The fast path's generated code takes over from about the sixth
# step, so a few hundred steps compare the same code paths, without 20,000 steps of Python under the
# suite's coverage tracing.
SHORTENED = {"04_training.py": ("range(10000)", "range(300)")}


@pytest.mark.parametrize("script", NOTE_SCRIPTS)
def test_the_modules_note_examples_are_bitwise_the_same_with_the_fast_path_off(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = EXAMPLES / "modules_note" / script
    if script in SHORTENED:
        original, shortened = SHORTENED[script]
        source = path.read_text()
        assert original in source
        (tmp_path / "common.py").write_text((path.parent / "common.py").read_text())
        path = tmp_path / script
        path.write_text(source.replace(original, shortened))
    fast, plain, _, _ = _both_ways(_run_script(path, monkeypatch))
    _assert_bitwise_equal(fast, plain)


def test_the_linear_regression_example_is_bitwise_the_same_with_the_fast_path_off(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fast, plain, fast_counts, _ = _both_ways(_run_script(EXAMPLES / "linear_regression.py", monkeypatch))
    _assert_bitwise_equal(fast, plain)


def test_the_environment_variable_turns_the_fast_path_off():
    code = "import onnxnn; print(onnxnn.is_fast_path_enabled())"
    for setting, expected in (("0", "False"), ("off", "False"), ("1", "True")):
        environment = {**os.environ, "ONNXNN_FAST_PATH": setting}
        printed = subprocess.run(
            [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
        ).stdout.strip()
        assert printed == expected, setting


def test_set_fast_path_restores_the_previous_setting():
    before = onnxnn.is_fast_path_enabled()
    with onnxnn.set_fast_path(False):
        assert not onnxnn.is_fast_path_enabled()
        with onnxnn.set_fast_path(True):
            assert onnxnn.is_fast_path_enabled()
        assert not onnxnn.is_fast_path_enabled()
    assert onnxnn.is_fast_path_enabled() == before


def test_clear_caches_empties_every_registered_cache():
    x = onnxnn.randn(5, requires_grad=True)
    for _ in range(3):
        (x * 2).sum().backward()
    assert backward_replay.replay_info()["templates"] > 0
    onnxnn.clear_caches()
    assert backward_replay.replay_info()["templates"] == 0
    assert onnxnn.kernels.cache_info()["plans"] == 0
    assert onnxnn.runtime.realization.cache_info()["sessions"] == 0
