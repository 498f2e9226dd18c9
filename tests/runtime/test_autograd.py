"""Autograd: backward, .grad accumulation, grad modes, hooks, autograd.grad, version counters."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn


def _leaf(values):
    return onnxnn.tensor(values, dtype=onnxnn.float64, requires_grad=True)


def test_backward_fills_grad_of_leaves_and_accumulates():
    x = _leaf([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0, 9.0])


def test_grad_accumulation_keeps_the_grad_tensor_object():
    x = _leaf([1.0, 2.0])
    x.sum().backward()
    grad = x.grad
    x.sum().backward()
    assert x.grad is grad
    np.testing.assert_allclose(grad.numpy(), [2.0, 2.0])


def test_a_shared_input_sums_gradients_from_every_use():
    x = _leaf([1.0, -2.0])
    y = x * 2 + x.exp() + x
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 + np.exp([1.0, -2.0]))


def test_broadcast_inputs_get_gradients_of_their_own_shape():
    a = _leaf(np.ones((3, 1)))
    b = _leaf(np.ones(4))
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,)
    np.testing.assert_allclose(a.grad.numpy(), np.full((3, 1), 4.0))
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 3.0))


def test_explicit_gradient_for_non_scalar_outputs():
    x = _leaf([1.0, 2.0])
    (x * x).backward(onnxnn.tensor([1.0, 10.0], dtype=onnxnn.float64))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 40.0])


@pytest.mark.parametrize(
    "build, grad_fn_name",
    [
        (lambda x: x + 1, "AddBackward0"),
        (lambda x: x * x, "MulBackward0"),
        (lambda x: x / 2, "DivBackward0"),
        (lambda x: x - 1, "SubBackward0"),
        (lambda x: -x, "NegBackward0"),
        (lambda x: x.sum(), "SumBackward0"),
        (lambda x: x.mean(), "MeanBackward0"),
        (lambda x: x.exp(), "ExpBackward0"),
        (lambda x: x.relu(), "ReluBackward0"),
        (lambda x: x.sigmoid(), "SigmoidBackward0"),
        (lambda x: x.reshape(2, 1), "ViewBackward0"),
        (lambda x: x.unsqueeze(0) @ x.unsqueeze(1), "MmBackward0"),
    ],
)
def test_grad_fn_names_follow_pytorch(build, grad_fn_name):
    out = build(_leaf([1.0, 2.0]))
    assert out.grad_fn.name() == grad_fn_name
    assert not out.is_leaf and out.requires_grad


def test_leaf_properties():
    x = onnxnn.randn(2, requires_grad=True)
    assert x.is_leaf and x.grad_fn is None and x.requires_grad
    y = onnxnn.randn(2)
    assert y.is_leaf and not y.requires_grad
    assert (y * 2).is_leaf, "results of ops on tensors that do not require grad are leaves"
    assert not x.detach().requires_grad


def test_no_grad_enable_grad_and_set_grad_enabled_as_contexts_and_decorators():
    x = onnxnn.randn(2, requires_grad=True)
    with onnxnn.no_grad():
        assert not (x * 2).requires_grad
        with onnxnn.enable_grad():
            assert (x * 2).requires_grad
    with onnxnn.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad

    @onnxnn.no_grad()
    def doubled(t):
        return t * 2

    assert not doubled(x).requires_grad
    onnxnn.set_grad_enabled(False)
    try:
        assert not onnxnn.is_grad_enabled()
    finally:
        onnxnn.set_grad_enabled(True)
    assert onnxnn.is_grad_enabled()


def test_retain_graph_allows_a_second_backward_and_its_absence_forbids_it():
    x = _leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0]))))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_backward_with_inputs_accumulates_only_into_those():
    a, b = _leaf([1.0]), _leaf([2.0])
    (a * b).sum().backward(inputs=[a])
    np.testing.assert_allclose(a.grad.numpy(), [2.0])
    assert b.grad is None


@pytest.mark.parametrize("position", [0, 1])
def test_backward_with_an_input_that_does_not_require_grad_raises_before_any_grad_changes(position):
    a, b, stray = _leaf([1.0]), _leaf([2.0]), onnxnn.tensor([3.0])
    inputs = [a, stray] if position else [stray, a]
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        (a * b).sum().backward(inputs=inputs)
    assert a.grad is None and b.grad is None


def test_autograd_grad_returns_gradients_without_touching_dot_grad():
    x = _leaf([1.0, 2.0])
    (gradient,) = onnxnn.autograd.grad((x**3).sum(), x)
    np.testing.assert_allclose(gradient.numpy(), [3.0, 12.0])
    assert x.grad is None


def test_autograd_grad_with_create_graph_gives_second_derivatives():
    x = _leaf([1.0, 2.0])
    (first,) = onnxnn.autograd.grad((x**3).sum(), x, create_graph=True)
    assert first.requires_grad
    (second,) = onnxnn.autograd.grad(first.sum(), x)
    np.testing.assert_allclose(second.numpy(), [6.0, 12.0])


def test_autograd_grad_of_an_intermediate_and_unused_inputs():
    x = _leaf([1.0, 2.0])
    hidden = x * 3
    unused = _leaf([5.0])
    out = (hidden * hidden).sum()
    gradient, nothing = onnxnn.autograd.grad(out, [hidden, unused], allow_unused=True)
    np.testing.assert_allclose(gradient.numpy(), [6.0, 12.0])
    assert nothing is None
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        onnxnn.autograd.grad((x * 2).sum(), [x, unused])


def test_tensor_hooks_see_and_replace_gradients():
    x = _leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    hidden = x * 2
    handle = hidden.register_hook(lambda g: g * 10)
    hidden.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 20.0])
    np.testing.assert_allclose(seen[0], [20.0, 20.0])
    handle.remove()
    x.grad = None
    hidden = x * 2
    hidden.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_retain_grad_fills_grad_of_non_leaf_tensors():
    x = _leaf([1.0, 2.0])
    hidden = x * 3
    hidden.retain_grad()
    assert hidden.retains_grad
    (hidden * hidden).sum().backward()
    np.testing.assert_allclose(hidden.grad.numpy(), [6.0, 12.0])


def test_requires_grad_rules():
    x = onnxnn.randn(2)
    x.requires_grad_()
    assert x.requires_grad
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        (x * 2).requires_grad_(False)
    with pytest.raises(RuntimeError, match="floating point"):
        onnxnn.tensor([1, 2]).requires_grad_()


def test_in_place_ops_on_non_leaves_continue_the_graph():
    x = _leaf([1.0, 2.0])
    y = x * 2
    y.add_(1)
    y.mul_(x)
    assert y.grad_fn.name() == "MulBackward0"
    y.sum().backward()
    values = np.array([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), 4 * values + 1)  # d/dx of (2x + 1) x


def test_in_place_update_of_a_leaf_under_no_grad_bumps_its_version():
    w = _leaf([1.0, 2.0])
    assert w._version == 0
    with onnxnn.no_grad():
        w.sub_(0.5)
    assert w._version == 1 and w.is_leaf and w.requires_grad
    np.testing.assert_allclose(w.detach().numpy(), [0.5, 1.5])


# ---------------------------------------------------------------- bad input


def test_backward_of_a_non_scalar_without_gradient():
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (_leaf([1.0, 2.0]) * 2).backward()


def test_backward_of_a_tensor_that_does_not_require_grad():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        onnxnn.randn(2).sum().backward()


def test_backward_through_a_value_changed_in_place_after_it_was_saved():
    x = _leaf([1.0, 2.0])
    hidden = x * 2
    out = hidden * hidden
    hidden.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*version 1; expected version 0"):
        out.sum().backward()


def test_in_place_on_a_leaf_that_requires_grad():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        _leaf([1.0]).add_(1)


def test_gradient_shape_mismatch():
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (_leaf([1.0, 2.0]) * 2).backward(onnxnn.ones(3, dtype=onnxnn.float64))


def test_numpy_of_a_tensor_that_requires_grad():
    with pytest.raises(RuntimeError, match="Use tensor.detach\\(\\).numpy\\(\\)"):
        _leaf([1.0]).numpy()


@pytest.mark.parametrize(
    "reduce, expected",
    [
        (lambda x: x.max(1), [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]),
        (lambda x: x.min(1), [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]),
    ],
)
def test_max_and_min_along_a_dim_send_the_gradient_to_the_returned_index_on_ties(reduce, expected):
    x = _leaf([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    values, indices = reduce(x)
    assert values.grad_fn.name() in ("MaxBackward0", "MinBackward0")
    values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    np.testing.assert_array_equal(indices.numpy(), np.argmax(np.array(expected), axis=1))


@pytest.mark.parametrize(
    "update",
    [
        lambda x: x.add_(2.5),
        lambda x: x.mul_(0.5),
        lambda x: x.div_(2),
        lambda x: x.sub_(onnxnn.tensor([0.5, 1.0])),
    ],
)
def test_in_place_arithmetic_refuses_a_result_the_tensor_cannot_hold(update):
    x = onnxnn.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        update(x)
    np.testing.assert_array_equal(x.numpy(), [1, 2])
    assert x._version == 0


def test_the_implicit_seed_gradient_is_not_multiplied_in():
    # backward() of a one-element loss seeds it with a static one; the first rule's product with it
    # (here Sin: seed * cos(x)) records no Mul, and the gradient is still exact.
    from onnxnn.ir.plan import plan

    x = onnxnn.tensor([-2.5], requires_grad=True)
    x.sin().backward()
    ops = [node.op_type for node in plan([x.grad._value]).nodes]
    assert ops == ["Cos"]
    np.testing.assert_allclose(x.grad.numpy(), [np.cos(-2.5)], rtol=2.4e-7)  # two float32 ulps


def test_multiplying_by_a_static_one_gives_a_new_handle_on_the_same_values():
    from onnxnn.ir.graph import static_constant

    t = onnxnn.randn(2, 3)
    one = onnxnn.Tensor._from_value(static_constant(np.ones((1, 3)), onnxnn.float32))
    product = one * t
    assert product is not t and product._value is t._value
    product.add_(1.0)  # rebinding the product leaves t alone
    assert not np.array_equal(product.numpy(), t.numpy())
    widened = onnxnn.randn(3) * onnxnn.Tensor._from_value(static_constant(np.ones((2, 3)), onnxnn.float32))
    assert widened.shape == (2, 3)  # a product that broadcasts beyond x is still recorded


# ---------------------------------------------------------------- .grad tensors are each their own


def test_gradients_accumulated_into_two_leaves_of_one_add_stay_apart():
    # One gradient reaches both inputs of an Add; each .grad must accumulate (and be written) alone.
    a = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    b = onnxnn.tensor([3.0, 4.0], requires_grad=True)
    for steps in range(1, 4):
        (a + b).sum().backward()  # the second and third backwards are replayed
        assert a.grad.tolist() == [steps, steps] and b.grad.tolist() == [steps, steps]
    a.grad.mul_(10)
    assert b.grad.tolist() == [3.0, 3.0]


def test_a_backward_leaves_the_callers_gradient_tensor_alone():
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    given = onnxnn.tensor([1.0, 1.0])
    x.backward(given)
    (x * 3).sum().backward()
    x.grad.zero_()
    assert given.tolist() == [1.0, 1.0]


def test_a_retained_gradient_accumulates_across_backwards():
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    z = (y * y).sum()
    z.backward(retain_graph=True)
    z.backward()
    assert y.grad.tolist() == [8.0, 16.0]  # 2 * (2 * y), as PyTorch's


def test_an_in_place_write_under_no_grad_keeps_the_history():
    # PyTorch records nothing for the write, and the tensor keeps its grad_fn: d(a * x)/dx = a + x.
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1
    with onnxnn.no_grad():
        a[0].mul_(3)
    assert a.requires_grad
    (a * x).sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]


def test_inference_mode_false_as_a_decorator_records_gradients():
    @onnxnn.inference_mode(False)
    def doubled(x):
        return x * 2

    assert doubled(onnxnn.ones(2, requires_grad=True)).requires_grad


def test_autograd_grad_returns_the_gradients_tensor_hooks_give():
    # As PyTorch's: a tensor's hooks change the gradient autograd.grad returns for it, and what
    # flows on from it (x's hook triples, y's multiplies by 5; d(y^2)/dy = 2y).
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda gradient: gradient * 3)
    y = x * 1
    y.register_hook(lambda gradient: gradient * 5)
    z = (y * y).sum()
    (wrt_x,) = onnxnn.autograd.grad(z, x, retain_graph=True)
    (wrt_y,) = onnxnn.autograd.grad(z, y)
    assert wrt_x.tolist() == [30.0, 60.0] and wrt_y.tolist() == [10.0, 20.0]


def test_post_accumulate_grad_hooks_see_each_accumulated_grad():
    weight = onnxnn.ones(2, requires_grad=True)
    order = []
    weight.register_hook(lambda gradient: order.append("tensor hook"))
    handle = weight.register_post_accumulate_grad_hook(lambda leaf: order.append(leaf.grad.numpy().tolist()))
    for _ in range(3):  # from the third backward on, replays leave hooked leaves to the general driver
        (weight * 3).sum().backward()
    assert order == ["tensor hook", [3.0, 3.0], "tensor hook", [6.0, 6.0], "tensor hook", [9.0, 9.0]]
    onnxnn.autograd.grad((weight * 2).sum(), weight)  # accumulates nothing: no post hook
    handle.remove()
    (weight * 3).sum().backward()
    assert order[-1] == "tensor hook" and weight.grad.numpy().tolist() == [12.0, 12.0]


def test_a_post_accumulate_grad_hook_may_step_the_parameter_during_backward():
    weight = onnxnn.tensor([1.0, -2.0], requires_grad=True)

    def step(leaf):
        with onnxnn.no_grad():
            leaf.sub_(0.5 * leaf.grad)
        leaf.grad = None

    weight.register_post_accumulate_grad_hook(step)
    (weight * weight).sum().backward()
    np.testing.assert_array_equal(weight.detach().numpy(), [0.0, 0.0])  # w - 0.5 * 2w
    assert weight.grad is None


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: onnxnn.ones(2, requires_grad=True) * 2, RuntimeError, "cannot be registered on non-leaf tensors"),
        (lambda: onnxnn.ones(2), RuntimeError, "doesn't require gradient"),
    ],
)
def test_post_accumulate_grad_hooks_are_for_leaves_that_require_grad(make, error, message):
    with pytest.raises(error, match=message):
        make().register_post_accumulate_grad_hook(lambda leaf: None)


def test_a_post_accumulate_grad_hook_must_return_none():
    weight = onnxnn.ones(2, requires_grad=True)
    weight.register_post_accumulate_grad_hook(lambda leaf: 5)
    with pytest.raises(TypeError, match="hook returned 'int'"):
        (weight * 3).sum().backward()


def test_copies_leave_the_hooks_behind():
    import copy

    weight = onnxnn.ones(2, requires_grad=True)
    weight.register_hook(lambda gradient: gradient * 2)
    weight.register_post_accumulate_grad_hook(lambda leaf: None)
    copied = copy.deepcopy(weight)
    assert copied._backward_hooks is None and copied._post_accumulate_grad_hooks is None


def test_grad_with_batched_grad_outputs_gives_one_vector_jacobian_product_per_row():
    # Rows of the identity as grad_outputs: the Jacobian of x -> (x^2 * w, sum(x)) row by row.
    x_array, w_array = np.array([0.3, -1.2, 2.0]), np.array([1.0, 2.0, -0.5])
    x = onnxnn.tensor(x_array, requires_grad=True)
    squares, total = x * x * onnxnn.tensor(w_array), x.sum()
    rows = onnxnn.tensor(np.eye(3))
    (jacobian,) = onnxnn.autograd.grad(
        [squares, total], x, [rows, onnxnn.tensor(np.array([1.0, 0.0, 2.0]))], is_grads_batched=True, retain_graph=True
    )
    expected = np.diag(2 * x_array * w_array) + np.array([1.0, 0.0, 2.0])[:, None]
    np.testing.assert_array_equal(jacobian.numpy(), expected)
    with pytest.raises(RuntimeError, match="first dimensions must agree"):
        onnxnn.autograd.grad([squares, total], x, [rows, onnxnn.ones(2)], is_grads_batched=True)
