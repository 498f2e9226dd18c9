"""STFT in imported models: replayed as frames, window and DFT (onnxnn/import_/spectral.py).

Forward against the official node tests (onnx's numpy reference) on both executors, with a
tolerance from the arithmetic; gradients with respect to the signal and the window against
float64 central differences on both executors.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from gradcheck import check_gradients
from onnx import TensorProto, helper
from onnx_node_test_cases import all_node_test_cases
from tolerances import accumulation_bound, assert_within

import onnxnn
from onnxnn.import_ import from_onnx


@functools.lru_cache(maxsize=1)
def _node_cases() -> tuple:
    return tuple(case for case in all_node_test_cases() if case.model.graph.node[0].op_type == "STFT")


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_node_tests_match_the_expected_outputs(executor):
    assert len(_node_cases()) >= 2
    for case in _node_cases():
        with onnxnn.set_executor(executor):
            module = from_onnx(case.model)
            for inputs, outputs in case.data_sets:
                result = module(*[onnxnn.tensor(array) for array in inputs]).numpy()
                given = dict(zip([info.name for info in case.model.graph.input], inputs))
                window = given.get("window", np.ones(1))
                length = window.shape[0] if "window" in given else int(given["frame_length"])
                # Each bin sums `length` windowed samples times unit twiddles: float32 sums of
                # 2 * length + 2 rounded operations over magnitudes up to length * max|x| * max|w|.
                magnitude = length * np.abs(given["signal"]).max() * np.abs(window).max()
                assert_within(result, outputs[0], accumulation_bound(magnitude, 2 * length + 2), err_msg=case.name)


def _model(onesided: int, signal: tuple, length: int, step: int, with_window: bool) -> onnx.ModelProto:
    inputs = ["signal", "frame_step", "window" if with_window else "", "frame_length"]
    node = helper.make_node("STFT", inputs, ["spectrum"], onesided=onesided)
    frames = (signal[1] - length) // step + 1
    bins = length // 2 + 1 if onesided else length
    graph = helper.make_graph(
        [node],
        "stft",
        [helper.make_tensor_value_info("signal", TensorProto.DOUBLE, signal)]
        + ([helper.make_tensor_value_info("window", TensorProto.DOUBLE, (length,))] if with_window else []),
        [helper.make_tensor_value_info("spectrum", TensorProto.DOUBLE, (signal[0], frames, bins, 2))],
        [
            helper.make_tensor("frame_step", TensorProto.INT64, (), [step]),
            helper.make_tensor("frame_length", TensorProto.INT64, (), [length]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "onesided, signal, length, step, with_window",
    [
        (1, (1, 9, 1), 4, 2, True),
        (0, (2, 7, 1), 3, 2, True),
        (0, (1, 6, 2), 4, 1, True),
        (1, (2, 8, 1), 5, 3, False),
    ],
    ids=["onesided_windowed", "twosided_windowed", "complex_signal", "no_window"],
)
def test_gradient_matches_finite_differences(executor, onesided, signal, length, step, with_window):
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(signal)] + ([rng.uniform(0.2, 1.0, length)] if with_window else [])
    with onnxnn.set_executor(executor):
        module = from_onnx(_model(onesided, signal, length, step, with_window))
        check_gradients(lambda *tensors: module(*tensors), arrays)
