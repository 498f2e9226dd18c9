"""Module hooks: forward pre/post hooks, global hooks, full backward (pre-)hooks, registration hooks."""

from __future__ import annotations


import numpy as np
import pytest
from gradcheck import central_differences

import onnxnn
from onnxnn import nn
from onnxnn.nn.modules import module as module_globals


class Affine(nn.Module):
    """y = tanh(x @ W) * b: a few ops over Parameters, float64 for finite differences."""

    def __init__(self, dtype=onnxnn.float64):
        super().__init__()
        self.weight = nn.Parameter(onnxnn.randn(3, 2, dtype=dtype))
        self.bias = nn.Parameter(onnxnn.randn(2, dtype=dtype))

    def forward(self, x):
        return (x @ self.weight).tanh() * self.bias


class TwoInputs(nn.Module):
    """forward(x, scale, y) = x * y * scale + y: scale is a Python number."""

    def forward(self, x, scale, y):
        return x * y * scale + y


class Identity(nn.Module):
    def forward(self, x):
        return x


class Fails(nn.Module):
    def forward(self, x):
        raise ValueError("forward failed")


def _recorder(log, label, result=None):
    def hook(*args):
        log.append(label)
        return result

    return hook


# ----------------------------------------------------------------------------- forward hooks: order
def test_global_hooks_fire_before_local_ones_and_prepend_moves_to_front():
    log = []
    m = Identity()
    m.register_forward_pre_hook(_recorder(log, "pre local 1"))
    m.register_forward_pre_hook(_recorder(log, "pre local 0"), prepend=True)
    m.register_forward_hook(_recorder(log, "post local 1"))
    m.register_forward_hook(_recorder(log, "post local 0"), prepend=True)
    with (
        module_globals.register_module_forward_pre_hook(_recorder(log, "pre global")),
        module_globals.register_module_forward_hook(_recorder(log, "post global")),
    ):
        m(onnxnn.ones(1))
    assert log == ["pre global", "pre local 0", "pre local 1", "post global", "post local 0", "post local 1"]
    log.clear()
    m(onnxnn.ones(1))  # the context managers removed the global hooks
    assert log == ["pre local 0", "pre local 1", "post local 0", "post local 1"]


def test_global_hooks_apply_to_every_module():
    seen = []
    handle = module_globals.register_module_forward_hook(lambda m, args, out: seen.append(type(m).__name__))
    try:
        Identity()(onnxnn.ones(1))
        Affine()(onnxnn.ones(2, 3, dtype=onnxnn.float64))
    finally:
        handle.remove()
    Identity()(onnxnn.ones(1))
    assert seen == ["Identity", "Affine"]


def test_handle_remove_is_idempotent_and_only_removes_its_hook():
    log = []
    m = Identity()
    first = m.register_forward_hook(_recorder(log, "first"))
    m.register_forward_hook(_recorder(log, "second"))
    first.remove()
    first.remove()
    m(onnxnn.ones(1))
    assert log == ["second"]


# ----------------------------------------------------------------------------- forward hooks: values
@pytest.mark.parametrize(
    "returned, expected",
    [
        (None, [1.0, 2.0]),  # None keeps the inputs
        (onnxnn.tensor([5.0, 6.0]), [5.0, 6.0]),  # a single value is wrapped in a tuple
        ((onnxnn.tensor([7.0, 8.0]),), [7.0, 8.0]),  # a tuple replaces the args
    ],
)
def test_forward_pre_hook_replaces_inputs(returned, expected):
    m = Identity()
    m.register_forward_pre_hook(lambda module, args: returned)
    np.testing.assert_array_equal(m(onnxnn.tensor([1.0, 2.0])).numpy(), expected)


def test_forward_pre_hook_with_kwargs_replaces_args_and_kwargs():
    class Shift(nn.Module):
        def forward(self, x, *, shift):
            return x + shift

    seen = {}

    def hook(module, args, kwargs):
        seen["kwargs"] = dict(kwargs)
        return (args[0] * 10,), {"shift": kwargs["shift"] + 1}

    m = Shift()
    m.register_forward_pre_hook(hook, with_kwargs=True)
    out = m(onnxnn.tensor([1.0]), shift=2.0)
    assert seen["kwargs"] == {"shift": 2.0}
    np.testing.assert_array_equal(out.numpy(), [13.0])


def test_forward_pre_hook_with_kwargs_must_return_a_pair():
    m = Identity()
    m.register_forward_pre_hook(lambda module, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"forward pre-hook must return None or a tuple of \(new_args, new_kwargs\)"):
        m(onnxnn.ones(1))


def test_forward_hooks_see_args_and_replace_output_in_turn():
    m = Identity()
    m.register_forward_hook(lambda module, args, output: output + args[0])
    m.register_forward_hook(lambda module, args, output: None)
    m.register_forward_hook(lambda module, args, output: output * 3)
    np.testing.assert_array_equal(m(onnxnn.tensor([1.0, 2.0])).numpy(), [6.0, 12.0])


def test_forward_hook_with_kwargs_receives_the_kwargs():
    class Shift(nn.Module):
        def forward(self, x, shift=0.0):
            return x + shift

    calls = []
    m = Shift()
    m.register_forward_hook(lambda module, args, kwargs, output: calls.append((len(args), kwargs)), with_kwargs=True)
    m(onnxnn.ones(1), shift=1.0)
    assert calls == [(1, {"shift": 1.0})]


def test_modules_note_residual_example():
    m = Affine()
    x = onnxnn.randn(2, 3, dtype=onnxnn.float64)
    plain = m(x).detach().numpy()
    pre = m.register_forward_pre_hook(lambda module, inputs: inputs[0] + 1.0)
    shifted = m(x).detach().numpy()
    post = m.register_forward_hook(lambda module, inputs, output: output + inputs[0][:, :2])
    both = m(x).detach().numpy()
    pre.remove()
    post.remove()
    np.testing.assert_allclose(m(x).detach().numpy(), plain)
    x_np = x.numpy()
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    np.testing.assert_allclose(shifted, np.tanh((x_np + 1) @ w) * b, rtol=1e-12)
    np.testing.assert_allclose(both, shifted + (x_np + 1)[:, :2], rtol=1e-12)


# ----------------------------------------------------------------------------- always_call
@pytest.mark.parametrize("global_hook", [False, True])
def test_always_call_hooks_run_when_forward_raises(global_hook):
    log = []
    m = Fails()
    m.register_forward_hook(_recorder(log, "ordinary"))
    if global_hook:
        handle = module_globals.register_module_forward_hook(_recorder(log, "always"), always_call=True)
    else:
        handle = m.register_forward_hook(_recorder(log, "always"), always_call=True)
    with handle, pytest.raises(ValueError, match="forward failed"):
        m(onnxnn.ones(1))
    assert log == ["always"]


def test_always_call_hook_runs_once_when_a_later_hook_raises():
    log = []
    m = Identity()
    m.register_forward_hook(_recorder(log, "always"), always_call=True)

    def failing(module, args, output):
        raise KeyError("late failure")

    m.register_forward_hook(failing)
    with pytest.raises(KeyError, match="late failure"):
        m(onnxnn.ones(1))
    assert log == ["always"]


def test_errors_of_always_call_hooks_after_a_failure_become_warnings():
    m = Fails()

    def broken(module, args, output):
        raise RuntimeError("hook broke")

    m.register_forward_hook(broken, always_call=True)
    with pytest.warns(UserWarning, match="hook broke"), pytest.raises(ValueError, match="forward failed"):
        m(onnxnn.ones(1))


def test_fast_path_skips_the_hook_machinery(monkeypatch):
    calls = []
    original = nn.Module._call_with_hooks
    monkeypatch.setattr(nn.Module, "_call_with_hooks", lambda self, *a: calls.append(1) or original(self, *a))
    m = Identity()
    m(onnxnn.ones(1))
    assert calls == []
    with m.register_forward_hook(lambda *a: None):
        m(onnxnn.ones(1))
    m(onnxnn.ones(1))
    assert calls == [1]


# ----------------------------------------------------------------------------- full backward hooks
def _numeric_gradient(function, array: np.ndarray, cotangent: np.ndarray) -> np.ndarray:
    """Central differences of sum(function(array) * cotangent) with respect to array."""

    def evaluated(a: np.ndarray) -> np.ndarray:
        with onnxnn.no_grad():
            return function(onnxnn.tensor(a)).numpy()

    return central_differences(evaluated, array, cotangent)


def test_full_backward_hook_grad_input_matches_finite_differences():
    m = Affine()
    captured = {}

    def hook(module, grad_input, grad_output):
        captured["module"] = module
        captured["grad_input"] = [g.numpy() for g in grad_input]
        captured["grad_output"] = [g.numpy() for g in grad_output]

    m.register_full_backward_hook(hook)
    x_np = np.random.default_rng(0).standard_normal((2, 3))
    cotangent = np.random.default_rng(1).standard_normal((2, 2))
    x = onnxnn.tensor(x_np, requires_grad=True)
    out = m(x)
    assert out.grad_fn.name() == "BackwardHookFunctionBackward"
    out.backward(onnxnn.tensor(cotangent))
    assert captured["module"] is m
    np.testing.assert_allclose(captured["grad_output"][0], cotangent)
    expected = _numeric_gradient(m, x_np, cotangent)
    # float64 central differences: truncation (eps^2 times a third derivative) and rounding
    # (u |f| / eps) stay orders of magnitude below 1e-5 relative; a wrong gradient is off by O(1).
    np.testing.assert_allclose(captured["grad_input"][0], expected, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-8)


def test_full_backward_hook_replacing_grad_input_sets_input_grad():
    # The Modules note: a hook returning 42s makes x.grad all 42, parameters' grads unaffected.
    m = Affine()
    x = onnxnn.randn(2, 3, dtype=onnxnn.float64, requires_grad=True)
    m(x).sum().backward()
    reference_weight_grad = m.weight.grad.numpy().copy()
    m.zero_grad()
    x.grad.zero_()
    m.register_full_backward_hook(
        lambda module, grad_input, grad_output: [onnxnn.full_like(g, 42.0) for g in grad_input]
    )
    m(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 42.0))
    np.testing.assert_allclose(m.weight.grad.numpy(), reference_weight_grad)


def test_full_backward_hook_packs_none_for_non_tensors_and_zeros_for_frozen_inputs():
    captured = {}

    def hook(module, grad_input, grad_output):
        captured["grad_input"] = grad_input
        return (grad_input[0] * 2, None, None)

    m = TwoInputs()
    m.register_full_backward_hook(hook)
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    y = onnxnn.tensor([3.0, 4.0])  # does not require grad
    m(x, 5.0, y).sum().backward()
    grad_input = captured["grad_input"]
    # PyTorch's: None for the number, zeros for the tensor that does not require grad.
    assert len(grad_input) == 3 and grad_input[1] is None
    np.testing.assert_array_equal(grad_input[2].numpy(), [0.0, 0.0])
    np.testing.assert_allclose(grad_input[0].numpy(), [15.0, 20.0])
    np.testing.assert_allclose(x.grad.numpy(), [30.0, 40.0])


def test_full_backward_hook_sees_gradients_of_several_inputs_at_once():
    captured = []
    m = TwoInputs()
    m.register_full_backward_hook(lambda module, gi, go: captured.append([g if g is None else g.numpy() for g in gi]))
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    y = onnxnn.tensor([3.0, 4.0], requires_grad=True)
    m(x, 2.0, y).sum().backward()
    assert len(captured) == 1
    np.testing.assert_allclose(captured[0][0], [6.0, 8.0])  # d/dx = y * scale
    assert captured[0][1] is None
    np.testing.assert_allclose(captured[0][2], [3.0, 5.0])  # d/dy = x * scale + 1


def test_full_backward_hook_without_input_gradients_gets_none():
    captured = []
    m = Affine()
    m.register_full_backward_hook(lambda module, gi, go: captured.append((gi, go[0].shape)))
    m(onnxnn.randn(2, 3, dtype=onnxnn.float64)).sum().backward()
    assert captured == [((None,), onnxnn.Size([2, 2]))]
    assert m.weight.grad is not None


def test_full_backward_hook_returning_wrong_count_raises():
    m = Affine()
    m.register_full_backward_hook(lambda module, gi, go: (gi[0], gi[0]))
    x = onnxnn.randn(2, 3, dtype=onnxnn.float64, requires_grad=True)
    with pytest.raises(
        RuntimeError, match="Backward hook returned an invalid number of grad_input, got 2, but expected 1"
    ):
        m(x).sum().backward()


def test_backward_pre_hook_replaces_grad_output():
    m = Affine()
    x = onnxnn.randn(2, 3, dtype=onnxnn.float64, requires_grad=True)
    m(x).sum().backward()
    reference = [x.grad.numpy().copy(), m.bias.grad.numpy().copy()]
    x.grad, m.bias.grad, m.weight.grad = None, None, None
    seen = []
    m.register_full_backward_pre_hook(lambda module, grad_output: seen.append(grad_output[0].numpy()))
    m.register_full_backward_pre_hook(lambda module, grad_output: (grad_output[0] * 3,))
    m(x).sum().backward()
    np.testing.assert_array_equal(seen[0], np.ones((2, 2)))
    np.testing.assert_allclose(x.grad.numpy(), 3 * reference[0])
    np.testing.assert_allclose(m.bias.grad.numpy(), 3 * reference[1])


def test_backward_pre_hook_feeds_the_full_hook_and_global_hooks_fire_first():
    log = []
    m = Affine()
    m.register_full_backward_hook(lambda module, gi, go: log.append(("local", float(go[0].sum()))))
    m.register_full_backward_pre_hook(lambda module, go: (go[0] * 2,))
    with (
        module_globals.register_module_full_backward_hook(lambda module, gi, go: log.append(("global", 0.0))),
        module_globals.register_module_full_backward_pre_hook(lambda module, go: log.append(("global pre", 0.0))),
    ):
        m(onnxnn.randn(2, 3, dtype=onnxnn.float64, requires_grad=True)).sum().backward()
    assert log == [("global pre", 0.0), ("global", 0.0), ("local", 8.0)]


def test_backward_hooks_of_nested_modules_run_inner_last():
    log = []

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Affine()

        def forward(self, x):
            return self.inner(x) * 2

    m = Outer()
    m.register_full_backward_hook(lambda module, gi, go: log.append("outer"))
    m.inner.register_full_backward_hook(lambda module, gi, go: log.append("inner"))
    m(onnxnn.randn(2, 3, dtype=onnxnn.float64, requires_grad=True)).sum().backward()
    assert log == ["inner", "outer"]


def test_removed_backward_hook_is_not_called():
    log = []
    m = Affine()
    handle = m.register_full_backward_hook(lambda module, gi, go: log.append(1))
    handle.remove()
    m(onnxnn.randn(2, 3, dtype=onnxnn.float64, requires_grad=True)).sum().backward()
    assert log == []


def test_backward_hooks_leave_the_recorded_graph_unchanged():
    m = Affine()
    x = onnxnn.randn(2, 3, dtype=onnxnn.float64, requires_grad=True)
    plain = m(x)
    m.register_full_backward_hook(lambda module, gi, go: None)
    hooked = m(x)
    assert hooked._value.node.op_type == plain._value.node.op_type == "Mul"


# ----------------------------------------------------------------------------- legacy backward hooks
def test_register_backward_hook_is_called_and_warns_that_it_is_deprecated():
    calls = []
    m = Affine()
    m.register_backward_hook(lambda module, grad_input, grad_output: calls.append(len(grad_output)))
    x = onnxnn.randn(2, 3, dtype=onnxnn.float64, requires_grad=True)
    with pytest.warns(FutureWarning, match="non-full backward hook"):
        out = m(x)
    out.sum().backward()
    assert calls == [1]


@pytest.mark.parametrize(
    "first, second",
    [
        ("register_backward_hook", "register_full_backward_hook"),
        ("register_full_backward_hook", "register_backward_hook"),
    ],
)
def test_mixing_full_and_legacy_backward_hooks_is_refused(first, second):
    m = Affine()
    getattr(m, first)(lambda *args: None)
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks"):
        getattr(m, second)(lambda *args: None)


# ----------------------------------------------------------------------------- registration hooks
@pytest.mark.parametrize(
    "register, perform, table",
    [
        (
            module_globals.register_module_parameter_registration_hook,
            lambda m, value: setattr(m, "p", value),
            "_parameters",
        ),
        (
            module_globals.register_module_buffer_registration_hook,
            lambda m, value: m.register_buffer("b", value),
            "_buffers",
        ),
        (
            module_globals.register_module_module_registration_hook,
            lambda m, value: m.add_module("c", value),
            "_modules",
        ),
    ],
)
def test_registration_hooks_see_and_may_replace_the_value(register, perform, table):
    values = {
        "_parameters": (nn.Parameter(onnxnn.ones(1)), nn.Parameter(onnxnn.zeros(1))),
        "_buffers": (onnxnn.ones(1), onnxnn.zeros(1)),
        "_modules": (Identity(), Identity()),
    }[table]
    seen = []

    def hook(module, name, value):
        seen.append((type(module).__name__, name))
        return values[1]

    with register(hook):
        m = Identity()
        perform(m, values[0])
    assert seen == [("Identity", name) for name in getattr(m, table)]
    assert next(iter(getattr(m, table).values())) is values[1]
