"""onnxnn.optim optimizers' API as PyTorch's: param groups, constructor checks and defaults, repr,
state_dict and load_state_dict, zero_grad, closures, and step and state_dict hooks.

Where a test steps an optimizer, it compares against the numpy references of PyTorch's documented
algorithms (optimizer_cases.py). The algorithms themselves are checked in test_optimizers_algorithms.py.
"""

from __future__ import annotations

import math
import pickle
import re

import numpy as np
import pytest

import onnxnn
from onnxnn.optim import SGD, Adagrad, Adam, AdamW, RMSprop


from .optimizer_cases import (
    assert_matches_reference,
    make_problem,
    reference_adagrad,
    reference_adamw,
    reference_sgd,
    rounded_problem,
    run_steps,
    value,
)


def test_param_groups_use_their_own_hyperparameters():
    initial, gradients = make_problem()
    params = [onnxnn.tensor(theta, dtype=onnxnn.float32, requires_grad=True) for theta in initial]
    optimizer = SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.01, "momentum": 0.5}], lr=0.1, momentum=0.9)
    assert [group["lr"] for group in optimizer.param_groups] == [0.1, 0.01]
    assert [group["momentum"] for group in optimizer.param_groups] == [0.9, 0.5]
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float32)
        optimizer.step()
    initial, gradients = rounded_problem(initial, gradients, onnxnn.float32)
    first, _ = reference_sgd(initial[:1], [g[:1] for g in gradients], lr=0.1, momentum=0.9)
    rest, _ = reference_sgd(initial[1:], [g[1:] for g in gradients], lr=0.01, momentum=0.5)
    for param, expected in zip(params, first + rest):
        assert_matches_reference(value(param), expected, initial, gradients, onnxnn.float32)


def test_adagrad_fills_every_groups_sums_with_the_constructors_initial_value():
    # PyTorch's constructor fills the sums of every group with its own argument; a group's
    # initial_accumulator_value is kept in the group but does not change them.
    first, second = onnxnn.ones(2, requires_grad=True), onnxnn.ones(3, requires_grad=True)
    optimizer = Adagrad([{"params": [first]}, {"params": [second], "initial_accumulator_value": 0.5}], lr=0.1)
    assert optimizer.param_groups[1]["initial_accumulator_value"] == 0.5
    for param in (first, second):
        np.testing.assert_array_equal(optimizer.state[param]["sum"].numpy(), np.zeros(param.shape, np.float32))


@pytest.mark.parametrize("group_value", [0.7, 0.0, None], ids=["0.7", "0.0", "group-default"])
@pytest.mark.parametrize("constructor_value", [0.2, 0.0])
def test_adagrad_group_added_later_starts_from_the_constructors_initial_value(constructor_value, group_value):
    # PyTorch 2.13 creates the state of a later group's params at their first step, from defaults.
    first = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    later = onnxnn.tensor([3.0, -1.0], requires_grad=True)
    optimizer = Adagrad([first], lr=0.1, initial_accumulator_value=constructor_value)
    group = (
        {"params": [later]} if group_value is None else {"params": [later], "initial_accumulator_value": group_value}
    )
    optimizer.add_param_group(group)
    gradients = [np.array([0.5, -2.0]), np.array([1.0, 0.25])]
    expected, _ = reference_adagrad(
        [np.array([3.0, -1.0])], [[g] for g in gradients], lr=0.1, initial_accumulator_value=constructor_value
    )
    for gradient in gradients:
        first.grad, later.grad = onnxnn.tensor([1.0, 1.0]), onnxnn.tensor(gradient, dtype=onnxnn.float32)
        optimizer.step()
    expected_sum = constructor_value + sum(g**2 for g in gradients)
    np.testing.assert_allclose(value(optimizer.state[later]["sum"]), expected_sum, rtol=1e-6)
    np.testing.assert_allclose(value(later), expected[0], rtol=1e-6)
    assert optimizer.state[later]["step"].item() == 2.0


def test_add_param_group_fills_defaults_and_is_optimized():
    first = onnxnn.tensor([1.0], requires_grad=True)
    second = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = SGD([first], lr=0.1, momentum=0.9)
    group = {"params": second, "lr": 0.5}
    optimizer.add_param_group(group)
    assert optimizer.param_groups[1] is group  # the caller's dict, as in PyTorch
    assert len(group["params"]) == 1 and group["params"][0] is second
    assert group["lr"] == 0.5 and group["momentum"] == 0.9 and group["nesterov"] is False
    first.grad = onnxnn.tensor([1.0])
    second.grad = onnxnn.tensor([1.0, 1.0])
    optimizer.step()
    np.testing.assert_allclose(value(first), [0.9], rtol=1e-6)
    np.testing.assert_allclose(value(second), [0.5, 1.5], rtol=1e-6)


@pytest.mark.parametrize(
    "make_group, error, message",
    [
        (lambda p: [p], TypeError, "param_group must be a dict, but got list"),
        (lambda p: {"params": {p}}, TypeError, "ordering of tensors in sets will change"),
        (lambda p: {"params": [p, 3]}, TypeError, "optimizer can only optimize Tensors, but one of the params is int"),
        (lambda p: {"params": [p * 2]}, ValueError, "can't optimize a non-leaf Tensor"),
    ],
)
def test_add_param_group_rejects_bad_groups_without_modifying(make_group, error, message):
    existing = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([existing], lr=0.1)
    new = onnxnn.tensor([2.0], requires_grad=True)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        optimizer.add_param_group(make_group(new))
    assert len(optimizer.param_groups) == 1


def test_parameters_in_two_groups_are_rejected():
    shared = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([shared], lr=0.1)
    group = {"params": [onnxnn.tensor([2.0], requires_grad=True), shared]}
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        optimizer.add_param_group(group)
    assert len(optimizer.param_groups) == 1 and "lr" not in group
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        SGD([{"params": [shared]}, {"params": [shared]}])


@pytest.mark.parametrize(
    "params, error, message",
    [
        ([], ValueError, "optimizer got an empty parameter list"),
        (
            "tensor",
            TypeError,
            "params argument given to the optimizer should be an iterable of Tensors or dicts, "
            "but got onnxnn.FloatTensor",
        ),
        ([1.0], TypeError, "optimizer can only optimize Tensors, but one of the params is float"),
    ],
)
def test_constructor_rejects_bad_params(params, error, message):
    if params == "tensor":
        params = onnxnn.tensor([1.0], requires_grad=True)
    with pytest.raises(error, match=message):
        SGD(params)


@pytest.mark.parametrize(
    "optimizer_class, options, message",
    [
        (SGD, {"lr": -1}, "Invalid learning rate: -1"),
        (SGD, {"momentum": -0.5}, "Invalid momentum value: -0.5"),
        (SGD, {"weight_decay": -1e-3}, "Invalid weight_decay value: -0.001"),
        (SGD, {"nesterov": True}, "Nesterov momentum requires a momentum and zero dampening"),
        (SGD, {"nesterov": True, "momentum": 0.9, "dampening": 0.1}, "Nesterov momentum requires a momentum and zero"),
        (Adam, {"lr": -0.1}, "Invalid learning rate: -0.1"),
        (Adam, {"eps": -1e-8}, "Invalid epsilon value: -1e-08"),
        (Adam, {"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0: 1.0"),
        (Adam, {"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1: -0.1"),
        (AdamW, {"weight_decay": -1}, "Invalid weight_decay value: -1"),
        (RMSprop, {"alpha": -0.5}, "Invalid alpha value: -0.5"),
        (RMSprop, {"momentum": -1}, "Invalid momentum value: -1"),
        (RMSprop, {"eps": -1}, "Invalid epsilon value: -1"),
        (Adagrad, {"lr_decay": -1}, "Invalid lr_decay value: -1"),
        (Adagrad, {"initial_accumulator_value": -1}, "Invalid initial_accumulator_value value: -1"),
    ],
)
def test_invalid_hyperparameters_raise_value_error(optimizer_class, options, message):
    with pytest.raises(ValueError, match=message):
        optimizer_class([onnxnn.tensor([1.0], requires_grad=True)], **options)


FUSED_AND_FOREACH = "`fused` and `foreach` cannot be `True` together."
TENSOR_LR_FOREACH = "lr as a Tensor is not supported for capturable=False and foreach=True"
BETAS_TYPES = "betas must be either both floats or both Tensors"


@pytest.mark.parametrize(
    "optimizer_class, options, error, message",
    [
        (SGD, lambda: {"lr": 0.1, "fused": True, "foreach": True}, RuntimeError, FUSED_AND_FOREACH),
        (Adagrad, lambda: {"fused": True, "foreach": True}, RuntimeError, FUSED_AND_FOREACH),
        (Adam, lambda: {"fused": True, "foreach": True}, RuntimeError, FUSED_AND_FOREACH),
        (Adam, lambda: {"lr": onnxnn.tensor(0.1), "foreach": True}, ValueError, TENSOR_LR_FOREACH),
        (AdamW, lambda: {"lr": onnxnn.tensor(0.1), "foreach": True}, ValueError, TENSOR_LR_FOREACH),
        (Adam, lambda: {"betas": (0, 0.99)}, ValueError, BETAS_TYPES),
        (AdamW, lambda: {"betas": (onnxnn.tensor(0.9), 0.999)}, ValueError, BETAS_TYPES),
        (
            Adam,
            lambda: {"betas": (onnxnn.tensor(0.9), onnxnn.tensor(0.99)), "foreach": True},
            ValueError,
            "betas[0] as a Tensor is not supported for capturable=False and foreach=True",
        ),
        (
            Adam,
            lambda: {"betas": (onnxnn.tensor(0.9), onnxnn.tensor([0.99, 0.9]))},
            RuntimeError,  # from the range check, as in PyTorch
            "Boolean value of Tensor with more than one value is ambiguous",
        ),
    ],
)
def test_constructors_refuse_what_pytorch_refuses(optimizer_class, options, error, message):
    with pytest.raises(error, match=re.escape(message)):
        optimizer_class([onnxnn.tensor([1.0], requires_grad=True)], **options())


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"betas": [0.8, 0.9]}, (0.8, 0.9)),
        ({"lr": 0.1, "foreach": True, "capturable": True}, (0.9, 0.999)),  # a tensor lr then is fine
        ({"betas": ("tensor", "tensor")}, (0.8, 0.9)),
    ],
)
def test_adam_keeps_betas_as_a_tuple_of_scalars(options, expected):
    options = dict(options)
    if options.get("betas") == ("tensor", "tensor"):
        options["betas"] = [onnxnn.tensor([0.8]), onnxnn.tensor([[0.9]])]
    if options.get("capturable"):
        options["lr"] = onnxnn.tensor(0.1)
    optimizer = Adam([onnxnn.tensor([1.0], requires_grad=True)], **options)
    betas = optimizer.param_groups[0]["betas"]
    assert isinstance(betas, tuple) and optimizer.state_dict()["param_groups"][0]["betas"] == betas
    assert [getattr(beta, "shape", ()) for beta in betas] == [(), ()]
    np.testing.assert_allclose([float(beta) for beta in betas], expected, rtol=1e-6)


@pytest.mark.parametrize(
    "optimizer_class, defaults",
    [
        (SGD, dict(lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False)),
        (Adam, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False)),
        (AdamW, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False)),
        (RMSprop, dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, maximize=False)),
        (Adagrad, dict(lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, maximize=False)),
    ],
)
def test_defaults_are_pytorchs(optimizer_class, defaults):
    optimizer = optimizer_class([onnxnn.tensor([1.0], requires_grad=True)])
    for name, expected in defaults.items():
        assert optimizer.defaults[name] == expected
        assert optimizer.param_groups[0][name] == expected


def test_repr_lists_each_group_with_sorted_keys():
    optimizer = SGD([onnxnn.tensor([1.0], requires_grad=True)], lr=0.1, momentum=0.9)
    assert repr(optimizer) == (
        "SGD (\n"
        "Parameter Group 0\n"
        "    dampening: 0\n"
        "    differentiable: False\n"
        "    foreach: None\n"
        "    fused: None\n"
        "    lr: 0.1\n"
        "    maximize: False\n"
        "    momentum: 0.9\n"
        "    nesterov: False\n"
        "    weight_decay: 0\n"
        ")"
    )


def test_state_dict_has_pytorchs_format():
    first = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    second = onnxnn.tensor([3.0], requires_grad=True)
    third = onnxnn.tensor([4.0], requires_grad=True)
    optimizer = Adam([{"params": [first, second]}, {"params": [third], "lr": 0.5}])
    first.grad = onnxnn.tensor([1.0, 1.0])
    third.grad = onnxnn.tensor([1.0])
    optimizer.step()
    state_dict = optimizer.state_dict()
    assert list(state_dict) == ["state", "param_groups"]
    assert list(state_dict["state"]) == [0, 2]
    assert list(state_dict["state"][0]) == ["step", "exp_avg", "exp_avg_sq"]
    assert [group["params"] for group in state_dict["param_groups"]] == [[0, 1], [2]]
    assert list(state_dict["param_groups"][0])[-1] == "params"
    assert state_dict["param_groups"][1]["lr"] == 0.5
    assert state_dict["param_groups"][0]["betas"] == (0.9, 0.999)


@pytest.mark.parametrize(
    "optimizer_class, options",
    [
        (SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
        (Adam, {"lr": 0.1, "amsgrad": True}),
        (AdamW, {"lr": 0.1}),
        (RMSprop, {"centered": True, "momentum": 0.5}),
        (Adagrad, {"lr": 0.1, "lr_decay": 0.1}),
    ],
)
def test_state_dict_round_trip_continues_like_an_uninterrupted_run(optimizer_class, options):
    initial, gradients = make_problem()
    uninterrupted, _ = run_steps(optimizer_class, options, initial, gradients)

    params, optimizer = run_steps(optimizer_class, options, initial, gradients[:2])
    saved = pickle.loads(pickle.dumps(optimizer.state_dict()))  # as through onnxnn.save / torch.save
    checkpoint = [value(param) for param in params]
    resumed_params = [onnxnn.tensor(theta, dtype=onnxnn.float32, requires_grad=True) for theta in checkpoint]
    resumed = optimizer_class(resumed_params, **options)
    resumed.load_state_dict(saved)
    for step_gradients in gradients[2:]:
        for param, gradient in zip(resumed_params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float32)
        resumed.step()
    for param, expected in zip(resumed_params, uninterrupted):
        np.testing.assert_allclose(value(param), value(expected), rtol=1e-6, atol=1e-7)
    # (The loaded dict's state tensors are the optimizer's from then on, as PyTorch's load_state_dict
    # keeps them when their dtype and device already fit: its steps show there too.)


def test_load_state_dict_casts_state_to_the_parameter_dtype_but_keeps_step():
    source = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = Adam([source], lr=0.1)
    source.grad = onnxnn.tensor([1.0, -1.0])
    optimizer.step()
    target = onnxnn.tensor([1.0, 2.0], dtype=onnxnn.float64, requires_grad=True)
    loaded = Adam([target], lr=0.1)
    loaded.load_state_dict(optimizer.state_dict())
    state = loaded.state[target]
    assert state["exp_avg"].dtype is onnxnn.float64 and state["exp_avg_sq"].dtype is onnxnn.float64
    assert state["step"].dtype is onnxnn.float32 and state["step"].item() == 1.0
    np.testing.assert_allclose(value(state["exp_avg"]), [0.1, -0.1], rtol=1e-6)


@pytest.mark.parametrize("decoupled_key", [False, None, True], ids=["adam-state", "no-flag", "adamw-state"])
@pytest.mark.parametrize("load", ["load_state_dict", "pickle"])
def test_adamw_keeps_decoupled_weight_decay_after_loading_any_state(decoupled_key, load):
    # PyTorch's AdamW.__setstate__ sets the flag on every group, whatever the loaded groups say.
    initial, gradients = make_problem()
    params = [onnxnn.tensor(theta, dtype=onnxnn.float64, requires_grad=True) for theta in initial]
    optimizer = AdamW(params, lr=0.1)
    if load == "load_state_dict":
        state_dict = Adam(params, lr=0.1, weight_decay=0.3).state_dict()
    else:  # an unpickled AdamW whose group (from an older onnxnn, or edited) says otherwise
        optimizer.param_groups[0]["weight_decay"] = 0.3
        state_dict = {"param_groups": optimizer.param_groups}
    group = state_dict["param_groups"][0]
    if decoupled_key is None:
        del group["decoupled_weight_decay"]
    else:
        group["decoupled_weight_decay"] = decoupled_key
    if load == "load_state_dict":
        optimizer.load_state_dict(state_dict)
    else:
        optimizer = pickle.loads(pickle.dumps(optimizer))
        params = optimizer.param_groups[0]["params"]
    assert optimizer.param_groups[0]["decoupled_weight_decay"] is True
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float64)
        optimizer.step()
    expected, _ = reference_adamw(initial, gradients, lr=0.1, weight_decay=0.3)
    for param, reference in zip(params, expected):
        assert_matches_reference(value(param), reference, initial, gradients, onnxnn.float64)


def test_load_state_dict_restores_hyperparameters_but_keeps_params():
    param = onnxnn.tensor([1.0], requires_grad=True)
    source = SGD([param], lr=0.5, momentum=0.9)
    other = onnxnn.tensor([2.0], requires_grad=True)
    target = SGD([other], lr=0.1)
    target.load_state_dict(source.state_dict())
    assert target.param_groups[0]["lr"] == 0.5 and target.param_groups[0]["momentum"] == 0.9
    assert target.param_groups[0]["params"][0] is other


@pytest.mark.parametrize(
    "groups, message",
    [
        (
            lambda a, b: [{"params": [a]}, {"params": [b]}],
            "loaded state dict has a different number of parameter groups",
        ),
        (
            lambda a, b: [a],
            "loaded state dict contains a parameter group that doesn't match the size of optimizer's group",
        ),
    ],
)
def test_load_state_dict_rejects_mismatched_groups_without_modifying(groups, message):
    a = onnxnn.tensor([1.0], requires_grad=True)
    b = onnxnn.tensor([2.0], requires_grad=True)
    source = SGD([a, b], lr=0.5, momentum=0.9)
    a.grad = b.grad = onnxnn.tensor([1.0])
    source.step()
    target = SGD(groups(onnxnn.tensor([1.0], requires_grad=True), onnxnn.tensor([1.0], requires_grad=True)), lr=0.1)
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(source.state_dict())
    assert all(group["lr"] == 0.1 for group in target.param_groups) and len(target.state) == 0


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    untouched = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([param, untouched], lr=0.1)
    (param * param).sum().backward()
    optimizer.zero_grad(set_to_none=set_to_none)
    assert untouched.grad is None
    if set_to_none:
        assert param.grad is None
    else:
        assert param.grad.tolist() == [0.0, 0.0] and not param.grad.requires_grad
        (param * 3).sum().backward()  # accumulates into the zeroed gradient
        assert param.grad.tolist() == [3.0, 3.0]


def test_step_runs_the_closure_with_gradients_enabled_and_returns_its_loss():
    param = onnxnn.tensor([1.0, -2.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    calls = []

    def closure():
        optimizer.zero_grad()
        loss = (param * param).sum()
        calls.append(onnxnn.is_grad_enabled())
        loss.backward()
        return loss

    with onnxnn.no_grad():
        loss = optimizer.step(closure)
    assert calls == [True]
    assert loss.item() == 5.0
    np.testing.assert_allclose(value(param), [0.8, -1.6], rtol=1e-6)


def test_step_hooks_run_around_step_and_can_be_removed():
    param = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    events = []
    pre = optimizer.register_step_pre_hook(lambda opt, args, kwargs: events.append(("pre", opt is optimizer)))
    post = optimizer.register_step_post_hook(lambda opt, args, kwargs: events.append(("post", value(param)[0])))
    param.grad = onnxnn.tensor([1.0])
    optimizer.step()
    assert events[0] == ("pre", True) and events[1][0] == "post" and math.isclose(events[1][1], 0.9, rel_tol=1e-6)
    pre.remove()
    post.remove()
    optimizer.step()
    assert len(events) == 2


@pytest.mark.parametrize("with_closure", [False, True])
def test_step_hooks_see_the_optimizer_as_the_first_argument(with_closure):
    param = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    seen = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(("pre", args)))
    optimizer.register_step_post_hook(lambda opt, args, kwargs: seen.append(("post", args)))
    param.grad = onnxnn.tensor([1.0])

    def closure():
        return 3.0

    loss = optimizer.step(closure) if with_closure else optimizer.step()
    expected_args = (optimizer, closure) if with_closure else (optimizer,)
    assert seen == [("pre", expected_args), ("post", expected_args)]
    assert loss == (3.0 if with_closure else None)


def test_a_step_pre_hook_replaces_the_arguments_keeping_the_optimizer_first():
    param = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    handle = optimizer.register_step_pre_hook(lambda opt, args, kwargs: ((args[0], lambda: 7.0), kwargs))
    param.grad = onnxnn.tensor([1.0])
    assert optimizer.step(None) == 7.0
    handle.remove()
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: "bad")
    with pytest.raises(RuntimeError, match="must return None or a tuple of \\(new_args, new_kwargs\\)"):
        optimizer.step()


# (register method, what triggers its hooks, the arguments after the optimizer they are called with)
STATE_DICT_HOOKS = [
    ("register_state_dict_pre_hook", "save", 0),
    ("register_state_dict_post_hook", "save", 1),
    ("register_load_state_dict_pre_hook", "load", 1),
    ("register_load_state_dict_post_hook", "load", 0),
]


def _save_or_load(optimizer, trigger):
    state_dict = optimizer.state_dict()
    if trigger == "load":
        optimizer.load_state_dict(state_dict)
    return state_dict


@pytest.mark.parametrize("register, trigger, extra_arguments", STATE_DICT_HOOKS, ids=[c[0] for c in STATE_DICT_HOOKS])
def test_state_dict_hooks_run_in_order_with_prepend_and_can_be_removed(register, trigger, extra_arguments):
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = Adam([param], lr=0.1)
    calls = []

    def hook(name):
        def record(opt, *arguments):
            assert opt is optimizer and len(arguments) == extra_arguments
            calls.append(name)

        return record

    first = getattr(optimizer, register)(hook("first"))
    getattr(optimizer, register)(hook("second"))
    getattr(optimizer, register)(hook("prepended"), prepend=True)
    _save_or_load(optimizer, trigger)
    assert calls == ["prepended", "first", "second"]
    calls.clear()
    first.remove()
    _save_or_load(optimizer, trigger)
    assert calls == ["prepended", "second"]
    calls.clear()
    unpickled = pickle.loads(pickle.dumps(optimizer))  # hooks are not pickled
    _save_or_load(unpickled, trigger)
    assert calls == []


def test_state_dict_post_hooks_edit_or_replace_the_dict():
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    optimizer.register_state_dict_post_hook(lambda opt, state_dict: state_dict.update(extra=1))
    optimizer.register_state_dict_post_hook(lambda opt, state_dict: {**state_dict, "replaced": state_dict["extra"]})
    state_dict = optimizer.state_dict()
    assert state_dict["extra"] == 1 and state_dict["replaced"] == 1 and state_dict["param_groups"][0]["lr"] == 0.1


def test_load_state_dict_pre_hooks_get_a_copy_and_may_return_the_dict_to_load():
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    saved = SGD([onnxnn.tensor([0.0, 0.0], requires_grad=True)], lr=0.5).state_dict()
    seen = []

    def edit(opt, state_dict):
        seen.append(state_dict is saved)
        state_dict["edited"] = True  # on the copy

    def replace(opt, state_dict):
        groups = [{**group, "lr": 0.25} for group in state_dict["param_groups"]]
        return {"state": state_dict["state"], "param_groups": groups}

    optimizer.register_load_state_dict_pre_hook(edit)
    optimizer.register_load_state_dict_pre_hook(replace)
    optimizer.register_load_state_dict_post_hook(lambda opt: seen.append(opt.param_groups[0]["lr"]))
    optimizer.load_state_dict(saved)
    assert seen == [False, 0.25] and "edited" not in saved and saved["param_groups"][0]["lr"] == 0.5
