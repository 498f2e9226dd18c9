"""Where autocast applies: functions whose recorded ops differ from the ATen ops PyTorch's autocast
lists (einsum, unfold, affine_grid, internal Concat/Scatter), keyword tensor arguments of listed
functions, losses, in-place products, ``custom_fwd``/``custom_bwd`` and device strings.

Expected dtypes are PyTorch's CPU autocast policy (``torch/csrc/autograd/autocast_mode.cpp`` and
the AMP docs): the lower-precision list lowers, the float32 list (losses, ``cdist``, ``max_unpool2d``)
casts to float32, ``cat``/``stack``/``index_copy`` promote, unlisted functions and in-place ops keep
their inputs' dtype. Values are checked against float64 numpy within the dtype's rounding.
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn.amp import autocast, custom_bwd, custom_fwd, is_autocast_enabled
from onnxnn.amp.op_lists import FP32, LOWER_PRECISION_FP, PROMOTE, policy_for

LOW = ["bfloat16", "float16"]
_OTHER = {"bfloat16": "float16", "float16": "bfloat16"}
_FLOAT32_EPS = float(np.finfo(np.float32).eps)


def _arrays() -> dict:
    rng = np.random.default_rng(7)
    return {
        "a": rng.standard_normal((3, 4)),
        "b": rng.standard_normal((3, 4)),
        "c": rng.standard_normal((4, 5)),
        "v": rng.standard_normal(4),
        "q": rng.standard_normal((1, 2, 3, 4)),
        "mask": rng.standard_normal((1, 2, 3, 3)),
        "image": rng.standard_normal((1, 2, 4, 4)),
        "columns": rng.standard_normal((1, 8, 4)),
        "signal": rng.standard_normal((1, 2, 6)),
        "theta": rng.standard_normal((1, 2, 3)),
        "log_probs": np.log(rng.dirichlet(np.ones(4), (5, 2))),
        "sign": np.array([1.0, -1.0, 1.0]),
    }


def _inputs(lib, low_name: str) -> dict:
    """The same data as ``lib`` tensors (onnxnn or torch): float32, ``*_low`` in the autocast dtype
    and ``*_other`` in the other low-precision dtype."""
    tensors = {key: lib.tensor(value.astype(np.float32)) for key, value in _arrays().items()}
    low, other = getattr(lib, low_name), getattr(lib, _OTHER[low_name])
    tensors.update({f"{key}_low": tensor.to(low) for key, tensor in list(tensors.items())})
    tensors.update({f"{key}_other": tensors[key].to(other) for key in list(_arrays())})
    tensors["index"] = lib.tensor(np.array([0, 2]))
    tensors["class"] = lib.tensor(np.array([0, 3, 1]))
    tensors["labels"] = lib.tensor(np.array([[1, 3, -1, 0], [2, -1, 0, 0], [0, 1, 2, 3]]))
    tensors["targets"] = lib.tensor(np.array([[1, 2], [3, 3]]))
    return tensors


def _unpooled(lib, F, x):
    pooled, indices = F.max_pool1d(x, 2, return_indices=True)
    return F.max_unpool1d(pooled, indices, 2)


def _sdpa_keywords(F, t, mask: str | None):
    keywords = {"query": t["q"], "key": t["q"], "value": t["q"]}
    if mask is not None:
        keywords["attn_mask"] = t[mask]
    return F.scaled_dot_product_attention(**keywords)


# name, function of (lib, F, tensors), expected dtype: "low", "other" or a dtype name.
DTYPE_CASES = [
    # einsum: PyTorch lowers it only through the bmm that sums a shared subscript.
    ("einsum contraction", lambda lib, F, t: lib.einsum("ij,kj->ik", t["a"], t["b"]), "low"),
    ("einsum inner product", lambda lib, F, t: lib.einsum("i,i->", t["v"], t["v"]), "low"),
    ("einsum row-wise dot", lambda lib, F, t: lib.einsum("ij,ij->i", t["a"], t["b"]), "low"),
    ("einsum elementwise", lambda lib, F, t: lib.einsum("ij,ij->ij", t["a"], t["b"]), "float32"),
    ("einsum outer", lambda lib, F, t: lib.einsum("i,j->ij", t["v"], t["v"]), "float32"),
    ("einsum transpose", lambda lib, F, t: lib.einsum("ij->ji", t["a"]), "float32"),
    ("einsum column sums", lambda lib, F, t: lib.einsum("ij->j", t["a"]), "float32"),
    ("einsum broadcast product", lambda lib, F, t: lib.einsum("ij,j->j", t["a"], t["v"]), "float32"),
    ("einsum elementwise of other", lambda lib, F, t: lib.einsum("ij,ij->ij", t["a_other"], t["b_other"]), "other"),
    # a float32 operand multiplied in after the bmm: mul promotes the lowered product back
    ("einsum product then outer", lambda lib, F, t: lib.einsum("ij,j,k->ik", t["a"], t["v"], t["v"]), "float32"),
    ("einsum outer then product", lambda lib, F, t: lib.einsum("k,ij,j->ik", t["v"], t["a"], t["v"]), "low"),
    # keyword tensors of listed functions are cast as positional ones
    ("sdpa by keywords", lambda lib, F, t: _sdpa_keywords(F, t, None), "low"),
    ("sdpa with an attn_mask keyword", lambda lib, F, t: _sdpa_keywords(F, t, "mask"), "low"),
    ("sdpa with an attn_mask of other", lambda lib, F, t: _sdpa_keywords(F, t, "mask_other"), "low"),
    ("cdist with x2 keyword", lambda lib, F, t: lib.cdist(t["a_low"], x2=t["b_low"]), "float32"),
    (
        "index_copy with a source keyword",
        lambda lib, F, t: t["a"].index_copy(0, t["index"], source=t["b_low"][:2]),
        "float32",
    ),
    # im2col / col2im are exact copies, on no list
    ("unfold", lambda lib, F, t: F.unfold(t["image"], 2), "float32"),
    ("unfold of low", lambda lib, F, t: F.unfold(t["image_low"], 2), "low"),
    ("fold", lambda lib, F, t: F.fold(t["columns"], (3, 3), 2), "float32"),
    ("nn.Unfold", lambda lib, F, t: lib.nn.Unfold(2, stride=2)(t["image"]), "float32"),
    # losses on the float32 list
    (
        "cosine_embedding_loss of low",
        lambda lib, F, t: F.cosine_embedding_loss(t["a_low"], t["b_low"], t["sign"], reduction="none"),
        "float32",
    ),
    ("multi_margin_loss of low", lambda lib, F, t: F.multi_margin_loss(t["a_low"], t["class"]), "float32"),
    (
        "multilabel_margin_loss of low",
        lambda lib, F, t: F.multilabel_margin_loss(t["a_low"], t["labels"]),
        "float32",
    ),
    (
        "ctc_loss of low",
        lambda lib, F, t: F.ctc_loss(t["log_probs_low"], t["targets"], (5, 5), (2, 1)),
        "float32",
    ),
    # affine_grid runs a bmm of theta; max_unpool1d is max_unpool2d inside
    ("affine_grid", lambda lib, F, t: F.affine_grid(t["theta"], [1, 1, 3, 4], align_corners=False), "low"),
    (
        "affine_grid of other",
        lambda lib, F, t: F.affine_grid(t["theta_other"], [1, 1, 3, 4], align_corners=False),
        "low",
    ),
    ("max_unpool1d of low", lambda lib, F, t: _unpooled(lib, F, t["signal_low"]), "float32"),
    # only cat, stack and index_copy promote: functions that concatenate or scatter inside keep the dtype
    ("scatter_add of other", lambda lib, F, t: t["v_other"].scatter_add(0, t["index"], t["v_other"][:2]), "other"),
    ("index_add of other", lambda lib, F, t: t["a_other"].index_add(0, t["index"], t["b_other"][:2]), "other"),
    ("diag of other", lambda lib, F, t: lib.diag(t["v_other"]), "other"),
    ("diag_embed of other", lambda lib, F, t: lib.diag_embed(t["a_other"]), "other"),
    ("circular pad of other", lambda lib, F, t: F.pad(t["signal_other"], (1, 1), mode="circular"), "other"),
    ("cat of float32 and low", lambda lib, F, t: lib.cat([t["a"], t["b_low"]]), "float32"),
    ("stack of low", lambda lib, F, t: lib.stack([t["a_low"], t["b_low"]]), "low"),
    ("index_copy of float32 and low", lambda lib, F, t: t["a"].index_copy(0, t["index"], t["b_low"][:2]), "float32"),
]


def _expected(expected: str, low_name: str):
    if expected == "low":
        return getattr(onnxnn, low_name)
    if expected == "other":
        return getattr(onnxnn, _OTHER[low_name])
    return getattr(onnxnn, expected)


@pytest.mark.parametrize("low_name", LOW)
@pytest.mark.parametrize("case, function, expected", DTYPE_CASES, ids=[case[0] for case in DTYPE_CASES])
def test_output_dtype_follows_pytorchs_cpu_policy(case, function, expected, low_name):
    tensors = _inputs(onnxnn, low_name)
    with autocast("cpu", dtype=getattr(onnxnn, low_name)):
        result = function(onnxnn, F, tensors)
    assert result.dtype is _expected(expected, low_name)
    assert np.all(np.isfinite(result.detach().float().numpy()))


@pytest.mark.parametrize("low_name", LOW)
def test_output_dtypes_equal_torch_autocast_cpu(low_name):
    torch = pytest.importorskip("torch")
    if tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13):
        pytest.skip(
            f"onnxnn follows PyTorch 2.13's CPU autocast lists; torch {torch.__version__} casts einsum otherwise"
        )
    ours, theirs = _inputs(onnxnn, low_name), _inputs(torch, low_name)
    for case, function, _ in DTYPE_CASES:
        with autocast("cpu", dtype=getattr(onnxnn, low_name)):
            mine = function(onnxnn, F, ours).dtype
        with warnings.catch_warnings(), torch.autocast("cpu", dtype=getattr(torch, low_name)):
            warnings.simplefilter("ignore")
            reference = function(torch, torch.nn.functional, theirs).dtype
        assert mine.name == str(reference).removeprefix("torch."), case


# ---------------------------------------------------------------- values: what runs in float32 is float32-accurate
def _rounded(array, dtype_name: str) -> np.ndarray:
    """``array`` as stored in ``dtype_name`` (float32 or a low dtype), back in float64."""
    numpy_dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype_name]
    return np.asarray(array, np.float64).astype(np.float32).astype(numpy_dtype).astype(np.float64)


def _cosine_embedding(a, b, sign):
    cosine = (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))
    return np.where(sign == 1, 1 - cosine, np.maximum(cosine, 0.0))


def _multi_margin(x, classes):
    picked = x[np.arange(len(x)), classes][:, None]
    hinge = np.maximum(1 - picked + x, 0.0)
    hinge[np.arange(len(x)), classes] = 0
    return hinge.sum(1) / x.shape[1]


def _multilabel_margin(x, labels):
    losses = []
    for row, label_row in zip(x, labels):
        listed = []
        for label in label_row:
            if label == -1:
                break
            listed.append(label)
        others = [i for i in range(len(row)) if i not in listed]
        losses.append(sum(max(0.0, 1 - (row[j] - row[i])) for j in listed for i in others) / len(row))
    return np.array(losses)


# name, function of (F, tensors), float64 reference of (rounded arrays): the loss per sample.
LOSS_CASES = [
    (
        "cosine_embedding_loss",
        lambda F, t: F.cosine_embedding_loss(t["a_low"], t["b_low"], t["sign"], reduction="none"),
        lambda r: _cosine_embedding(r["a"], r["b"], r["sign"]),
    ),
    (
        "multi_margin_loss",
        lambda F, t: F.multi_margin_loss(t["a_low"], t["class"], reduction="none"),
        lambda r: _multi_margin(r["a"], np.array([0, 3, 1])),
    ),
    (
        "multilabel_margin_loss",
        lambda F, t: F.multilabel_margin_loss(t["a_low"], t["labels"], reduction="none"),
        lambda r: _multilabel_margin(r["a"], [[1, 3, -1, 0], [2, -1, 0, 0], [0, 1, 2, 3]]),
    ),
]


@pytest.mark.parametrize("low_name", LOW)
@pytest.mark.parametrize("case, function, reference", LOSS_CASES, ids=[case[0] for case in LOSS_CASES])
def test_losses_compute_in_float32_from_low_precision_inputs(case, function, reference, low_name):
    # The inputs are low precision; a float32 computation from them is exact to a few float32
    # roundings, while one in the low dtype is off in the third digit (bfloat16) or fourth (float16).
    tensors = _inputs(onnxnn, low_name)
    with autocast("cpu", dtype=getattr(onnxnn, low_name)):
        loss = function(F, tensors)
    assert loss.dtype is onnxnn.float32
    rounded = {key: _rounded(value, low_name) for key, value in _arrays().items()}
    rounded["sign"] = _arrays()["sign"]
    np.testing.assert_allclose(loss.numpy(), reference(rounded), rtol=32 * _FLOAT32_EPS, atol=32 * _FLOAT32_EPS)


@pytest.mark.parametrize("low_name", LOW)
def test_ctc_loss_of_low_log_probs_equals_the_float32_loss(low_name):
    # PyTorch casts the log-probabilities to float32 before its kernel's dtype check.
    tensors = _inputs(onnxnn, low_name)
    expected = F.ctc_loss(tensors["log_probs_low"].float(), tensors["targets"], (5, 5), (2, 1), reduction="none")
    with autocast("cpu", dtype=getattr(onnxnn, low_name)):
        loss = F.ctc_loss(tensors["log_probs_low"], tensors["targets"], (5, 5), (2, 1), reduction="none")
    assert loss.dtype is onnxnn.float32
    np.testing.assert_array_equal(loss.numpy(), expected.numpy())


@pytest.mark.parametrize("low_name", LOW)
@pytest.mark.parametrize(
    "equation, names",
    [("ij,ij->ij", ("a", "b")), ("i,j->ij", ("v", "v")), ("ij->ji", ("a",)), ("ij,j->j", ("a", "v"))],
)
def test_einsum_without_contraction_is_float32_exact(equation, names, low_name):
    # One product per element (or a copy, or a sum of 3): float32 rounding only, never the low dtype's.
    arrays = _arrays()
    operands = [onnxnn.tensor(arrays[name].astype(np.float32)) for name in names]
    with autocast("cpu", dtype=getattr(onnxnn, low_name)):
        result = onnxnn.einsum(equation, *operands)
    expected = np.einsum(equation, *[_rounded(arrays[name], "float32") for name in names])
    np.testing.assert_allclose(result.numpy(), expected, rtol=4 * _FLOAT32_EPS, atol=4 * _FLOAT32_EPS)


@pytest.mark.parametrize("low_name", LOW)
def test_einsum_contraction_runs_in_the_low_dtype(low_name):
    arrays = _arrays()
    with autocast("cpu", dtype=getattr(onnxnn, low_name)):
        result = onnxnn.einsum("ij,jk->ik", onnxnn.tensor(arrays["a"]).float(), onnxnn.tensor(arrays["c"]).float())
    a, c = _rounded(arrays["a"], low_name), _rounded(arrays["c"], low_name)
    epsilon = float(ml_dtypes.finfo(ml_dtypes.bfloat16 if low_name == "bfloat16" else np.float16).eps)
    magnitude = np.abs(a) @ np.abs(c)
    np.testing.assert_array_less(np.abs(result.float().numpy() - a @ c), epsilon * magnitude + 1e-30)


@pytest.mark.parametrize("low_name", LOW)
@pytest.mark.parametrize(
    "function", [lambda x: F.unfold(x, 2), lambda x: F.fold(F.unfold(x, 2, stride=2), (4, 4), 2, stride=2)]
)
def test_unfold_and_fold_copy_float32_values_exactly(function, low_name):
    x = onnxnn.tensor(_arrays()["image"].astype(np.float32))
    expected = function(x).numpy()
    with autocast("cpu", dtype=getattr(onnxnn, low_name)):
        result = function(x)
    np.testing.assert_array_equal(result.numpy(), expected)


# ---------------------------------------------------------------- in-place products are never autocast
IN_PLACE_CASES = [
    ("addmm_", (3, 5), ((3, 4), (4, 5)), lambda c, a, b: c + a @ b),
    ("baddbmm_", (2, 3, 5), ((2, 3, 4), (2, 4, 5)), lambda c, a, b: c + a @ b),
    ("addbmm_", (3, 5), ((2, 3, 4), (2, 4, 5)), lambda c, a, b: c + (a @ b).sum(0)),
]


@pytest.mark.parametrize("low_name", LOW)
@pytest.mark.parametrize("method, shape, operand_shapes, reference", IN_PLACE_CASES, ids=[c[0] for c in IN_PLACE_CASES])
def test_in_place_products_compute_in_their_operands_dtype(method, shape, operand_shapes, reference, low_name):
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(shape)] + [rng.standard_normal(s) for s in operand_shapes]
    c, a, b = (onnxnn.tensor(array.astype(np.float32)) for array in arrays)
    with autocast("cpu", dtype=getattr(onnxnn, low_name)):
        getattr(c, method)(a, b)
    assert c.dtype is onnxnn.float32
    expected = reference(*(_rounded(array, "float32") for array in arrays))
    np.testing.assert_allclose(c.numpy(), expected, rtol=16 * _FLOAT32_EPS, atol=16 * _FLOAT32_EPS)


# ---------------------------------------------------------------- custom_fwd / custom_bwd
def _recording_function(cast_inputs):
    seen: dict = {}

    class Product(onnxnn.autograd.Function):
        @staticmethod
        @custom_fwd(device_type="cpu", cast_inputs=cast_inputs)
        def forward(ctx, x, w):
            seen["forward inputs"] = (x.dtype, w.dtype)
            seen["forward enabled"] = is_autocast_enabled("cpu")
            ctx.save_for_backward(x, w)
            return x @ w

        @staticmethod
        @custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            seen["backward enabled"] = is_autocast_enabled("cpu")
            grad_x = grad @ w.t()
            seen["backward product"] = grad_x.dtype
            return grad_x, x.t() @ grad

    return Product, seen


# cast_inputs, x's dtype, then what PyTorch's custom_fwd/custom_bwd give: forward's input dtypes,
# whether autocast is on in forward and backward, the output dtype and the product in backward.
CUSTOM_CASES = [
    (None, "float32", ("float32", "float32"), True, "low", "low"),
    ("float32", "float32", ("float32", "float32"), False, "float32", "float32"),
    ("float32", "low", ("float32", "float32"), False, "float32", "float32"),
    ("float64", "float32", ("float64", "float64"), False, "float64", "float64"),
]


@pytest.mark.parametrize("low_name", LOW)
@pytest.mark.parametrize("cast_inputs, x_dtype, forward_inputs, enabled, output, backward_product", CUSTOM_CASES)
def test_custom_fwd_and_bwd(cast_inputs, x_dtype, forward_inputs, enabled, output, backward_product, low_name):
    low = getattr(onnxnn, low_name)

    def named(name):
        return low if name == "low" else getattr(onnxnn, name)

    Product, seen = _recording_function(None if cast_inputs is None else named(cast_inputs))
    x = onnxnn.randn(3, 4).to(named(x_dtype)).requires_grad_()
    w = onnxnn.randn(4, 2, requires_grad=True)
    with autocast("cpu", dtype=low):
        y = Product.apply(x, w)
    y.float().sum().backward()  # backward outside the region: custom_bwd re-enters forward's state
    assert seen["forward inputs"] == tuple(named(name) for name in forward_inputs)
    assert seen["forward enabled"] is enabled and seen["backward enabled"] is enabled
    assert y.dtype is named(output)
    assert seen["backward product"] is named(backward_product)
    assert x.grad.dtype is x.dtype and w.grad.dtype is onnxnn.float32


def test_custom_fwd_outside_a_region_changes_nothing():
    Product, seen = _recording_function(onnxnn.float32)
    x = onnxnn.randn(3, 4, dtype=onnxnn.bfloat16, requires_grad=True)
    y = Product.apply(x, onnxnn.randn(4, 2, dtype=onnxnn.bfloat16))
    y.sum().backward()
    assert seen["forward inputs"] == (onnxnn.bfloat16, onnxnn.bfloat16) and y.dtype is onnxnn.bfloat16
    assert not seen["forward enabled"] and not seen["backward enabled"]


@pytest.mark.parametrize("decorator", [custom_fwd, custom_bwd])
def test_custom_decorators_want_a_string_device_type(decorator):
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        decorator(lambda ctx: None, device_type=onnxnn.device("cpu"))


# ---------------------------------------------------------------- device strings and the policy table
def test_a_device_string_with_an_index_names_its_device_type():
    region = autocast("cpu:0")
    assert region.device == "cpu:0"  # kept as given, as PyTorch's
    with region:
        assert is_autocast_enabled("cpu") and is_autocast_enabled("cpu:0")
        assert (onnxnn.randn(2, 3) @ onnxnn.randn(3, 2)).dtype is onnxnn.bfloat16
    assert not is_autocast_enabled("cpu")
    assert onnxnn.amp.is_autocast_available("cpu:0") and not onnxnn.amp.is_autocast_available("tpu")


@pytest.mark.parametrize("device_type", ["cpu:x", "cpu:", "cpu:-1"])
def test_a_malformed_device_string_is_refused(device_type):
    with pytest.raises(RuntimeError, match="Invalid device string"):
        autocast(device_type)


@pytest.mark.parametrize(
    "device_type, op_type, policy",
    [
        ("cpu", "AffineGrid", LOWER_PRECISION_FP),
        ("cpu", "Einsum", None),  # decided inside einsum: lowered only through a contraction
        ("cpu", "Concat", None),  # cat promotes its inputs itself; pad, diag... keep their dtype
        ("cpu", "ScatterElements", None),  # scatter, scatter_add, index_add are unlisted on the CPU
        ("cpu", "ScatterND", None),
        ("cuda", "Einsum", LOWER_PRECISION_FP),
        ("cuda", "ScatterElements", PROMOTE),  # scatter_add is on PyTorch's CUDA promote list
        ("cuda", "AffineGrid", LOWER_PRECISION_FP),
    ],
)
def test_policy_table(device_type, op_type, policy):
    assert policy_for(device_type, op_type) == policy
    assert policy_for("cpu", "Identity", "CosineEmbeddingLossBackward0") == FP32
