"""``Proxy``: the stand-in for a value while ``symbolic_trace`` runs ``forward``.

Every operation on a Proxy records a node instead of computing: operators become
``call_function`` nodes on ``operator`` functions, method calls ``call_method`` nodes, attribute
reads ``getattr`` nodes. A Proxy has no value, so Python control flow on it cannot be decided
and raises ``TraceError``, as in ``torch.fx``.
"""

from __future__ import annotations

import builtins
import operator
from typing import TYPE_CHECKING, Any, Iterator

from .node import Node

if TYPE_CHECKING:
    from .tracer import Tracer

__all__ = ["Attribute", "Proxy", "TraceError"]


class TraceError(ValueError):
    """Raised when a traced program needs a value that symbolic tracing does not have."""


class _ConversionError(TraceError, TypeError):
    """``int(proxy)``, ``float(proxy)``, ``range(proxy)``: a TypeError, as torch.fx's Proxy gives
    (it defines no conversions), which is still a TraceError for code that catches those."""


class Proxy:
    """A traced value: operations on it add nodes to its tracer's graph.

    Args:
        node: the node whose result this proxy stands for.
        tracer: the tracer recording the graph.

    Example::

        >>> class Doubler(fx.Transformer):
        ...     def call_function(self, target, args, kwargs):
        ...         return super().call_function(target, args, kwargs) * 2  # a Proxy: records a mul
    """

    def __init__(self, node: Node, tracer: Tracer | None = None) -> None:
        if tracer is None:
            raise ValueError("Proxy needs the tracer recording its graph")
        self.tracer = tracer
        self.node = node

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, name: str) -> Attribute:
        # Double-underscore names are Python protocols (copy, pickle, numpy): never tensor attributes.
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Attribute(self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", "__call__", (self, *args), kwargs)

    def __getitem__(self, index: Any) -> Proxy:
        return self.tracer.create_proxy("call_function", operator.getitem, (self, index), {})

    def __setitem__(self, index: Any, value: Any) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, index, value), {})

    # ------------------------------------------------------------------------ what tracing cannot decide
    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __iter__(self) -> Iterator[Proxy]:
        return self.tracer.iter(self)

    def __len__(self) -> int:
        raise RuntimeError(
            "'len' is not supported in symbolic tracing by default. If you want this call to be "
            "recorded, please call onnxnn.fx.wrap('len') at module scope"
        )

    def __index__(self) -> int:
        raise _ConversionError(
            "'Proxy' object cannot be interpreted as an integer "
            "(symbolically traced variables cannot be used as an index or a size)"
        )

    def __int__(self) -> int:
        raise _ConversionError(
            "int() argument must be a string, a bytes-like object or a real number, not 'Proxy' "
            "(symbolically traced variables cannot be converted to int)"
        )

    def __float__(self) -> float:
        raise _ConversionError(
            "float() argument must be a string or a real number, not 'Proxy' "
            "(symbolically traced variables cannot be converted to float)"
        )

    def keys(self) -> Any:
        return self.tracer.keys(self)


class Attribute(Proxy):
    """``proxy.name``: a method call when called, a ``getattr`` node when used as a value."""

    def __init__(self, root: Proxy, attr: str) -> None:
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node: Node | None = None

    @property
    def node(self) -> Node:  # type: ignore[override]
        # Recorded on first use as a value: ``x.relu()`` needs no getattr node, ``x.shape`` does.
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", builtins.getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root, *args), kwargs)


def _binary(operation: Any, reflected: bool):
    if reflected:

        def method(self: Proxy, other: Any) -> Proxy:
            return self.tracer.create_proxy("call_function", operation, (other, self), {})

    else:

        def method(self: Proxy, other: Any) -> Proxy:
            return self.tracer.create_proxy("call_function", operation, (self, other), {})

    return method


def _unary(operation: Any):
    def method(self: Proxy) -> Proxy:
        return self.tracer.create_proxy("call_function", operation, (self,), {})

    return method


_REFLECTABLE = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift",
)  # fmt: skip
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")

for _name in _REFLECTABLE:
    _operation = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    setattr(Proxy, f"__{_name}__", _binary(_operation, reflected=False))
    setattr(Proxy, f"__r{_name}__", _binary(_operation, reflected=True))
for _name in _COMPARISONS:
    setattr(Proxy, f"__{_name}__", _binary(getattr(operator, _name), reflected=False))
for _name in ("neg", "pos", "invert", "abs"):
    setattr(Proxy, f"__{_name}__", _unary(getattr(operator, _name)))
# Defining __eq__ removes the default hash; nodes and proxies are still keyed by identity.
Proxy.__hash__ = object.__hash__  # type: ignore[method-assign]
