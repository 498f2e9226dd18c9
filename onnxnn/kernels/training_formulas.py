"""onnxnn's kernels of the fused optimizer updates of ``ir/update_formulas.py`` (SGD, Adamax, ..., Rprop).

Each kernel hands its node's tensors to ``update_driver.run_update`` with the update's formula run
on the array module itself (numpy or CuPy), so it computes the decomposition's operations
(``runtime/ops/training_formulas.py``) on the same operands in the same order; a large update on
the CPU runs as its compiled loop (``update_loops_template.h``), the same operations in C.
"""

from __future__ import annotations

from typing import Callable

from ..ir.domains import TRAINING_DOMAIN
from ..ir.kernel_registry import FLOATING, kernels
from ..ir.update_formulas import FUSED_UPDATES, FusedUpdate
from .update_driver import Factors, Update, run_update

__all__ = ["KERNELS"]


def _into(xp, value, out):
    """A formula's result as an array: written into the driver's ``out`` where it gives one."""
    if out is None:
        return xp.asarray(value)  # numpy's 0-d arithmetic gives scalars
    out[...] = value
    return out


def _register(fused: FusedUpdate) -> Callable:
    def formula(arrays, results, scratch, xp, factors, attrs) -> tuple:
        x, g, *states = arrays
        named = dict(zip(fused.hyperparameters, factors))
        new = fused.formula(xp, x, g, states, named, attrs)
        return tuple(_into(xp, value, out) for value, out in zip(new, results))

    update = Update(fused.op_type, formula)
    start = len(fused.hyperparameters)
    lists = len(fused.tensor_lists)

    # The tensors are float32 or float64 (the optimizers record other dtypes op by op); the first
    # input, whose dtype the registry checks, is a float64 hyperparameter.
    @kernels.register(fused.op_type, domain=TRAINING_DOMAIN, types=FLOATING, finished_results=True)
    def kernel(xp, inputs, attrs):
        tensors = inputs[start:]
        count = len(tensors) // lists
        columns = [tensors[kind * count : (kind + 1) * count] for kind in range(lists)]
        return run_update(xp, update, columns[0], columns[1], tuple(columns[2:]), (Factors(inputs[:start]), attrs))

    return kernel


# op type -> its kernel, ``kernel(xp, inputs, attrs) -> results``, as registered.
KERNELS: dict[str, Callable] = {op_type: _register(fused) for op_type, fused in FUSED_UPDATES.items()}
