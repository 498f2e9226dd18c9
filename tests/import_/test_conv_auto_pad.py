"""A Conv with ``auto_pad`` SAME and dilations (torch.onnx.export's ``padding="same"`` with a dilation).

onnxruntime refuses the combination, so the import writes the node's explicit pads (at stride 1 they
do not depend on the input's size): it runs on every executor and its re-export is served. Expected
values are a direct numpy convolution over the input padded as the ONNX spec says (SAME_UPPER puts the
odd element at the end, SAME_LOWER at the beginning).
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxnn
from onnxnn.import_ import from_onnx

KERNEL, DILATION = 2, 3  # total padding dilation * (kernel - 1) = 3: odd


def conv_model(mode: str):
    weight = np.random.default_rng(2).standard_normal((2, 3, KERNEL)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad=mode, dilations=[DILATION], kernel_shape=[KERNEL])
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "length"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, "length"])],
        [numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), weight


def reference(x: np.ndarray, weight: np.ndarray, mode: str) -> np.ndarray:
    total = DILATION * (KERNEL - 1)
    begin = total // 2 if mode == "SAME_UPPER" else total - total // 2
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (begin, total - begin)))
    taps = [padded[:, :, tap * DILATION : tap * DILATION + x.shape[2]] for tap in range(KERNEL)]
    return sum(np.einsum("ncl,oc->nol", taps[tap], weight[:, :, tap]) for tap in range(KERNEL))


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_imported_same_padding_with_dilation_runs(mode, executor):
    model, weight = conv_model(mode)
    x = np.random.default_rng(3).standard_normal((2, 3, 9)).astype(np.float32)
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        actual = from_onnx(model)(onnxnn.tensor(x)).numpy()
    # Six products per output, summed in float32.
    np.testing.assert_allclose(actual, reference(x, weight, mode), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
def test_its_re_export_is_served_at_other_lengths(mode):
    model, weight = conv_model(mode)
    module = from_onnx(model).eval()
    proto = onnxnn.export.to_onnx(
        module, onnxnn.randn(2, 3, 9), input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "b", 2: "t"}}
    )
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(4).standard_normal((3, 3, 14)).astype(np.float32)
    np.testing.assert_allclose(session.run(None, {"x": x})[0], reference(x, weight, mode), rtol=1e-5, atol=1e-5)
