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
