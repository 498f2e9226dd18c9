"""onnxnn.autocast: PyTorch's autocast semantics at record time (onnxnn.amp.autocast_mode, op_lists)."""

from __future__ import annotations

import threading
import warnings

import ml_dtypes
import numpy as np
import onnx
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.amp import autocast, get_autocast_dtype, is_autocast_enabled
from onnxnn.amp.op_lists import FP32, LOWER_PRECISION_FP, PROMOTE, policy_for
from onnxnn.export import to_onnx
from onnxnn.export.training_step import training_step_to_onnx
from onnxnn.ir.mode import MODE

LOW_DTYPES = [("bfloat16", ml_dtypes.bfloat16), ("float16", np.float16)]


def _rounded(array: np.ndarray, numpy_dtype) -> np.ndarray:
    """``array`` rounded to a low-precision dtype, back in float64 for exact reference arithmetic."""
    return array.astype(np.float32).astype(numpy_dtype).astype(np.float64)


def _epsilon(numpy_dtype) -> float:
    return float(ml_dtypes.finfo(numpy_dtype).eps)


def _recorded_op_types(function) -> list[str]:
    seen: list[str] = []
    previous = MODE.observer
    MODE.observer = lambda node, outputs: seen.append(node.op_type)
    try:
        function()
    finally:
        MODE.observer = previous
    return seen


# ---------------------------------------------------------------- values of a Linear in low precision
@pytest.mark.parametrize("name, numpy_dtype", LOW_DTYPES)
def test_linear_runs_in_the_autocast_dtype_and_equals_numpy_on_rounded_inputs(name, numpy_dtype):
    low = getattr(onnxnn, name)
    layer = nn.Linear(16, 5)
    x = onnxnn.randn(7, 16)
    with autocast("cpu", dtype=low):
        y = layer(x)
    assert y.dtype is low
    xs, ws, bs = (_rounded(t.detach().numpy(), numpy_dtype) for t in (x, layer.weight, layer.bias))
    expected = xs @ ws.T + bs
    # Products of low-precision values are exact in float32 and the K=16 sums add ~16 float32
    # roundings; the result is rounded once to the low dtype: half its epsilon of the magnitudes.
    magnitude = np.abs(xs) @ np.abs(ws).T + np.abs(bs)
    tolerance = _epsilon(numpy_dtype) / 2 * magnitude + 16 * np.finfo(np.float32).eps * magnitude
    np.testing.assert_array_less(np.abs(y.detach().float().numpy() - expected), tolerance + 1e-30)


# 1 + 3 ulps, squared, less 1: rounding the square to the low dtype first keeps 6 ulps of 1 and drops
# the 9 * ulp^2 that PyTorch's addmm (float32, one rounding) keeps.
CANCELLING = {"bfloat16": 1 + 3 * 2.0**-7, "float16": 1 + 3 * 2.0**-10}


@pytest.mark.parametrize("executor", ["kernels", "onnxruntime"])
@pytest.mark.parametrize("product", ["linear", "addmm"])
@pytest.mark.parametrize("name, numpy_dtype", LOW_DTYPES)
def test_a_product_with_a_bias_rounds_once_as_pytorchs_addmm(name, numpy_dtype, product, executor):
    value = CANCELLING[name]
    x, weight, bias = onnxnn.tensor([[value]]), onnxnn.tensor([[value]]), onnxnn.tensor([-1.0])
    with onnxnn.set_executor(executor), autocast("cpu", dtype=getattr(onnxnn, name)):
        if product == "linear":
            result = F.linear(x, weight, bias)
        else:
            result = onnxnn.addmm(bias, x, weight.t())
    expected = _rounded(np.array(value * value - 1.0), numpy_dtype)
    rounded_twice = _rounded(_rounded(np.array(value * value), numpy_dtype) - 1.0, numpy_dtype)
    assert expected != rounded_twice  # the case tells the two apart
    assert float(result.float().item()) == expected


# ---------------------------------------------------------------- output dtype per op, as torch.autocast("cpu")
def _inputs(lib, numpy_dtype_name: str) -> dict:
    """The same data as ``lib`` tensors (onnxnn or torch); ``low`` ones in the autocast dtype."""
    rng = np.random.default_rng(0)
    arrays = {
        "x": rng.standard_normal((4, 3)),
        "w": rng.standard_normal((5, 3)),
        "b": rng.standard_normal(5),
        "image": rng.standard_normal((1, 2, 5, 5)),
        "kernel": rng.standard_normal((3, 2, 3, 3)),
        "kernel_t": rng.standard_normal((2, 3, 3, 3)),
        "signal": rng.standard_normal((1, 2, 6)),
        "kernel_1d": rng.standard_normal((3, 2, 3)),
        "q": rng.standard_normal((1, 2, 4)),
        "probabilities": rng.uniform(0.1, 0.9, (4, 3)),
    }
    tensors = {key: lib.tensor(value.astype(np.float32)) for key, value in arrays.items()}
    low = getattr(lib, numpy_dtype_name)
    tensors.update({f"{key}_low": tensor.to(low) for key, tensor in tensors.items()})
    tensors["target"] = lib.tensor(np.array([0, 2, 1, 0]))
    tensors["x64"] = lib.tensor(arrays["x"])
    tensors["ints"] = lib.tensor(np.arange(4).reshape(2, 2))
    return tensors


# name, function of (lib, F, tensors); the expected dtype is "low", "float32" or another dtype name.
OP_CASES = [
    ("linear", lambda lib, F, t: F.linear(t["x"], t["w"], t["b"]), "low"),
    ("linear of a low input", lambda lib, F, t: F.linear(t["x_low"], t["w"], t["b"]), "low"),
    ("matmul", lambda lib, F, t: t["x"] @ t["w"].t(), "low"),
    ("mm", lambda lib, F, t: lib.mm(t["x"], t["w"].t()), "low"),
    ("bmm", lambda lib, F, t: lib.bmm(t["x"][None], t["w"].t()[None]), "low"),
    ("addmm", lambda lib, F, t: lib.addmm(t["b"], t["x"], t["w"].t()), "low"),
    ("baddbmm", lambda lib, F, t: lib.baddbmm(t["b"][None, None], t["x"][None], t["w"].t()[None]), "low"),
    ("einsum", lambda lib, F, t: lib.einsum("ij,kj->ik", t["x"], t["w"]), "low"),
    ("conv1d", lambda lib, F, t: F.conv1d(t["signal"], t["kernel_1d"]), "low"),
    ("conv2d", lambda lib, F, t: F.conv2d(t["image"], t["kernel"], t["b"][:3]), "low"),
    ("conv2d of a low input", lambda lib, F, t: F.conv2d(t["image_low"], t["kernel"]), "low"),
    ("conv_transpose2d", lambda lib, F, t: F.conv_transpose2d(t["image"], t["kernel_t"]), "low"),
    ("prelu", lambda lib, F, t: F.prelu(t["x"], lib.ones(1)), "low"),
    ("sdpa", lambda lib, F, t: F.scaled_dot_product_attention(t["q"], t["q"], t["q"]), "low"),
    ("rnn_cell", lambda lib, F, t: lib.nn.RNNCell(3, 2)(t["x"]), "low"),
    ("softmax of float32", lambda lib, F, t: F.softmax(t["x"], 1), "float32"),
    ("softmax of low", lambda lib, F, t: F.softmax(t["x_low"], 1), "low"),
    ("log_softmax of low", lambda lib, F, t: F.log_softmax(t["x_low"], 1), "low"),
    ("cross_entropy of low", lambda lib, F, t: F.cross_entropy(t["x_low"], t["target"].clamp(0, 2)), "float32"),
    ("cross_entropy of a linear", lambda lib, F, t: F.cross_entropy(F.linear(t["x"], t["w"]), t["target"]), "float32"),
    ("nll_loss of low", lambda lib, F, t: F.nll_loss(t["x_low"], t["target"].clamp(0, 2)), "float32"),
    ("mse_loss of low", lambda lib, F, t: F.mse_loss(t["x_low"], t["x_low"] * 2), "float32"),
    (
        "mse_loss of low, reduction none",
        lambda lib, F, t: F.mse_loss(t["x_low"], t["x_low"] * 2, reduction="none"),
        "float32",
    ),
    (
        "l1_loss of low, reduction none",
        lambda lib, F, t: F.l1_loss(t["x_low"], t["x_low"] * 2, reduction="none"),
        "float32",
    ),
    ("l1_loss of low", lambda lib, F, t: F.l1_loss(t["x_low"], t["x_low"] * 2), "float32"),
    ("smooth_l1_loss of low", lambda lib, F, t: F.smooth_l1_loss(t["x_low"], t["x_low"] * 2), "float32"),
    ("kl_div of low", lambda lib, F, t: F.kl_div(t["x_low"], t["probabilities_low"], reduction="sum"), "float32"),
    (
        "binary_cross_entropy of low",
        lambda lib, F, t: F.binary_cross_entropy(t["probabilities_low"], t["probabilities_low"]),
        "float32",
    ),
    (
        "binary_cross_entropy_with_logits of low",
        lambda lib, F, t: F.binary_cross_entropy_with_logits(t["x_low"], t["probabilities_low"]),
        "float32",
    ),
    ("margin_ranking_loss of low", lambda lib, F, t: F.margin_ranking_loss(t["b_low"], t["b_low"], t["b"]), "float32"),
    ("hinge_embedding_loss of low", lambda lib, F, t: F.hinge_embedding_loss(t["x_low"], t["x"].sign()), "float32"),
    (
        "triplet_margin_loss of low",
        lambda lib, F, t: F.triplet_margin_loss(t["x_low"], t["x_low"], t["x_low"]),
        "float32",
    ),
    ("prod of low", lambda lib, F, t: t["x_low"].prod(), "float32"),
    ("sum of low", lambda lib, F, t: t["x_low"].sum(), "low"),
    ("exp of low", lambda lib, F, t: t["x_low"].exp(), "low"),
    ("layer_norm of low", lambda lib, F, t: F.layer_norm(t["x_low"], (3,)), "low"),
    ("relu of low", lambda lib, F, t: F.relu(t["x_low"]), "low"),
    ("cat of float32 and low", lambda lib, F, t: lib.cat([t["x"], t["x_low"]]), "float32"),
    ("stack of low", lambda lib, F, t: lib.stack([t["x_low"], t["x_low"]]), "low"),
    ("add of float32 and low", lambda lib, F, t: t["x"] + t["x_low"], "float32"),
    ("matmul of float64", lambda lib, F, t: t["x64"] @ t["x64"].t(), "float64"),
    ("matmul of integers", lambda lib, F, t: t["ints"] @ t["ints"], "int64"),
    # The cell state starts float32: c' = f * c + i * g and h' promote to it (torch's CPU cells too).
    ("lstm_cell", lambda lib, F, t: lib.nn.LSTMCell(3, 2)(t["x"])[0], "float32"),
    ("gru_cell", lambda lib, F, t: lib.nn.GRUCell(3, 2)(t["x"]), "float32"),
    # The full-sequence modules: PyTorch's CPU list has the LSTM and RNN kernels, not GRU's.
    ("lstm", lambda lib, F, t: lib.nn.LSTM(3, 2, num_layers=2)(t["x"])[0], "low"),
    ("lstm state", lambda lib, F, t: lib.nn.LSTM(3, 2)(t["x"])[1][1], "low"),
    ("rnn", lambda lib, F, t: lib.nn.RNN(3, 2, bidirectional=True)(t["x"])[0], "low"),
    ("gru", lambda lib, F, t: lib.nn.GRU(3, 2)(t["x"])[0], "float32"),
    # The LSTM leaves that kernel for projections, packed input and an empty batch: its generic cell
    # autocasts the products only, so c (and h, unless projected back to the autocast dtype) stays float32.
    ("lstm with projections", lambda lib, F, t: lib.nn.LSTM(3, 2, proj_size=1)(t["x"][:, None])[0], "low"),
    ("lstm with projections' cell", lambda lib, F, t: lib.nn.LSTM(3, 2, proj_size=1)(t["x"][:, None])[1][1], "float32"),
    ("lstm of an empty batch", lambda lib, F, t: lib.nn.LSTM(3, 2)(t["x"][:, None][:, :0])[0], "float32"),
    (
        "lstm of a packed sequence",
        lambda lib, F, t: (
            lib.nn.LSTM(3, 2)(lib.nn.utils.rnn.pack_padded_sequence(t["x"].reshape(2, 2, 3), lib.tensor([2, 1])))[
                0
            ].data
        ),
        "float32",
    ),
    # Not on the lists: they run in their inputs' dtype, their own matrix products too.
    ("det", lambda lib, F, t: lib.linalg.det(_spd(lib, t)), "float32"),
    ("cholesky", lambda lib, F, t: lib.linalg.cholesky(_spd(lib, t)), "float32"),
    ("qr", lambda lib, F, t: lib.linalg.qr(t["x"])[1], "float32"),
    ("eigvalsh", lambda lib, F, t: lib.linalg.eigvalsh(_spd(lib, t)), "float32"),
    ("svdvals", lambda lib, F, t: lib.linalg.svdvals(t["x"]), "float32"),
    ("inv", lambda lib, F, t: lib.linalg.inv(_spd(lib, t)), "float32"),
    ("mv", lambda lib, F, t: lib.mv(t["x"], t["w"][0]), "float32"),
    ("dot", lambda lib, F, t: lib.dot(t["b"], t["b"]), "float32"),
    ("addmv", lambda lib, F, t: lib.addmv(t["b"][:4], t["x"], t["w"][0]), "float32"),
    # On PyTorch's CPU float32 list: low-precision inputs are cast to float32 (linear algebra has no
    # bfloat16 or float16 kernels).
    ("inv of low", lambda lib, F, t: lib.linalg.inv(_spd(lib, t).to(t["x_low"].dtype)), "float32"),
    ("inverse of low", lambda lib, F, t: lib.inverse(_spd(lib, t).to(t["x_low"].dtype)), "float32"),
    ("cholesky of low", lambda lib, F, t: lib.linalg.cholesky(_spd(lib, t).to(t["x_low"].dtype)), "float32"),
    ("qr of low", lambda lib, F, t: lib.linalg.qr(t["x_low"])[1], "float32"),
    ("svdvals of low", lambda lib, F, t: lib.linalg.svdvals(t["x_low"]), "float32"),
    ("pinverse of low", lambda lib, F, t: lib.pinverse(t["x_low"]), "float32"),
    ("cdist of low", lambda lib, F, t: lib.cdist(t["x_low"], t["x_low"]), "float32"),
    ("trace of low", lambda lib, F, t: lib.trace(t["x_low"]), "float32"),
    ("quantile of low", lambda lib, F, t: lib.quantile(t["x_low"], 0.5), "float32"),
    ("max_pool3d of low", lambda lib, F, t: F.max_pool3d(t["image_low"], 1), "float32"),
    ("avg_pool3d of low", lambda lib, F, t: F.avg_pool3d(t["image_low"], 1), "float32"),
    ("reflect pad of low", lambda lib, F, t: F.pad(t["image_low"], (1, 1, 1, 1), mode="reflect"), "float32"),
    ("replicate pad of low", lambda lib, F, t: F.pad(t["signal_low"], (1, 1), mode="replicate"), "float32"),
    ("circular pad of low", lambda lib, F, t: F.pad(t["signal_low"], (1, 1), mode="circular"), "low"),
    ("max_pool2d of low", lambda lib, F, t: F.max_pool2d(t["image_low"], 2), "low"),
    ("vecdot", lambda lib, F, t: lib.linalg.vecdot(t["x"], t["x"]), "low"),
    (
        "index_copy of float32 and low",
        lambda lib, F, t: t["x"].index_copy(0, t["target"][:1], t["x_low"][:1]),
        "float32",
    ),
]


def _spd(lib, t):
    """A symmetric positive-definite 3 x 3 matrix of the inputs, built outside autocast's products."""
    x = t["x"][:3]
    return lib.diag(lib.ones(3) * 4) + x * x.sum() / 100


def _expected_dtype(expected: str, low):
    return low if expected == "low" else getattr(onnxnn, expected)


@pytest.mark.parametrize("name, numpy_dtype", LOW_DTYPES)
@pytest.mark.parametrize("case, function, expected", OP_CASES)
def test_output_dtype_per_op_under_cpu_autocast(case, function, expected, name, numpy_dtype):
    low = getattr(onnxnn, name)
    tensors = _inputs(onnxnn, name)
    with autocast("cpu", dtype=low):
        result = function(onnxnn, F, tensors)
    assert result.dtype is _expected_dtype(expected, low)
    assert np.all(np.isfinite(result.detach().float().numpy()))


@pytest.mark.parametrize(
    "function",
    [
        lambda a: onnxnn.linalg.det(a),
        lambda a: onnxnn.linalg.cholesky(a),
        lambda a: onnxnn.linalg.eigvalsh(a),
        lambda a: onnxnn.linalg.inv(a),
    ],
    ids=["det", "cholesky", "eigvalsh", "inv"],
)
def test_decompositions_under_autocast_keep_their_float32_accuracy(function):
    # Their own matrix products are not autocast: the results are the ones without autocast,
    # computed by the same float32 operations (a bfloat16 product would be off in the third digit).
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 4))
    a = onnxnn.tensor((x @ x.T + 4 * np.eye(4)).astype(np.float32))
    expected = function(a).numpy()
    with onnxnn.autocast("cpu", dtype=onnxnn.bfloat16):
        result = function(a)
    assert result.dtype == onnxnn.float32
    np.testing.assert_array_equal(result.numpy(), expected)


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_output_dtypes_equal_torch_autocast_cpu(name):
    torch = pytest.importorskip("torch")
    ours, theirs = _inputs(onnxnn, name), _inputs(torch, name)
    torch_low, low = getattr(torch, name), getattr(onnxnn, name)
    for label, function, _ in OP_CASES:
        with autocast("cpu", dtype=low):
            mine = function(onnxnn, F, ours).dtype
        with warnings.catch_warnings(), torch.autocast("cpu", dtype=torch_low):
            warnings.simplefilter("ignore")
            try:
                reference = function(torch, torch.nn.functional, theirs).dtype
            except RuntimeError:  # oneDNN has no float16 LSTM on CPU: nothing to compare with
                continue
        assert mine.name == str(reference).removeprefix("torch."), label


@pytest.mark.parametrize(
    "device_type, op_type, name, policy",
    [
        ("cpu", "MatMul", None, LOWER_PRECISION_FP),
        ("cpu", "Gemm", None, LOWER_PRECISION_FP),
        ("cpu", "Conv", None, LOWER_PRECISION_FP),
        ("cpu", "Softmax", None, None),  # PyTorch's CPU list keeps softmax in the input's dtype
        ("cpu", "ReduceMean", "MseLossBackward0", FP32),
        ("cpu", "ReduceMean", None, None),
        ("cpu", "Concat", None, None),  # cat promotes its inputs itself (test_autocast_scope.py)
        ("cpu", "Identity", "index_copy", PROMOTE),
        ("cuda", "ConvTranspose", None, LOWER_PRECISION_FP),
        ("cuda", "Softmax", None, FP32),
        ("cuda", "LogSoftmax", None, FP32),
        ("cuda", "ReduceSum", None, FP32),
        ("cuda", "LayerNormalization", None, FP32),
        ("cuda", "Exp", None, FP32),
        ("cuda", "Relu", None, None),
        ("cuda", "Div", "NllLossBackward0", FP32),
    ],
)
def test_policy_table(device_type, op_type, name, policy):
    assert policy_for(device_type, op_type, name) == policy


@pytest.mark.skipif(not onnxnn.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_softmax_and_cross_entropy_run_in_float32():
    x = onnxnn.randn(4, 3).cuda().half()
    with autocast("cuda"):
        assert F.softmax(x, 1).dtype is onnxnn.float32
        assert F.log_softmax(x, 1).dtype is onnxnn.float32
        assert F.cross_entropy(x, onnxnn.tensor([0, 1, 2, 0]).cuda()).dtype is onnxnn.float32
        assert (x.float() @ x.float().t()).dtype is onnxnn.float16


# ---------------------------------------------------------------- the region's state
def test_defaults_and_state_inside_and_after_the_region():
    assert get_autocast_dtype("cpu") is onnxnn.bfloat16
    assert get_autocast_dtype("cuda") is onnxnn.float16
    assert not is_autocast_enabled("cpu") and not is_autocast_enabled()
    assert MODE.autocast is None  # recording pays one attribute read while autocast is off
    with autocast("cpu", dtype=onnxnn.float16):
        assert is_autocast_enabled("cpu") and not is_autocast_enabled("cuda")
        assert get_autocast_dtype("cpu") is onnxnn.float16
    assert not is_autocast_enabled("cpu")
    assert get_autocast_dtype("cpu") is onnxnn.bfloat16
    assert MODE.autocast is None


def test_nested_regions_restore_the_outer_one():
    layer = nn.Linear(3, 2)
    x = onnxnn.randn(2, 3)
    with autocast("cpu"):
        assert layer(x).dtype is onnxnn.bfloat16
        with autocast("cpu", enabled=False):
            assert layer(x).dtype is onnxnn.float32
            with autocast("cpu", dtype=onnxnn.float16):
                assert layer(x).dtype is onnxnn.float16
            assert layer(x).dtype is onnxnn.float32
        assert layer(x).dtype is onnxnn.bfloat16
    assert layer(x).dtype is onnxnn.float32


def test_decorator_form():
    layer = nn.Linear(3, 2)

    @autocast("cpu", dtype=onnxnn.float16)
    def forward(x):
        """Runs the layer."""
        return layer(x)

    assert forward(onnxnn.randn(2, 3)).dtype is onnxnn.float16
    assert forward.__doc__ == "Runs the layer."
    assert not is_autocast_enabled("cpu")
    with pytest.raises(TypeError, match="requires a callable"):
        autocast("cpu")(3)


def test_state_is_restored_after_an_exception():
    with pytest.raises(ValueError, match="inside"):
        with autocast("cpu", dtype=onnxnn.float16):
            raise ValueError("inside")
    assert not is_autocast_enabled("cpu")
    assert get_autocast_dtype("cpu") is onnxnn.bfloat16
    assert MODE.autocast is None
    assert nn.Linear(3, 2)(onnxnn.randn(2, 3)).dtype is onnxnn.float32


def test_state_is_per_thread():
    layer = nn.Linear(3, 2)
    seen = {}

    def other_thread():
        seen["enabled"] = is_autocast_enabled("cpu")
        seen["dtype"] = layer(onnxnn.randn(2, 3)).dtype

    with autocast("cpu"):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert layer(onnxnn.randn(2, 3)).dtype is onnxnn.bfloat16
    assert seen == {"enabled": False, "dtype": onnxnn.float32}


def test_another_threads_backward_leaves_this_threads_autocast_on():
    # Gradient ops are never cast, but only the backward's own thread records them: a region in
    # another thread keeps casting while that backward runs.
    inside, release = threading.Event(), threading.Event()

    class Waits(onnxnn.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad_output):
            inside.set()
            assert release.wait(60)
            return grad_output

    x = onnxnn.randn(3, requires_grad=True)
    loss = Waits.apply(x).sum()
    training = threading.Thread(target=loss.backward)
    training.start()
    try:
        assert inside.wait(60)
        with autocast("cpu"):
            dtype = nn.Linear(3, 2)(onnxnn.randn(2, 3)).dtype
    finally:
        release.set()
        training.join()
    assert dtype is onnxnn.bfloat16
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3, np.float32))


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        (("xpu",), RuntimeError, "unsupported autocast device_type 'xpu'"),
        ((onnxnn.device("cpu"),), ValueError, "Expected `device_type` of type `str`"),
    ],
)
def test_bad_device_type(arguments, error, message):
    with pytest.raises(error, match=message):
        autocast(*arguments)


def test_unsupported_dtype_warns_and_disables():
    with pytest.warns(UserWarning, match="target dtype is not supported. Disabling autocast"):
        region = autocast("cpu", dtype=onnxnn.float64)
    with region:
        assert not is_autocast_enabled("cpu")
        assert nn.Linear(3, 2)(onnxnn.randn(2, 3)).dtype is onnxnn.float32


@pytest.mark.skipif(onnxnn.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_cuda_without_a_device_warns_and_disables():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        region = autocast("cuda")
    with region:
        assert not is_autocast_enabled("cuda")


def test_cpu_region_leaves_float64_and_other_devices_alone():
    x = onnxnn.randn(2, 3, dtype=onnxnn.float64)
    with autocast("cpu"):
        assert (x @ x.t()).dtype is onnxnn.float64


# ---------------------------------------------------------------- gradients
@pytest.mark.parametrize("name, numpy_dtype", LOW_DTYPES)
def test_parameter_grads_are_float32_and_match_finite_differences(name, numpy_dtype):
    low = getattr(onnxnn, name)
    layer = nn.Linear(4, 3)
    x, target = onnxnn.randn(6, 4), onnxnn.randn(6, 3)
    with autocast("cpu", dtype=low):
        loss = F.mse_loss(layer(x), target)
    assert loss.dtype is onnxnn.float32
    loss.backward()
    assert layer.weight.grad.dtype is onnxnn.float32 and layer.bias.grad.dtype is onnxnn.float32

    xs, ts = x.numpy().astype(np.float64), target.numpy().astype(np.float64)
    w0, b0 = layer.weight.detach().numpy().astype(np.float64), layer.bias.detach().numpy().astype(np.float64)

    def exact_loss(w, b):
        return np.mean((xs @ w.T + b - ts) ** 2)

    step = 1e-6
    numeric_w = np.zeros_like(w0)
    for index in np.ndindex(*w0.shape):
        bump = np.zeros_like(w0)
        bump[index] = step
        numeric_w[index] = (exact_loss(w0 + bump, b0) - exact_loss(w0 - bump, b0)) / (2 * step)
    numeric_b = np.array(
        [(exact_loss(w0, b0 + step * e) - exact_loss(w0, b0 - step * e)) / (2 * step) for e in np.eye(3)]
    )
    # The gradient 2/N (y - t)^T x runs in the low dtype: y, t and x each carry a relative
    # rounding of about one epsilon, and the products and sums a few more.
    eps = _epsilon(numpy_dtype)
    y = xs @ w0.T + b0
    magnitude = 2 / xs.shape[0] * (np.abs(xs) @ np.abs(w0).T + np.abs(b0) + np.abs(ts) + np.abs(y - ts))
    np.testing.assert_array_less(
        np.abs(layer.weight.grad.numpy() - numeric_w), 4 * eps * magnitude.T @ np.abs(xs) + 1e-6
    )
    np.testing.assert_array_less(np.abs(layer.bias.grad.numpy() - numeric_b), 4 * eps * magnitude.sum(0) + 1e-6)


def test_a_weight_used_twice_is_cast_once_unless_the_cache_is_off():
    layer = nn.Linear(3, 3)
    x = onnxnn.randn(2, 3)

    def twice():
        layer(layer(x))

    with autocast("cpu"):
        cached = _recorded_op_types(twice).count("Cast")
    with autocast("cpu", cache_enabled=False):
        uncached = _recorded_op_types(twice).count("Cast")
    # x, weight and bias once; the second call casts nothing (its input is already low). Each call
    # also widens its three half operands and rounds its result once, as PyTorch's addmm: 4 more.
    assert (cached, uncached) == (3 + 8, 5 + 8)


def test_backward_ops_are_not_autocast():
    layer = nn.Linear(3, 2)
    with autocast("cpu"):
        loss = layer(onnxnn.randn(4, 3)).float().sum()
        loss.backward()  # inside the region: gradient ops keep their forward dtypes
    assert layer.weight.grad.dtype is onnxnn.float32


# ---------------------------------------------------------------- exported graphs keep the casts
def _products_of_casts(proto: onnx.ModelProto, to: int) -> int:
    """How many MatMul/Gemm nodes read a value cast to ``to`` (directly or through a Transpose)."""
    producers = {output: node for node in proto.graph.node for output in node.output}

    def cast_to_low(name: str) -> bool:
        node = producers.get(name)
        while node is not None and node.op_type == "Transpose":
            node = producers.get(node.input[0])
        return node is not None and node.op_type == "Cast" and node.attribute[0].i == to

    return sum(
        1 for node in proto.graph.node if node.op_type in ("MatMul", "Gemm") and any(map(cast_to_low, node.input))
    )


def test_exported_model_has_casts_before_matmul_and_onnxruntime_runs_it():
    ort = pytest.importorskip("onnxruntime")
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).eval()
    x = onnxnn.randn(5, 3)
    with autocast("cpu", dtype=onnxnn.float16):
        proto = to_onnx(model, (x,))
        expected = model(x).detach().float().numpy()
    assert _products_of_casts(proto, onnx.TensorProto.FLOAT16) == 2
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (output,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    assert output.dtype == np.float16
    # onnxruntime runs float16 kernels, onnxnn widens them to float32 and rounds each output:
    # they differ by a few float16 roundings of the magnitudes each layer sums.
    first, second = model[0], model[2]
    hidden = np.abs(x.numpy()) @ np.abs(first.weight.detach().numpy()).T + np.abs(first.bias.detach().numpy())
    magnitude = hidden @ np.abs(second.weight.detach().numpy()).T + np.abs(second.bias.detach().numpy())
    np.testing.assert_array_less(np.abs(output.astype(np.float32) - expected), 4 * _epsilon(np.float16) * magnitude)


def test_exported_training_step_keeps_the_casts():
    ort = pytest.importorskip("onnxruntime")
    model = nn.Linear(3, 2)
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    x, target = onnxnn.randn(5, 3), onnxnn.randn(5, 2)
    with autocast("cpu", dtype=onnxnn.float16):
        proto, signature = training_step_to_onnx(model, F.mse_loss, optimizer, (x, target))
    assert _products_of_casts(proto, onnx.TensorProto.FLOAT16) >= 1  # forward and gradient products
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {**dict(signature.initial_state), "input": x.numpy(), "target": target.numpy()}
    loss = session.run(None, feeds)[0]
    with autocast("cpu", dtype=onnxnn.float16):
        reference = F.mse_loss(model(x), target).item()
    # onnxruntime's float16 MatMul and onnxnn's (widened to float32) differ by float16 roundings
    # of the K=3 products and of the output.
    np.testing.assert_allclose(loss, reference, rtol=4 * _epsilon(np.float16))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_a_loss_computes_in_float32_from_low_precision_inputs(reduction):
    # (1 + 2**-7)**2 = 1.0156860... is not a bfloat16 number (the nearest is 1.015625): a loss that
    # squared in bfloat16 would be off by 6e-5; PyTorch casts the inputs of mse_loss to float32 first.
    value = 1 + 2**-7
    x = onnxnn.full((4,), value, dtype=onnxnn.bfloat16)
    with autocast("cpu", dtype=onnxnn.bfloat16):
        loss = F.mse_loss(x, onnxnn.zeros(4, dtype=onnxnn.bfloat16), reduction=reduction)
    assert loss.dtype is onnxnn.float32
    expected = np.float32(value) ** 2 * (4 if reduction == "sum" else 1)
    np.testing.assert_allclose(loss.numpy(), np.broadcast_to(expected, loss.shape), rtol=2 * np.finfo(np.float32).eps)


@pytest.mark.parametrize("dtype", [onnxnn.bfloat16, onnxnn.float16])
def test_gru_autocasts_its_gate_products_with_or_without_gradients(dtype):
    # PyTorch's GRU kernel is off CPU autocast's lists but its gate products (at::linear) are on
    # them: the result is the same whether a gradient is wanted or not.
    onnxnn.manual_seed(0)
    gru = nn.GRU(8, 16)
    x = onnxnn.randn(7, 3, 8)
    with autocast("cpu", dtype=dtype):
        with onnxnn.no_grad():
            inference = gru(x)[0].numpy()
        training = gru(x)[0].detach().numpy()
    with onnxnn.no_grad():
        plain = gru(x)[0].numpy()
    np.testing.assert_array_equal(inference, training)
    # Gate products rounded to 8 or 11 bits move the outputs by far more than float32's rounding.
    assert np.abs(inference - plain).max() > 1e-4
