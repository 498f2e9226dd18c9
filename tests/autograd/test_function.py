"""onnxnn.autograd.Function: custom forward/backward, checked against finite differences and numpy.

Gradients of differentiable functions are compared with float64 central differences
(``tests/gradcheck.py``: tolerances rtol 1e-5, atol 1e-7 from its truncation and rounding
analysis); straight-through and hand-built cases against the numpy formula of what backward
returns, exactly where backward only copies or scales by exact factors.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.autograd import Function, once_differentiable
from onnxnn.runtime.fastpath import backward_replay
from tests.gradcheck import check_gradients


def _leaf(values):
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64, requires_grad=True)


# ----------------------------------------------------------------------------- custom functions
class Exp(Function):
    """exp, saving its output: backward is grad * exp(x) from the saved output."""

    @staticmethod
    def forward(ctx, x):
        result = x.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * result


class Cube(Function):
    """x ** 3, saving its input: backward 3 x^2 grad uses differentiable ops (double backward works)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x * x


class StraightThroughClamp(Function):
    """clamp(x, low, high) whose backward passes the gradient straight through (non-tensor args)."""

    @staticmethod
    def forward(ctx, x, low, high):
        return x.clamp(low, high)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None, None


class SinCos(Function):
    """Two outputs, sin x and cos x: backward combines both output gradients."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, grad_sin, grad_cos):
        (x,) = ctx.saved_tensors
        return grad_sin * x.cos() - grad_cos * x.sin()


class ScaledProduct(Function):
    """a * b * factor with a non-tensor factor between the tensors, given by keyword or position."""

    @staticmethod
    def forward(ctx, a, factor, b):
        ctx.save_for_backward(a, b)
        ctx.factor = factor
        return a * b * factor

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b * ctx.factor, None, grad_output * a * ctx.factor


class ExpNoCtx(Function):
    """exp in the setup_context style: forward takes no ctx."""

    @staticmethod
    def forward(x):
        return x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * result


def _sin_cos_combined(x):
    sin, cos = SinCos.apply(x)
    return sin * 2.0 + cos * cos


@pytest.mark.parametrize(
    "function, arrays",
    [
        (Exp.apply, [np.array([-1.5, 0.0, 0.7, 2.0])]),
        (ExpNoCtx.apply, [np.array([[-1.5, 0.0], [0.7, 2.0]])]),
        (Cube.apply, [np.array([-1.2, 0.3, 1.7])]),
        (_sin_cos_combined, [np.array([-2.0, 0.1, 1.3])]),
        (lambda a, b: ScaledProduct.apply(a, 2.5, b), [np.array([1.0, -2.0, 0.5]), np.array([0.3, 4.0, -1.0])]),
        (lambda a, b: ScaledProduct.apply(a, factor=-1.5, b=b), [np.array([1.0, -2.0]), np.array([0.3, 4.0])]),
        (lambda a: Exp.apply(a * 2.0).sum(dim=0), [np.array([[0.1, 0.2, -0.3], [1.0, -1.0, 0.5]])]),
    ],
    ids=["exp", "setup_context", "cube", "two_outputs", "non_tensor_arg", "keyword_args", "inside_a_graph"],
)
def test_custom_gradients_match_finite_differences(function, arrays):
    check_gradients(function, [a.astype(np.float64) for a in arrays])


def test_custom_exp_values_and_gradient_match_numpy():
    values = np.array([-1.0, 0.0, 0.5, 3.0])
    x = _leaf(values)
    y = Exp.apply(x)
    assert y.grad_fn.name() == "ExpBackward"
    assert y.grad_fn.next_functions[0][0].variable is x  # the edge to x's AccumulateGrad
    np.testing.assert_allclose(y.detach().numpy(), np.exp(values), rtol=1e-15)
    y.backward(onnxnn.tensor([1.0, 2.0, 3.0, 4.0], dtype=onnxnn.float64))
    # One product per element: the gradient is exact up to one rounding of exp's.
    np.testing.assert_allclose(x.grad.numpy(), np.array([1.0, 2.0, 3.0, 4.0]) * np.exp(values), rtol=1e-15)


def test_straight_through_clamp_passes_the_gradient_unchanged():
    values = np.array([-3.0, -0.5, 0.2, 0.9, 4.0])
    x = _leaf(values)
    y = StraightThroughClamp.apply(x, -1.0, 1.0)
    np.testing.assert_array_equal(y.detach().numpy(), np.clip(values, -1.0, 1.0))
    cotangent = np.array([0.5, -1.0, 2.0, 3.0, -4.0])
    y.backward(onnxnn.tensor(cotangent, dtype=onnxnn.float64))
    np.testing.assert_array_equal(x.grad.numpy(), cotangent)  # the true gradient would be 0 outside [-1, 1]


def test_multiple_outputs_and_an_unused_output_gets_a_zero_gradient():
    seen = []

    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, grad_first, grad_second):
            seen.append((grad_first.numpy().copy(), grad_second.numpy().copy()))
            return grad_first * 2.0 + grad_second * 3.0

    x = _leaf([1.0, -1.0])
    first, second = Split.apply(x)
    assert first.grad_fn is second.grad_fn and (first.output_nr, second.output_nr) == (0, 1)
    first.sum().backward()
    np.testing.assert_array_equal(seen[0][0], [1.0, 1.0])
    np.testing.assert_array_equal(seen[0][1], [0.0, 0.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_materialize_grads_false_passes_none_for_outputs_without_gradient():
    seen = []

    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, grad_first, grad_second):
            seen.append((grad_first is None, grad_second is None))
            gradient = None
            for grad, scale in ((grad_first, 2.0), (grad_second, 3.0)):
                if grad is not None:
                    gradient = grad * scale if gradient is None else gradient + grad * scale
            return gradient

    x = _leaf([1.0, -1.0])
    _, second = Split.apply(x)
    second.sum().backward()
    assert seen == [(True, False)]
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_non_tensor_arguments_and_outputs_pass_through():
    seen = []

    class Describe(Function):
        @staticmethod
        def forward(ctx, x, label, power):
            ctx.power = power
            ctx.save_for_backward(x)
            return x**power, f"{label}:{power}"

        @staticmethod
        def backward(ctx, grad_output, grad_label):
            seen.append(grad_label)
            (x,) = ctx.saved_tensors
            return grad_output * ctx.power * x ** (ctx.power - 1), None, None

    x = _leaf([2.0, 3.0])
    y, label = Describe.apply(x, "square", 2)
    assert label == "square:2"
    y.sum().backward()
    assert seen == [None]
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 6.0])


def test_needs_input_grad_says_which_arguments_take_a_gradient():
    seen = []

    class Record(Function):
        @staticmethod
        def forward(ctx, a, scale, b):
            seen.append(ctx.needs_input_grad)
            return a * b * scale

        @staticmethod
        def backward(ctx, grad_output):
            seen.append(ctx.needs_input_grad)
            return grad_output, None, None

    a, b = _leaf([1.0]), onnxnn.tensor([2.0], dtype=onnxnn.float64)
    Record.apply(a, 2.0, b).sum().backward()
    assert seen == [(True, False, False), (True, False, False)]
    seen.clear()
    with onnxnn.no_grad():
        out = Record.apply(a, 2.0, b)
    assert seen == [(False, False, False)] and not out.requires_grad and out.grad_fn is None


def test_mark_non_differentiable_outputs_get_no_grad_fn():
    seen = []

    class DoubledWithMask(Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x > 0).to(x.dtype)
            ctx.mark_non_differentiable(mask)
            return x * 2.0, mask

        @staticmethod
        def backward(ctx, grad_output, grad_mask):
            seen.append(grad_mask.numpy().copy())
            return grad_output * 2.0

    x = _leaf([-1.0, 2.0])
    doubled, mask = DoubledWithMask.apply(x)
    assert doubled.requires_grad and doubled.grad_fn.name() == "DoubledWithMaskBackward"
    assert not mask.requires_grad and mask.grad_fn is None
    (doubled + mask).sum().backward()
    np.testing.assert_array_equal(seen[0], [0.0, 0.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_an_input_returned_unchanged_gets_a_new_handle_and_keeps_its_own_history():
    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 5.0

    x = _leaf([1.0, 2.0])
    y = Identity.apply(x)
    assert y is not x and x.is_leaf and y.grad_fn.name() == "IdentityBackward"
    assert y._value is x._value  # nothing recorded
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])


# ----------------------------------------------------------------------------- engine features
def test_create_graph_gives_second_derivatives_through_the_users_backward():
    values = np.array([-1.0, 0.5, 2.0])
    x = _leaf(values)
    (first,) = onnxnn.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert first.requires_grad
    (second,) = onnxnn.autograd.grad(first.sum(), x)
    # 3 x^2 and 6 x: a few exact-factor products, at most a few roundings apart.
    np.testing.assert_allclose(first.detach().numpy(), 3 * values**2, rtol=1e-15)
    np.testing.assert_allclose(second.numpy(), 6 * values, rtol=1e-15)
    # A saved output keeps the node as its history: d2/dx2 exp = exp.
    y = _leaf(values)
    (first,) = onnxnn.autograd.grad(Exp.apply(y).sum(), y, create_graph=True)
    first.sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), np.exp(values), rtol=1e-15)


def test_double_backward_matches_finite_differences_of_the_first_gradient():
    def first_gradient(x):
        # Finite differences evaluate it under no_grad on plain tensors: differentiate a leaf then.
        with onnxnn.enable_grad():
            leaf = x if x.requires_grad else x.detach().requires_grad_()
            (gradient,) = onnxnn.autograd.grad(
                (Cube.apply(leaf) * leaf.sin()).sum(), leaf, create_graph=x.requires_grad
            )
        return gradient

    check_gradients(first_gradient, [np.array([-0.7, 0.2, 1.1])])


def test_retain_graph_allows_a_second_backward_and_its_absence_frees_saved_tensors():
    values = np.array([0.5, -0.5])
    x = _leaf(values)
    y = Exp.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(values), rtol=1e-15)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_autograd_grad_and_backward_with_inputs_through_a_custom_function():
    a, b = _leaf([1.0, 2.0]), _leaf([3.0, -1.0])
    out = ScaledProduct.apply(a, 2.0, b).sum()
    grad_a, grad_b = onnxnn.autograd.grad(out, [a, b])
    np.testing.assert_array_equal(grad_a.numpy(), [6.0, -2.0])
    np.testing.assert_array_equal(grad_b.numpy(), [2.0, 4.0])
    assert a.grad is None and b.grad is None
    ScaledProduct.apply(a, 2.0, b).sum().backward(inputs=[b])
    assert a.grad is None
    np.testing.assert_array_equal(b.grad.numpy(), [2.0, 4.0])


def test_backward_receives_tensors_and_may_return_pending_values():
    seen = []

    class Twice(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, grad_output):
            seen.append(isinstance(grad_output, onnxnn.Tensor))
            return (grad_output * 2.0).exp().log()  # a pending chain, not realized here

    x = _leaf([1.0, 2.0])
    Twice.apply(x).sum().backward()
    assert seen == [True]
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0], rtol=1e-15)


def test_tensor_hooks_and_retain_grad_on_custom_outputs():
    x = _leaf([0.0, 1.0])
    y = Exp.apply(x)
    y.retain_grad()
    y.register_hook(lambda grad: grad * 10.0)
    y.sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [10.0, 10.0])
    np.testing.assert_allclose(x.grad.numpy(), 10.0 * np.exp([0.0, 1.0]), rtol=1e-15)


def test_the_backward_replay_never_takes_a_custom_function():
    x = _leaf([0.1, 0.2, 0.3])
    with onnxnn.set_fast_path(True):
        backward_replay.clear_templates()
        for step in range(4):
            x.grad = None
            (Exp.apply(x * (step + 1.0)) * 2.0).sum().backward()
            np.testing.assert_allclose(
                x.grad.numpy(), 2.0 * (step + 1.0) * np.exp((step + 1.0) * x.detach().numpy()), rtol=1e-14
            )
        info = backward_replay.replay_info()
    assert info["traced"] == 0 and info["replayed"] == 0 and info["templates"] == 0


def test_saved_tensor_changed_in_place_raises():
    x = _leaf([1.0, 2.0])
    hidden = x * 1.0
    out = Cube.apply(hidden)
    with onnxnn.no_grad():
        hidden.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*saved by CubeBackward"):
        out.sum().backward()


def test_once_differentiable_refuses_double_backward():
    class OnceExp(Function):
        @staticmethod
        def forward(ctx, x):
            result = x.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        @once_differentiable
        def backward(ctx, grad_output):
            (result,) = ctx.saved_tensors
            return grad_output * result

    x = _leaf([0.0, 1.0])
    OnceExp.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.0, 1.0]), rtol=1e-15)
    direction = _leaf([1.0, 1.0])
    (first,) = onnxnn.autograd.grad(OnceExp.apply(x), x, grad_outputs=direction, create_graph=True)
    with pytest.raises(
        RuntimeError, match="trying to differentiate twice a function that was marked with @once_differentiable"
    ):
        first.sum().backward()


# ----------------------------------------------------------------------------- errors
class _ReturnsTooMany(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, grad_output


class _ReturnsTooFew(Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class _GradientForANumber(Function):
    @staticmethod
    def forward(ctx, x, scale):
        return x * scale

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, grad_output


class _WrongShape(Function):
    @staticmethod
    def forward(ctx, x):
        return x.sum()

    @staticmethod
    def backward(ctx, grad_output):
        return onnxnn.ones(5, dtype=onnxnn.float64)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda x: _ReturnsTooMany.apply(x),
            RuntimeError,
            r"function _ReturnsTooManyBackward returned an incorrect number of gradients \(expected 1, got 2\)",
        ),
        (
            lambda x: _ReturnsTooFew.apply(x, x),
            RuntimeError,
            r"function _ReturnsTooFewBackward returned an incorrect number of gradients \(expected 2, got 1\)",
        ),
        (
            lambda x: _GradientForANumber.apply(x, 2.0),
            RuntimeError,
            (
                "returned a gradient different than None at position 2, but the corresponding forward input was not a "
                "Variable"
            ),
        ),
        (
            lambda x: _WrongShape.apply(x),
            RuntimeError,
            r"returned an invalid gradient at index 0 - got \[5\] but expected shape compatible with \[2\]",
        ),
    ],
    ids=["too_many", "too_few", "gradient_for_a_number", "wrong_shape"],
)
def test_backward_returning_wrong_gradients_raises_pytorchs_errors(call, error, message):
    x = _leaf([1.0, 2.0])
    with pytest.raises(error, match=message):
        call(x).sum().backward()


def test_trailing_none_gradients_beyond_the_inputs_are_allowed():
    class Extra(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 2.0, None, None

    x = _leaf([1.0])
    Extra.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0])


def test_calling_an_instance_is_the_legacy_api_and_raises():
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward method"):
        Exp()(_leaf([1.0]))


# ----------------------------------------------------------------------------- module hooks
class _ExpLayer(nn.Module):
    """y = Exp(x * w): a module around a custom Function."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(onnxnn.tensor([0.5, -1.0, 2.0], dtype=onnxnn.float64))

    def forward(self, x):
        return Exp.apply(x * self.weight)


def test_module_full_backward_hooks_see_grad_input_and_grad_output():
    module = _ExpLayer()
    captured = {}

    def pre_hook(module, grad_output):
        captured["pre"] = [g.numpy().copy() for g in grad_output]

    def hook(module, grad_input, grad_output):
        captured["grad_input"] = [g.numpy().copy() for g in grad_input]
        captured["grad_output"] = [g.numpy().copy() for g in grad_output]

    module.register_full_backward_pre_hook(pre_hook)
    module.register_full_backward_hook(hook)
    values = np.array([0.3, -0.2, 0.1])
    cotangent = np.array([1.0, 2.0, -3.0])
    x = _leaf(values)
    out = module(x)
    assert out.grad_fn.name() == "BackwardHookFunctionBackward"
    out.backward(onnxnn.tensor(cotangent, dtype=onnxnn.float64))
    weight = module.weight.detach().numpy()
    expected = cotangent * np.exp(values * weight) * weight  # d/dx of exp(x w), one rounding per product
    np.testing.assert_array_equal(captured["pre"][0], cotangent)
    np.testing.assert_array_equal(captured["grad_output"][0], cotangent)
    np.testing.assert_allclose(captured["grad_input"][0], expected, rtol=1e-14)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-14)


def test_module_hook_replacing_grad_input_reaches_the_input():
    module = _ExpLayer()
    module.register_full_backward_hook(lambda m, grad_input, grad_output: (grad_input[0] * 0.0 + 7.0,))
    x = _leaf([0.3, -0.2, 0.1])
    module(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [7.0, 7.0, 7.0])


def test_training_steps_with_custom_functions_and_hooks_leave_no_cyclic_garbage():
    module = _ExpLayer()
    module.register_full_backward_hook(lambda m, grad_input, grad_output: None)
    optimizer = onnxnn.optim.SGD(module.parameters(), lr=0.01)
    x = onnxnn.tensor([0.3, -0.2, 0.1], dtype=onnxnn.float64)

    def step():
        optimizer.zero_grad()
        Cube.apply(module(x)).sum().backward()
        optimizer.step()

    for _ in range(3):
        step()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(5):
            step()
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()
