"""scaled_dot_product_attention, multi_head_attention_forward and MultiheadAttention.

Forward values come from the numpy formulas below (softmax(Q K^T * scale + bias) V, heads split
and merged as PyTorch documents); gradients from float64 finite differences; exported graphs run
in plain onnxruntime. Tolerance (``attention_bound``): the scores are dot products of ``E`` terms,
off by ``2 gamma(E) * scale * |q| |k|``; softmax turns an absolute score error ``d`` into a relative
weight error of at most ``2 d`` plus a few roundings; the output sums ``S`` products, adding
``gamma(S)`` relative to ``|w| |v|``.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import assert_within, gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.nn.functional._attention import packed_self_attention

from .layer_checks import EXECUTORS, exported_output, forward_on

RNG = np.random.default_rng(13)


def _softmax(x):
    shifted = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def sdpa_reference(q, k, v, mask=None, is_causal=False, scale=None, enable_gqa=False):
    """softmax(Q K^T * scale + bias) V with PyTorch's mask conventions; rows with no key left give 0."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    if enable_gqa:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    scores = q @ np.swapaxes(k, -1, -2) * scale
    bias = np.zeros(scores.shape[-2:])
    if is_causal:
        bias = np.where(np.tril(np.ones(bias.shape, bool)), 0.0, -np.inf)
    if mask is not None:
        bias = bias + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    scores = scores + bias
    dead = np.all(np.isneginf(scores), axis=-1, keepdims=True)
    weights = np.where(dead, 0.0, _softmax(np.where(dead, 0.0, scores)))
    return weights @ v, weights, scale


def attention_bound(q, k, v, weights, scale, dtype):
    """The rounding bound described in the module docstring, elementwise on the output."""
    if k.shape[-3] != q.shape[-3] and q.ndim >= 3:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    score_error = 2 * gamma(q.shape[-1], dtype) * scale * np.max(np.abs(q) @ np.swapaxes(np.abs(k), -1, -2))
    relative = 2 * score_error + gamma(v.shape[-2] + 16, dtype)
    return 2 * relative * (np.abs(weights) @ np.abs(v)) + 2 * gamma(4, dtype) * np.abs(weights @ v)


def _bool_mask(shape, rate=0.3):
    return RNG.random(shape) > rate


SDPA_CASES = {
    "plain": dict(q=(2, 3, 4, 8), k=(2, 3, 5, 8), v=(2, 3, 5, 6)),
    "bool mask broadcast": dict(q=(2, 3, 4, 8), k=(2, 3, 5, 8), v=(2, 3, 5, 6), mask=("bool", (4, 5))),
    "float mask": dict(q=(2, 2, 4, 8), k=(2, 2, 5, 8), v=(2, 2, 5, 8), mask=("float", (2, 1, 4, 5))),
    "causal": dict(q=(1, 2, 5, 4), k=(1, 2, 5, 4), v=(1, 2, 5, 4), is_causal=True),
    "causal rectangular": dict(q=(1, 2, 3, 4), k=(1, 2, 6, 4), v=(1, 2, 6, 4), is_causal=True),
    "scale": dict(q=(2, 4, 8), k=(2, 4, 8), v=(2, 4, 3), scale=0.7),
    "grouped-query": dict(q=(1, 4, 3, 8), k=(1, 2, 5, 8), v=(1, 2, 5, 8), enable_gqa=True),
    "grouped-query, key and value head counts differ": dict(
        q=(1, 4, 3, 8), k=(1, 2, 5, 8), v=(1, 1, 5, 6), enable_gqa=True
    ),
    "fully masked row": dict(
        q=(1, 1, 3, 4),
        k=(1, 1, 4, 4),
        v=(1, 1, 4, 4),
        mask=("fixed", np.array([[False] * 4, [True, False, True, False], [True] * 4])),
    ),
}


def _sdpa_inputs(case):
    arrays = [RNG.standard_normal(case[name]) for name in ("q", "k", "v")]
    mask = None
    if "mask" in case:
        kind, spec = case["mask"]
        mask = spec if kind == "fixed" else _bool_mask(spec) if kind == "bool" else RNG.standard_normal(spec)
    options = {name: case[name] for name in ("is_causal", "scale", "enable_gqa") if name in case}
    return arrays, mask, options


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", list(SDPA_CASES))
def test_scaled_dot_product_attention_matches_the_softmax_formula(name, executor):
    (q, k, v), mask, options = _sdpa_inputs(SDPA_CASES[name])
    expected, weights, scale = sdpa_reference(q, k, v, mask, **options)
    if mask is None:
        actual = forward_on(executor, lambda a, b, c: F.scaled_dot_product_attention(a, b, c, **options), q, k, v)
    else:
        actual = forward_on(
            executor, lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, m, **options), q, k, v, mask
        )
    assert not np.any(np.isnan(actual))
    assert_within(actual, expected, attention_bound(q, k, v, weights, scale, np.float32))


@pytest.mark.parametrize("autocast", [False, True], ids=["float16", "float16 autocast"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_float16_attention_computes_its_scores_in_float32(executor, autocast):
    # Rows of magnitude ~40 over 64 features: Q K^T passes float16's largest value (65504) before the
    # scaling. PyTorch's CPU kernel computes the scores and softmax in float32 (finite); float16 scores
    # were inf and their softmax NaN.
    q = np.random.default_rng(5).standard_normal((1, 4, 64)).astype(np.float32) * 40
    v = np.random.default_rng(6).standard_normal((1, 4, 64)).astype(np.float32)
    q, v = q.astype(np.float16).astype(np.float32), v.astype(np.float16).astype(np.float32)  # what float16 holds
    with onnxnn.set_executor(executor):
        if autocast:
            with onnxnn.autocast("cpu", dtype=onnxnn.float16):
                output = F.scaled_dot_product_attention(onnxnn.tensor(q), onnxnn.tensor(q), onnxnn.tensor(v))
        else:
            half = [onnxnn.tensor(array).half() for array in (q, q, v)]
            output = F.scaled_dot_product_attention(*half)
        assert output.dtype is onnxnn.float16
        actual = output.float().numpy()
    expected, weights, _ = sdpa_reference(q.astype(np.float64), q.astype(np.float64), v.astype(np.float64))
    # float32 scores and softmax, the weights rounded to float16 (2^-11 relative each) before the product
    # with V, and the output rounded once.
    float32_bound = attention_bound(q, q, v, weights, 1 / 8, np.float32)
    assert_within(actual, expected, float32_bound + 2.0**-11 * (weights @ np.abs(v) + np.abs(expected)))


@pytest.mark.parametrize(
    "name", ["bool mask broadcast", "float mask", "causal rectangular", "grouped-query", "fully masked row"]
)
def test_scaled_dot_product_attention_gradients_match_finite_differences(name):
    (q, k, v), mask, options = _sdpa_inputs(SDPA_CASES[name])
    if mask is None:
        check_gradients(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, **options), [q, k, v])
    else:
        check_gradients(
            lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, m, **options),
            [q, k, v, mask],
            requires_grad=[True, True, True, False],
        )


def test_scaled_dot_product_attention_dropout_one_drops_every_weight():
    q = onnxnn.tensor(RNG.standard_normal((1, 2, 3, 4)))
    out = F.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    np.testing.assert_array_equal(out.numpy(), np.zeros((1, 2, 3, 4)))


def test_scaled_dot_product_attention_dropout_keeps_rows_as_scaled_subsets():
    # With dropout each output row is (kept weights / (1 - p)) @ v, so it lies in v's row span scaled by 2.
    onnxnn.manual_seed(0)
    q = RNG.standard_normal((1, 1, 6, 4))
    v = np.eye(6)  # the output row then shows the dropped-and-rescaled weights themselves
    out = F.scaled_dot_product_attention(onnxnn.tensor(q), onnxnn.tensor(q), onnxnn.tensor(v), dropout_p=0.5).numpy()
    _, weights, _ = sdpa_reference(q, q, v)
    kept = out != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(out[kept], 2 * weights[kept], rtol=1e-12)


SDPA_ERRORS = [
    (
        dict(attn_mask=np.zeros((3, 3), np.int64)),
        RuntimeError,
        "Expected attn_mask dtype to be bool or float .*attn_mask.dtype: long int and  query.dtype: float",
    ),
    (dict(attn_mask=np.zeros((3, 3), np.float64)), RuntimeError, "attn_mask.dtype: double and  query.dtype: float"),
    (
        dict(attn_mask=np.zeros((4, 3), bool)),
        RuntimeError,
        "The size of tensor a \\(3\\) must match the size of tensor b \\(4\\) at non-singleton dimension 2",
    ),
    (dict(key_shape=(1, 2, 3, 5)), RuntimeError, "Expected size for first two dimensions of batch2 tensor"),
    (dict(key_shape=(1, 3, 3, 4), enable_gqa=True), RuntimeError, "Number of heads in key and value must divide"),
    (dict(key_shape=(4,)), RuntimeError, "Expected query, key, and value to all be  at least 2 dimensional"),
    (
        dict(key_dtype=onnxnn.float64),
        RuntimeError,
        "Expected query, key, and value to have the same dtype, but got query.dtype: float key.dtype: double",
    ),
]


@pytest.mark.parametrize("options, error, message", SDPA_ERRORS)
def test_scaled_dot_product_attention_rejects_bad_masks_and_shapes_as_pytorch_does(options, error, message):
    options = dict(options)
    q = onnxnn.randn(1, 2, 3, 4)
    k = onnxnn.randn(*options.pop("key_shape", (1, 2, 3, 4)), dtype=options.pop("key_dtype", onnxnn.float32))
    if "attn_mask" in options:
        options["attn_mask"] = onnxnn.tensor(options["attn_mask"])
    with pytest.raises(error, match=message):
        F.scaled_dot_product_attention(q, k, k if k.shape[-1] == 4 else q, **options)


# --- multi-head attention ---------------------------------------------------------------------------


def mha_reference(
    module,
    query,
    key,
    value,
    key_padding_mask=None,
    attn_mask=None,
    need_weights=True,
    average_attn_weights=True,
    batch_first=False,
):
    """PyTorch's documented multi-head attention, from the module's parameters, in float64 numpy."""
    p = {name: t.detach().numpy().astype(np.float64) for name, t in module.named_parameters()}
    if batch_first:
        query, key, value = (np.swapaxes(a, 0, 1) for a in (query, key, value))
    e, h = module.embed_dim, module.num_heads
    if "in_proj_weight" in p:
        wq, wk, wv = np.split(p["in_proj_weight"], 3)
    else:
        wq, wk, wv = p["q_proj_weight"], p["k_proj_weight"], p["v_proj_weight"]
    bq, bk, bv = np.split(p["in_proj_bias"], 3) if "in_proj_bias" in p else (0, 0, 0)
    q, k, v = query @ wq.T + bq, key @ wk.T + bk, value @ wv.T + bv
    length, batch = q.shape[:2]
    bias = np.zeros((batch, h, length, k.shape[0]))
    if attn_mask is not None:
        m = np.where(attn_mask, -np.inf, 0.0) if attn_mask.dtype == bool else attn_mask
        bias = bias + (m if m.ndim == 2 else m.reshape(batch, h, length, -1))
    if key_padding_mask is not None:
        bias = bias + np.where(key_padding_mask, -np.inf, 0.0)[:, None, None, :]
    if "bias_k" in p:
        k = np.concatenate([k, np.broadcast_to(p["bias_k"], (1, batch, e))])
        v = np.concatenate([v, np.broadcast_to(p["bias_v"], (1, batch, e))])
        bias = np.concatenate([bias, np.zeros(bias.shape[:-1] + (1,))], axis=-1)
    if module.add_zero_attn:
        k = np.concatenate([k, np.zeros((1, batch, e))])
        v = np.concatenate([v, np.zeros((1, batch, e))])
        bias = np.concatenate([bias, np.zeros(bias.shape[:-1] + (1,))], axis=-1)
    heads = [a.reshape(a.shape[0], batch, h, e // h).transpose(1, 2, 0, 3) for a in (q, k, v)]  # (N, H, L, D)
    weights = _softmax(heads[0] @ np.swapaxes(heads[1], -1, -2) / np.sqrt(e // h) + bias)
    out = (weights @ heads[2]).transpose(2, 0, 1, 3).reshape(length, batch, e)
    out = out @ p["out_proj.weight"].T + p.get("out_proj.bias", 0)
    if batch_first:
        out = np.swapaxes(out, 0, 1)
    if not need_weights:
        return out, None
    return out, weights.mean(axis=1) if average_attn_weights else weights


MHA_CASES = {
    "packed": ({}, {}),
    "kdim and vdim": (dict(kdim=6, vdim=5), {}),
    "no bias": (dict(bias=False), dict(need_weights=False)),
    "bias_kv and zero attention with masks": (
        dict(add_bias_kv=True, add_zero_attn=True),
        dict(key_padding_mask="bool", attn_mask="bool2d"),
    ),
    "float 3-D mask, per-head weights": ({}, dict(attn_mask="float3d", average_attn_weights=False)),
    "batch first, padding, no weights": (dict(batch_first=True), dict(key_padding_mask="bool", need_weights=False)),
}
L, S, N, E, H = 4, 5, 3, 8, 2


def _mha_arrays(ctor, call):
    batch_first = ctor.get("batch_first", False)
    shape = (lambda seq, dim: (N, seq, dim)) if batch_first else (lambda seq, dim: (seq, N, dim))
    arrays = [
        RNG.standard_normal(shape(L, E)),
        RNG.standard_normal(shape(S, ctor.get("kdim", E))),
        RNG.standard_normal(shape(S, ctor.get("vdim", E))),
    ]
    kwargs = dict(call)
    if kwargs.get("key_padding_mask") == "bool":
        mask = np.zeros((N, S), bool)
        mask[1, 3:] = True
        kwargs["key_padding_mask"] = mask
    if kwargs.get("attn_mask") == "bool2d":
        kwargs["attn_mask"] = np.triu(np.ones((L, S), bool), 2)
    elif kwargs.get("attn_mask") == "float3d":
        kwargs["attn_mask"] = RNG.standard_normal((N * H, L, S))
    return arrays, kwargs


def _module(ctor):
    onnxnn.manual_seed(3)
    module = nn.MultiheadAttention(E, H, **ctor).double()
    if module.in_proj_bias is not None:  # zeros by init: make the biases matter in the check
        with onnxnn.no_grad():
            module.in_proj_bias.copy_(onnxnn.tensor(RNG.standard_normal(3 * E)))
    return module


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", list(MHA_CASES))
def test_multihead_attention_matches_the_per_head_formula(name, executor):
    ctor, call = MHA_CASES[name]
    module = _module(ctor)
    arrays, kwargs = _mha_arrays(ctor, call)
    expected, expected_weights = mha_reference(module, *arrays, batch_first=ctor.get("batch_first", False), **kwargs)
    tensor_kwargs = {
        key: onnxnn.tensor(value) if isinstance(value, np.ndarray) else value for key, value in kwargs.items()
    }
    with onnxnn.set_executor(executor):
        out, weights = module(*(onnxnn.tensor(a) for a in arrays), **tensor_kwargs)
        _assert_attention_equals(out, weights, expected, expected_weights)  # realizes on ``executor``


def _assert_attention_equals(out, weights, expected, expected_weights) -> None:
    # float64 throughout: each value is a chain of a few dot products of at most 3 * E terms.
    bound = gamma(8 * E, np.float64) * 64 * max(1.0, np.max(np.abs(expected)))
    assert_within(out.detach().numpy(), expected, bound)
    if expected_weights is None:
        assert weights is None
    else:
        assert_within(weights.detach().numpy(), expected_weights, bound)


def test_multihead_attention_unbatched_input_equals_a_batch_of_one():
    module = _module({})
    q, k, v = (RNG.standard_normal((L, E)), RNG.standard_normal((S, E)), RNG.standard_normal((S, E)))
    out, weights = module(onnxnn.tensor(q), onnxnn.tensor(k), onnxnn.tensor(v))
    expected, expected_weights = mha_reference(module, q[:, None], k[:, None], v[:, None])
    bound = gamma(8 * E, np.float64) * 64 * max(1.0, np.max(np.abs(expected)))
    assert_within(out.detach().numpy(), expected[:, 0], bound)
    assert_within(weights.detach().numpy(), expected_weights[0], bound)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multi_head_attention_forward_gradients_match_finite_differences(need_weights):
    q, k, v = (RNG.standard_normal((3, 2, 4)) for _ in range(3))
    in_w, in_b = RNG.standard_normal((12, 4)) * 0.5, RNG.standard_normal(12)
    out_w, out_b = RNG.standard_normal((4, 4)) * 0.5, RNG.standard_normal(4)
    bias_k, bias_v = RNG.standard_normal((1, 1, 4)), RNG.standard_normal((1, 1, 4))
    padding = np.array([[False, False, True], [False, False, False]])

    def attend(q, k, v, in_w, in_b, out_w, out_b, bias_k, bias_v, padding):
        return F.multi_head_attention_forward(
            q,
            k,
            v,
            4,
            2,
            in_w,
            in_b,
            bias_k,
            bias_v,
            True,
            0.0,
            out_w,
            out_b,
            key_padding_mask=padding,
            need_weights=need_weights,
        )[0]

    check_gradients(
        attend, [q, k, v, in_w, in_b, out_w, out_b, bias_k, bias_v, padding], requires_grad=[True] * 9 + [False]
    )


# Self-attention (query, key and value one tensor, no masks) takes the packed path: one Gemm
# projects queries, keys and values together (nn.functional._attention.packed_self_attention).
SELF_ATTENTION_CASES = {
    "sequence first, averaged weights": ({}, {}),
    "batch first, per-head weights": (dict(batch_first=True), dict(average_attn_weights=False)),
    "no bias, no weights": (dict(bias=False), dict(need_weights=False)),
    "batch first, no weights": (dict(batch_first=True), dict(need_weights=False)),
}


class _SelfAttention(nn.Module):
    def __init__(self, attention):
        super().__init__()
        self.attention = attention

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", list(SELF_ATTENTION_CASES))
def test_self_attention_takes_the_packed_path_and_matches_the_per_head_formula(name, executor):
    ctor, call = SELF_ATTENTION_CASES[name]
    module = _module(ctor)
    batch_first = ctor.get("batch_first", False)
    x = RNG.standard_normal((N, L, E) if batch_first else (L, N, E))
    expected, expected_weights = mha_reference(module, x, x, x, batch_first=batch_first, **call)
    tensor = onnxnn.tensor(x)
    with onnxnn.set_executor(executor):
        out, weights = module(tensor, tensor, tensor, **call)
        _assert_attention_equals(out, weights, expected, expected_weights)  # realizes on ``executor``
    exported = to_onnx(_SelfAttention(module).eval(), (tensor,))
    assert [node.op_type for node in exported.graph.node].count("Gemm") == 2  # in and out projections


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_packed_self_attention_gradients_match_finite_differences(batch_first, need_weights):
    x = RNG.standard_normal((2, 3, 4))
    in_w, in_b = RNG.standard_normal((12, 4)) * 0.5, RNG.standard_normal(12)
    out_w, out_b = RNG.standard_normal((4, 4)) * 0.5, RNG.standard_normal(4)

    def attend(x, in_w, in_b, out_w, out_b):
        output, weights = packed_self_attention(
            x, 2, in_w, in_b, out_w, out_b, need_weights=need_weights, batch_first=batch_first
        )
        return output if weights is None else output.sum() + (weights * weights).sum()

    check_gradients(attend, [x, in_w, in_b, out_w, out_b])


def test_multihead_attention_parameters_are_named_and_shaped_as_pytorch():
    shapes = {name: tuple(t.shape) for name, t in nn.MultiheadAttention(8, 2, add_bias_kv=True).state_dict().items()}
    assert shapes == {
        "in_proj_weight": (24, 8),
        "in_proj_bias": (24,),
        "bias_k": (1, 1, 8),
        "bias_v": (1, 1, 8),
        "out_proj.weight": (8, 8),
        "out_proj.bias": (8,),
    }
    shapes = {name: tuple(t.shape) for name, t in nn.MultiheadAttention(8, 2, kdim=3, vdim=5).state_dict().items()}
    assert shapes == {
        "q_proj_weight": (8, 8),
        "k_proj_weight": (8, 3),
        "v_proj_weight": (8, 5),
        "in_proj_bias": (24,),
        "out_proj.weight": (8, 8),
        "out_proj.bias": (8,),
    }
    module = nn.MultiheadAttention(8, 2)
    np.testing.assert_array_equal(module.in_proj_bias.detach().numpy(), np.zeros(24))
    np.testing.assert_array_equal(module.out_proj.bias.detach().numpy(), np.zeros(8))
    assert isinstance(module.out_proj, nn.Linear)


def test_multihead_attention_exports_to_onnxruntime():
    module = _module(dict(add_bias_kv=True)).float()
    inputs = [onnxnn.tensor(RNG.standard_normal((L, N, E)), dtype=onnxnn.float32) for _ in range(3)]
    expected = module(*inputs)[0].detach().numpy()
    actual = exported_output(module, *inputs)
    assert_within(actual, expected, gamma(8 * E, np.float32) * 64 * max(1.0, np.max(np.abs(expected))))


MHA_ERRORS = [
    (
        dict(attn_mask=np.zeros((L, L), bool)),
        RuntimeError,
        r"The shape of the 2D attn_mask is .*4, 4.*"
        r"should be \(4, 5\)",
    ),
    (dict(attn_mask=np.zeros((N, L, S), bool)), RuntimeError, "The shape of the 3D attn_mask is"),
    (dict(attn_mask=np.zeros((1, 1, L, S), bool)), AssertionError, "expected `attn_mask` to be `None`, 2-D or 3-D"),
    (dict(attn_mask=np.zeros((L, S), np.int64)), AssertionError, "only bool and floating types of attn_mask"),
    (
        dict(key_padding_mask=np.zeros((N, S), np.int32)),
        AssertionError,
        "only bool and floating types of key_padding_mask",
    ),
    (dict(key_padding_mask=np.zeros((N, L), bool)), AssertionError, "expecting key_padding_mask shape of"),
    (dict(is_causal=True), RuntimeError, "Need attn_mask if specifying the is_causal hint"),
]


@pytest.mark.parametrize("kwargs, error, message", MHA_ERRORS)
def test_multihead_attention_rejects_bad_masks_as_pytorch_does(kwargs, error, message):
    module = nn.MultiheadAttention(E, H)
    inputs = [onnxnn.randn(L, N, E), onnxnn.randn(S, N, E), onnxnn.randn(S, N, E)]
    kwargs = {key: onnxnn.tensor(value) if isinstance(value, np.ndarray) else value for key, value in kwargs.items()}
    with pytest.raises(error, match=message):
        module(*inputs, **kwargs)


def test_separate_projections_reject_keys_of_another_width_naming_the_weight():
    module = nn.MultiheadAttention(E, H, kdim=6, vdim=6)
    key, value = onnxnn.randn(S, N, 5), onnxnn.randn(S, N, 6)
    with pytest.raises(AssertionError, match=r"expecting key weights shape of \(8, 5\)"):
        module(onnxnn.randn(L, N, E), key, value)


STATIC_ERRORS = [
    # static_k / static_v shapes: (N * H, S, E // H) expected
    (dict(static_k=(N * H + 1, S, E // H)), r"expecting static_k.size\(0\) of 6, but got 7"),
    (dict(static_k=(N * H, S, E // H + 1)), r"expecting static_k.size\(2\) of 4, but got 5"),
    (dict(static_v=(N, S, E // H)), r"expecting static_v.size\(0\) of 6, but got 3"),
]


@pytest.mark.parametrize("statics, message", STATIC_ERRORS)
def test_static_keys_and_values_of_the_wrong_shape_are_named(statics, message):
    module = nn.MultiheadAttention(E, H)
    query = onnxnn.randn(L, N, E)
    statics = {name: onnxnn.randn(*shape) for name, shape in statics.items()}
    with pytest.raises(AssertionError, match=message):
        F.multi_head_attention_forward(
            query, query, query, E, H, module.in_proj_weight, module.in_proj_bias, None, None, False, 0.0,
            module.out_proj.weight, module.out_proj.bias, **statics,
        )  # fmt: skip


def test_multihead_attention_rejects_bad_head_counts():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(8, 3)
    with pytest.raises(ValueError, match="embed_dim and num_heads must be greater than 0"):
        nn.MultiheadAttention(8, 0)


@pytest.mark.parametrize("name", list(MHA_CASES))
def test_multihead_attention_equals_pytorch_with_its_state_dict(name):
    torch = pytest.importorskip("torch")
    ctor, call = MHA_CASES[name]
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(E, H, **ctor).double()
    module = nn.MultiheadAttention(E, H, **ctor).double()
    module.load_state_dict(
        {key: onnxnn.tensor(value.detach().numpy()) for key, value in reference.state_dict().items()}
    )
    arrays, kwargs = _mha_arrays(ctor, call)
    expected = reference(
        *(torch.tensor(a) for a in arrays),
        **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()},
    )
    actual = module(
        *(onnxnn.tensor(a) for a in arrays),
        **{k: onnxnn.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()},
    )
    np.testing.assert_allclose(actual[0].detach().numpy(), expected[0].detach().numpy(), rtol=0, atol=1e-12)
    if expected[1] is not None:
        np.testing.assert_allclose(actual[1].detach().numpy(), expected[1].detach().numpy(), rtol=0, atol=1e-12)


def test_multihead_attention_warns_on_mismatched_mask_types_as_pytorch_does():
    module = nn.MultiheadAttention(E, H)
    x = onnxnn.randn(L, N, E)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        module(x, x, x, key_padding_mask=onnxnn.zeros(N, L, dtype=onnxnn.bool), attn_mask=onnxnn.zeros(L, L))


def test_multihead_attention_dropout_acts_in_training_only():
    onnxnn.manual_seed(1)
    module = _module(dict(dropout=0.5))
    x = onnxnn.tensor(RNG.standard_normal((L, N, E)))
    _, expected = mha_reference(module, *(x.numpy(),) * 3, average_attn_weights=False)
    _, dropped = module(x, x, x, average_attn_weights=False)
    dropped = dropped.detach().numpy()
    kept = dropped != 0
    assert 0 < kept.sum() < kept.size
    # Kept weights are scaled by 1 / (1 - p); float64 rounding of the softmax only.
    np.testing.assert_allclose(dropped[kept], 2 * expected[kept], rtol=1e-12)
    module.eval()
    _, weights = module(x, x, x, average_attn_weights=False)
    assert_within(weights.detach().numpy(), expected, gamma(8 * E, np.float64) * 64)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
def test_attention_runs_in_half_precision(dtype, executor):
    q = RNG.standard_normal((1, 2, 3, 4))
    mask = np.tril(np.ones((3, 3), bool))
    with onnxnn.set_executor(executor):
        out = F.scaled_dot_product_attention(*(onnxnn.tensor(q, dtype=dtype),) * 3, attn_mask=onnxnn.tensor(mask))
        actual = out.float().numpy()  # realized on ``executor`` (onnxnn is lazy)
    assert out.dtype is dtype
    expected, _, _ = sdpa_reference(q, q, q, mask)
    # Smoke test: a coarse bound of a few units of the half type's precision on O(1) values.
    np.testing.assert_allclose(
        actual,
        expected,
        atol=16 * float(np.finfo(np.float16).eps) if dtype is onnxnn.float16 else 16 * 2.0**-7,
    )
