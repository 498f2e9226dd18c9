"""``onnxnn.onnx``: ``torch.onnx.export`` and its companions over onnxnn's exporter."""

from __future__ import annotations

import os

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn


def _model() -> nn.Module:
    onnxnn.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 128), nn.BatchNorm1d(128), nn.Dropout(0.5), nn.Linear(128, 2))


def _served(path: str, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize(
    "external_data, files",
    [(True, ["model.onnx", "model.onnx.data"]), (False, ["model.onnx"])],
    ids=["beside", "inside"],
)
def test_export_writes_a_file_onnxruntime_serves_in_evaluation_mode(tmp_path, external_data, files):
    model = _model().train()
    path = str(tmp_path / "model.onnx")
    onnxnn.onnx.export(
        model,
        (onnxnn.randn(5, 3),),
        path,
        input_names=["x"],
        dynamic_axes={"x": {0: "batch"}},
        external_data=external_data,
    )
    assert sorted(os.listdir(tmp_path)) == files
    assert all(module.training for module in model.modules())  # TrainingMode.EVAL restores the mode
    x = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)  # another batch size
    with onnxnn.no_grad():
        expected = model.eval()(onnxnn.from_numpy(x)).numpy()
        hidden = model[1](model[0](onnxnn.from_numpy(x))).numpy()
    _assert_close_to_float32_rounding(_served(path, x), expected, hidden, model[3])


def _assert_close_to_float32_rounding(served, expected, hidden, last: nn.Linear) -> None:
    """The same float32 graph in two runtimes that sum in other orders: the last layer's 128 terms
    (and the hidden values' own few roundings, carried through it) err by about 2 * 131 eps of the
    magnitudes summed."""
    weight, bias = last.weight.detach().numpy(), last.bias.detach().numpy()
    magnitude = np.abs(hidden) @ np.abs(weight).T + np.abs(bias)
    bound = 2 * 131 * np.finfo(np.float32).eps * magnitude
    assert np.all(np.abs(served - expected) <= bound)


@pytest.mark.parametrize("training", ["PRESERVE", "TRAINING"])
def test_training_modes_export_batch_statistics(tmp_path, training):
    model = _model()
    model[2].p = 0.0  # dropout off: only the normalization's mode tells the exports apart
    model.train(training == "PRESERVE")
    path = str(tmp_path / "model.onnx")
    x = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    onnxnn.onnx.export(model, (onnxnn.from_numpy(x),), path, training=getattr(onnxnn.onnx.TrainingMode, training))
    with onnxnn.no_grad():
        expected = model.train()(onnxnn.from_numpy(x)).numpy()  # the batch's own statistics
        hidden = model[1](model[0](onnxnn.from_numpy(x))).numpy()
    _assert_close_to_float32_rounding(_served(path, x), expected, hidden, model[3])


def test_is_in_onnx_export_is_true_only_while_exporting():
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(onnxnn.onnx.is_in_onnx_export())
            return x * 2

    Probe()(onnxnn.ones(2))
    onnxnn.onnx.export(Probe(), (onnxnn.ones(2),))
    assert seen[0] is False and seen[-1] is True and not onnxnn.onnx.is_in_onnx_export()


@pytest.mark.parametrize(
    "option, value",
    [
        ("kwargs", {"scale": 2}),
        ("dynamic_shapes", {"x": {0: "batch"}}),
        ("export_params", False),
        ("keep_initializers_as_inputs", True),
        ("operator_export_type", 1),
    ],
)
def test_options_the_exporter_does_not_offer_are_refused_before_writing(tmp_path, option, value):
    path = tmp_path / "model.onnx"
    with pytest.raises(NotImplementedError, match=option.split("=")[0]):
        onnxnn.onnx.export(_model().eval(), (onnxnn.randn(2, 3),), str(path), **{option: value})
    assert not path.exists()


def test_a_training_mode_that_is_not_one_is_a_value_error():
    with pytest.raises(ValueError, match="TrainingMode"):
        onnxnn.onnx.export(_model().eval(), (onnxnn.randn(2, 3),), training=7)
