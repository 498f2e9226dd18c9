"""Edge semantics of the autograd API, as PyTorch documents and raises them.

The grad-mode switches as decorators (generator functions, no parentheses), argument checks of
``autograd.grad``/``autograd.backward``, ``.grad`` assignment, what tensor hooks may return, what
node and module backward hooks see for outputs no gradient reached, and the error types of
misuses. Expected gradients are written out from the chain rule (exact small numbers); nothing
expected is computed by onnxnn.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.autograd import Function


def _leaf(values, dtype=onnxnn.float32):
    return onnxnn.tensor(np.asarray(values), dtype=dtype, requires_grad=True)


# ----------------------------------------------------------------------------- grad mode as a decorator
@pytest.mark.parametrize(
    "make_switch, inside",
    [
        (onnxnn.no_grad, False),
        (onnxnn.inference_mode, False),
        (lambda: onnxnn.set_grad_enabled(False), False),  # made in the test: it switches when made
        (onnxnn.enable_grad, True),
    ],
    ids=["no_grad", "inference_mode", "set_grad_enabled", "enable_grad"],
)
@pytest.mark.parametrize("outside", [True, False], ids=["caller_grad", "caller_no_grad"])
def test_decorated_generator_runs_its_body_in_the_mode_at_every_resume(make_switch, inside, outside):
    x = _leaf([1.0, 2.0])
    seen_by_caller = []

    @make_switch()
    def steps():
        for _ in range(3):
            yield onnxnn.is_grad_enabled(), (x * 2).requires_grad

    with onnxnn.set_grad_enabled(outside):
        for item in steps():
            seen_by_caller.append(onnxnn.is_grad_enabled())
            assert item == (inside, inside)
    assert seen_by_caller == [outside] * 3  # the caller's mode between the resumes
    assert onnxnn.is_grad_enabled()


def test_no_grad_generator_may_update_a_parameter_in_place():
    p = nn.Parameter(onnxnn.ones(2))

    @onnxnn.no_grad()
    def updates():
        for _ in range(2):
            p.add_(1.0)  # refused for a leaf that requires grad while gradients are recorded
            yield p.requires_grad

    assert list(updates()) == [True, True]
    np.testing.assert_array_equal(p.detach().numpy(), [3.0, 3.0])


def test_decorated_generator_forwards_send_throw_close_and_its_return_value():
    log = []

    @onnxnn.no_grad()
    def worker():
        received = yield "ready"
        log.append(("sent", received, onnxnn.is_grad_enabled()))
        try:
            yield "waiting"
        except KeyError:
            log.append(("thrown", onnxnn.is_grad_enabled()))
        try:
            yield "last"
        finally:
            log.append(("closed", onnxnn.is_grad_enabled()))

    generator = worker()
    assert next(generator) == "ready"
    assert generator.send(7) == "waiting"
    assert generator.throw(KeyError("k")) == "last"
    generator.close()
    assert log == [("sent", 7, False), ("thrown", False), ("closed", False)]

    @onnxnn.enable_grad()
    def returns():
        yield 1
        return "done"

    def delegate():
        result = yield from returns()
        yield result

    assert list(delegate()) == [1, "done"]


@pytest.mark.parametrize(
    "switch, inside",
    [(onnxnn.no_grad, False), (onnxnn.inference_mode, False), (onnxnn.enable_grad, True)],
    ids=["no_grad", "inference_mode", "enable_grad"],
)
def test_switches_decorate_without_parentheses(switch, inside):
    x = _leaf([1.0])

    @switch
    def double(value):
        return value * 2, onnxnn.is_grad_enabled()

    with onnxnn.set_grad_enabled(not inside):
        result, enabled = double(x)
    assert enabled is inside and result.requires_grad is inside
    assert double.__name__ == "double"


def test_inference_mode_false_is_still_a_context_and_a_decorator():
    x = _leaf([1.0])
    with onnxnn.no_grad():
        with onnxnn.inference_mode(False):
            assert (x * 2).requires_grad
        decorated = onnxnn.inference_mode(False)(lambda: (x * 2).requires_grad)
        assert decorated()


@pytest.mark.parametrize("mode", ["no", 1, 0, None, np.bool_(False)], ids=["str", "one", "zero", "none", "numpy"])
def test_set_grad_enabled_refuses_what_is_not_a_bool(mode):
    try:
        with pytest.raises(TypeError, match=r"set_grad_enabled\(\): argument 'enabled' \(position 1\) must be bool"):
            onnxnn.set_grad_enabled(mode)
        assert onnxnn.is_grad_enabled()  # unchanged
    finally:
        onnxnn.set_grad_enabled(True)  # had it been accepted: the next tests record gradients again


# ----------------------------------------------------------------------------- grad / backward arguments
def test_grad_with_fewer_grad_outputs_than_outputs_raises_and_ignores_extra_ones():
    x = _leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="got 2 tensors and 1 gradients"):
        onnxnn.autograd.grad([x * 1, x * x], x, grad_outputs=onnxnn.ones(3))
    with pytest.raises(RuntimeError, match="got 3 tensors and 2 gradients"):
        onnxnn.autograd.grad([x * 1, x * x, x * 3], x, grad_outputs=[onnxnn.ones(3), onnxnn.ones(3)])
    # PyTorch ignores gradients beyond the outputs.
    (gradient,) = onnxnn.autograd.grad([x * x], x, grad_outputs=[onnxnn.ones(3), onnxnn.ones(3)])
    np.testing.assert_array_equal(gradient.numpy(), [2.0, 4.0, 6.0])


def test_backward_with_fewer_grad_tensors_than_tensors_raises():
    x = _leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="got 2 tensors and 1 gradients"):
        onnxnn.autograd.backward([x.sum(), (x * x).sum()], grad_tensors=[onnxnn.tensor(1.0)])
    assert x.grad is None  # nothing was accumulated
    onnxnn.autograd.backward([x.sum(), (x * x).sum()], grad_tensors=[onnxnn.tensor(1.0), onnxnn.tensor(2.0)])
    np.testing.assert_array_equal(x.grad.numpy(), [1.0 + 2 * 2 * 1.0, 1.0 + 2 * 2 * 2.0, 1.0 + 2 * 2 * 3.0])


def test_grad_refuses_inputs_that_are_not_tensors():
    x = _leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="all inputs have to be Tensors or GradientEdges, but got int"):
        onnxnn.autograd.grad(x.sum(), [x, 3])


def test_materialize_grads_refuses_allow_unused_false_and_defaults_it_to_true():
    x, unused = _leaf([1.0, 2.0]), _leaf([5.0, 6.0])
    with pytest.raises(ValueError, match="Expected allow_unused to be True or not passed when materialize_grads=True"):
        onnxnn.autograd.grad((x * 2).sum(), [x, unused], allow_unused=False, materialize_grads=True)
    gradient, zeros = onnxnn.autograd.grad((x * 2).sum(), [x, unused], materialize_grads=True)
    np.testing.assert_array_equal(gradient.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(zeros.numpy(), [0.0, 0.0])


# ----------------------------------------------------------------------------- assigning .grad
@pytest.mark.parametrize(
    "gradient, match",
    [
        (lambda: onnxnn.full((1,), 0.5, dtype=onnxnn.float64), "attempting to assign a gradient of size '\\[1\\]'"),
        (lambda: onnxnn.ones(3, 1, dtype=onnxnn.float64), "attempting to assign a gradient of size '\\[3, 1\\]'"),
        (lambda: onnxnn.ones(3, dtype=onnxnn.float32), "attempting to assign a gradient with dtype"),
    ],
    ids=["shape", "rank", "dtype"],
)
def test_assigning_a_grad_unlike_the_tensor_raises(gradient, match):
    p = nn.Parameter(onnxnn.ones(3, dtype=onnxnn.float64))
    with pytest.raises(RuntimeError, match=match):
        p.grad = gradient()
    assert p.grad is None


def test_assigning_a_grad_that_is_not_a_tensor_raises_type_error():
    p = nn.Parameter(onnxnn.ones(3))
    with pytest.raises(TypeError, match="assigned grad expected to be a Tensor or None but got grad of type int"):
        p.grad = 3
    with pytest.raises(TypeError, match="assigned grad expected to be a Tensor or None"):
        p.grad = np.ones(3, dtype=np.float32)
    with pytest.raises(RuntimeError, match="can't assign Variable as its own grad"):
        p.grad = p


def test_assigned_grad_is_what_the_optimizer_steps_with_and_none_clears_it():
    p = nn.Parameter(onnxnn.tensor([1.0, 2.0, 3.0], dtype=onnxnn.float64))
    p.grad = onnxnn.tensor([0.5, -1.0, 2.0], dtype=onnxnn.float64)
    onnxnn.optim.SGD([p], lr=0.5).step()
    np.testing.assert_array_equal(p.detach().numpy(), [1.0 - 0.25, 2.0 + 0.5, 3.0 - 1.0])
    p.grad = None
    assert p.grad is None
    p.grad = onnxnn.zeros(3, dtype=onnxnn.float64)
    del p.grad
    assert p.grad is None
    plain = onnxnn.ones(2)  # any tensor may be given a gradient, as in PyTorch
    plain.grad = onnxnn.zeros(2)
    np.testing.assert_array_equal(plain.grad.numpy(), [0.0, 0.0])


def test_backward_accumulates_into_an_assigned_grad():
    x = _leaf([1.0, 2.0])
    x.grad = onnxnn.tensor([10.0, 20.0])
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [13.0, 23.0])


# ----------------------------------------------------------------------------- what tensor hooks may return
def _double_to_float(grad):
    return grad.float()


@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "non_leaf"])
def test_hook_changing_the_dtype_raises_naming_the_hook(leaf):
    x = _leaf([1.0, 1.0, 1.0], onnxnn.float64)
    hooked = x if leaf else x * 2
    hooked.register_hook(_double_to_float)
    with pytest.raises(
        RuntimeError,
        match=r"hook '_double_to_float' has changed the type of value "
        r"\(was onnxnn.DoubleTensor got onnxnn.FloatTensor\)",
    ):
        (hooked * 2).sum().backward()


@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "non_leaf"])
def test_hook_changing_the_size_raises(leaf):
    x = _leaf([1.0, 1.0, 1.0])
    hooked = x if leaf else x * 2
    hooked.register_hook(lambda grad: grad.sum().reshape(1))
    with pytest.raises(RuntimeError, match="hook '<lambda>' has changed the size of value"):
        (hooked * 2).sum().backward()


def test_hook_checks_apply_to_autograd_grad_too():
    x = _leaf([1.0, 1.0], onnxnn.float64)
    x.register_hook(_double_to_float)
    with pytest.raises(RuntimeError, match="hook '_double_to_float' has changed the type of value"):
        onnxnn.autograd.grad((x * 2).sum(), x)


@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "non_leaf"])
def test_hook_returning_a_non_tensor_raises_type_error(leaf):
    x = _leaf([1.0, 1.0])
    hooked = x if leaf else x * 2
    hooked.register_hook(lambda grad: 3)
    with pytest.raises(TypeError, match="expected Variable, but hook returned 'int'"):
        (hooked * 2).sum().backward()


@pytest.mark.parametrize(
    "returned,error,message",
    [
        (lambda: onnxnn.ones(2), RuntimeError, "Tensor post accumulate grad hooks should return None."),
        (lambda: 5, TypeError, "expected Variable, but hook returned 'int'"),
    ],
    ids=["tensor", "int"],
)
def test_post_accumulate_grad_hook_returning_a_value_raises_as_pytorch(returned, error, message):
    x = _leaf([1.0, 1.0])
    x.register_post_accumulate_grad_hook(lambda tensor: returned())
    with pytest.raises(error, match=re.escape(message)):
        (x * 2).sum().backward()


def test_hook_returning_a_tensor_like_the_gradient_replaces_it():
    x = _leaf([1.0, 2.0])
    x.register_hook(lambda grad: grad * 10)
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [30.0, 30.0])


# ----------------------------------------------------------------------------- hooks and missing gradients
def test_node_hooks_see_none_for_an_output_no_gradient_reached():
    x = _leaf([1.0, 2.0, 3.0, 4.0])
    first, _second = (x * 1).split(2)
    seen = {}
    first.grad_fn.register_prehook(lambda grad_outputs: seen.update(pre=grad_outputs))  # update returns None
    first.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.update(post=grad_outputs))
    (first * 5).sum().backward()
    for key in ("pre", "post"):
        np.testing.assert_array_equal(seen[key][0].numpy(), [5.0, 5.0])
        assert seen[key][1] is None
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0, 0.0, 0.0])  # the split's backward had zeros


class _ProductAndTotal(nn.Module):
    def forward(self, a, b):
        return a * b, (a + b).sum()


def test_full_backward_hooks_see_none_for_an_output_without_gradient():
    module = _ProductAndTotal()
    seen = {}
    module.register_full_backward_pre_hook(lambda m, grad_output: seen.update(pre=grad_output))  # returns None
    module.register_full_backward_hook(lambda m, grad_input, grad_output: seen.update(full=grad_output))
    a = _leaf([1.0, 2.0])
    product, _total = module(a, onnxnn.full((2,), 3.0))
    product.sum().backward()  # the total receives no gradient
    for key in ("pre", "full"):
        grad_output = seen[key]
        assert len(grad_output) == 2 and grad_output[1] is None
        np.testing.assert_array_equal(grad_output[0].numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0])


def test_custom_function_without_materialized_grads_still_gets_none():
    class TwoOutputs(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, first, second):
            assert second is None
            return first * 2

    x = _leaf([1.0, 2.0])
    first, _second = TwoOutputs.apply(x)
    first.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


# ----------------------------------------------------------------------------- error types of misuses
def test_save_for_backward_refuses_a_non_tensor_by_position():
    class SavesANumber(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 is of type int"):
        SavesANumber.apply(_leaf([1.0, 2.0]))


def test_requires_grad_of_a_non_leaf_cannot_be_assigned():
    h = _leaf([1.0, 2.0]) * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables."):
        h.requires_grad = True
    with pytest.raises(RuntimeError, match="If you want to use a computed variable in a subgraph"):
        h.requires_grad = False
    assert h.requires_grad_(True) is h  # the method accepts what the tensor already is, as PyTorch's
    leaf = onnxnn.ones(2)
    leaf.requires_grad = True
    assert leaf.requires_grad and leaf.is_leaf


# What a grad_fn's pre-hook (grad_outputs) or hook (grad_inputs, grad_outputs) returns replaces the
# gradients only as PyTorch allows: a tuple of as many entries, each None or a tensor like the one it
# replaces (the hook y = x * 3 sees one grad_output, and grad_inputs for x and the constant 3).
NODE_HOOK_RESULTS = [
    ("pre", lambda g: 5, TypeError, "expected tuple, but hook returned 'int'"),
    ("pre", lambda g: [g[0]], TypeError, "expected tuple, but hook returned 'list'"),
    ("pre", lambda g: (g[0], g[0]), RuntimeError, r"incorrect number of values \(got 2, but expected 1\)"),
    ("pre", lambda g: (g[0].double(),), RuntimeError, "has changed the type of value"),
    ("pre", lambda g: (g[0][:1],), RuntimeError, "has changed the size of value"),
    ("pre", lambda g: (1.0,), TypeError, "expected Variable, but hook returned 'float'"),
    ("post", lambda inputs, outputs: 5, TypeError, "expected tuple, but hook returned 'int'"),
    ("post", lambda inputs, outputs: (inputs[0], inputs[0]), RuntimeError, "can't replace a None gradient"),
    (
        "post",
        lambda inputs, outputs: (inputs[0],),
        RuntimeError,
        r"incorrect number of values \(got 1, but expected 2\)",
    ),
]


@pytest.mark.parametrize("kind, hook, error, message", NODE_HOOK_RESULTS)
def test_node_hook_results_are_checked(kind, hook, error, message):
    x = onnxnn.ones(2, requires_grad=True)
    y = x * 3
    (y.grad_fn.register_prehook if kind == "pre" else y.grad_fn.register_hook)(hook)
    with pytest.raises(error, match=message):
        y.sum().backward()


def test_a_pre_hook_may_drop_the_gradient():
    x = onnxnn.ones(2, requires_grad=True)
    y = x * 3
    y.grad_fn.register_prehook(lambda g: (None,))
    y.sum().backward()
    assert x.grad is None


class _ReturnsNoGradient(Function):
    @staticmethod
    def forward(ctx, a):
        return a * 3

    @staticmethod
    def backward(ctx, gradient):
        return None


def _drop_at_the_last_node(y):
    z = y.exp()
    z.grad_fn.register_prehook(lambda g: (None,))
    return z


@pytest.mark.parametrize(
    "dropped_after",
    [
        pytest.param(_drop_at_the_last_node, id="a pre-hook two nodes on"),
        pytest.param(_ReturnsNoGradient.apply, id="a custom Function returning None"),
    ],
)
def test_a_recorded_op_no_gradient_reaches_computes_none_and_leaves_grad_none(dropped_after):
    # PyTorch's built-in nodes compute nothing from no gradient: the leaf keeps .grad None, so an
    # optimizer with weight decay skips it rather than stepping with zeros.
    x = onnxnn.ones(2, requires_grad=True)
    dropped_after(x * 2).sum().backward()
    assert x.grad is None
    onnxnn.optim.SGD([x], lr=1.0, weight_decay=0.5).step()
    assert x.tolist() == [1.0, 1.0]


def test_a_module_whose_full_backward_pre_hook_drops_the_gradient_keeps_its_grads_none():
    layer = nn.Linear(3, 2)
    layer.register_full_backward_pre_hook(lambda module, grad_output: (None,))
    layer(onnxnn.ones(1, 3)).sum().backward()
    assert layer.weight.grad is None and layer.bias.grad is None


@pytest.mark.parametrize("inputs", ["y", "y and x"])
def test_grad_runs_a_non_leaf_inputs_hook_once(inputs):
    # Where the backward runs on behind y (x is asked for too), PyTorch captures y's gradient as it
    # arrived and its hook runs once, there; where nothing lies behind, the capture is the hook's.
    calls = []
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: calls.append(g.tolist()) or g * 2)
    gradients = onnxnn.autograd.grad((y * y).sum(), [y, x] if inputs == "y and x" else [y])
    assert calls == [[4.0, 8.0]]
    assert gradients[0].tolist() == ([4.0, 8.0] if inputs == "y and x" else [8.0, 16.0])
    if inputs == "y and x":
        assert gradients[1].tolist() == [16.0, 32.0]  # the hook's doubled gradient flows on to x


@pytest.mark.parametrize("only_inputs", [True, False])
def test_grad_accepts_pytorchs_deprecated_only_inputs_and_ignores_it(only_inputs):
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (gradient,) = onnxnn.autograd.grad((x * x).sum(), x, only_inputs=only_inputs)
    assert gradient.tolist() == [2.0, 4.0] and x.grad is None
    assert [w.category for w in caught] == ([] if only_inputs else [FutureWarning])


def test_next_functions_pair_every_input_as_pytorchs():
    x = onnxnn.ones(2, requires_grad=True)
    y = x * onnxnn.ones(2)  # the second input takes no gradient: PyTorch's (None, 0)
    (leaf, index), no_gradient = y.grad_fn.next_functions
    assert leaf.variable is x and index == 0 and no_gradient == (None, 0)
    # The usual walk over a graph (torchviz's) unpacks every edge.
    names, stack = [], [(y * 2).sum().grad_fn]
    while stack:
        function = stack.pop()
        names.append(function.name())
        stack.extend(behind for behind, _ in function.next_functions if behind is not None)
    assert names == ["SumBackward0", "MulBackward0", "MulBackward0", "torch::autograd::AccumulateGrad"]


def test_is_inference_mode_enabled_follows_the_innermost_inference_mode_block():
    seen = [onnxnn.is_inference_mode_enabled()]
    with onnxnn.inference_mode():
        seen.append(onnxnn.is_inference_mode_enabled())
        with onnxnn.inference_mode(False):
            seen.append(onnxnn.is_inference_mode_enabled())
        with onnxnn.enable_grad():  # grad mode alone does not leave inference mode
            seen.append(onnxnn.is_inference_mode_enabled())
        seen.append(onnxnn.is_inference_mode_enabled())
    with onnxnn.no_grad():
        seen.append(onnxnn.is_inference_mode_enabled())
    assert seen == [False, True, False, True, True, False]

    @onnxnn.inference_mode
    def bare():
        return onnxnn.is_inference_mode_enabled()

    @onnxnn.inference_mode()
    def steps():
        yield onnxnn.is_inference_mode_enabled()

    assert bare() and next(steps()) and not onnxnn.is_inference_mode_enabled()


# ----------------------------------------------------------------------------- Variable and the grad-mode aliases
@pytest.mark.parametrize(
    "make, requires_grad",
    [
        (lambda: onnxnn.tensor([1.0, 2.0]), False),
        (lambda: onnxnn.tensor([1.0, 2.0]), True),
        (lambda: _leaf([1.0, 2.0]) * 3, False),  # a non-leaf: the result is a leaf without its history
        (lambda: _leaf([1.0, 2.0]) * 3, True),
        (lambda: nn.Parameter(onnxnn.tensor([1.0, 2.0])), False),  # a Parameter: a plain tensor comes back
    ],
    ids=["tensor", "tensor_requires_grad", "non_leaf", "non_leaf_requires_grad", "parameter"],
)
def test_variable_returns_a_detached_tensor_sharing_the_data(make, requires_grad):
    data = make()
    variable = onnxnn.autograd.Variable(data, requires_grad=requires_grad)
    assert type(variable) is onnxnn.Tensor and variable is not data
    assert variable.requires_grad is requires_grad and variable.grad_fn is None and variable.is_leaf
    with onnxnn.no_grad():
        variable[0] = 5.0  # shares the data, as PyTorch's does
    np.testing.assert_array_equal(data.detach().numpy(), [5.0, 6.0] if data.grad_fn is not None else [5.0, 2.0])


def test_variable_that_requires_grad_is_a_leaf_of_a_new_graph():
    variable = onnxnn.autograd.Variable(onnxnn.tensor([1.0, 2.0]), True)  # requires_grad by position too
    (variable * variable).sum().backward()
    np.testing.assert_array_equal(variable.grad.numpy(), [2.0, 4.0])


@pytest.mark.parametrize(
    "value, expected",
    [
        (onnxnn.tensor([1.0]), True),
        (nn.Parameter(onnxnn.tensor([1.0])), True),
        (onnxnn.tensor([1], dtype=onnxnn.int64), True),
        (np.ones(1), False),
        (3, False),
    ],
    ids=["tensor", "parameter", "integer_tensor", "ndarray", "int"],
)
def test_every_tensor_is_an_instance_of_variable(value, expected):
    assert isinstance(value, onnxnn.autograd.Variable) is expected


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: onnxnn.autograd.Variable(3), TypeError, "Variable data has to be a tensor, but got int"),  # type: ignore[arg-type]
        (
            lambda: onnxnn.autograd.Variable(onnxnn.tensor([1]), requires_grad=True),
            RuntimeError,
            "Only Tensors of floating point and complex dtype can require gradients",
        ),
        (lambda: onnxnn.autograd.Variable(onnxnn.tensor([1.0]), foo=1), TypeError, "foo"),  # type: ignore[call-arg]
    ],
    ids=["not_a_tensor", "integer_requires_grad", "unknown_keyword"],
)
def test_variable_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_variable_without_data_is_empty_and_volatile_only_warns():
    assert onnxnn.autograd.Variable().shape == (0,)
    with pytest.warns(UserWarning, match="volatile was removed and now has no effect"):
        variable = onnxnn.autograd.Variable(onnxnn.tensor([1.0]), volatile=True)
    assert not variable.requires_grad


def test_autograd_exposes_inference_mode_and_grad_mode_as_torch_autograd():
    grad_mode = onnxnn.autograd.grad_mode  # also a module: ``from onnxnn.autograd.grad_mode import no_grad``
    assert onnxnn.autograd.inference_mode is onnxnn.inference_mode
    for name in ("no_grad", "enable_grad", "set_grad_enabled", "inference_mode"):
        assert getattr(grad_mode, name) is getattr(onnxnn, name)
    x = _leaf([1.0])
    with onnxnn.autograd.inference_mode():
        assert onnxnn.is_inference_mode_enabled() and not (x * 2).requires_grad
    with grad_mode.no_grad():
        assert not (x * 2).requires_grad
