"""Autograd engine behaviours where onnxnn follows PyTorch 2.13 (its behaviour is the specification):

- a backward through a released graph raises only where a node needs a freed saved value;
- ``backward(inputs=...)`` accumulates into non-leaf inputs' ``.grad`` (after their hooks);
- ``ctx.mark_dirty`` in a custom ``autograd.Function`` (an input modified in place, returned as is);
- ``AccumulateGrad`` node hooks and metadata, and grad_fn classes named after their node.

Expected values come from numpy formulas; the comparisons with PyTorch at the end skip without it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.fastpath.backward_replay import clear_templates, replay_info

FREED = "Trying to backward through the graph a second time"
X = np.array([0.5, 1.5, 2.5], dtype=np.float32)


def _leaf(values=X):
    return onnxnn.tensor(np.array(values, dtype=np.float32), requires_grad=True)


# ------------------------------------------------------------------ backward through a released graph

# (expression of the leaf x, gradient of its sum with respect to x): nodes that save no tensor in
# PyTorch, so a second backward without retain_graph adds the same gradient again.
NOTHING_SAVED = [
    ("x + 1", lambda x: x + 1, np.ones(3)),
    ("x - 1", lambda x: x - 1, np.ones(3)),
    ("-x", lambda x: -x, -np.ones(3)),
    ("x + x", lambda x: x + x, 2 * np.ones(3)),
    ("x.view(3, 1)", lambda x: x.view(3, 1), np.ones(3)),
    ("x.reshape(1, 3).t()", lambda x: x.reshape(1, 3).t(), np.ones(3)),
    ("x.unsqueeze(0)", lambda x: x.unsqueeze(0), np.ones(3)),
    ("x.expand(2, 3)", lambda x: x.expand(2, 3), 2 * np.ones(3)),
    ("x[1:]", lambda x: x[1:], np.array([0.0, 1.0, 1.0])),
    ("x.mean()", lambda x: x.mean(), np.full(3, 1 / 3)),
    ("x.cumsum(0)", lambda x: x.cumsum(0), np.array([3.0, 2.0, 1.0])),
    ("x.clone()", lambda x: x.clone(), np.ones(3)),
    ("x.double()", lambda x: x.double(), np.ones(3)),
    ("cat([x, x])", lambda x: onnxnn.cat([x, x]), 2 * np.ones(3)),
    ("x.flip(0)", lambda x: x.flip(0), np.ones(3)),
]

# Nodes that save a tensor (an input, an output, or a number's wrapped tensor) in PyTorch.
SAVES_A_TENSOR = [
    ("x * x", lambda x: x * x),
    ("x * 2", lambda x: x * 2),
    ("x / 2", lambda x: x / 2),
    ("x.exp()", lambda x: x.exp()),
    ("x.relu()", lambda x: x.relu()),
    ("x.sin()", lambda x: x.sin()),
    ("x.pow(2)", lambda x: x.pow(2)),
    ("x.sigmoid()", lambda x: x.sigmoid()),
    ("x.softmax(0)", lambda x: x.softmax(0)),
    ("x.clamp(0, 1)", lambda x: x.clamp(0, 1)),
]


@pytest.mark.parametrize("name, expression, gradient", NOTHING_SAVED, ids=[case[0] for case in NOTHING_SAVED])
def test_a_second_backward_through_nodes_that_saved_nothing_accumulates_again(name, expression, gradient) -> None:
    x = _leaf()
    y = expression(x).sum()
    y.backward()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * gradient, rtol=1e-6)


@pytest.mark.parametrize("name, expression", SAVES_A_TENSOR, ids=[case[0] for case in SAVES_A_TENSOR])
def test_a_second_pass_raises_where_a_node_on_its_path_saved_a_tensor(name, expression) -> None:
    x, z = _leaf(), _leaf()
    loss = (x + 1).sum() + expression(z).sum()
    loss.backward()
    (gradient,) = onnxnn.autograd.grad(loss, x)  # its path saved nothing
    np.testing.assert_allclose(gradient.numpy(), np.ones(3))
    with pytest.raises(RuntimeError, match=FREED):
        loss.backward()


@pytest.mark.parametrize(
    "raising",
    [
        lambda x, z, loss: loss.backward(),  # z's MulBackward0 is on the path
        lambda x, z, loss: onnxnn.autograd.grad(loss, z),
        lambda x, z, loss: onnxnn.autograd.grad(loss, [x, z]),
        lambda x, z, loss: loss.backward(inputs=[z]),
    ],
)
def test_a_second_pass_through_a_mixed_graph_raises_only_where_the_path_needs_freed_values(raising) -> None:
    x, z = _leaf(), _leaf([1.0, 2.0, 3.0])
    loss = (x + 1).sum() + (z * z).sum()
    loss.backward()
    x.grad = None
    loss.backward(inputs=[x])  # Mul's node is not on the path: it is not run
    (gradient,) = onnxnn.autograd.grad(loss, x)
    np.testing.assert_allclose(x.grad.numpy(), np.ones(3))
    np.testing.assert_allclose(gradient.numpy(), np.ones(3))
    with pytest.raises(RuntimeError, match=FREED):
        raising(x, z, loss)


def test_retain_graph_then_release_then_a_backward_that_needs_nothing_saved() -> None:
    x = _leaf()
    y = (x.view(3, 1) - 1).sum()
    y.backward(retain_graph=True)
    y.backward()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.ones(3))


@pytest.mark.usefixtures("fast_path_on")  # backward replays are the fast path's
def test_a_second_backward_after_replayed_backwards_follows_the_same_rules() -> None:
    # The fast path replays a repeated structure: what it leaves in the nodes it frees must serve a
    # second backward as the general driver's does.
    clear_templates()
    for _ in range(3):
        x = _leaf()
        saves_nothing = (x + 1).sum()
        saves_nothing.backward()
        saves_nothing.backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * np.ones(3))
    for _ in range(3):
        z = _leaf()
        saves = (z * z).sum()
        saves.backward()
        with pytest.raises(RuntimeError, match=FREED):
            saves.backward()
    assert replay_info()["replayed"] >= 2


class _Double(onnxnn.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2


class _DoubleReadingSaved(onnxnn.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        ctx.saved_tensors  # nothing was saved: still an access to freed buffers, as in PyTorch
        return grad_output * 2


def test_a_custom_function_takes_a_second_backward_unless_it_reads_saved_tensors() -> None:
    x, z = _leaf(), _leaf()
    loss = _Double.apply(x).sum() + _DoubleReadingSaved.apply(z).sum()
    loss.backward()
    loss.backward(inputs=[x])
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.ones(3))
    with pytest.raises(RuntimeError, match=FREED):
        loss.backward(inputs=[z])


# ------------------------------------------------------------------ backward(inputs=...) with non-leaves


@pytest.mark.parametrize("calls", [1, 2])
def test_backward_accumulates_into_a_non_leaf_input_only(calls) -> None:
    x = _leaf()
    hidden = x * 3
    loss = (hidden * hidden).sum()
    for _ in range(calls):
        loss.backward(inputs=[hidden], retain_graph=True)
    np.testing.assert_allclose(hidden.grad.numpy(), calls * 2 * 3 * X, rtol=1e-6)
    assert x.grad is None
    assert hidden.retains_grad  # as PyTorch: the input retains its gradient from then on


def test_backward_accumulates_into_a_mix_of_leaves_and_non_leaves() -> None:
    x, w = _leaf(), _leaf([2.0, 2.0, 2.0])
    hidden = x * w
    other = w.exp()
    loss = (hidden * hidden).sum() + other.sum()
    loss.backward(inputs=[hidden, x])
    np.testing.assert_allclose(hidden.grad.numpy(), 2 * X * 2, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 2 * (X * 2) * 2, rtol=1e-6)
    assert w.grad is None and other.grad is None


def test_a_non_leaf_input_gradient_is_what_its_hooks_give() -> None:
    x = _leaf()
    hidden = x * 2
    hidden.register_hook(lambda grad: grad * 10)
    loss = (hidden * hidden).sum()
    loss.backward(inputs=[hidden, x])
    np.testing.assert_allclose(hidden.grad.numpy(), 10 * 2 * (2 * X), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 2 * 10 * 2 * (2 * X), rtol=1e-6)


def test_a_non_leaf_input_node_runs_its_node_hooks() -> None:
    x = _leaf()
    hidden = x * 2
    seen = []
    hidden.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(grad_outputs[0].numpy()))
    (hidden * hidden).sum().backward(inputs=[hidden])
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], 2 * (2 * X), rtol=1e-6)
    assert x.grad is None


def test_a_non_leaf_input_off_the_path_gets_no_gradient() -> None:
    x = _leaf()
    elsewhere = x * 2
    (x * x).sum().backward(inputs=[elsewhere, x])
    assert elsewhere.grad is None
    np.testing.assert_allclose(x.grad.numpy(), 2 * X)


@pytest.mark.parametrize("item, name", [(1.0, "float"), ("x", "str"), (None, "NoneType")])
def test_backward_refuses_inputs_that_are_not_tensors(item, name) -> None:
    x = _leaf()
    with pytest.raises(RuntimeError, match=f"all inputs have to be Tensors or GradientEdges, but got {name}"):
        (x * 2).sum().backward(inputs=[x, item])


# ------------------------------------------------------------------ ctx.mark_dirty


class _AddOne_(onnxnn.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 3  # not the true derivative: shows this backward ran


def _scale_function(library):
    """``x *= w`` as ``library``'s custom Function, saving the modified x (an output now) and w."""

    class _Scale_(library.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            x.mul_(w)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x, w)
            return x

        @staticmethod
        def backward(ctx, grad_output):
            result, w = ctx.saved_tensors
            return grad_output * w, (grad_output * result / w).sum()

    return _Scale_


_Scale_ = _scale_function(onnxnn)


def test_mark_dirty_returns_the_input_itself_with_the_function_as_its_history() -> None:
    x = _leaf()
    hidden = x * 2
    result = _AddOne_.apply(hidden)
    assert result is hidden
    assert type(hidden.grad_fn).__name__ == hidden.grad_fn.name() == "_AddOne_Backward"
    assert hidden._version == 2  # forward's write and the marking, as PyTorch counts
    np.testing.assert_allclose(hidden.detach().numpy(), 2 * X + 1)
    hidden.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * 2 * np.ones(3))


def test_mark_dirty_with_saved_tensors_gives_the_chain_rule_gradients() -> None:
    x, w = _leaf(), onnxnn.tensor(2.0, requires_grad=True)
    hidden = x * 1
    out = _Scale_.apply(hidden, w)
    (out * out).sum().backward()
    result = X * 2.0
    np.testing.assert_allclose(x.grad.numpy(), 2 * result * 2.0, rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), np.sum(2 * result * X), rtol=1e-6)


def test_mark_dirty_on_a_tensor_without_gradient_gives_it_the_history() -> None:
    buffer, w = onnxnn.zeros(3), onnxnn.tensor(2.0, requires_grad=True)
    result = _Scale_.apply(buffer.add_(1), w)
    assert result is buffer and buffer.requires_grad and buffer.grad_fn is not None
    buffer.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 3.0)


def test_mark_dirty_moves_retain_grad_to_the_new_history() -> None:
    x = _leaf()
    hidden = x * 2
    hidden.retain_grad()
    _AddOne_.apply(hidden)
    assert hidden.retains_grad
    hidden.sum().backward()
    np.testing.assert_allclose(hidden.grad.numpy(), np.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.ones(3))


def test_mark_dirty_on_a_view_gives_its_base_the_history_too() -> None:
    x = _leaf([1.0, 2.0, 3.0, 4.0])
    base = x * 1
    view = base[1:3]
    assert _AddOne_.apply(view) is view
    np.testing.assert_allclose(base.detach().numpy(), [1.0, 3.0, 4.0, 4.0])
    base.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 3.0, 3.0, 1.0])


class _AddOneTwice_(onnxnn.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x, x * 2

    @staticmethod
    def backward(ctx, first, second):
        return first + 2 * second


class _AddOneReturningCopy_(onnxnn.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x * 1

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class _MarksANumber(onnxnn.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(3)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


_KEPT: list = []  # bases kept alive: onnxnn's views refer to their base weakly


@pytest.mark.parametrize(
    "make, function, message",
    [
        (lambda: _leaf(), _AddOne_, "a leaf Variable that requires grad has been used in an in-place operation"),
        (lambda: _leaf()[1:], _AddOne_, "a view of a leaf Variable that requires grad is being used"),
        (lambda: _KEPT.append(_leaf() * 1) or _KEPT[-1][1:], _AddOneTwice_, "cannot return more than one Tensor"),
        (lambda: _leaf() * 1, _AddOneReturningCopy_, "Some elements marked as dirty .* were not returned"),
        (lambda: _leaf() * 1, _MarksANumber, "mark_dirty can only accept variables, but argument 0 is of type int"),
    ],
)
def test_mark_dirty_refuses_what_pytorch_refuses(make, function, message) -> None:
    with pytest.raises(RuntimeError, match=message):
        function.apply(make())


def test_mark_dirty_checks_what_forward_returned_with_nothing_to_record_too() -> None:
    with pytest.raises(RuntimeError, match="Some elements marked as dirty"):
        _AddOneReturningCopy_.apply(onnxnn.zeros(3))
    with onnxnn.no_grad(), pytest.raises(RuntimeError, match="Some elements marked as dirty"):
        _AddOneReturningCopy_.apply(_leaf() * 1)


def test_mark_dirty_of_a_tensor_that_is_not_an_input_warns() -> None:
    class MarksItsOwnResult(onnxnn.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = x * 2
            ctx.mark_dirty(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * 2

    x = _leaf()
    with pytest.warns(UserWarning, match="ctx.mark_dirty\\(\\) received a tensor that was not an input"):
        MarksItsOwnResult.apply(x * 1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.ones(3))


# ------------------------------------------------------------------ AccumulateGrad node, grad_fn classes


def _accumulator(tensor):
    return tensor.view_as(tensor).grad_fn.next_functions[0][0]


def test_accumulate_grad_node_hooks_run_around_the_accumulation() -> None:
    x = _leaf()
    accumulator = _accumulator(x)
    events = []
    accumulator.register_prehook(lambda grad_outputs: events.append(("pre", grad_outputs[0].numpy(), x.grad)))
    accumulator.register_hook(
        lambda grad_inputs, grad_outputs: events.append(("post", grad_inputs, grad_outputs[0].numpy(), x.grad))
    )
    (x * 3).sum().backward()
    assert [event[0] for event in events] == ["pre", "post"]
    np.testing.assert_allclose(events[0][1], 3 * np.ones(3))
    assert events[0][2] is None  # before the accumulation
    assert events[1][1] == ()
    np.testing.assert_allclose(events[1][3].numpy(), 3 * np.ones(3))  # after it


def test_accumulate_grad_prehook_replaces_the_gradient_and_handles_remove() -> None:
    x = _leaf()
    accumulator = _accumulator(x)
    handle = accumulator.register_prehook(lambda grad_outputs: (grad_outputs[0] * 10,))
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 30 * np.ones(3))
    handle.remove()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 33 * np.ones(3))


def test_accumulate_grad_hooks_run_at_every_step_of_a_repeated_structure() -> None:
    # The pattern of DDP-style gradient bucketing: the node is kept, its hook fires per step.
    clear_templates()
    x = _leaf()
    accumulator = _accumulator(x)
    ready = []
    accumulator.register_hook(lambda grad_inputs, grad_outputs: ready.append(x.grad.numpy().copy()))
    for _ in range(4):
        (x * 2).sum().backward()
    assert len(ready) == 4
    np.testing.assert_allclose(ready[-1], 8 * np.ones(3))


def test_accumulate_grad_hooks_do_not_run_for_autograd_grad() -> None:
    x = _leaf()
    accumulator = _accumulator(x)
    calls = []
    accumulator.register_hook(lambda grad_inputs, grad_outputs: calls.append(1))
    onnxnn.autograd.grad((x * 2).sum(), x)
    assert calls == []


@pytest.mark.parametrize(
    "hook, error, message",
    [
        (lambda grad_outputs: grad_outputs[0], TypeError, "expected tuple, but hook returned 'Tensor'"),
        (lambda grad_outputs: (), RuntimeError, "returned an incorrect number of values"),
    ],
)
def test_accumulate_grad_prehook_results_are_checked(hook, error, message) -> None:
    x = _leaf()
    accumulator = _accumulator(x)
    accumulator.register_prehook(hook)
    with pytest.raises(error, match=message):
        (x * 2).sum().backward()


def test_accumulate_grad_node_metadata_name_and_variable() -> None:
    x = _leaf()
    accumulator = _accumulator(x)
    assert accumulator.name() == "torch::autograd::AccumulateGrad"
    assert type(accumulator).__name__ == "AccumulateGrad"
    assert accumulator.variable is x
    assert accumulator.metadata == {}
    accumulator.metadata["bucket"] = 3
    assert _accumulator(x) is accumulator and _accumulator(x).metadata == {"bucket": 3}


@pytest.mark.parametrize(
    "expression, name",
    [
        (lambda x: x * x, "MulBackward0"),
        (lambda x: x + 1, "AddBackward0"),
        (lambda x: x.exp(), "ExpBackward0"),
        (lambda x: x.sum(), "SumBackward0"),
        (lambda x: x.view(3, 1), "ViewBackward0"),
        (lambda x: onnxnn.linalg.svd(x.reshape(1, 3))[1], "LinalgSvdBackward0"),  # a closed-form node
    ],
)
def test_grad_fn_class_is_named_after_its_node(expression, name) -> None:
    function = expression(_leaf()).grad_fn
    assert type(function).__name__ == function.name() == name
    assert type(expression(_leaf()).grad_fn) is type(function)  # one class per name
    assert isinstance(function, onnxnn.runtime.autograd.Function)
    assert function.metadata == {}
    behind = (expression(_leaf()) * 1).grad_fn.next_functions[0][0]  # reached through next_functions
    assert type(behind).__name__ == behind.name() == name


@pytest.mark.usefixtures("fast_path_on")  # backward replays are the fast path's
def test_grad_fn_classes_named_when_shown_still_replay() -> None:
    clear_templates()
    for _ in range(4):
        x = _leaf()
        loss = (x * x).sum()
        assert type(loss.grad_fn).__name__ == "SumBackward0"
        assert type(loss.grad_fn.next_functions[0][0]).__name__ == "MulBackward0"
        loss.backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * X)
    assert replay_info()["replayed"] >= 2


# ------------------------------------------------------------------ side by side with PyTorch


def _both(expression_source: str):
    torch = pytest.importorskip("torch")
    results = []
    for library in (torch, onnxnn):
        x = library.tensor(X.tolist(), requires_grad=True)
        y = eval(expression_source, {"x": x, "t": library}).sum()  # noqa: S307  # a fixed table
        y.backward()
        try:
            y.backward()
            results.append(np.asarray(x.grad.tolist()))
        except RuntimeError as error:
            assert FREED in str(error)
            results.append(None)
    return results


def test_second_backward_raises_where_pytorch_raises() -> None:
    sources = ["x + 1", "x * 2", "x.exp()", "x.view(3, 1)", "x.mean()", "x[1:]", "t.cat([x, x])", "x.relu()"]
    for source in sources:
        expected, actual = _both(source)
        if expected is None:
            assert actual is None, source
        else:
            assert actual is not None, source
            np.testing.assert_allclose(actual, expected, rtol=1e-6, err_msg=source)


def test_mark_dirty_gradients_equal_pytorchs() -> None:
    torch = pytest.importorskip("torch")

    gradients = []
    for library in (torch, onnxnn):
        x = library.tensor([1.0, -2.0, 3.0, 0.5], requires_grad=True)
        w = library.tensor(1.5, requires_grad=True)
        base = x * 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _scale_function(library).apply(base[1:3], w)
        (base * base).sum().backward()
        gradients.append((np.asarray(x.grad.tolist()), float(w.grad)))
    np.testing.assert_allclose(gradients[1][0], gradients[0][0], rtol=1e-6)
    np.testing.assert_allclose(gradients[1][1], gradients[0][1], rtol=1e-6)
