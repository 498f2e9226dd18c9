"""``to_onnx`` declares the first opset that defines every node for its element types: ONNX defines
Conv, the pools and most activations for bfloat16 only from opset 22."""

from __future__ import annotations

import pytest

import onnxnn
from onnxnn import nn

BFLOAT16_FROM_22 = [
    ("conv and max pool", lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.MaxPool2d(2)), (1, 3, 8, 8), "Conv"),
    ("elu", lambda: nn.Sequential(nn.Linear(4, 4), nn.ELU()), (2, 4), "Elu"),
    ("average pool", lambda: nn.AvgPool2d(2), (1, 2, 4, 4), "AveragePool"),
]


def declared(model) -> int:
    return next(entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx"))


@pytest.mark.parametrize("name, build, shape, op_type", BFLOAT16_FROM_22, ids=[case[0] for case in BFLOAT16_FROM_22])
def test_bfloat16_graphs_are_declared_at_the_opset_that_defines_them(name, build, shape, op_type):
    module = build().to(onnxnn.bfloat16).eval()
    example = onnxnn.randn(*shape).to(onnxnn.bfloat16)
    assert declared(onnxnn.export.to_onnx(module, example)) == 22  # to_onnx runs the full checker
    with pytest.raises(ValueError, match=f"{op_type} for tensor\\(bfloat16\\) inputs from opset 22"):
        onnxnn.export.to_onnx(module, example, opset_version=21)


@pytest.mark.parametrize("opset_version, expected", [(None, 21), (17, 17)])
def test_float32_graphs_keep_the_recorded_or_chosen_opset(opset_version, expected):
    module = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ELU()).eval()
    model = onnxnn.export.to_onnx(module, onnxnn.randn(1, 3, 8, 8), opset_version=opset_version)
    assert declared(model) == expected
