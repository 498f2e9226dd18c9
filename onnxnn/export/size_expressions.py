"""The sizes a dynamic-axes export computes: fitting a traced constant to the axis sizes, and the
ONNX subgraph that computes the fitted form from the graph inputs' shapes (``dynamic_shapes``).

A constant's values over the traces (the example, one trace per axis, a far check trace) are fitted
as a sum of whole multiples of the sizes plus a constant, or a multiple of a product of two sizes
plus a constant; the form solved from the first traces must hold exactly in the check trace.
"""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

__all__ = ["terms", "candidates", "fit", "followed_axes", "size_expression", "term_expression", "input_size"]


def terms(sources: list) -> list:
    """The sizes a shape constant may follow: each dynamic size, and each product of two of them
    (``x.reshape(B * T, -1)``), one source per symbol; as ``(factors, sizes in every trace)``."""
    by_symbol = list({source.symbol: source for source in sources}.values())
    terms: list[tuple[tuple, tuple]] = [((source,), source.sizes) for source in by_symbol]
    for i, first in enumerate(by_symbol):
        for second in by_symbol[i:]:
            terms.append(((first, second), tuple(a * b for a, b in zip(first.sizes, second.sizes))))
    return terms


def candidates(terms: list) -> list:
    """The forms a constant may take, as ``(terms, solver)``: the sum of the dynamic sizes (each times a
    whole number), or one size or product of two; ``solver`` maps the values in every trace but the
    check to the factors and constant (its pseudo-inverse: computed once, used for every constant).
    A form the traces do not determine (every size grown alike) is left out."""
    singles = [term for term in terms if len(term[0]) == 1]
    candidates = []
    for chosen in (singles, *([term] for term in terms)):
        columns = [sizes[:-1] for _, sizes in chosen] + [(1,) * (len(chosen[0][1]) - 1)]
        matrix = np.array(columns, np.float64).T
        if np.linalg.matrix_rank(matrix) == len(columns):
            candidates.append((chosen, np.linalg.pinv(matrix)))
    return candidates


def fit(values: tuple, candidates: list) -> tuple | None:
    """The simplest ``(((factors, k), ...), c)`` with ``value = sum(k * product(factors)) + c`` in
    every trace, the check included: a sum of the dynamic sizes, or one product of two, times whole
    numbers (``candidates``)."""
    best = None
    fitted_values = np.array(values[:-1], np.float64)
    for chosen, solver in candidates:
        *factors, c = (int(round(float(number))) for number in solver @ fitted_values)
        # Exactly, in whole numbers, in every trace: a form that does not hold in one is not the size's.
        if any(
            sum(k * sizes[index] for k, (_, sizes) in zip(factors, chosen)) + c != value
            for index, value in enumerate(values)
        ):
            continue
        used = tuple((term_factors, k) for (term_factors, _), k in zip(chosen, factors) if k)
        if not used:
            continue
        score = (sum(len(term_factors) > 1 for term_factors, _ in used), len(used), c != 0, [abs(k) for _, k in used])
        if best is None or score < best[0]:
            best = (score, used, c)
    return None if best is None else best[1:]


def followed_axes(values: tuple, terms: list) -> str:
    """The dynamic axes a constant changes with (for an error): those grown in a probe that changed it."""
    changed = [index for index in range(1, len(values) - 1) if values[index] != values[0]]
    followed = [
        factors[0]
        for factors, sizes in terms
        if len(factors) == 1 and (not changed or any(sizes[index] != sizes[0] for index in changed))
    ]
    return ", ".join(f"'{source.symbol}' ({source.name} axis {source.axis})" for source in followed)


def size_expression(graph_nodes: list, initializers: list, cache: dict, used: tuple, c: int) -> str:
    """Appends nodes computing ``sum(k * product of the factors' sizes) + c`` (``used``: the
    ``(factors, k)`` of ``fit``) as a 1-element int64 tensor; returns its name."""
    key = (tuple((tuple((source.name, source.axis) for source in factors), k) for factors, k in used), c)
    if key in cache:
        return cache[key]
    result = None
    for factors, k in used:
        term = term_expression(graph_nodes, initializers, cache, factors, k)
        if result is not None:
            total = f"{result}::plus::{term}"
            if total not in cache:
                graph_nodes.append(helper.make_node("Add", [result, term], [total]))
                cache[total] = total
            term = total
        result = term
    assert result is not None  # a fit follows at least one size
    if c != 0:
        shifted = f"{result}::plus_{c}"
        initializers.append(numpy_helper.from_array(np.array([c], np.int64), shifted + "::offset"))
        graph_nodes.append(helper.make_node("Add", [result, shifted + "::offset"], [shifted]))
        result = shifted
    cache[key] = result
    return result


def term_expression(graph_nodes: list, initializers: list, cache: dict, factors: tuple, k: int) -> str:
    """Appends nodes computing ``k * product of the factors' sizes``; returns its name."""
    result = None
    for source in factors:
        size = input_size(graph_nodes, initializers, cache, source.name, source.axis)
        if result is None:
            result = size
        else:
            product = f"{result}::times::{size}"
            graph_nodes.append(helper.make_node("Mul", [result, size], [product]))
            result = product
    assert result is not None  # a term has at least one factor
    if k != 1:
        factor = f"{result}::times_{k}"
        if factor not in cache:
            initializers.append(numpy_helper.from_array(np.array([k], np.int64), factor + "::factor"))
            graph_nodes.append(helper.make_node("Mul", [result, factor + "::factor"], [factor]))
            cache[factor] = factor
        result = factor
    return result


def input_size(graph_nodes: list, initializers: list, cache: dict, name: str, axis: int) -> str:
    """Appends (once) the nodes reading ``name``'s size along ``axis`` as a 1-element tensor."""
    shape_name = f"{name}::shape"
    if shape_name not in cache:
        graph_nodes.append(helper.make_node("Shape", [name], [shape_name]))
        cache[shape_name] = shape_name
    size_name = f"{name}::size_{axis}"
    if size_name not in cache:
        index_name = f"{size_name}::index"
        initializers.append(numpy_helper.from_array(np.array([axis], np.int64), index_name))
        graph_nodes.append(helper.make_node("Gather", [shape_name, index_name], [size_name], axis=0))
        cache[size_name] = size_name
    return size_name
