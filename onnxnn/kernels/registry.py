"""The kernel table: one array function per ONNX op, keyed by ``(domain, op_type)``.

A kernel is ``kernel(xp, inputs, attrs) -> list[array]``: ``xp`` is the array module (numpy or
cupy), ``inputs`` the node's input arrays in ONNX order (None for an omitted optional input) and
``attrs`` the node's attributes plus ``"_num_outputs"`` (the node's output count) and
``"_used_outputs"`` (the indices of the outputs anything reads: a kernel may skip the others).
Kernels never modify their inputs; they may return views of them.

Registration also says what the executor does around the kernel, so kernels stay plain math:

- ``types``: the dtypes the op's first input may have; any other raises TypeError when the plan
  is compiled, before anything runs.
- ``native_low_precision``: whether the kernel runs on float16/bfloat16 arrays as they are (data
  movement: reshapes, gathers, concatenation). Every other kernel gets float16/bfloat16 inputs
  widened to float32 and its results rounded back to the recorded dtype, which is what PyTorch's
  CPU kernels do and what keeps numpy off its slow float16 loops.

Example::

    @kernels.register("Relu", types=FLOATING | SIGNED)
    def relu(xp, inputs, attrs):
        return [xp.maximum(inputs[0], 0)]
"""
from __future__ import annotations

from typing import Callable

from ..runtime.registry import Registry

__all__ = ["KernelRegistry", "kernels", "FLOATING", "SIGNED", "UNSIGNED", "INTEGER", "NUMERIC", "BOOL",
           "ALL_TYPES", "LOW_PRECISION"]

FLOATING = frozenset({"float16", "bfloat16", "float32", "float64"})
LOW_PRECISION = frozenset({"float16", "bfloat16"})
SIGNED = frozenset({"int8", "int16", "int32", "int64"})
UNSIGNED = frozenset({"uint8", "uint16", "uint32", "uint64"})
INTEGER = SIGNED | UNSIGNED
NUMERIC = FLOATING | INTEGER
BOOL = frozenset({"bool"})
ALL_TYPES = NUMERIC | BOOL


class KernelRegistry(Registry):
    """The ``(domain, op_type) -> kernel`` table, with each kernel's dtype contract."""

    def __init__(self):
        super().__init__("kernel")
        self.types: dict[tuple[str, str], frozenset] = {}
        self.native_low_precision: set[tuple[str, str]] = set()

    def register(self, *op_types: str, domain: str = "", types: frozenset = ALL_TYPES,
                 native_low_precision: bool = False) -> Callable[[Callable], Callable]:
        """Decorator registering ``kernel(xp, inputs, attrs) -> list[array]`` for each of ``op_types``.

        Args:
            op_types: the ONNX op types the function computes.
            domain: the ONNX domain ("" is the default domain, ai.onnx).
            types: dtype names the first input may have.
            native_low_precision: run float16/bfloat16 inputs as they are instead of widening them.
        """
        def decorate(function: Callable) -> Callable:
            for op_type in op_types:
                key = (domain, op_type)
                self._table[key] = function
                self.types[key] = types
                if native_low_precision:
                    self.native_low_precision.add(key)
                else:
                    self.native_low_precision.discard(key)
            return function
        return decorate

    def lookup(self, op_type: str, domain: str = "", *, opset: int | None = None,
               node_name: str | None = None) -> Callable:
        """The kernel of an op; NotImplementedError naming the op, its domain and this executor otherwise."""
        function = self._table.get((domain, op_type))
        if function is None:
            raise NotImplementedError(
                f"onnxnn kernels executor has no kernel for op_type '{op_type}' (domain '{domain or 'ai.onnx'}')")
        return function

    def check_dtype(self, op_type: str, domain: str, dtype_name: str) -> None:
        """Raises TypeError when the op's kernel does not take ``dtype_name`` as its first input."""
        allowed = self.types.get((domain, op_type), ALL_TYPES)
        if dtype_name not in allowed:
            raise TypeError(
                f"onnxnn kernels executor: {op_type} does not support dtype {dtype_name} "
                f"(supported: {', '.join(sorted(allowed))})")


kernels = KernelRegistry()
