"""nn.Module behaviours that must be PyTorch's: each scenario runs the same code on onnxnn and, where
it is installed, on torch (``lib`` is the library), and both must give the expected plain values.

The tests after the scenario table check onnxnn's documented departures from PyTorch: its atomic
``load_state_dict`` and the error for a ParameterDict key that names a module table.
"""

from __future__ import annotations

import importlib
import warnings
from collections import OrderedDict

import pytest

import onnxnn
from onnxnn import nn


# ---------------------------------------------------------------- a table replaced past __setattr__
def _parameters_table_set_by_object_setattr(lib):
    linear = lib.nn.Linear(1, 1)
    new = {"weight": lib.nn.Parameter(lib.full((1, 1), 10.0)), "bias": lib.nn.Parameter(lib.zeros(1))}
    object.__setattr__(linear, "_parameters", new)
    with lib.no_grad():
        output = linear(lib.ones(1, 1)).item()
    return [linear.weight is new["weight"], output, linear.state_dict()["weight"].item()]


def _buffers_table_set_by_object_setattr(lib):
    norm = lib.nn.BatchNorm1d(1, eps=0.0).eval()
    new = {
        "running_mean": lib.full((1,), 2.0),
        "running_var": lib.full((1,), 4.0),
        "num_batches_tracked": lib.tensor(0),
    }
    object.__setattr__(norm, "_buffers", new)
    with lib.no_grad():
        output = norm(lib.full((1, 1), 4.0)).item()  # (4 - 2) / sqrt(4): exact in float32
    return [norm.running_mean is new["running_mean"], output]


def _modules_table_set_by_object_setattr(lib):
    sequential = lib.nn.Sequential(lib.nn.Linear(1, 1))
    object.__setattr__(sequential, "_modules", OrderedDict([("0", lib.nn.Identity())]))
    with lib.no_grad():
        output = sequential(lib.full((1, 1), 3.0)).item()
    return [type(getattr(sequential, "0")).__name__, output]


def _zero_grad_sees_a_parameter_added_by_object_setattr(lib):
    sequential = lib.nn.Sequential(lib.nn.Linear(1, 1))
    sequential.zero_grad()  # keeps the tree's parameter list, which the new table must invalidate
    extra = lib.nn.Parameter(lib.ones(1))
    object.__setattr__(sequential[0], "_parameters", dict(sequential[0]._parameters, extra=extra))
    extra.grad = lib.ones(1)
    sequential.zero_grad()
    return [getattr(sequential[0], "extra") is extra, extra.grad is None]


def _table_deleted_by_object_delattr(lib):
    linear = lib.nn.Linear(1, 1)
    object.__delattr__(linear, "_parameters")
    return hasattr(linear, "weight")


# ---------------------------------------------------------------- load_state_dict
def _post_hook_runs_before_a_size_mismatch_raises(lib):
    linear = lib.nn.Linear(2, 2)
    log = []

    def hook(module, incompatible):
        log.append((list(incompatible.missing_keys), list(incompatible.unexpected_keys)))
        incompatible.missing_keys.clear()  # cleared keys do not excuse a size mismatch

    linear.register_load_state_dict_post_hook(hook)
    try:
        linear.load_state_dict({"weight": lib.ones(3, 2), "x": lib.ones(1)})
    except RuntimeError as error:
        log.append("size mismatch for weight" in str(error) and "Missing" not in str(error))
    return log


def _post_hook_sees_the_valid_copies(lib):
    linear = lib.nn.Linear(2, 2)
    seen = []
    linear.register_load_state_dict_post_hook(lambda module, incompatible: seen.append(module.weight.sum().item()))
    try:
        linear.load_state_dict({"weight": lib.full((2, 2), 3.0), "bias": lib.ones(3)})
    except RuntimeError:
        seen.append("raised")
    return seen


def _load_never_calls_get_extra_state(lib):
    log = []

    class WithExtraState(lib.nn.Module):
        def get_extra_state(self):
            log.append("get")
            return 1

        def set_extra_state(self, state):
            log.append(("set", state))

    WithExtraState().load_state_dict({"_extra_state": 5})
    return log


def _same_function_as_public_then_private_state_dict_hook(lib):
    def hook(module, state_dict, prefix, local_metadata):
        return None

    linear = lib.nn.Linear(1, 1)
    linear.register_state_dict_post_hook(hook)
    try:
        linear._register_state_dict_hook(hook)
    except RuntimeError as error:
        return str(error)
    return "registered twice"


# ---------------------------------------------------------------- backward hooks
def _full_backward_hooks_when_no_input_requires_grad(lib):
    messages = []
    for register in ("register_full_backward_hook", "register_full_backward_pre_hook"):
        linear = lib.nn.Linear(2, 1)
        getattr(linear, register)(lambda *args: None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            linear(lib.ones(1, 2)).sum().backward()
        messages.append([(type(item.message).__name__, str(item.message)) for item in caught])
    return messages


_NO_INPUT_GRAD_WARNING = (
    "UserWarning",
    "Full backward hook is firing when gradients are computed with respect to module outputs since no "
    "inputs require gradients. See https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
    "#torch.nn.Module.register_full_backward_hook for more details.",
)


# ---------------------------------------------------------------- tensors, handles, printing
def _is_shared(lib):
    import copy

    linear = lib.nn.Linear(2, 2)
    before = linear.weight.is_shared()
    linear.share_memory()
    weight = linear.weight
    shared = [
        before,
        weight.is_shared(),
        weight.detach().is_shared(),
        weight.data.is_shared(),
        linear.state_dict()["weight"].is_shared(),
        weight[0].is_shared(),
        weight.t().is_shared(),
        (weight * 1).is_shared(),
        weight.clone().is_shared(),
        copy.deepcopy(weight).is_shared(),
        linear.float().weight.is_shared(),  # already float32: the same storage
        linear.double().weight.is_shared(),  # new storage
    ]
    tensor = lib.ones(3)
    view = tensor[1:]
    shared += [tensor.share_memory_() is tensor, tensor.is_shared(), view.is_shared(), lib.ones(3).is_shared()]
    return shared


def _utils_hooks_removable_handle(lib):
    hooks_module = importlib.import_module(lib.__name__ + ".utils.hooks")
    linear = lib.nn.Linear(1, 1)
    handle = linear.register_forward_hook(lambda *args: None)
    hooks, extra = OrderedDict(), OrderedDict()
    own = hooks_module.RemovableHandle(hooks, extra_dict=extra)
    hooks[own.id] = extra[own.id] = "hook"
    own.remove()
    return [
        isinstance(handle, hooks_module.RemovableHandle),
        handle.hooks_dict_ref() is linear._forward_hooks,
        hooks,
        extra,
    ]


def _reprs(lib):
    parameters = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2))})
    return [
        repr(lib.nn.RNN(3, 4, nonlinearity="relu")),
        repr(lib.nn.RNN(3, 4)),
        repr(parameters).replace(lib.__name__ + ".", "LIB."),
    ]


def _lazy_module_warnings(lib):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib.nn.LazyLinear(3)
    return [str(item.message) for item in caught]


SCENARIOS = [
    ("_parameters set by object.__setattr__", _parameters_table_set_by_object_setattr, [True, 10.0, 10.0]),
    ("_buffers set by object.__setattr__", _buffers_table_set_by_object_setattr, [True, 1.0]),
    ("_modules set by object.__setattr__", _modules_table_set_by_object_setattr, ["Identity", 3.0]),
    (
        "zero_grad after object.__setattr__ of a table",
        _zero_grad_sees_a_parameter_added_by_object_setattr,
        [True, True],
    ),
    ("a table deleted by object.__delattr__", _table_deleted_by_object_delattr, False),
    (
        "load post-hook before a size mismatch raises",
        _post_hook_runs_before_a_size_mismatch_raises,
        [(["bias"], ["x"]), True],
    ),
    ("load post-hook sees the valid copies", _post_hook_sees_the_valid_copies, [12.0, "raised"]),
    ("load never calls get_extra_state", _load_never_calls_get_extra_state, [("set", 5)]),
    (
        "public then private state_dict hook",
        _same_function_as_public_then_private_state_dict_hook,
        "Cannot register the same function as the state dict post hook that was previously registered via "
        "register_state_dict_post_hook",
    ),
    (
        "full backward hooks, no input requires grad",
        _full_backward_hooks_when_no_input_requires_grad,
        [[_NO_INPUT_GRAD_WARNING], [_NO_INPUT_GRAD_WARNING]],
    ),
    (
        "is_shared",
        _is_shared,
        [False, True, True, True, True, True, True, False, False, False, True, False, True, True, True, False],
    ),
    ("utils.hooks.RemovableHandle", _utils_hooks_removable_handle, [True, True, OrderedDict(), OrderedDict()]),
    (
        "reprs",
        _reprs,
        ["RNN(3, 4)", "RNN(3, 4)", "ParameterDict(  (a): Parameter containing: [LIB.FloatTensor of size 2])"],
    ),
    ("lazy modules do not warn", _lazy_module_warnings, []),
]


@pytest.mark.parametrize("name, scenario, expected", SCENARIOS, ids=[case[0] for case in SCENARIOS])
def test_module_behaves_as_pytorch(name, scenario, expected):
    assert scenario(onnxnn) == expected


@pytest.mark.parametrize("name, scenario, expected", SCENARIOS, ids=[case[0] for case in SCENARIOS])
def test_expected_values_are_pytorchs(name, scenario, expected):
    torch = pytest.importorskip("torch")
    assert scenario(torch) == expected


# ---------------------------------------------------------------- onnxnn's documented departures
def _failing_loads():
    # (what makes the load fail, the state given to a Linear(2, 2) that has extra state)
    return [
        ("size mismatch", {"weight": onnxnn.full((2, 2), 3.0), "bias": onnxnn.ones(3), "_extra_state": 7}),
        ("missing key", {"weight": onnxnn.full((2, 2), 3.0), "_extra_state": 7}),
        (
            "unexpected key",
            {"weight": onnxnn.full((2, 2), 3.0), "bias": onnxnn.ones(2), "_extra_state": 7, "x": onnxnn.ones(1)},
        ),
    ]


class _LinearWithExtraState(nn.Linear):
    def __init__(self):
        super().__init__(2, 2)
        self.log: list = []

    def get_extra_state(self):
        self.log.append("get")
        return 0

    def set_extra_state(self, state):
        self.log.append(("set", state))


@pytest.mark.parametrize("name, state", _failing_loads(), ids=[case[0] for case in _failing_loads()])
def test_a_failing_load_runs_the_post_hooks_and_changes_nothing(name, state):
    module = _LinearWithExtraState()
    weight, bias = module.weight.detach().clone(), module.bias.detach().clone()
    hook_calls = []
    module.register_load_state_dict_post_hook(lambda mod, incompatible: hook_calls.append(mod.weight.sum().item()))
    with pytest.raises(RuntimeError, match="Error\\(s\\) in loading state_dict for _LinearWithExtraState"):
        module.load_state_dict(state)
    assert hook_calls == [12.0]  # the hook saw the valid copy, as PyTorch's does
    assert onnxnn.equal(module.weight, weight) and onnxnn.equal(module.bias, bias)
    assert module.log == []  # neither set_extra_state nor get_extra_state was called


def test_a_raising_set_extra_state_restores_the_tensors():
    class Failing(_LinearWithExtraState):
        def set_extra_state(self, state):
            raise ValueError("bad extra state")

    module = Failing()
    weight = module.weight.detach().clone()
    with pytest.raises(ValueError, match="bad extra state"):
        module.load_state_dict({"weight": onnxnn.full((2, 2), 3.0), "bias": onnxnn.ones(2), "_extra_state": 7})
    assert onnxnn.equal(module.weight, weight)


@pytest.mark.parametrize("key", ["_parameters", "_buffers", "_modules"])
def test_parameter_dict_refuses_a_table_name_as_key(key):
    parameters = nn.ParameterDict({"a": nn.Parameter(onnxnn.ones(1))})
    with pytest.raises(AttributeError, match=f"'{key}' cannot be a key of a ParameterDict"):
        parameters[key] = onnxnn.ones(1)
    assert list(parameters.keys()) == ["a"] and isinstance(parameters._parameters, dict)
    assert parameters.a is parameters["a"]
