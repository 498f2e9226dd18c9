"""``onnxnn.utils.checkpoint``: both variants recompute in backward (the function is called again),
give the gradients of the plain computation (dropout's masks drawn again from the saved random
state), reach parameters, keyword and nested arguments as PyTorch's rules say, and keep nothing
recorded inside the function for backward."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.runtime import internal
from onnxnn.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential

VARIANTS = [pytest.param(True, id="reentrant"), pytest.param(False, id="non-reentrant")]
F64 = onnxnn.float64


class Block(nn.Module):
    """Linear, tanh, dropout, linear: counts its calls and keeps the Value of its hidden activation."""

    def __init__(self, dropout: float = 0.5):
        super().__init__()
        self.first, self.second = nn.Linear(4, 6).double(), nn.Linear(6, 3).double()
        self.dropout = nn.Dropout(dropout)
        self.calls = 0
        self.hidden: list = []

    def forward(self, x):
        self.calls += 1
        hidden = self.first(x).tanh()
        self.hidden.append(internal.value_of(hidden))  # the Value, not a handle: it holds nothing
        return self.second(self.dropout(hidden))


def gradients(block: Block, x) -> list[np.ndarray]:
    found = [x.grad] + [parameter.grad for parameter in block.parameters()]
    return [g.numpy().copy() for g in found]


def plain_and_checkpointed(use_reentrant: bool, seed: int = 3):
    """Gradients of sum(f(x)^2) without and with checkpointing, from the same random state."""
    onnxnn.manual_seed(0)
    block, x = Block(), onnxnn.randn(5, 4, dtype=F64, requires_grad=True)
    onnxnn.manual_seed(seed)
    (block(x) ** 2).sum().backward()
    expected = gradients(block, x)
    block.zero_grad(set_to_none=True)
    x.grad = None
    block.calls = 0
    onnxnn.manual_seed(seed)
    output = checkpoint(block, x, use_reentrant=use_reentrant)
    calls_after_forward = block.calls
    (output**2).sum().backward()
    return expected, gradients(block, x), calls_after_forward, block.calls


@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_backward_calls_the_function_again_and_matches_the_plain_gradients(use_reentrant):
    expected, found, calls_after_forward, calls = plain_and_checkpointed(use_reentrant)
    assert (calls_after_forward, calls) == (1, 2)
    # Same ops on the same values (the dropout mask drawn again from the saved state): bitwise equal.
    for plain, checkpointed in zip(expected, found):
        np.testing.assert_array_equal(checkpointed, plain)


@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_without_preserve_rng_state_the_masks_differ_and_the_generator_moves(use_reentrant):
    y = onnxnn.ones(1000, dtype=F64, requires_grad=True)
    dropout = nn.Dropout(0.5)
    for preserve in (True, False):
        y.grad = None
        onnxnn.manual_seed(5)
        output = checkpoint(dropout, y, use_reentrant=use_reentrant, preserve_rng_state=preserve)
        kept_forward = output.detach().numpy() != 0
        output.sum().backward()
        kept_backward = y.grad.numpy() != 0
        after_backward = onnxnn.rand(3).numpy()
        onnxnn.manual_seed(5)
        dropout(onnxnn.ones(1000))
        undisturbed = onnxnn.rand(3).numpy()  # the draw after the forward pass alone
        # 1000 masks of p=0.5 agree by chance with probability 2**-1000.
        assert (kept_forward == kept_backward).all() == preserve
        assert np.array_equal(after_backward, undisturbed) == preserve


@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_intermediates_are_not_kept_when_the_forward_pass_is_computed(use_reentrant):
    onnxnn.manual_seed(0)
    block, x = Block(dropout=0.0), onnxnn.randn(5, 4, dtype=F64, requires_grad=True)
    loss = (block(x) ** 2).sum()
    loss.item()  # computes the forward pass, and what backward nodes keep for backward
    assert block.hidden[-1].realized  # without checkpointing the activation is computed and kept
    loss = (checkpoint(block, x, use_reentrant=use_reentrant) ** 2).sum()
    loss.item()
    assert not block.hidden[-1].realized  # with it, nothing keeps the activation: not computed to keep
    loss.backward()
    recomputed = block.hidden[-1]
    block.first.weight.grad.numpy()
    assert not recomputed.realized  # computed inside the run of the gradients, not kept either


def test_non_reentrant_arguments_keywords_structures_and_autograd_grad():
    x = onnxnn.tensor([0.5, -1.0, 2.0], dtype=F64, requires_grad=True)
    w = onnxnn.tensor([1.5, 2.0, -0.5], dtype=F64, requires_grad=True)

    def function(inputs, scale, *, shift):
        return {"value": (inputs["x"] * scale + shift).sin(), "rest": [(inputs["x"] * w).sum(), "label"]}

    output = checkpoint(function, {"x": x}, 2.0, shift=w, use_reentrant=False)
    assert output["rest"][1] == "label"
    gx, gw = onnxnn.autograd.grad(output["value"].sum() + output["rest"][0], (x, w))
    a, b = x.detach().numpy(), w.detach().numpy()
    np.testing.assert_allclose(gx.numpy(), 2 * np.cos(2 * a + b) + b, rtol=1e-15)
    np.testing.assert_allclose(gw.numpy(), np.cos(2 * a + b) + a, rtol=1e-15)


def test_non_reentrant_reaches_parameters_when_no_input_requires_grad():
    linear = nn.Linear(3, 2).double()
    output = checkpoint(linear, onnxnn.ones(4, 3, dtype=F64), use_reentrant=False)
    assert output.requires_grad
    output.sum().backward()
    np.testing.assert_array_equal(linear.weight.grad.numpy(), np.full((2, 3), 4.0))
    np.testing.assert_array_equal(linear.bias.grad.numpy(), np.full(2, 4.0))


def test_reentrant_warns_and_gives_no_gradient_when_no_input_requires_grad():
    linear = nn.Linear(3, 2).double()
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True. Gradients will be None"):
        output = checkpoint(linear, onnxnn.ones(4, 3, dtype=F64), use_reentrant=True)
    assert not output.requires_grad


def test_non_reentrant_closed_over_tensor_with_history_gets_its_gradient():
    x = onnxnn.tensor([0.5, -1.0, 2.0], dtype=F64, requires_grad=True)
    w = onnxnn.tensor([1.5, 2.0, -0.5], dtype=F64, requires_grad=True)
    scaled = x * 3  # from outside the function, with a history
    output = checkpoint(lambda b: (scaled * b).sum(), w, use_reentrant=False)
    (output + scaled.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * w.detach().numpy() + 3, rtol=1e-15)
    np.testing.assert_allclose(w.grad.numpy(), 3 * x.detach().numpy(), rtol=1e-15)


def test_non_reentrant_nested_and_double_backward():
    x = onnxnn.tensor([0.5, -1.0, 2.0], dtype=F64, requires_grad=True)
    calls = [0, 0]

    def inner(b):
        calls[1] += 1
        return b.exp()

    def outer(a):
        calls[0] += 1
        return checkpoint(inner, a * 2, use_reentrant=False).sum()

    checkpoint(outer, x, use_reentrant=False).backward()
    # outer: forward and backward; inner: in outer's two calls and in its own backward.
    assert calls == [2, 3]
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * x.detach().numpy()), rtol=1e-15)
    cubed = checkpoint(lambda a: (a**3).sum(), x, use_reentrant=False)
    (first,) = onnxnn.autograd.grad(cubed, x, create_graph=True)
    (second,) = onnxnn.autograd.grad(first.sum(), x)
    np.testing.assert_allclose(second.numpy(), 6 * x.detach().numpy(), rtol=1e-15)


@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_tuple_outputs_non_tensor_arguments_and_retain_graph(use_reentrant):
    x = onnxnn.tensor([0.5, -1.0, 2.0], dtype=F64, requires_grad=True)
    output, index = checkpoint(lambda a, power: (a**power, a.argmax()), x, 3, use_reentrant=use_reentrant)
    assert index.item() == 2 and not index.requires_grad
    output.sum().backward(retain_graph=True)
    output.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 3 * x.detach().numpy() ** 2, rtol=1e-15)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        output.sum().backward()


@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_checkpoint_sequential_matches_and_recomputes_all_but_the_last_segment(use_reentrant):
    onnxnn.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(3, 3).double() for _ in range(6)])
    calls = [0] * 6
    for index, layer in enumerate(model):
        layer.register_forward_hook(
            lambda module, args, output, index=index: calls.__setitem__(index, calls[index] + 1)
        )
    x = onnxnn.randn(2, 3, dtype=F64, requires_grad=True)
    model(x).sum().backward()
    expected = [p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy().copy()]
    model.zero_grad()
    x.grad = None
    calls[:] = [0] * 6
    checkpoint_sequential(model, 3, x, use_reentrant=use_reentrant).sum().backward()
    assert calls == [2, 2, 2, 2, 1, 1]  # three segments of two layers, the last one not checkpointed
    found = [p.grad.numpy() for p in model.parameters()] + [x.grad.numpy()]
    for plain, checkpointed in zip(expected, found):
        np.testing.assert_array_equal(checkpointed, plain)


def test_determinism_check():
    x = onnxnn.tensor([0.5, -1.0, 2.0], dtype=F64, requires_grad=True)

    def growing(calls):
        def function(a):
            calls[0] += 1
            return a[: calls[0]].sum()

        return function

    output = checkpoint(growing([0]), x, use_reentrant=False, debug=True)
    with pytest.raises(CheckpointError, match="have different metadata than during the forward pass") as error:
        output.backward()
    assert "saved metadata: {'shape': (1,)" in str(error.value)
    assert "Operations recorded in the recomputation: ['Slice', 'ReduceSum']" in str(error.value)
    calls = [0]

    def longer_again(a):
        calls[0] += 1
        return a.sum() if calls[0] == 1 else a.exp().sum()

    with pytest.raises(CheckpointError, match="A different number of tensors was recorded"):
        checkpoint(longer_again, x, use_reentrant=False).backward()
    x.grad = None
    checkpoint(growing([0]), x, use_reentrant=False, determinism_check="none").backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0, 0.0])  # the recomputation's slice


def test_context_fn_wraps_the_first_call_and_the_recomputation():
    x = onnxnn.tensor([1.0, 2.0], dtype=F64, requires_grad=True)
    events: list = []

    class Named:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            events.append(self.name)

        def __exit__(self, *exc_info):
            return None

    output = checkpoint(lambda a: a.exp(), x, use_reentrant=False, context_fn=lambda: (Named("first"), Named("again")))
    output.sum().backward()
    assert events == ["first", "again"]


def test_argument_errors_and_the_use_reentrant_warning():
    x = onnxnn.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="the use_reentrant parameter should be passed explicitly"):
        checkpoint(lambda a: a * 2, x)
    with pytest.warns(UserWarning, match="checkpoint_sequential: the use_reentrant parameter"):
        checkpoint_sequential([nn.ReLU()], 1, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # passed explicitly: no warning
        checkpoint(lambda a: a * 2, x, use_reentrant=False)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(lambda a, scale=1: a * scale, x, scale=2, use_reentrant=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: other"):
        checkpoint_sequential([nn.ReLU()], 1, x, use_reentrant=False, other=1)
    with pytest.raises(ValueError, match="Passing `context_fn` or `debug` is only supported when use_reentrant=False."):
        checkpoint(lambda a: a, x, use_reentrant=True, debug=True)
    with pytest.raises(ValueError, match=r"determinism_check should be one of \['default', 'none'\], but got full"):
        checkpoint(lambda a: a, x, use_reentrant=False, determinism_check="full")
    with pytest.raises(RuntimeError, match="none of output has requires_grad=True"):
        checkpoint(lambda a: a.detach(), x, use_reentrant=True).sum().backward()


def test_under_no_grad_nothing_is_recorded():
    x = onnxnn.ones(2, requires_grad=True)
    with onnxnn.no_grad():
        assert not checkpoint(lambda a: a * 2, x, use_reentrant=False).requires_grad
        assert not checkpoint(lambda a: a * 2, x, use_reentrant=True).requires_grad


def test_reachable_as_onnxnn_utils_checkpoint():
    assert onnxnn.utils.checkpoint.checkpoint is checkpoint


@pytest.mark.parametrize(
    "differentiate",
    [
        lambda loss, x: onnxnn.autograd.grad(loss, x),
        lambda loss, x: loss.backward(inputs=[x]),
    ],
    ids=["autograd.grad", "backward(inputs=...)"],
)
def test_reentrant_refuses_backwards_that_accumulate_into_some_leaves_only(differentiate):
    layer = onnxnn.nn.Linear(3, 3)
    x = onnxnn.randn(2, 3, requires_grad=True)
    loss = checkpoint(layer, x, use_reentrant=True).sum()
    with pytest.raises(RuntimeError, match="use_reentrant=True, onnxnn.utils.checkpoint is incompatible with .grad()"):
        differentiate(loss, x)
    assert layer.weight.grad is None  # nothing was written that the caller did not ask for


# (autocast's dtype in the first call or None, autocast's dtype around backward or None): the
# recomputation runs as the first call did, whatever surrounds the backward.
AUTOCAST_CASES = [
    pytest.param(onnxnn.bfloat16, None, id="bfloat16-forward"),
    pytest.param(onnxnn.float16, None, id="float16-forward"),
    pytest.param(None, onnxnn.bfloat16, id="bfloat16-around-backward-only"),
    pytest.param(onnxnn.bfloat16, onnxnn.float16, id="bfloat16-forward-float16-around-backward"),
]


def _autocast(dtype):
    return onnxnn.autocast("cpu", dtype=dtype, enabled=dtype is not None)


@pytest.mark.parametrize("forward_dtype, backward_dtype", AUTOCAST_CASES)
@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_the_recomputation_runs_under_the_first_calls_autocast_state(use_reentrant, forward_dtype, backward_dtype):
    # PyTorch re-enters the first call's autocast state around the recomputation; without it the
    # recomputed ops are float32 where the first call's were cast, and the backward fails or
    # differentiates another computation.
    onnxnn.manual_seed(0)
    layers = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    hidden_dtypes = []  # the dtype of the first layer's output at each call, the recomputation's last
    layers[0].register_forward_hook(lambda module, inputs, output: hidden_dtypes.append(output.dtype))
    x_data = onnxnn.randn(5, 4)
    weights = onnxnn.arange(15.0).reshape(5, 3)
    results = []
    for checkpointed in (False, True):
        layers.zero_grad()
        x = x_data.clone().requires_grad_()
        with _autocast(forward_dtype):
            output = checkpoint(layers, x, use_reentrant=use_reentrant) if checkpointed else layers(x)
        with _autocast(backward_dtype):
            (output.float() * weights).sum().backward()
        assert onnxnn.is_autocast_enabled("cpu") is False
        results.append((output.dtype, [x.grad.numpy()] + [p.grad.numpy() for p in layers.parameters()]))
    (plain_dtype, plain), (checkpointed_dtype, recomputed) = results
    assert checkpointed_dtype is plain_dtype is (forward_dtype or onnxnn.float32)
    assert hidden_dtypes == [forward_dtype or onnxnn.float32] * 3  # plain call, first call, recomputation
    for expected, actual in zip(plain, recomputed):
        assert actual.dtype == np.float32
        # The same ops on the same values: only the grouping of runs differs, which may round a
        # low-precision intermediate to its neighbour (one unit in its last place, 2**-7 for bfloat16).
        np.testing.assert_allclose(actual, expected, rtol=2.0**-7, atol=2.0**-7 * np.abs(expected).max())
