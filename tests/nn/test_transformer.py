"""Transformer layers, stacks and the full Transformer.

Forward values come from numpy formulas composed of the attention reference of test_attention
(itself checked against the softmax formula) with LayerNorm and the feedforward network, in
float64, so the tolerance is float64's rounding of a few chained dot products; gradients from
float64 finite differences; exported graphs run in plain onnxruntime.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import assert_within, gamma

import onnxnn
from onnxnn import nn

from .layer_checks import EXECUTORS, exported_output
from .test_attention import mha_reference

RNG = np.random.default_rng(131)
D, NHEAD, FF = 8, 2, 12
ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / np.sqrt(2))),
}


def _layer_norm(x, norm):
    weight = norm.weight.detach().numpy()
    bias = norm.bias.detach().numpy() if norm.bias is not None else 0
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + norm.eps) * weight + bias


def _linear(x, linear):
    return x @ linear.weight.detach().numpy().T + (0 if linear.bias is None else linear.bias.detach().numpy())


def _feedforward(x, layer, activation):
    return _linear(ACTIVATIONS[activation](_linear(x, layer.linear1)), layer.linear2)


def encoder_layer_reference(layer, x, activation, mask=None, padding=None, batch_first=False):
    def attend(y):
        return mha_reference(
            layer.self_attn,
            y,
            y,
            y,
            key_padding_mask=padding,
            attn_mask=mask,
            need_weights=False,
            batch_first=batch_first,
        )[0]

    if layer.norm_first:
        x = x + attend(_layer_norm(x, layer.norm1))
        return x + _feedforward(_layer_norm(x, layer.norm2), layer, activation)
    x = _layer_norm(x + attend(x), layer.norm1)
    return _layer_norm(x + _feedforward(x, layer, activation), layer.norm2)


def decoder_layer_reference(layer, x, memory, activation, tgt_mask=None, memory_padding=None):
    def self_attend(y):
        return mha_reference(layer.self_attn, y, y, y, attn_mask=tgt_mask, need_weights=False)[0]

    def cross_attend(y):
        return mha_reference(
            layer.multihead_attn, y, memory, memory, key_padding_mask=memory_padding, need_weights=False
        )[0]

    if layer.norm_first:
        x = x + self_attend(_layer_norm(x, layer.norm1))
        x = x + cross_attend(_layer_norm(x, layer.norm2))
        return x + _feedforward(_layer_norm(x, layer.norm3), layer, activation)
    x = _layer_norm(x + self_attend(x), layer.norm1)
    x = _layer_norm(x + cross_attend(x), layer.norm2)
    return _layer_norm(x + _feedforward(x, layer, activation), layer.norm3)


def _bound(expected):
    # float64: a handful of chained dot products of at most 3 * FF terms, and LayerNorm's division
    # by a standard deviation that is O(1) here.
    return gamma(16 * FF, np.float64) * 256 * max(1.0, float(np.max(np.abs(expected))))


def _randomize_biases(module):
    # Init leaves the attention biases and LayerNorm's affine at 0 and 1: give them values that matter.
    with onnxnn.no_grad():
        for name, parameter in module.named_parameters():
            if parameter.dim() == 1:
                parameter.copy_(onnxnn.tensor(RNG.standard_normal(tuple(parameter.shape)) * 0.5))
    return module


ENCODER_CASES = {
    "post-norm relu": dict(),
    "pre-norm gelu without bias": dict(norm_first=True, activation="gelu", bias=False),
    "batch first": dict(batch_first=True),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", list(ENCODER_CASES))
def test_encoder_layer_matches_the_residual_formula(name, executor):
    options = ENCODER_CASES[name]
    layer = _randomize_biases(nn.TransformerEncoderLayer(D, NHEAD, FF, dropout=0.0, **options).double())
    batch_first = options.get("batch_first", False)
    x = RNG.standard_normal((3, 5, D) if batch_first else (5, 3, D))
    mask = np.triu(np.ones((5, 5), bool), 1)
    padding = np.zeros((3, 5), bool)
    padding[2, 4] = True
    expected = encoder_layer_reference(layer, x, options.get("activation", "relu"), mask, padding, batch_first)
    with onnxnn.set_executor(executor):
        actual = layer(onnxnn.tensor(x), src_mask=onnxnn.tensor(mask), src_key_padding_mask=onnxnn.tensor(padding))
        actual = actual.detach().numpy()  # realized on ``executor`` (onnxnn is lazy)
    assert_within(actual, expected, _bound(expected))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_the_residual_formula(norm_first, executor):
    layer = _randomize_biases(nn.TransformerDecoderLayer(D, NHEAD, FF, dropout=0.0, norm_first=norm_first).double())
    x, memory = RNG.standard_normal((4, 2, D)), RNG.standard_normal((6, 2, D))
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=onnxnn.float64)
    padding = np.array([[False] * 6, [False] * 4 + [True] * 2])
    expected = decoder_layer_reference(layer, x, memory, "relu", tgt_mask.numpy(), padding)
    with onnxnn.set_executor(executor):
        actual = layer(
            onnxnn.tensor(x),
            onnxnn.tensor(memory),
            tgt_mask=tgt_mask,
            memory_key_padding_mask=onnxnn.tensor(padding),
            tgt_is_causal=True,
        )
        actual = actual.detach().numpy()  # realized on ``executor`` (onnxnn is lazy)
    assert_within(actual, expected, _bound(expected))


def test_callable_activation_is_used_in_the_feedforward_network():
    layer = nn.TransformerEncoderLayer(D, NHEAD, FF, dropout=0.0, activation=lambda t: t.tanh()).double()
    ACTIVATIONS["tanh"] = np.tanh
    x = RNG.standard_normal((5, 3, D))
    expected = encoder_layer_reference(layer, x, "tanh")
    assert_within(layer(onnxnn.tensor(x)).detach().numpy(), expected, _bound(expected))


def test_encoder_stack_applies_copies_of_the_layer_then_the_norm():
    layer = nn.TransformerEncoderLayer(D, NHEAD, FF, dropout=0.0).double()
    encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(D).double(), enable_nested_tensor=False)
    assert encoder.layers[0] is not layer and encoder.layers[0].linear1.weight is not encoder.layers[1].linear1.weight
    x = RNG.standard_normal((5, 3, D))
    expected = x
    for copy in encoder.layers:
        expected = encoder_layer_reference(copy, expected, "relu")
    expected = _layer_norm(expected, encoder.norm)
    assert_within(encoder(onnxnn.tensor(x)).detach().numpy(), expected, _bound(expected))


def test_encoder_layer_gradients_match_finite_differences():
    layer = _randomize_biases(nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, norm_first=True).double())
    mask = nn.Transformer.generate_square_subsequent_mask(3, dtype=onnxnn.float64)
    check_gradients(lambda x: layer(x, src_mask=mask, is_causal=True), [RNG.standard_normal((3, 2, 4))])


def test_decoder_layer_gradients_match_finite_differences():
    layer = _randomize_biases(nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0).double())
    check_gradients(lambda x, m: layer(x, m), [RNG.standard_normal((3, 2, 4)), RNG.standard_normal((4, 2, 4))])


def test_generate_square_subsequent_mask_is_minus_infinity_above_the_diagonal():
    expected = np.where(np.triu(np.ones((4, 4), bool), 1), -np.inf, 0.0)
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    assert mask.dtype is onnxnn.float32
    np.testing.assert_array_equal(mask.numpy(), expected)


def test_transformer_parameters_are_named_as_pytorch_and_xavier_initialized():
    model = nn.Transformer(D, NHEAD, 1, 1, FF)
    names = set(model.state_dict())
    for name in (
        "encoder.layers.0.self_attn.in_proj_weight",
        "encoder.layers.0.linear1.weight",
        "encoder.norm.weight",
        "decoder.layers.0.multihead_attn.out_proj.weight",
        "decoder.layers.0.norm3.bias",
        "decoder.norm.bias",
    ):
        assert name in names
    # xavier_uniform_ draws from U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
    weight = model.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.max(np.abs(weight)) <= math.sqrt(6 / (D + FF))


def test_encoder_layer_exports_to_onnxruntime():
    layer = _randomize_biases(nn.TransformerEncoderLayer(D, NHEAD, FF, dropout=0.0)).eval()
    x = onnxnn.tensor(RNG.standard_normal((5, 3, D)), dtype=onnxnn.float32)
    expected = layer(x).detach().numpy()
    # float32 this time: the same chain's rounding, in float32's unit roundoff.
    bound = gamma(16 * FF, np.float32) * 256 * max(1.0, float(np.max(np.abs(expected))))
    assert_within(exported_output(layer, x), expected, bound)


@pytest.mark.parametrize(
    "build, error, message",
    [
        (
            lambda: nn.TransformerEncoderLayer(D, NHEAD, activation="tanh"),
            RuntimeError,
            "activation should be relu/gelu",
        ),
        (
            lambda: nn.Transformer(D, NHEAD, 1, 1, FF)(onnxnn.randn(5, 3, D), onnxnn.randn(4, 2, D)),
            RuntimeError,
            "the batch number of src and tgt must be equal",
        ),
        (
            lambda: nn.Transformer(D, NHEAD, 1, 1, FF)(onnxnn.randn(5, 3, D), onnxnn.randn(4, 3, 6)),
            RuntimeError,
            "the feature number of src and tgt must be equal to d_model",
        ),
        (
            lambda: nn.TransformerEncoderLayer(D, NHEAD, FF)(onnxnn.randn(5, 3, D), src_mask=onnxnn.zeros(4, 4)),
            RuntimeError,
            "The shape of the 2D attn_mask is",
        ),
    ],
)
def test_transformer_rejects_bad_arguments_as_pytorch_does(build, error, message):
    with pytest.raises(error, match=message):
        build()


@pytest.mark.parametrize(
    "options", [dict(), dict(norm_first=True, activation="gelu", bias=False), dict(batch_first=True)]
)
def test_transformer_equals_pytorch_with_its_state_dict(options):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    reference = torch.nn.Transformer(D, NHEAD, 2, 2, FF, dropout=0.0, **options).double().eval()
    model = nn.Transformer(D, NHEAD, 2, 2, FF, dropout=0.0, **options).double().eval()
    assert list(model.state_dict()) == list(reference.state_dict())
    model.load_state_dict({key: onnxnn.tensor(value.detach().numpy()) for key, value in reference.state_dict().items()})
    shape = (lambda seq: (3, seq, D)) if options.get("batch_first") else (lambda seq: (seq, 3, D))
    src, tgt = RNG.standard_normal(shape(5)), RNG.standard_normal(shape(4))
    padding = np.zeros((3, 5), bool)
    padding[1, 3:] = True
    expected = (
        reference(
            torch.tensor(src),
            torch.tensor(tgt),
            tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64),
            memory_key_padding_mask=torch.tensor(padding),
        )
        .detach()
        .numpy()
    )
    actual = (
        model(
            onnxnn.tensor(src),
            onnxnn.tensor(tgt),
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(4, dtype=onnxnn.float64),
            memory_key_padding_mask=onnxnn.tensor(padding),
        )
        .detach()
        .numpy()
    )
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-12)


def _nested_case(batch_first=True, left_aligned=True):
    layer = _randomize_biases(nn.TransformerEncoderLayer(D, NHEAD, FF, dropout=0.0, batch_first=batch_first).double())
    encoder = nn.TransformerEncoder(layer, 2, norm=_randomize_biases(nn.LayerNorm(D).double()))
    x = RNG.standard_normal((3, 5, D) if batch_first else (5, 3, D))
    padding = np.zeros((3, 5), bool)
    padding[1, 3:] = True
    if not left_aligned:
        padding[2, 0] = True
    return encoder.eval(), x, padding


def _padded_path_reference(encoder, x, padding, batch_first=True):
    out = x
    for layer in encoder.layers:
        out = encoder_layer_reference(layer, out, "relu", padding=padding, batch_first=batch_first)
    return out


@pytest.mark.parametrize("mask_kind", ["bool", "float", "float, finite"])
def test_encoder_zeroes_padding_positions_where_pytorch_takes_the_nested_tensor_path(mask_kind):
    # A float mask pads where it is nonzero, as PyTorch builds its nested tensor from the mask's
    # logical_not: a finite nonzero entry (0.5) pads there as -inf does, it is no additive bias.
    encoder, x, padding = _nested_case()
    mask = {"bool": padding, "float": np.where(padding, -np.inf, 0.0), "float, finite": np.where(padding, 0.5, 0.0)}
    mask = mask[mask_kind]
    with onnxnn.no_grad():
        actual = encoder(onnxnn.tensor(x), src_key_padding_mask=onnxnn.tensor(mask)).numpy()
    expected = _padded_path_reference(encoder, x, padding)
    expected = _layer_norm(np.where(padding[..., None], 0.0, expected), encoder.norm)
    assert_within(actual, expected, _bound(expected))


@pytest.mark.parametrize("condition", ["grad enabled", "not batch first", "not left aligned", "training"])
def test_encoder_keeps_padding_positions_where_pytorch_takes_the_padded_path(condition):
    encoder, x, padding = _nested_case(
        batch_first=condition != "not batch first", left_aligned=condition != "not left aligned"
    )
    if condition == "training":
        encoder.train()
    with onnxnn.set_grad_enabled(condition == "grad enabled"):
        actual = encoder(onnxnn.tensor(x), src_key_padding_mask=onnxnn.tensor(padding)).detach().numpy()
    expected = _layer_norm(_padded_path_reference(encoder, x, padding, condition != "not batch first"), encoder.norm)
    assert_within(actual, expected, _bound(expected))


def test_encoder_warns_as_pytorch_when_nested_tensors_cannot_be_used():
    with pytest.warns(UserWarning, match="use_nested_tensor is False because encoder_layer.norm_first was True"):
        nn.TransformerEncoder(nn.TransformerEncoderLayer(D, NHEAD, FF, norm_first=True), 1)


@pytest.mark.parametrize("left_aligned", [True, False])
def test_encoder_equals_pytorch_on_and_off_its_nested_tensor_path(left_aligned):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    reference = (
        torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(D, NHEAD, FF, batch_first=True), 2, norm=torch.nn.LayerNorm(D)
        )
        .double()
        .eval()
    )
    _, x, padding = _nested_case(left_aligned=left_aligned)
    encoder = (
        nn.TransformerEncoder(nn.TransformerEncoderLayer(D, NHEAD, FF, batch_first=True), 2, norm=nn.LayerNorm(D))
        .double()
        .eval()
    )
    encoder.load_state_dict(
        {key: onnxnn.tensor(value.detach().numpy()) for key, value in reference.state_dict().items()}
    )
    with torch.no_grad():
        expected = reference(torch.tensor(x), src_key_padding_mask=torch.tensor(padding)).numpy()
    # On the nested path the padding positions are LayerNorm(0): its bias.
    took_nested_path = np.allclose(expected[1, 3:], reference.norm.bias.detach().numpy(), rtol=0, atol=1e-12)
    assert took_nested_path == left_aligned
    with onnxnn.no_grad():
        actual = encoder(onnxnn.tensor(x), src_key_padding_mask=onnxnn.tensor(padding)).numpy()
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-12)


def test_transformer_unbatched_inputs_equal_a_batch_of_one():
    model = _randomize_biases(nn.Transformer(D, NHEAD, 1, 1, FF, dropout=0.0).double()).eval()
    src, tgt = RNG.standard_normal((5, D)), RNG.standard_normal((4, D))
    padding = np.array([False] * 4 + [True])
    unbatched = (
        model(
            onnxnn.tensor(src),
            onnxnn.tensor(tgt),
            src_key_padding_mask=onnxnn.tensor(padding),
            memory_key_padding_mask=onnxnn.tensor(padding),
        )
        .detach()
        .numpy()
    )
    batched = (
        model(
            onnxnn.tensor(src[:, None]),
            onnxnn.tensor(tgt[:, None]),
            src_key_padding_mask=onnxnn.tensor(padding[None]),
            memory_key_padding_mask=onnxnn.tensor(padding[None]),
        )
        .detach()
        .numpy()
    )
    # The same arithmetic on the same numbers, arranged with one more axis.
    assert_within(unbatched, batched[:, 0], _bound(batched))
