"""The float64 Conv, ConvTranspose and AveragePool that onnxnn writes as standard ops for onnxruntime
(which has no double kernel for them, runtime/ops/float64_convolutions.py): values and gradients
against PyTorch in float64 on both executors, imported nodes with asymmetric and ``SAME_*`` pads,
one graph shared across sizes, NaN and infinity placement, and an export that plain onnxruntime
serves.

Bounds: every case is linear in each input (a pool's divisor is exact), so each output and gradient
element is a sum of terms whose absolute values sum to the same computation over the inputs' absolute
values; two computations of such a sum differ by at most ``2 gamma(terms) * magnitude``
(tolerances.accumulation_bound), ``terms`` bounded by the elements the computation reads.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from tolerances import accumulation_bound, assert_within

torch = pytest.importorskip("torch")

F = onnxnn.nn.functional
EXECUTORS = ["kernels", "onnxruntime"]

# (id, function name in both libraries, input shapes: x, then weight and bias where taken, keywords)
CASES = [
    ("conv1d_grouped_dilated", "conv1d", [(2, 4, 9), (6, 2, 3), (6,)], dict(stride=2, padding=1, dilation=2, groups=2)),
    (
        "conv2d_strided",
        "conv2d",
        [(2, 3, 7, 8), (4, 3, 3, 2), (4,)],
        dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
    ),
    (
        "conv2d_same_even_kernel",
        "conv2d",
        [(1, 4, 6, 7), (4, 2, 4, 3)],
        dict(padding="same", dilation=(2, 1), groups=2),
    ),
    ("conv2d_depthwise", "conv2d", [(2, 6, 5, 5), (12, 1, 3, 3), (12,)], dict(padding=1, groups=6)),
    ("conv2d_wide", "conv2d", [(2, 256, 3, 3), (256, 256, 3, 3)], dict(padding=1)),
    ("conv2d_rgb_7x7", "conv2d", [(2, 3, 12, 12), (4, 3, 7, 7), (4,)], dict(padding=3, stride=2)),
    ("conv2d_grouped_wide", "conv2d", [(2, 32, 6, 6), (32, 16, 3, 3)], dict(padding=1, groups=2)),
    ("conv2d_batch0", "conv2d", [(0, 3, 6, 6), (4, 3, 3, 3), (4,)], dict()),
    ("conv3d", "conv3d", [(1, 2, 5, 6, 4), (3, 2, 2, 3, 2), (3,)], dict(stride=(1, 2, 1), padding=(1, 1, 0))),
    (
        "conv_transpose1d_grouped",
        "conv_transpose1d",
        [(2, 4, 5), (4, 3, 3), (6,)],
        dict(stride=3, padding=1, output_padding=2, groups=2),
    ),
    (
        "conv_transpose2d_dilated",
        "conv_transpose2d",
        [(1, 2, 4, 5), (2, 3, 3, 2), (3,)],
        dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), dilation=(1, 2)),
    ),
    (
        "conv_transpose2d_padding_past_stride",
        "conv_transpose2d",
        [(1, 2, 4, 5), (2, 3, 3, 3)],
        dict(padding=1, output_padding=1, dilation=2),
    ),
    (
        "conv_transpose2d_padding_past_kernel",
        "conv_transpose2d",
        [(1, 2, 6, 6), (2, 3, 2, 2), (3,)],
        dict(stride=2, padding=2),
    ),
    (
        "conv_transpose3d_grouped",
        "conv_transpose3d",
        [(1, 4, 3, 3, 2), (4, 1, 2, 2, 2), (2,)],
        dict(stride=2, groups=2),
    ),
    ("avg_pool1d_ceil", "avg_pool1d", [(2, 3, 10)], dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (
        "avg_pool2d_ceil_exclude_pad",
        "avg_pool2d",
        [(2, 3, 7, 8)],
        dict(kernel_size=(3, 2), stride=(2, 3), padding=1, ceil_mode=True, count_include_pad=False),
    ),
    (
        "avg_pool2d_ceil_include_pad",
        "avg_pool2d",
        [(2, 3, 7, 8)],
        dict(kernel_size=(3, 4), stride=(2, 3), padding=(1, 2), ceil_mode=True),
    ),
    ("avg_pool2d_divisor", "avg_pool2d", [(2, 3, 7, 8)], dict(kernel_size=3, padding=1, divisor_override=5)),
    ("avg_pool3d_ceil", "avg_pool3d", [(1, 2, 5, 6, 7)], dict(kernel_size=2, stride=2, ceil_mode=True)),
]


def _terms(arrays, upstream) -> int:
    """More than any output or gradient element sums: every element the computation reads."""
    return sum(array.size for array in arrays) + upstream.size + 1


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(("case_id", "name", "shapes", "kwargs"), CASES, ids=[case[0] for case in CASES])
def test_values_and_gradients_match_pytorch(executor, case_id, name, shapes, kwargs):
    rng = np.random.default_rng(sum(map(ord, case_id)))
    arrays = [rng.standard_normal(shape) for shape in shapes]
    inputs = [torch.tensor(array, requires_grad=True) for array in arrays]
    expected = getattr(torch.nn.functional, name)(*inputs, **kwargs)
    upstream = rng.standard_normal(tuple(expected.shape))
    expected_grads = torch.autograd.grad(expected, inputs, torch.tensor(upstream))
    # The same computation over absolute values: each element's sum of |terms|.
    magnitudes = [torch.tensor(np.abs(array), requires_grad=True) for array in arrays]
    magnitude = getattr(torch.nn.functional, name)(*magnitudes, **kwargs)
    grad_magnitudes = torch.autograd.grad(magnitude, magnitudes, torch.tensor(np.abs(upstream)))
    terms = _terms(arrays, upstream)
    with onnxnn.set_executor(executor):
        ours = [onnxnn.tensor(array, requires_grad=True) for array in arrays]
        result = getattr(F, name)(*ours, **kwargs)
        grads = onnxnn.autograd.grad(result, ours, onnxnn.tensor(upstream))
        assert tuple(result.shape) == tuple(expected.shape)
        bound = accumulation_bound(magnitude.detach().numpy(), terms, np.float64)
        assert_within(result.detach().numpy(), expected.detach().numpy(), bound, f"{case_id} value")
        for position, (grad, want, scale) in enumerate(zip(grads, expected_grads, grad_magnitudes)):
            bound = accumulation_bound(scale.numpy(), terms, np.float64)
            assert_within(grad.numpy(), want.numpy(), bound, f"{case_id} gradient {position}")


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    ("name", "arguments"),
    [("conv2d", (np.ones((1, 1, 2, 2)),)), ("conv_transpose2d", (np.ones((1, 1, 2, 2)),)), ("avg_pool2d", (2, 1))],
)
def test_infinities_and_nans_stay_in_their_windows(executor, name, arguments):
    x = np.ones((1, 1, 6, 6))
    x[0, 0, 2, 3], x[0, 0, 0, 0], x[0, 0, 5, 1] = np.inf, np.nan, -np.inf
    expected = getattr(torch.nn.functional, name)(
        torch.tensor(x), *[torch.tensor(a) if isinstance(a, np.ndarray) else a for a in arguments]
    ).numpy()
    with onnxnn.set_executor(executor):
        result = getattr(F, name)(
            onnxnn.tensor(x), *[onnxnn.tensor(a) if isinstance(a, np.ndarray) else a for a in arguments]
        ).numpy()
    np.testing.assert_array_equal(result, expected)


def _node_model(op_type: str, attrs: dict, x_shape, weight_shape) -> onnx.ModelProto:
    """One float64 node over inputs x (and w, b), as an imported model gives it, sizes symbolic."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["n", x_shape[1], "h", "w"])]
    names = ["x"]
    if weight_shape is not None:
        channels = weight_shape[0] if op_type == "Conv" else weight_shape[1] * attrs.get("group", 1)
        inputs += [
            helper.make_tensor_value_info("w", TensorProto.DOUBLE, weight_shape),
            helper.make_tensor_value_info("b", TensorProto.DOUBLE, [channels]),
        ]
        names += ["w", "b"]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    output = helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["a", "b", "c", "d"])
    graph = helper.make_graph([node], "node", inputs, [output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


NODE_CASES = [
    ("Conv", dict(pads=[0, 1, 2, 0], strides=[2, 1]), [1, 2, 6, 7], [3, 2, 3, 3]),
    ("Conv", dict(auto_pad="SAME_UPPER", strides=[2, 2]), [1, 2, 7, 8], [3, 2, 3, 2]),
    ("Conv", dict(auto_pad="SAME_LOWER", strides=[2, 3], group=2), [1, 4, 7, 8], [4, 2, 3, 2]),
    ("ConvTranspose", dict(pads=[0, 1, 2, 0], strides=[2, 3], output_padding=[1, 0]), [1, 2, 4, 5], [2, 3, 3, 3]),
    ("ConvTranspose", dict(auto_pad="SAME_UPPER", strides=[2, 2], group=2), [1, 2, 4, 5], [2, 3, 3, 3]),
    ("AveragePool", dict(kernel_shape=[3, 2], pads=[0, 1, 2, 0], strides=[2, 2], ceil_mode=1), [1, 2, 7, 8], None),
    (
        "AveragePool",
        dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2], count_include_pad=1),
        [1, 2, 7, 8],
        None,
    ),
    (
        "AveragePool",
        dict(kernel_shape=[2, 3], pads=[1, 1, 1, 1], dilations=[2, 1], count_include_pad=1),
        [1, 2, 7, 8],
        None,
    ),
]


@pytest.mark.parametrize(("op_type", "attrs", "x_shape", "weight_shape"), NODE_CASES, ids=str)
def test_imported_nodes_at_several_sizes_match_the_kernels(op_type, attrs, x_shape, weight_shape):
    """Asymmetric and SAME_* pads, at sizes that change (one shared graph serves them: its pads and
    windows are computed at run time); onnxnn's kernels, which run the node itself, are the reference."""
    module = onnxnn.import_.from_onnx(_node_model(op_type, attrs, x_shape, weight_shape))
    rng = np.random.default_rng(7)
    parameters = []
    if weight_shape is not None:
        channels = weight_shape[0] if op_type == "Conv" else weight_shape[1] * attrs.get("group", 1)
        parameters = [rng.standard_normal(weight_shape), rng.standard_normal(channels)]
    for batch, height, width in [(1, 0, 0), (2, 2, 1), (3, 1, 3), (1, 3, 2), (2, 4, 4)]:
        x = rng.standard_normal((batch, x_shape[1], x_shape[2] + height, x_shape[3] + width))
        arrays = [x, *parameters]
        with onnxnn.set_executor("kernels"):
            expected = module(*[onnxnn.tensor(a) for a in arrays]).numpy()
            magnitude = module(*[onnxnn.tensor(np.abs(a)) for a in arrays]).numpy()
        with onnxnn.set_executor("onnxruntime"):
            result = module(*[onnxnn.tensor(a) for a in arrays]).numpy()
        assert result.shape == expected.shape
        terms = sum(a.size for a in arrays)
        assert_within(result, expected, accumulation_bound(magnitude, terms, np.float64), f"{op_type} {x.shape}")


def test_float64_export_runs_in_plain_onnxruntime():
    layers = [
        nn.Conv2d(3, 4, 3, padding=1, groups=1),
        nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1, groups=2),
    ]
    model = nn.Sequential(*layers).double().eval()
    reference = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        torch.nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1, groups=2),
    ).double()
    reference.load_state_dict({key: torch.tensor(value.numpy()) for key, value in model.state_dict().items()})
    x = np.random.default_rng(3).standard_normal((2, 3, 9, 9))
    exported = to_onnx(model, (onnxnn.tensor(x),))
    session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    result = session.run(None, {session.get_inputs()[0].name: x})[0]
    expected = reference(torch.tensor(x)).detach().numpy()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.abs_()
        magnitude = reference(torch.tensor(np.abs(x))).numpy()
    terms = x.size + sum(parameter.numel() for parameter in reference.parameters())
    assert_within(result, expected, accumulation_bound(magnitude, terms, np.float64))
