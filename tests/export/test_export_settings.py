"""Export settings checked and honoured: dynamic axes inside each input's rank, the IR version an
opset needs, and every submodule's training flag put back after ``training=True``."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx


@pytest.mark.parametrize("axes", [{2: "d"}, {-3: "d"}, {5: "d"}, [2], {1.0: "d"}], ids=str)
def test_a_dynamic_axis_outside_the_input_is_refused_before_anything_changes(axes):
    model = nn.ReLU().train()
    with pytest.raises(ValueError, match="dynamic_axes gives axis .* of input 'x', which has 2 dimension"):
        to_onnx(model, onnxnn.randn(3, 4), input_names=["x"], dynamic_axes={"x": axes}, training=True)
    assert model.training


@pytest.mark.parametrize("axis", [1, -1])
def test_a_dynamic_axis_inside_the_input_is_that_axis(axis):
    proto = to_onnx(nn.ReLU().eval(), onnxnn.randn(3, 4), input_names=["x"], dynamic_axes={"x": {axis: "d"}})
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert (dims[0].dim_value, dims[1].dim_param) == (3, "d")


@pytest.mark.parametrize("opset", [17, 21, 23, 24, 25, 26])
def test_the_ir_version_is_the_one_the_opset_needs(opset):
    if opset > onnxnn.export.max_opset_version():
        pytest.skip(f"the installed onnxruntime runs opsets up to {onnxnn.export.max_opset_version()}")
    proto = to_onnx(nn.Linear(3, 2).eval(), onnxnn.randn(2, 3), opset_version=opset)
    needed = onnx.helper.find_min_ir_version_for(list(proto.opset_import), True)
    assert proto.ir_version == max(10, needed)
    (result,) = onnxruntime.InferenceSession(proto.SerializeToString()).run(
        None, {"input_0": np.ones((2, 3), np.float32)}
    )
    assert result.shape == (2, 2)


def test_a_training_export_puts_every_submodules_flag_back():
    model = nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3), nn.Dropout(0.5))
    model.train()
    model[1].eval()  # a frozen BatchNorm inside a training model
    before = [module.training for module in model.modules()]
    to_onnx(model, onnxnn.randn(2, 3, 4, 4), training=True)
    assert [module.training for module in model.modules()] == before


@pytest.mark.parametrize(
    "layer", [nn.Embedding(5, 3, padding_idx=0), nn.EmbeddingBag(5, 3, padding_idx=0)], ids=["embedding", "bag"]
)
def test_a_training_export_of_a_padding_row_warns_and_an_eval_one_does_not(layer):
    indices = onnxnn.tensor([[1, 0, 2]])
    with pytest.warns(UserWarning, match="padding_idx"):
        to_onnx(layer, indices, training=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to_onnx(layer.eval(), indices)
