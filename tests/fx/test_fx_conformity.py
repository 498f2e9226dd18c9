"""onnxnn.fx against torch.fx 2.13: the same programs traced, matched and rewritten by both."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest

import onnxnn
from onnxnn import fx
from onnxnn import relu as onnxnn_relu  # imported by name: the function itself is a global here
from onnxnn.nn.functional import gelu as onnxnn_gelu

torch = pytest.importorskip("torch")
import torch.fx as torch_fx  # noqa: E402
from torch import relu as torch_relu  # noqa: E402
from torch.nn.functional import gelu as torch_gelu  # noqa: E402

# ``len`` of a traced value records a node in this module's code from here on, as torch.fx documents.
fx.wrap("len")
torch_fx.wrap("len")

Case = tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]


def _rewrite_cases(library: Any) -> dict[str, Case]:
    """(traced function, pattern, replacement) per case, written once for onnxnn and once for torch."""
    return {
        "pattern nodes inside a list argument": (
            lambda x, y: library.cat([x, y], 0).relu(),
            lambda a, b: library.cat([a, b], 0),
            lambda a, b: library.cat([b, a], 0),
        ),
        "a placeholder binds a literal": (
            lambda x, y: library.add(x, 1) * y,
            lambda a, b: library.add(a, b),
            lambda a, b: library.sub(a, b),
        ),
        "two placeholders never bind one node": (
            lambda x, y: library.add(x, x) + library.add(x, y),
            lambda a, b: library.add(a, b),
            lambda a, b: library.sub(a, b),
        ),
        "a literal matches only an equal literal of its type": (
            lambda x, y: library.mul(x, 2) + library.mul(y, 3) + library.mul(x, 2.0),
            lambda a: library.mul(a, 2),
            lambda a: library.neg(a),
        ),
        "a placeholder bound twice needs the same value": (
            lambda x, y: library.add(library.mul(x, 2), 2) + library.add(library.mul(y, 2), 3),
            lambda a, b: library.add(library.mul(a, b), b),
            lambda a, b: library.sub(a, b),
        ),
    }


def _rewrite(library: Any, fx_module: Any, case: str) -> tuple[Any, list]:
    traced, pattern, replacement = _rewrite_cases(library)[case]
    gm = fx_module.symbolic_trace(traced)
    return gm, fx_module.replace_pattern(gm, pattern, replacement)


@pytest.mark.parametrize("case", list(_rewrite_cases(onnxnn)))
def test_replace_pattern_matches_what_torch_fx_matches(case: str) -> None:
    gm, matches = _rewrite(onnxnn, fx, case)
    torch_gm, torch_matches = _rewrite(torch, torch_fx, case)
    assert len(matches) == len(torch_matches)
    # The anchor is the pattern's returned node; nodes_map[anchor] is the graph node it matched.
    assert [m.anchor.name for m in matches] == [m.anchor.name for m in torch_matches]
    assert [m.nodes_map[m.anchor].name for m in matches] == [m.nodes_map[m.anchor].name for m in torch_matches]
    x, y = np.array([1.0, -2.0, 3.0], np.float32), np.array([0.5, 4.0, -1.0], np.float32)
    expected = torch_gm(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    # Each case's values are small integers and halves: every operation is exact in float32.
    np.testing.assert_array_equal(gm(onnxnn.tensor(x), onnxnn.tensor(y)).numpy(), expected)


def _flag_first(library: Any) -> Any:
    class FlagFirst(library.nn.Module):
        def forward(self, flag, x):
            return x + 1 if flag else x - 1

    return FlagFirst()


def _flag_last(library: Any) -> Any:
    class FlagLast(library.nn.Module):
        def forward(self, x, flag=False):
            return x + 1 if flag else x - 1

    return FlagLast()


# (module builder, concrete_args, the arguments of a call with the traced value, of one with another value)
SPECIALIZED_CASES = {
    "a parameter before a tensor": (_flag_first, {"flag": True}, ("flag", "x"), (True, False)),
    "a name forward does not take is ignored": (_flag_last, {"flag": True, "nope": 1}, ("x", "flag"), (True, False)),
}


@pytest.mark.parametrize("case", list(SPECIALIZED_CASES))
def test_concrete_args_trace_and_check_as_torch_fx(case: str) -> None:
    build, concrete, order, (traced_value, other_value) = SPECIALIZED_CASES[case]
    x = np.array([1.0, -2.0], np.float32)
    results = []
    for library, fx_module, tensor in ((onnxnn, fx, onnxnn.tensor(x)), (torch, torch_fx, torch.from_numpy(x))):
        gm = fx_module.symbolic_trace(build(library), concrete_args=concrete)

        def call(flag: Any, gm: Any = gm, tensor: Any = tensor) -> Any:
            values = {"flag": flag, "x": tensor}
            return gm(*(values[name] for name in order))

        results.append(call(traced_value).numpy())
        with pytest.raises(AssertionError, match="flag has been specialized to have value True"):
            call(other_value)
    np.testing.assert_array_equal(results[0], results[1])


def _convert_int(proxy: Any) -> Any:
    return int(proxy)


def _convert_float(proxy: Any) -> Any:
    return float(proxy)


def _convert_range(proxy: Any) -> Any:
    return range(proxy)


def _convert_index(proxy: Any) -> Any:
    return [1, 2, 3][proxy]


CONVERSIONS = {"int": _convert_int, "float": _convert_float, "range": _convert_range, "index": _convert_index}


@pytest.mark.parametrize("name", list(CONVERSIONS))
def test_converting_a_proxy_raises_type_error_as_torch_fx(name: str) -> None:
    convert = CONVERSIONS[name]
    with pytest.raises(TypeError) as torch_error:
        torch_fx.symbolic_trace(lambda x: convert(x.sum()))
    with pytest.raises(TypeError) as error:
        fx.symbolic_trace(lambda x: convert(x.sum()))
    assert isinstance(error.value, fx.TraceError)  # still a TraceError for code that catches it
    assert "Proxy" in str(error.value) and "Proxy" in str(torch_error.value)


def halve(x: Any) -> Any:
    return x * 0.5


def _sqrt_of_size(library: Any) -> Any:
    class SqrtOfSize(library.nn.Module):
        def forward(self, x):
            return x / math.sqrt(x.shape[-1])  # torch.fx autowraps the math module

    return SqrtOfSize()


def _norm_and_expit(library: Any) -> Any:
    class NormAndExpit(library.nn.Module):
        def forward(self, x):
            return library.linalg.vector_norm(x) + library.special.expit(x)

    return NormAndExpit()


class _OnnxnnByName(onnxnn.nn.Module):
    def forward(self, x):
        return onnxnn_gelu(onnxnn_relu(x)) + 1


class _TorchByName(torch.nn.Module):
    def forward(self, x):
        return torch_gelu(torch_relu(x)) + 1


def _imported_by_name_in_a_submodule(library: Any) -> Any:
    # The root (Sequential) is defined elsewhere: only the submodule's file imports the functions.
    return library.nn.Sequential(_OnnxnnByName() if library is onnxnn else _TorchByName())


def _wrapped_len(library: Any) -> Any:
    class WrappedLen(library.nn.Module):
        def forward(self, x):
            return x + len(x)

    return WrappedLen()


def _autowrapped_function(library: Any) -> Any:
    class AutowrappedFunction(library.nn.Module):
        def forward(self, x):
            return halve(x.shape[0]) * x

    return AutowrappedFunction()


# (module builder, Tracer keyword arguments, float32 operations in the widest formula: the tolerance in eps)
TRACED_FUNCTION_CASES = {
    "math on a traced size": (_sqrt_of_size, {}, 2),
    "linalg and special functions": (_norm_and_expit, {}, 8),
    "functions imported by name in a submodule's file": (_imported_by_name_in_a_submodule, {}, 16),
    "wrap of the builtin len": (_wrapped_len, {}, 1),
    "Tracer autowrap_functions": (_autowrapped_function, {"autowrap_functions": (halve,)}, 2),
}


@pytest.mark.parametrize("case", list(TRACED_FUNCTION_CASES))
def test_functions_called_on_proxies_are_recorded_as_torch_fx_records_them(case: str) -> None:
    build, tracer_options, operations = TRACED_FUNCTION_CASES[case]
    x = np.array([[3.0, -4.0, 0.5, 2.0], [1.0, 0.0, -1.5, 6.0]], np.float32)
    outputs, recorded = [], []
    for library, fx_module, tensor in ((onnxnn, fx, onnxnn.tensor(x)), (torch, torch_fx, torch.from_numpy(x))):
        root = build(library)
        gm = fx_module.GraphModule(root, fx_module.Tracer(**tracer_options).trace(root))
        names = [getattr(node.target, "__name__", node.target) for node in gm.graph.nodes]
        # torch's builtins are named linalg_vector_norm, special_expit
        names = [name.removeprefix("linalg_").removeprefix("special_") for name in names]
        recorded.append([(node.op, name) for node, name in zip(gm.graph.nodes, names)])
        outputs.append(gm(tensor).detach().numpy())
    assert recorded[0] == recorded[1]
    eps = float(np.finfo(np.float32).eps)
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=operations * eps, atol=operations * eps)


def test_linalg_and_special_calls_read_by_their_public_names() -> None:
    gm = fx.symbolic_trace(_norm_and_expit(onnxnn))
    assert "onnxnn.linalg.vector_norm(x)" in gm.code and "onnxnn.special.expit(x)" in gm.code
