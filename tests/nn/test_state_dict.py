"""state_dict / load_state_dict: key order, metadata, hooks, strict errors, no partial loads, assign."""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import onnxnn
from onnxnn import nn


class Leaf(nn.Module):
    def __init__(self, n: int = 3):
        super().__init__()
        self.weight = nn.Parameter(onnxnn.randn(n, 2))
        self.bias = nn.Parameter(onnxnn.randn(n))

    def forward(self, x):
        return x @ self.weight.t() + self.bias


class Stateful(nn.Module):
    """The Modules note's StatefulModule, with a tiny leaf in place of nn.Linear."""

    def __init__(self):
        super().__init__()
        self.param1 = nn.Parameter(onnxnn.randn(2))
        self.register_parameter("param2", nn.Parameter(onnxnn.randn(3)))
        self.register_parameter("param3", None)
        self.param_list = nn.ParameterList([nn.Parameter(onnxnn.randn(2)) for _ in range(3)])
        self.param_dict = nn.ParameterDict({"foo": nn.Parameter(onnxnn.randn(3)), "bar": nn.Parameter(onnxnn.randn(4))})
        self.register_buffer("buffer1", onnxnn.randn(4), persistent=True)
        self.register_buffer("buffer2", onnxnn.randn(5), persistent=False)
        self.register_buffer("buffer3", None)
        self.linear = Leaf()


class WithExtraState(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(onnxnn.ones(2))
        self.register_buffer("steps", onnxnn.tensor(0))
        self.config = {"mode": "a"}

    def get_extra_state(self):
        return dict(self.config)

    def set_extra_state(self, state):
        self.config = dict(state)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = Leaf(3)
        self.extra = WithExtraState()
        self.l2 = Leaf(4)


def _values(module) -> dict:
    return {
        key: np.array(value.numpy()) for key, value in module.state_dict().items() if isinstance(value, onnxnn.Tensor)
    }


def _assert_same_values(module, expected: dict) -> None:
    actual = _values(module)
    assert list(actual) == list(expected)
    for key in expected:
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)


# ----------------------------------------------------------------------------- state_dict
def test_state_dict_key_order_follows_the_modules_note():
    assert list(Stateful().state_dict()) == [
        "param1",
        "param2",
        "buffer1",
        "param_list.0",
        "param_list.1",
        "param_list.2",
        "param_dict.bar",
        "param_dict.foo",
        "linear.weight",
        "linear.bias",
    ]


def test_state_dict_orders_params_buffers_extra_state_then_children():
    class Parent(nn.Module):
        def __init__(self):
            super().__init__()
            self.child = WithExtraState()
            self.register_buffer("b", onnxnn.zeros(1))
            self.p = nn.Parameter(onnxnn.zeros(1))

        def get_extra_state(self):
            return 1

    assert list(Parent().state_dict()) == ["p", "b", "_extra_state", "child.scale", "child.steps", "child._extra_state"]


def test_state_dict_metadata_and_prefix():
    state = Net().state_dict(prefix="model.")
    assert isinstance(state, OrderedDict)
    assert list(state._metadata) == ["model", "model.l1", "model.extra", "model.l2"]
    assert all(entry == {"version": 1} for entry in state._metadata.values())
    assert next(iter(state)) == "model.l1.weight"


def test_state_dict_values_are_detached_unless_keep_vars():
    m = Leaf()
    detached = m.state_dict()
    assert type(detached["weight"]) is onnxnn.Tensor and not detached["weight"].requires_grad
    kept = m.state_dict(keep_vars=True)
    assert kept["weight"] is m.weight


def test_state_dict_fills_a_given_destination_and_warns_on_positional_arguments():
    destination = {}
    assert Leaf().state_dict(destination=destination) is destination
    assert list(destination) == ["weight", "bias"]
    with pytest.warns(FutureWarning, match="Positional args are being deprecated"):
        positional = Leaf().state_dict(None, "p.")
    assert list(positional) == ["p.weight", "p.bias"]


def test_state_dict_hooks():
    log = []
    m = Net()
    m.l1.register_state_dict_pre_hook(lambda module, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))

    def post(module, state_dict, prefix, local_metadata):
        log.append(("post", prefix, list(state_dict)[-1]))
        state_dict[prefix + "added"] = onnxnn.zeros(1)

    handle = m.l1.register_state_dict_post_hook(post)
    state = m.state_dict()
    assert log == [("pre", "l1.", False), ("post", "l1.", "l1.bias")]
    assert list(state)[:3] == ["l1.weight", "l1.bias", "l1.added"]
    handle.remove()
    assert "l1.added" not in m.state_dict()


def test_public_state_dict_post_hook_must_not_return_a_value():
    m = Leaf()
    m.register_state_dict_post_hook(lambda module, state_dict, prefix, metadata: {})
    with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
        m.state_dict()


# ----------------------------------------------------------------------------- load_state_dict
def test_round_trip_through_pickle_restores_every_value_and_extra_state():
    source, target = Net(), Net()
    source.extra.config = {"mode": "b"}
    with onnxnn.no_grad():
        source.extra.steps.fill_(7)
    loaded = pickle.loads(pickle.dumps(source.state_dict()))
    result = target.load_state_dict(loaded)
    assert repr(result) == "<All keys matched successfully>"
    assert result.missing_keys == [] and result.unexpected_keys == []
    _assert_same_values(target, _values(source))
    assert target.extra.config == {"mode": "b"}


def test_load_copies_into_the_existing_parameters():
    source, target = Leaf(), Leaf()
    weight = target.weight
    target.load_state_dict(source.state_dict())
    assert target.weight is weight and isinstance(target.weight, nn.Parameter)
    assert target.weight.requires_grad and target.weight.is_leaf
    np.testing.assert_array_equal(target.weight.detach().numpy(), source.weight.detach().numpy())


def test_load_converts_to_the_parameter_dtype_and_accepts_1d_for_0d():
    m = WithExtraState()
    m.load_state_dict(
        {
            "scale": onnxnn.tensor([2.0, 3.0], dtype=onnxnn.float64),
            "steps": onnxnn.tensor([5]),
            "_extra_state": {"mode": "c"},
        }
    )
    assert m.scale.dtype == onnxnn.float32 and m.steps.shape == () and m.steps.item() == 5


@pytest.mark.parametrize("key", ["scale", "steps"])  # a 0-d parameter, a 0-d buffer
@pytest.mark.parametrize("length", [0, 3])
def test_a_1d_tensor_of_other_than_one_element_is_a_size_mismatch_for_0d(key, length):
    m = WithExtraState()
    m.scale = nn.Parameter(onnxnn.tensor(1.5))
    state = dict(m.state_dict())
    state[key] = onnxnn.arange(7, 7 + length, dtype=state[key].dtype)
    with pytest.raises(
        RuntimeError, match=rf"size mismatch for {key}: copying a param with shape onnxnn.Size\(\[{length}\]\)"
    ):
        m.load_state_dict(state)
    assert m.scale.item() == 1.5 and m.steps.item() == 0


def test_strict_load_lists_every_problem_and_changes_nothing():
    m = Net()
    before = _values(m)
    config = dict(m.extra.config)
    state = Net().state_dict()
    del state["l1.weight"]
    state["x"] = onnxnn.zeros(1)
    state["l2.bias"] = onnxnn.zeros(5)
    state["extra._extra_state"] = {"mode": "changed"}
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(state)
    assert str(info.value) == (
        "Error(s) in loading state_dict for Net:\n"
        '\tMissing key(s) in state_dict: "l1.weight". \n'
        '\tUnexpected key(s) in state_dict: "x". \n'
        "\tsize mismatch for l2.bias: copying a param with shape onnxnn.Size([5]) from checkpoint, "
        "the shape in current model is onnxnn.Size([4])."
    )
    _assert_same_values(m, before)
    assert m.extra.config == config


def test_missing_and_unexpected_keys_message():
    class Single(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = Leaf()

    state = {"l1.bias": onnxnn.zeros(3), "x": onnxnn.zeros(1)}
    with pytest.raises(RuntimeError) as info:
        Single().load_state_dict(state)
    assert str(info.value) == (
        "Error(s) in loading state_dict for Single:\n"
        '\tMissing key(s) in state_dict: "l1.weight". \n'
        '\tUnexpected key(s) in state_dict: "x". '
    )


def test_size_mismatch_message_names_both_shapes():
    m = Leaf(3)
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict({"weight": onnxnn.zeros(2, 3), "bias": onnxnn.zeros(3)})
    assert (
        "size mismatch for weight: copying a param with shape onnxnn.Size([2, 3]) from checkpoint, "
        "the shape in current model is onnxnn.Size([3, 2])."
    ) in str(info.value)


def test_non_strict_load_reports_keys_and_loads_the_rest():
    m = Net()
    source = Net()
    state = source.state_dict()
    del state["l2.bias"]
    state["unknown.weight"] = onnxnn.zeros(1)
    state["l1.extra_param"] = onnxnn.zeros(1)
    result = m.load_state_dict(state, strict=False)
    assert result.missing_keys == ["l2.bias"]
    assert result.unexpected_keys == ["unknown.weight", "l1.extra_param"]
    assert repr(result) == (
        "_IncompatibleKeys(missing_keys=['l2.bias'], unexpected_keys=['unknown.weight', 'l1.extra_param'])"
    )
    np.testing.assert_array_equal(m.l1.weight.detach().numpy(), source.l1.weight.detach().numpy())


def test_non_strict_load_still_refuses_size_mismatches_without_changes():
    m = Leaf()
    before = _values(m)
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        m.load_state_dict({"weight": onnxnn.zeros(1), "bias": onnxnn.zeros(3)}, strict=False)
    _assert_same_values(m, before)


def test_keys_of_none_reservations_are_unexpected():
    m = Stateful()
    state = m.state_dict()
    state["param3"] = onnxnn.zeros(1)
    state["buffer3"] = onnxnn.zeros(1)
    state["buffer2"] = onnxnn.zeros(5)  # non-persistent: not part of the state either
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "param3", "buffer3", "buffer2"'):
        m.load_state_dict(state)


def test_non_tensor_values_are_reported():
    with pytest.raises(RuntimeError, match='While copying the parameter named "bias", expected torch.Tensor'):
        Leaf().load_state_dict({"weight": onnxnn.zeros(3, 2), "bias": [0.0, 0.0, 0.0]})


def test_load_requires_a_mapping():
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like, got <class 'list'>."):
        Leaf().load_state_dict([("weight", onnxnn.zeros(3, 2))])


def test_load_does_not_modify_the_callers_dict():
    m = Leaf()
    m.register_load_state_dict_pre_hook(lambda module, state_dict, prefix, *rest: state_dict.pop(prefix + "bias", None))
    state = Leaf().state_dict()
    result = m.load_state_dict(state, strict=False)
    assert list(state) == ["weight", "bias"] and result.missing_keys == ["bias"]


@pytest.mark.parametrize("strict", [True, False])
def test_assign_puts_the_given_tensors_into_the_module(strict):
    m = WithExtraState()
    m.scale.requires_grad_(False)
    new_scale = onnxnn.tensor([4.0, 5.0], dtype=onnxnn.float64)
    new_steps = onnxnn.tensor(9)
    m.load_state_dict(
        {"scale": new_scale, "steps": new_steps, "_extra_state": {"mode": "z"}}, strict=strict, assign=True
    )
    assert isinstance(m.scale, nn.Parameter) and m.scale._value is new_scale._value
    assert m.scale.dtype == onnxnn.float64 and not m.scale.requires_grad
    assert m.steps is new_steps


def test_assign_keeps_a_given_parameter_object():
    m = Leaf()
    weight = nn.Parameter(onnxnn.zeros(3, 2), requires_grad=False)
    m.load_state_dict({"weight": weight, "bias": onnxnn.zeros(3)}, assign=True)
    assert m.weight is weight and m.weight.requires_grad  # requires_grad taken from the model


# ----------------------------------------------------------------------------- load hooks
def test_load_pre_hook_can_rename_keys():
    def rename(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        if prefix + "old_weight" in state_dict:
            state_dict[prefix + "weight"] = state_dict.pop(prefix + "old_weight")

    m = Net()
    m.l1.register_load_state_dict_pre_hook(rename)
    state = Net().state_dict()
    state["l1.old_weight"] = state.pop("l1.weight")
    assert repr(m.load_state_dict(state)) == "<All keys matched successfully>"


def test_load_post_hooks_run_children_first_and_may_clear_keys():
    order = []
    m = Net()
    m.register_load_state_dict_post_hook(lambda module, keys: order.append(("net", list(keys.missing_keys))))

    def forgive(module, incompatible_keys):
        order.append(("l1", list(incompatible_keys.missing_keys)))
        incompatible_keys.missing_keys.clear()

    m.l1.register_load_state_dict_post_hook(forgive)
    state = Net().state_dict()
    del state["l1.bias"]
    result = m.load_state_dict(state)
    assert order == [("l1", ["l1.bias"]), ("net", [])]
    assert repr(result) == "<All keys matched successfully>"


def test_load_post_hook_adding_a_key_fails_strict_and_rolls_back():
    m = Net()
    before = _values(m)
    config = dict(m.extra.config)
    m.register_load_state_dict_post_hook(lambda module, keys: keys.unexpected_keys.append("invented"))
    source = Net()
    source.extra.config = {"mode": "loaded"}
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "invented"'):
        m.load_state_dict(source.state_dict())
    _assert_same_values(m, before)
    assert m.extra.config == config
    weight = m.l1.weight
    assert isinstance(weight, nn.Parameter) and weight.requires_grad


def test_failed_assign_load_restores_the_original_objects():
    m = Leaf()
    weight = m.weight
    m.register_load_state_dict_post_hook(lambda module, keys: keys.missing_keys.append("forced"))
    with pytest.raises(RuntimeError, match='"forced"'):
        m.load_state_dict(Leaf().state_dict(), assign=True)
    assert m.weight is weight


def test_load_post_hook_must_not_return_a_value():
    m = Leaf()
    m.register_load_state_dict_post_hook(lambda module, keys: keys)
    with pytest.raises(AssertionError, match="not expected to return new values"):
        m.load_state_dict(Leaf().state_dict())


def test_incompatible_keys_repr():
    from onnxnn.nn.modules.module import _IncompatibleKeys

    assert repr(_IncompatibleKeys([], [])) == "<All keys matched successfully>"
    assert str(_IncompatibleKeys(["a"], [])) == "_IncompatibleKeys(missing_keys=['a'], unexpected_keys=[])"
    assert _IncompatibleKeys(["a"], ["b"]).unexpected_keys == ["b"]


def test_override_of_load_from_state_dict_is_honoured():
    class Upgrading(Leaf):
        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
            version = local_metadata.get("version")
            if version is None and prefix + "bias" not in state_dict:
                state_dict[prefix + "bias"] = onnxnn.zeros(3)
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    m = Upgrading()
    assert repr(m.load_state_dict({"weight": onnxnn.ones(3, 2)})) == "<All keys matched successfully>"
    np.testing.assert_array_equal(m.bias.detach().numpy(), np.zeros(3))


def test_load_pre_hook_follows_a_deep_copied_module():
    seen = []
    m = Leaf()
    m.register_load_state_dict_pre_hook(lambda module, *rest: seen.append(module))
    clone = copy.deepcopy(m)
    clone.load_state_dict(Leaf().state_dict())
    assert seen == [clone]
