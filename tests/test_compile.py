"""``onnxnn.compile``: torch.compile's entry point; a module comes back as an ``OptimizedModule``.

The wrapper behaves as PyTorch's: the module under ``_orig_mod`` (state_dict keys, parameters,
training mode and attributes are the module's), its calls compiled whole
(tests/runtime/fastpath/test_compiled_calls.py specifies those calls).
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
from onnxnn.compile import OptimizedModule
from onnxnn.runtime.fastpath import compiled_calls


@pytest.fixture(autouse=True)
def _fresh_caches():
    onnxnn.clear_caches()
    yield
    onnxnn.clear_caches()


def _model():
    onnxnn.manual_seed(0)
    return nn.Sequential(nn.Linear(96, 64), nn.ReLU(), nn.Linear(64, 10))


def _expected(model, x: np.ndarray) -> np.ndarray:
    first, second = model[0], model[2]
    hidden = np.maximum(x @ first.weight.detach().numpy().T + first.bias.detach().numpy(), 0)
    return hidden @ second.weight.detach().numpy().T + second.bias.detach().numpy()


def test_a_compiled_module_is_the_module_under_orig_mod():
    model = _model()
    compiled = onnxnn.compile(model)
    assert isinstance(compiled, OptimizedModule) and compiled._orig_mod is model
    assert list(compiled.state_dict()) == [f"_orig_mod.{key}" for key in model.state_dict()]
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    assert repr(compiled).startswith("OptimizedModule(\n  (_orig_mod): Sequential(")
    compiled.eval()
    assert not model.training and not model[0].training and not compiled.training
    model.train()
    assert compiled.training
    compiled.note = "kept on the module"
    assert model.note == "kept on the module" and compiled.note == "kept on the module"
    del compiled.note
    assert not hasattr(model, "note")


@pytest.mark.usefixtures("fast_path_on")  # compiled calls are the fast path's
def test_a_compiled_modules_calls_are_compiled_and_right():
    model = _model().eval()
    compiled = onnxnn.compile(model)
    x = np.random.default_rng(0).standard_normal((4, 96)).astype(np.float32)
    with onnxnn.no_grad():
        for _ in range(6):
            np.testing.assert_allclose(
                compiled(onnxnn.from_numpy(x)).numpy(), _expected(model, x), rtol=1e-5, atol=1e-5
            )
    assert compiled_calls.compiled_info()["prepared"] > 0


def test_its_state_dict_loads_back_and_its_hooks_run():
    compiled = onnxnn.compile(_model().eval())
    state = {key: value * 0 + 1 for key, value in compiled.state_dict().items()}
    compiled.load_state_dict(state)
    assert float(compiled._orig_mod[0].weight.detach().sum()) == 96 * 64
    seen = []
    compiled.register_forward_hook(lambda module, args, output: seen.append(module))
    with onnxnn.no_grad():
        compiled(onnxnn.randn(2, 96))
    assert seen == [compiled]


@pytest.mark.usefixtures("fast_path_on")  # compiled calls are the fast path's
def test_pickled_and_copied_compiled_modules_stay_compiled_and_separate():
    compiled = onnxnn.compile(_model().eval())
    x = np.random.default_rng(0).standard_normal((3, 96)).astype(np.float32)
    expected = _expected(compiled._orig_mod, x)
    with onnxnn.no_grad():
        for clone in (pickle.loads(pickle.dumps(compiled)), copy.deepcopy(compiled)):
            assert isinstance(clone, OptimizedModule) and clone._orig_mod is not compiled._orig_mod
            compiled_calls.reset_counts()
            for _ in range(6):
                np.testing.assert_allclose(clone(onnxnn.from_numpy(x)).numpy(), expected, rtol=1e-5, atol=1e-5)
            assert compiled_calls.compiled_info()["prepared"] > 0


def test_functions_and_disabled_compilation_come_back_as_they_are():
    def function(x):
        return x * 2

    assert onnxnn.compile(function) is function
    assert onnxnn.compile(mode="reduce-overhead")(function) is function
    model = _model()
    assert onnxnn.compile(model, disable=True) is model
    model.compile(disable=True)
    assert model._compiled_call_impl == model._call_impl


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        ({"model": 3}, TypeError, "expects a callable, got int"),
        ({"model": _model(), "mode": "fastest"}, RuntimeError, "Unrecognized mode=fastest"),
        ({"model": _model(), "backend": "tvm"}, RuntimeError, "invalid backend 'tvm'"),
        ({"mode": "fastest"}, RuntimeError, "Unrecognized mode=fastest"),
    ],
)
def test_bad_arguments_are_refused(arguments, error, message):
    with pytest.raises(error, match=message):
        onnxnn.compile(**arguments)


# A weight changed through an alias by an op that is not computed at once stays pending; a compiled
# call must read it as it is at each call, not the value its pending history started from.
# (name, the change, its numpy twin)
PENDING_CHANGES = [
    ("clamp through .data", lambda w: w.data.clamp_(-0.1, 0.1), lambda w: np.clip(w, -0.1, 0.1)),
    ("mul through .data", lambda w: w.data.mul_(2.0), lambda w: w * 2),
    ("mul through detach()", lambda w: w.detach().mul_(2.0), lambda w: w * 2),
    ("divided by its norm", lambda w: w.data.div_(w.data.norm()), lambda w: w / np.linalg.norm(w)),
    ("a tensor added", lambda w: w.data.add_(onnxnn.ones(4, 4)), lambda w: w + 1),
    ("a pending tensor copied", lambda w: w.data.copy_(w.data * 0.5), lambda w: w * 0.5),
]
# (name, the later change of the model, from the other model)
LATER_CHANGES = [
    ("fill_", lambda model, other: model.weight.fill_(0.25)),
    ("load_state_dict", lambda model, other: model.load_state_dict(other.state_dict())),
]


def _linear_output(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, got: np.ndarray) -> None:
    bound = np.abs(x) @ np.abs(weight).T + np.abs(bias)  # 4 products and a bias summed in float32
    np.testing.assert_allclose(got, x @ weight.T + bias, rtol=0, atol=float(5 * np.finfo(np.float32).eps * bound.max()))


@pytest.mark.usefixtures("fast_path_on")
@pytest.mark.parametrize("executor", ["auto", "onnxruntime", "kernels"])
@pytest.mark.parametrize("later_name, later", LATER_CHANGES, ids=[case[0] for case in LATER_CHANGES])
@pytest.mark.parametrize("name, change, twin", PENDING_CHANGES, ids=[case[0] for case in PENDING_CHANGES])
def test_a_compiled_call_reads_a_weight_left_pending_as_it_is_at_each_call(
    name, change, twin, later_name, later, executor
):
    onnxnn.manual_seed(0)
    model, other = nn.Linear(4, 4).eval(), nn.Linear(4, 4)
    compiled = onnxnn.compile(model)
    x = onnxnn.randn(3, 4)
    x_array, weight, bias = x.numpy(), model.weight.detach().numpy(), model.bias.detach().numpy()
    if later_name == "fill_":
        later_weight, later_bias = np.full((4, 4), 0.25, np.float32), bias
    else:
        later_weight, later_bias = other.weight.detach().numpy(), other.bias.detach().numpy()
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        change(model.weight)  # nothing here reads the weight: it stays pending
        for _ in range(3):
            _linear_output(x_array, twin(weight), bias, compiled(x).numpy())
        later(model, other)
        for _ in range(4):
            _linear_output(x_array, later_weight, later_bias, compiled(x).numpy())
    assert compiled_calls.compiled_info()["prepared"] > 0  # realized weights: the prepared run again


def _branching(library, condition):
    class Branching(library.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = library.nn.Parameter(library.ones(3))

        def forward(self, x):
            return x * 10 if condition(self, x, library) else x * 1

    return Branching().eval()


_HELD: dict = {}


def _held_base(library):
    # onnxnn's views link to their base weakly (runtime/views.py): ``_base`` is None once it is gone.
    return _HELD.setdefault(library.__name__, library.ones(4, 3))


def _with_grad(library):
    x = library.ones(2, 3, requires_grad=True)
    x.grad = library.ones(2, 3)
    return x


# (name, what the forward branches on, the input of the first calls, the later input, the change of
# the module at the later calls and back): torch.compile guards on each, so a compiled call traces again.
BRANCHES = [
    ("x.requires_grad", lambda m, x, lib: x.requires_grad, None, lambda lib: lib.ones(2, 3, requires_grad=True), None),
    ("x.is_contiguous()", lambda m, x, lib: x.is_contiguous(), None, lambda lib: lib.ones(3, 2).t(), None),
    ("x._base is None", lambda m, x, lib: x._base is None, None, lambda lib: _held_base(lib)[1:3], None),
    (
        "isinstance(x, Parameter)",
        lambda m, x, lib: isinstance(x, lib.nn.Parameter),
        None,
        lambda lib: lib.nn.Parameter(lib.ones(2, 3), requires_grad=False),
        None,
    ),
    (
        "x.grad is None",
        lambda m, x, lib: x.grad is None,
        lambda lib: lib.ones(2, 3, requires_grad=True),
        _with_grad,
        None,
    ),
    (
        "a weight's requires_grad",
        lambda m, x, lib: m.weight.requires_grad,
        None,
        None,
        lambda module, later: module.weight.requires_grad_(not later),
    ),
]


@pytest.mark.usefixtures("fast_path_on")
@pytest.mark.parametrize("name, condition, first, later, change", BRANCHES, ids=[case[0] for case in BRANCHES])
def test_a_compiled_call_traces_again_where_a_forwards_branch_on_tensor_facts_changes(
    name, condition, first, later, change
):
    torch = pytest.importorskip("torch")
    first = first or (lambda library: library.ones(2, 3))
    later = later or first
    model, reference = _branching(onnxnn, condition), _branching(torch, condition)
    compiled = onnxnn.compile(model)
    with onnxnn.no_grad():
        for phase in ("first", "later", "first again"):
            if change is not None:
                change(model, phase == "later")
                change(reference, phase == "later")
            make = later if phase == "later" else first
            for _ in range(3):
                with torch.no_grad():
                    expected = reference(make(torch)).numpy()
                np.testing.assert_array_equal(compiled(make(onnxnn)).detach().numpy(), expected)
    assert compiled_calls.compiled_info()["prepared"] > 0
