"""torch's top-level in-place functions: ``onnxnn.abs_(x)`` is ``x.abs_()``.

Also ``onnxnn.detach(x)`` and ``onnxnn.fill(x, v)``, torch's out-of-place forms of two methods.
``nn.functional``'s in-place activations (``onnxnn.selu_(x)``) are given by the package, which
imports ``nn`` (a layer above this one).
"""

from __future__ import annotations

from typing import Callable

__all__ = ["IN_PLACE_METHODS", "top_level_in_place"]

# The methods whose ``name_`` form torch also offers as a function of the top level.
IN_PLACE_METHODS = (
    "abs",
    "acos",
    "acosh",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctanh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "ceil",
    "clamp",
    "clamp_max",
    "clamp_min",
    "clip",
    "cos",
    "cosh",
    "deg2rad",
    "erf",
    "erfc",
    "exp",
    "exp2",
    "expm1",
    "fix",
    "floor",
    "frac",
    "log",
    "log10",
    "log1p",
    "log2",
    "logit",
    "nan_to_num",
    "neg",
    "negative",
    "rad2deg",
    "reciprocal",
    "relu",
    "round",
    "rsqrt",
    "sigmoid",
    "sin",
    "sinc",
    "sinh",
    "sqrt",
    "square",
    "tan",
    "tanh",
    "trunc",
    "xlogy",
    "zero",
    "fill",
    "detach",
    "index_put",
    "addmv",
    "ldexp",
    "i0",
    "gcd",
    "lcm",
)


def top_level_in_place(functional: dict[str, Callable]) -> dict[str, Callable]:
    """The top-level functions: ``name_`` for each of ``IN_PLACE_METHODS`` (the method) and of
    ``functional``'s names (rebinding ``input`` to ``functional[name](input, ...)``), with
    ``detach`` and ``fill``."""
    result = {name + "_": _call_method(name + "_") for name in IN_PLACE_METHODS}
    result["detach"] = _call_method("detach")
    result["fill"] = lambda input, value: input.clone().fill_(value)
    for name, function in functional.items():
        result[name + "_"] = _assign_functional(name, function)
    return result


def _call_method(method: str):
    def function(input, *args, **kwargs):
        return getattr(input, method)(*args, **kwargs)

    function.__name__ = function.__qualname__ = method
    function.__doc__ = f"``input.{method}(...)``."
    return function


def _assign_functional(name: str, functional):
    def function(input, *args, **kwargs):
        return input._assign(functional(input._alias(), *args, **kwargs))

    function.__name__ = function.__qualname__ = name + "_"
    function.__doc__ = f"In-place ``{name}``: rebinds ``input`` to the result."
    return function
