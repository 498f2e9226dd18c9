"""``onnxnn.autograd.gradcheck`` and ``gradgradcheck``: correct gradients pass, and each way backward
can be wrong is caught with PyTorch's error (Jacobians from the formulas written here)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxnn
from onnxnn.autograd import GradcheckError, gradcheck, gradgradcheck

X = np.array([0.5, -1.2, 2.0])
Y = np.array([[1.0, 2.0, -0.5], [0.3, -0.7, 1.5]])


def leaf(array, requires_grad=True, dtype=onnxnn.float64):
    return onnxnn.tensor(array, dtype=dtype, requires_grad=requires_grad)


class WrongSquare(onnxnn.autograd.Function):
    """x**2 with the gradient of x**2 / 2: backward returns x * g instead of 2 x * g."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * x


class Drifting(onnxnn.autograd.Function):
    """2 x whose backward scales by 1e-9 more on each call: not deterministic."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        Drifting.calls += 1
        return grad_output * (2 + Drifting.calls * 1e-9)


class Offset(onnxnn.autograd.Function):
    """2 x whose backward adds a constant: not multiplied by grad_output."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2 + 1.0


class RefusesMissingGradients(onnxnn.autograd.Function):
    """2 x whose backward asks for None gradients and fails on them (``fail``) or returns ones."""

    fail = True

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        if grad_output is None:
            if RefusesMissingGradients.fail:
                raise RuntimeError("no gradient")
            return onnxnn.ones(3, dtype=onnxnn.float64)
        return grad_output * 2


class FirstOrderCube(onnxnn.autograd.Function):
    """x**3 whose backward is right but not differentiable in x (it reads a detached x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x.detach() ** 2


CORRECT = {
    "elementwise": (lambda a: a.sin() * a.exp(), (X,)),
    "two inputs, reduction": (lambda a, b: (a.sin() * b).sum(0), (X, Y)),
    "two outputs": (lambda a, b: (a * b, (a + b).exp()), (X, Y)),
    "matmul": (lambda b: b @ b.t(), (Y,)),
}


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_gradients_pass(name, fast_mode):
    function, arrays = CORRECT[name]
    assert gradcheck(function, tuple(leaf(a) for a in arrays), fast_mode=fast_mode) is True


def test_wrong_gradient_shows_both_jacobians():
    x = leaf([1.0, 2.0])
    with pytest.raises(GradcheckError) as error:
        gradcheck(WrongSquare.apply, (x,))
    message = str(error.value)
    assert message.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:")
    # d(x^2)/dx = 2x by differences, x from the wrong backward: diag(2, 4) against diag(1, 2).
    numerical = message.split("numerical:")[1].split("analytical:")[0]
    analytical = message.split("analytical:")[1]
    assert "[[2.0000, 0.0000]," in numerical and "[0.0000, 4.0000]]" in numerical
    assert "[[1., 0.]," in analytical and "[0., 2.]]" in analytical
    assert isinstance(error.value, RuntimeError)
    assert gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_fast_mode_failure_recomputes_the_jacobians_element_by_element():
    with pytest.raises(GradcheckError) as error:
        gradcheck(WrongSquare.apply, (leaf([1.0, 2.0]),), fast_mode=True)
    message = str(error.value)
    assert message.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:")
    # v^T J u with u, v >= 0: the wrong backward gives half the numerical projection.
    numerical = float(message.split("numerical:")[1].split("\n")[0])
    analytical = float(message.split("analytical:")[1].split("\n")[0])
    assert analytical == pytest.approx(numerical / 2, rel=1e-6)
    assert "Recomputed element by element (slow mode)" in message
    assert "The max per-element difference (slow mode) is: 2.0" in message


def test_fast_mode_leaves_the_random_state_alone():
    onnxnn.manual_seed(4)
    expected = onnxnn.rand(3).numpy()
    onnxnn.manual_seed(4)
    gradcheck(lambda a: a.exp(), (leaf(X),), fast_mode=True)
    np.testing.assert_array_equal(onnxnn.rand(3).numpy(), expected)


def test_nondeterministic_backward_needs_nondet_tol():
    x = leaf(X)
    with pytest.raises(GradcheckError, match="Backward is not reentrant.*tolerance for nondeterminism was 0.0"):
        gradcheck(Drifting.apply, (x,), check_undefined_grad=False)
    assert gradcheck(Drifting.apply, (x,), nondet_tol=1e-6, check_undefined_grad=False)


def test_backward_must_scale_with_grad_output():
    with pytest.raises(GradcheckError, match="^backward not multiplied by grad_output$"):
        gradcheck(Offset.apply, (leaf(X),), atol=2.0, rtol=0.0)  # the Jacobian check alone would pass


@pytest.mark.parametrize(
    "fail, message",
    [
        (True, "Expected backward function to handle undefined output grads"),
        (False, "Expected all input grads to be undefined or zero when all output grads are undefined or zero."),
    ],
)
def test_undefined_output_gradients(fail, message, monkeypatch):
    monkeypatch.setattr(RefusesMissingGradients, "fail", fail)
    x = leaf(X)
    with pytest.warns(UserWarning, match="check_undefined_grad=False"), pytest.raises(GradcheckError) as error:
        gradcheck(RefusesMissingGradients.apply, (x,))
    assert str(error.value).startswith(message)
    assert gradcheck(RefusesMissingGradients.apply, (x,), check_undefined_grad=False)


def test_outputs_that_do_not_require_grad():
    # Detached from x: backward gives nothing, so finite differences must be zero.
    with pytest.raises(GradcheckError, match="Numerical gradient for function expected to be zero"):
        gradcheck(lambda a: a.detach() * 2, (leaf(X),))
    assert gradcheck(lambda a: onnxnn.ones(2, dtype=onnxnn.float64), (leaf(X),))
    # An integer output is left out; non-tensor arguments pass through.
    assert gradcheck(lambda a, scale: (a * scale, a.argmax()), (leaf(X), 3.0))


def test_inputs_checks():
    with pytest.raises(ValueError, match="gradcheck expects at least one input tensor to require gradient"):
        gradcheck(lambda a: a * 2, (leaf(X, requires_grad=False),))
    with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double precision floating point"):
        # float32 differences need a larger step: rounding error ~ 6e-8 |f| / eps.
        assert gradcheck(lambda a: a * 2, (leaf(X, dtype=onnxnn.float32),), eps=1e-3, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"check_forward_ad": True}, NotImplementedError, "forward-mode AD"),
        ({"check_batched_grad": True}, NotImplementedError, "vmap"),
        (
            {"check_backward_ad": False},
            AssertionError,
            "Expected at least one of check_forward_ad or check_backward_ad",
        ),
        ({"check_batched_forward_grad": True}, AssertionError, "requires check_forward_ad to be True"),
    ],
)
def test_unsupported_and_inconsistent_options(kwargs, error, message):
    with pytest.raises(error, match=message):
        gradcheck(lambda a: a * 2, (leaf(X),), **kwargs)


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
def test_gradgradcheck_of_correct_second_derivatives(fast_mode):
    assert gradgradcheck(lambda a, b: (a.sin() * b).sum(0), (leaf(X), leaf(Y)), fast_mode=fast_mode)
    grad_output = leaf([0.5, -1.0, 2.0])
    assert gradgradcheck(lambda a: a**3, (leaf(X),), (grad_output,))


def test_gradgradcheck_catches_a_backward_that_is_not_differentiable():
    # First derivatives are right; the second derivative 6 x g is missing (the detached x).
    x = leaf(X)
    assert gradcheck(FirstOrderCube.apply, (x,))
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        gradgradcheck(FirstOrderCube.apply, (x,))


def test_gradgradcheck_draws_grad_outputs_from_the_default_generator():
    onnxnn.manual_seed(8)
    gradgradcheck(lambda a: a.exp(), (leaf(X),))
    after = onnxnn.rand(2).numpy()
    onnxnn.manual_seed(8)
    onnxnn.rand(3, dtype=onnxnn.float64)  # the one grad_output it drew (three float64 values)
    np.testing.assert_array_equal(onnxnn.rand(2).numpy(), after)


@pytest.mark.parametrize(
    "kwargs, error",
    [({"check_fwd_over_rev": True}, NotImplementedError), ({"check_rev_over_rev": False}, AssertionError)],
)
def test_gradgradcheck_options(kwargs, error):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error):
            gradgradcheck(lambda a: a**3, (leaf(X),), check_undefined_grad=False, **kwargs)
