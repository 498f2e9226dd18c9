"""Dynamic axes for exported graphs, found by tracing at several sizes.

Python code such as ``x.view(x.size(0), -1)`` turns a size into a structural constant when it is
recorded. Tracing again with each dynamic axis resized alone, and once with all of them resized far
(see ``_PROBE_GROWTH``), shows which constants follow which axes: each such constant, a sum of whole
multiples of the sizes (``P + T``) or a multiple of a product of two (``B * T``) plus a constant, is
replaced by a small ``Shape -> Gather -> Mul -> Add -> Concat`` subgraph over the graph input, so the
exported model runs at any size; a size used as a value (``y.sum(0) / y.shape[0]``) is that
expression as a scalar of the constant's dtype, and a constant filled with one value over such a
shape (``zeros_like(x)``, a graph output too) is that value expanded to it; ``arange(T)`` and a causal
mask are written as the ``Range`` and ``Where`` they follow (``_PATTERNS``), and ``topk(min(k, T))``'s
``k`` as ``Min(k, T)`` (``_BOUNDED_BY_AXIS``). Graph inputs and outputs
get symbolic dimensions. A tensor that follows an axis some other way (float arithmetic on a size, a
pad to a multiple of 8) raises: written as traced, it would be wrong at other sizes.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..runtime.creation import as_tensor
from .size_expressions import candidates, fit, followed_axes, size_expression, terms

__all__ = ["make_shapes_dynamic", "normalize_dynamic_axes"]


def normalize_dynamic_axes(dynamic_axes: dict, names: list[str]) -> dict[str, dict[int, str]]:
    """``{name: {axis: symbol}}`` from PyTorch's accepted forms (dicts or lists of axes)."""
    normalized = {}
    for name, axes in dynamic_axes.items():
        if name not in names:
            raise ValueError(
                f"to_onnx: dynamic_axes names '{name}', which is neither an input nor an output name (names: {names})"
            )
        if isinstance(axes, dict):
            normalized[name] = {int(axis): str(symbol) for axis, symbol in axes.items()}
        else:
            normalized[name] = {int(axis): f"{name}_dynamic_axes_{position + 1}" for position, axis in enumerate(axes)}
    return normalized


def widen_unit_axes(args: tuple, input_names: list[str], dynamic_axes: dict) -> tuple:
    """The example arguments with every dynamic axis of size 0 or 1 made size 2 (data repeated).

    A trace at size 1 specializes: broadcasting needs no node, ``expand`` to the same shape records
    none, so the trace at another size would differ in structure. PyTorch's ``torch.export`` refuses
    such examples for the same reason; tracing at 2 instead exports the graph every size shares.
    """
    names = list(input_names)
    axes = normalize_dynamic_axes({name: dims for name, dims in dynamic_axes.items() if name in names}, names)
    widened = []
    for arg, name in zip(args, input_names):
        shape = list(getattr(arg, "shape", ()))
        small = [axis % len(shape) for axis in axes.get(name, {}) if shape and shape[axis % len(shape)] < 2]
        if not small:
            widened.append(arg)
            continue
        for axis in small:
            shape[axis] = 2
        data = np.resize(arg.numpy(force=True), shape).astype(arg.dtype.numpy_dtype)
        if data.size == 0:  # np.resize of an empty array fills nothing: zeros of the new shape
            data = np.zeros(shape, arg.dtype.numpy_dtype)
        widened.append(as_tensor(data))
    return tuple(widened)


# The traces that find how each constant follows the dynamic sizes (each symbol: inputs sharing one
# grow together): one more trace per symbol, that symbol alone grown by ``_PROBE_GROWTH``, so each
# constant's dependence on each size is measured apart (``P + T`` is ``1*p + 1*t``; with every size
# grown at once, the growths of ``t`` and ``p`` could add up to a multiple of ``b``'s and ``P + T`` fit
# ``4*b - 1``); and a last, check trace with every symbol grown far, each by its own odd prime, so its
# sizes have other residues than the example's. Every fit must hold in the check trace too: a size
# that is not linear in its axis (``2 * ceil(T / 2)``, a pad to a multiple of 8) passes through the
# probes' few points near the example, never through the check (pads to periods up to the check's
# growth are caught). A model may need its sizes to keep a divisor (``x.view(B, -1, 2, C)``): the
# growths are tried as they are, then doubled, then times 8, and last with every size grown alike in
# one probe (sizes the model needs equal under different symbols); a model that refuses the far check
# sizes (a table of learned positions) is checked at nearer ones.
_PROBE_GROWTH = 3
_CHECK_PRIMES = (
    (37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109, 113, 127),
    (7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83),
)
_MULTIPLES = (1, 2, 8)


class _Source:
    """One dynamic axis of one input, and its sizes in every trace (the example's first, the check's last)."""

    __slots__ = ("name", "axis", "symbol", "sizes")

    def __init__(self, name: str, axis: int, symbol: str, sizes: tuple):
        self.name, self.axis, self.symbol, self.sizes = name, axis, symbol, sizes


def _growth_plans(symbols: list, multiple: int | None, check_primes: tuple) -> list[dict]:
    """``{symbol: growth}`` for each trace after the example's: the probes, then the check."""
    if len(symbols) > len(check_primes):
        raise ValueError(f"to_onnx: at most {len(check_primes)} dynamic axis names, got {len(symbols)}")
    if multiple is None:  # every size alike: the model needs sizes under different symbols equal
        return [dict.fromkeys(symbols, 2), dict.fromkeys(symbols, check_primes[0])]
    probes = [{symbol: multiple * _PROBE_GROWTH} for symbol in symbols]
    return [*probes, {symbol: multiple * check_primes[i] for i, symbol in enumerate(symbols)}]


def _resized_arguments(args: tuple, input_names: list[str], axes: dict, growths: dict) -> tuple:
    """Copies of the example arguments with every dynamic axis grown by its symbol's growth (if any)."""
    resized = []
    for arg, name in zip(args, input_names):
        dims = {axis: symbol for axis, symbol in axes.get(name, {}).items() if symbol in growths}
        if not dims:
            resized.append(arg)
            continue
        new_shape = list(arg.shape)
        for axis, symbol in dims.items():
            new_shape[axis % len(new_shape)] += growths[symbol]
        data = np.resize(arg.numpy(force=True), new_shape).astype(arg.dtype.numpy_dtype)
        resized.append(as_tensor(data))
    return tuple(resized)


def _sources(args: tuple, input_names: list[str], axes: dict, plans: list) -> list:
    sources = []
    for arg, name in zip(args, input_names):
        for axis, symbol in axes.get(name, {}).items():
            axis %= len(arg.shape)
            size = arg.shape[axis]
            sizes = (size, *(size + growths.get(symbol, 0) for growths in plans))
            sources.append(_Source(name, axis, symbol, sizes))
    return sources


def _retraces(args: tuple, input_names: list[str], axes: dict, retrace) -> tuple:
    """The probe and check traces (see ``_PROBE_GROWTH``) and the dynamic axes' sources."""
    symbols = list(dict.fromkeys(symbol for name in input_names for symbol in axes.get(name, {}).values()))
    first_error = None
    for multiple in (*_MULTIPLES, None):
        plans = _growth_plans(symbols, multiple, _CHECK_PRIMES[0])
        try:
            probes = [retrace(_resized_arguments(args, input_names, axes, growths)) for growths in plans[:-1]]
        except Exception as error:  # the model refused those sizes: try sizes it may take
            first_error = first_error or error
            continue
        for check_primes in _CHECK_PRIMES:
            plans = _growth_plans(symbols, multiple, check_primes)
            try:
                check = retrace(_resized_arguments(args, input_names, axes, plans[-1]))
            except Exception as error:
                first_error = first_error or error
                continue
            return [*probes, check], _sources(args, input_names, axes, plans)
    raise RuntimeError(
        f"to_onnx: the model does not run with its dynamic axes resized ({first_error}); export with fixed sizes"
    ) from first_error


def _reader_of(by_name: dict, position: int, node, slot: int):
    """The ONNX node that reads input ``slot`` of the plan's node at ``position``.

    The graph's nodes do not follow the plan's one for one: ``build_model`` writes an op that has a
    decomposition (BatchNormalization with batch statistics, GroupNormalization) as several nodes,
    so every later op stands further down the graph. An op written as recorded is one node named
    ``{op_type}_{position}``; ``by_name``: the graph's nodes by name.
    """
    recorded = by_name.get(f"{node.op_type}_{position}")
    if recorded is None or recorded.op_type != node.op_type or slot >= len(recorded.input):
        # A decomposition's nodes (``node_{position}_...``) may read the shape anywhere, or not at all.
        raise RuntimeError(
            f"to_onnx: a shape argument of {node.op_type} depends on a dynamic axis, and the op is "
            "written as several ONNX nodes, which onnxnn cannot make dynamic; export with fixed sizes"
        )
    return recorded


def _check_same_structure(first, second) -> None:
    if len(first.plan.nodes) != len(second.plan.nodes) or any(
        a.signature != b.signature for a, b in zip(first.plan.nodes, second.plan.nodes)
    ):
        raise RuntimeError(
            "to_onnx: the traced graph changes structure when a dynamic axis changes size "
            "(Python control flow on a size?); export with fixed sizes instead"
        )


class _Rewrite:
    """What replacing constants adds to the graph: nodes to put first, their initializers, the names
    computed so far (by expression), and the terms fits may use."""

    __slots__ = ("prologue", "initializers", "cache", "terms", "candidates")

    def __init__(self, terms: list):
        self.prologue: list = []
        self.initializers: list = []
        self.cache: dict = {}
        self.terms = terms
        self.candidates = candidates(terms)


def _shape_expression(rewrite: _Rewrite, sizes, op_type: str) -> str:
    """Appends nodes computing a shape whose elements took ``sizes`` (tuples, one size per trace): a
    constant where every trace agrees, else a fitted expression of the dynamic sizes; returns its name."""
    pieces = []
    for element in sizes:
        if len(set(element)) == 1:
            constant_name = f"onnxnn::dim_constant_{element[0]}"
            if constant_name not in rewrite.cache:
                rewrite.initializers.append(numpy_helper.from_array(np.array([element[0]], np.int64), constant_name))
                rewrite.cache[constant_name] = constant_name
            pieces.append(constant_name)
            continue
        element = tuple(element)
        if ("fit", element) not in rewrite.cache:  # the same sizes recur: each layer's reshapes
            rewrite.cache["fit", element] = fit(element, rewrite.candidates)
        fitted = rewrite.cache["fit", element]
        if fitted is None:
            # Written as traced, or as a line through a few traces near the example, it would be
            # silently wrong at other sizes (a pad to a multiple of 8, ``2 * ceil(T / 2)``).
            raise RuntimeError(
                f"to_onnx: a size used by {op_type} ({element[0]} at the traced size) depends on the dynamic "
                f"axis {followed_axes(element, rewrite.terms)} in a way that is not a whole multiple of "
                "the dynamic axes' sizes (a sum of them, or a product of two) plus a constant, so the exported "
                "graph would be wrong at other sizes; export with fixed sizes for that axis"
            )
        pieces.append(size_expression(rewrite.prologue, rewrite.initializers, rewrite.cache, *fitted))
    computed = f"onnxnn::dynamic_shape_{len(rewrite.prologue)}"
    rewrite.prologue.append(helper.make_node("Concat", pieces, [computed], axis=0))
    return computed


def _whole_numbers(values: np.ndarray) -> bool:
    return values.dtype.kind in "iu" or (values.dtype.kind == "f" and bool(np.all(np.mod(values, 1) == 0)))


def _sizes_as_values(rewrite: _Rewrite, traced: tuple, op_type: str) -> str:
    """Appends nodes computing a constant of at most one axis whose elements follow the dynamic sizes
    (``traced``: its arrays in every trace), in its own shape and dtype; returns its name.

    A size used as a value (``y.sum(0) / y.shape[0]``, an imported model's ``Range`` limit) is a scalar
    of the forward's dtype, not a shape."""
    flat = [array.reshape(-1) for array in traced]
    if not all(map(_whole_numbers, flat)):
        raise RuntimeError(
            f"to_onnx: a constant read by {op_type} depends on a dynamic axis and is not a whole "
            f"number ({flat[0].tolist()} at the traced size), which onnxnn cannot write as a computation "
            "of the axes' sizes"
        )
    elements = zip(*(values.astype(np.int64).tolist() for values in flat))
    return _like(rewrite.prologue, _shape_expression(rewrite, elements, op_type), traced[0])


def _like(prologue: list, computed: str, constant: np.ndarray) -> str:
    """``computed`` (a 1-D int64 shape) as ``constant`` is: a scalar where it is one, in its dtype."""
    if constant.ndim == 0:
        scalar = f"{computed}::scalar"
        prologue.append(helper.make_node("Squeeze", [computed], [scalar]))  # one element, no axes: a scalar
        computed = scalar
    if constant.dtype != np.int64:
        cast = f"{computed}::as_{constant.dtype.name}"
        prologue.append(
            helper.make_node("Cast", [computed], [cast], to=helper.np_dtype_to_tensor_dtype(constant.dtype))
        )
        computed = cast
    return computed


def _same(first: np.ndarray, other: np.ndarray) -> bool:
    # NaN is the same constant in every trace (logsumexp's masked maximum), though never equal to itself.
    return first.shape == other.shape and np.array_equal(first, other, equal_nan=first.dtype.kind in "fc")


def _fills(values: tuple) -> tuple | None:
    """Each trace's one value (as a 0-d array), where each trace's constant is one value repeated over
    shapes of one rank that differ; else None."""
    if any(value.data.size == 0 for value in values) or len({value.data.ndim for value in values}) != 1:
        return None
    if len({value.shape for value in values}) == 1:
        return None
    fills = tuple(value.data.reshape(-1)[:1].reshape(()) for value in values)
    if not all(np.all(_same_elements(value.data, fill)) for value, fill in zip(values, fills)):
        return None
    return fills


def _same_elements(data: np.ndarray, fill: np.ndarray) -> np.ndarray:
    if data.dtype.kind in "fc" and np.isnan(fill):
        return np.isnan(data)
    return data == fill


def _dynamic_constant(rewrite: _Rewrite, values: tuple, op_type: str, position: int | str) -> str | None:
    """The name of nodes computing a constant (``values``: its value in every trace) from the dynamic
    sizes; None where every trace has the same constant. Raises where onnxnn cannot compute it."""
    first = values[0].data
    if all(_same(first, value.data) for value in values[1:]):
        return None
    fills = _fills(values)
    if fills is not None:
        # zeros_like(x), full_like(x, v), ones(x.shape[0], 3), full((B,), T): one value over a shape
        # that follows the dynamic axes, written as that value expanded to the computed shape.
        shape = _shape_expression(rewrite, zip(*(value.shape for value in values)), op_type)
        fill = f"onnxnn::fill_{position}"
        if all(_same(fills[0], other) for other in fills[1:]):
            rewrite.initializers.append(numpy_helper.from_array(fills[0], fill))
        else:  # the value follows the sizes too
            fill = _sizes_as_values(rewrite, fills, op_type)
        rewrite.prologue.append(helper.make_node("Expand", [fill, shape], [f"onnxnn::fill_{position}::expanded"]))
        return f"onnxnn::fill_{position}::expanded"
    if first.ndim <= 1 and len({value.shape for value in values}) == 1:
        return _sizes_as_values(rewrite, tuple(value.data for value in values), op_type)
    for pattern in _PATTERNS:  # arange(T), a causal mask: each trace's constant, a formula of its sizes
        computed = pattern(rewrite, tuple(value.data for value in values), op_type, position)
        if computed is not None:
            return computed
    # Written as it was traced, it would be silently wrong at every other size (an imported model's
    # Resize sizes from float arithmetic on its input's shape, say).
    raise RuntimeError(
        f"to_onnx: a tensor read by {op_type} was computed from the size of a dynamic axis in a way "
        "onnxnn cannot write as a computation of that size, so the exported graph would be wrong at "
        "every other size; export without that dynamic axis, or compute the tensor from the input's "
        "shape with integer arithmetic"
    )


def _scalar(rewrite: _Rewrite, values, op_type: str) -> str:
    """A scalar int64 that took ``values`` (one whole number per trace): a constant, or a fitted size."""
    return _like(rewrite.prologue, _shape_expression(rewrite, [tuple(values)], op_type), np.zeros((), np.int64))


def _constant(rewrite: _Rewrite, value: np.ndarray, name: str) -> str:
    rewrite.initializers.append(numpy_helper.from_array(value, name))
    return name


def _progression(rewrite: _Rewrite, traced: tuple, op_type: str, position: int | str) -> str | None:
    """``arange(T)`` positions (``pos_emb(arange(T))``): 1-D constants ``start + step * [0..n)`` with
    one whole step in every trace, and a start and length fitted to the sizes (or the same in every
    trace), written as ``Range(start, start + n * step, step)`` cast to the constant's dtype."""
    if any(data.ndim != 1 or data.size == 0 or not _whole_numbers(data) for data in traced):
        return None
    steps = {int(data[1]) - int(data[0]) for data in traced if data.size > 1}
    if len(steps) != 1 or 0 in steps:
        return None
    step = steps.pop()
    starts = tuple(int(data[0]) for data in traced)
    if not all(
        np.array_equal(data, (start + step * np.arange(data.size)).astype(data.dtype))
        for data, start in zip(traced, starts)
    ):
        return None
    start = _scalar(rewrite, starts, op_type)
    step_name = _constant(rewrite, np.array(step, np.int64), f"onnxnn::range_{position}::step")
    length = _scalar(rewrite, tuple(data.size for data in traced), op_type)
    span, limit, computed = (f"onnxnn::range_{position}::{part}" for part in ("span", "limit", "values"))
    rewrite.prologue += [
        helper.make_node("Mul", [length, step_name], [span]),
        helper.make_node("Add", [start, span], [limit]),
        helper.make_node("Range", [start, limit, step_name], [computed]),
    ]
    return _like(rewrite.prologue, computed, traced[0])


def _triangle(rewrite: _Rewrite, traced: tuple, op_type: str, position: int | str) -> str | None:
    """A causal mask (``generate_square_subsequent_mask(T)``, ``is_causal=True``): each trace's
    constant is ``where(column - row >= d, a, b)``, with ``a`` and ``b`` the same in every trace and the
    sizes and diagonal ``d`` fitted to the dynamic sizes; written as that ``Where`` over two ``Range``s."""
    if any(data.ndim != 2 or data.size == 0 for data in traced):
        return None
    inside, outside = np.asarray(traced[0][0, -1]), np.asarray(traced[0][-1, 0])  # upper and lower corners
    diagonals = []
    for data in traced:
        offsets = np.arange(data.shape[1])[None, :] - np.arange(data.shape[0])[:, None]
        is_inside = _same_elements(data, inside)
        if not is_inside.any() or is_inside.all():
            return None
        lowest = int(offsets[is_inside].min())
        if not np.array_equal(is_inside, offsets >= lowest) or not np.all(_same_elements(data[~is_inside], outside)):
            return None
        diagonals.append(lowest)
    rows = _scalar(rewrite, tuple(data.shape[0] for data in traced), op_type)
    columns = _scalar(rewrite, tuple(data.shape[1] for data in traced), op_type)
    diagonal = _scalar(rewrite, diagonals, op_type)
    name = f"onnxnn::triangle_{position}"
    zero = _constant(rewrite, np.array(0, np.int64), f"{name}::zero")
    one = _constant(rewrite, np.array(1, np.int64), f"{name}::one")
    row_axis = _constant(rewrite, np.array([1], np.int64), f"{name}::row_axis")
    values = [_constant(rewrite, inside, f"{name}::inside"), _constant(rewrite, outside, f"{name}::outside")]
    rewrite.prologue += [
        helper.make_node("Range", [zero, rows, one], [f"{name}::rows"]),
        helper.make_node("Unsqueeze", [f"{name}::rows", row_axis], [f"{name}::row_column"]),
        helper.make_node("Range", [zero, columns, one], [f"{name}::columns"]),
        helper.make_node("Sub", [f"{name}::columns", f"{name}::row_column"], [f"{name}::offsets"]),
        helper.make_node("GreaterOrEqual", [f"{name}::offsets", diagonal], [f"{name}::is_inside"]),
        helper.make_node("Where", [f"{name}::is_inside", *values], [f"{name}::matrix"]),
    ]
    return f"{name}::matrix"


# The constants of several elements that follow the sizes as a formula of them, tried in turn.
_PATTERNS = (_progression, _triangle)


# The shape arguments that a size of the op's data input bounds, by (op, slot): the axis (from the
# attributes) whose size bounds it. ``topk(min(k, T))`` takes ``k`` in every trace longer than ``k``:
# written as traced, the graph fails below that length, where PyTorch returns the top ``T``.
_BOUNDED_BY_AXIS = {("TopK", 1): lambda attributes: attributes.get("axis", -1)}


def _bounded_by_axis(rewrite: _Rewrite, nodes: tuple, slot: int, values: tuple) -> str | None:
    """``Min(k, size)`` for a shape argument that took ``min(k, size)`` in every trace (``k`` the
    largest it took) where ``size``, the bounding axis's size (``_BOUNDED_BY_AXIS``), follows the
    dynamic axes; None for any other argument (a plain size, ``topk(T)``, is fitted as one)."""
    axis_of = _BOUNDED_BY_AXIS.get((nodes[0].op_type, slot))
    if axis_of is None or any(value.data.size != 1 for value in values):
        return None
    axis = axis_of(nodes[0].attrs)
    sizes = tuple(node.inputs[0].shape[axis % len(node.inputs[0].shape)] for node in nodes)
    chosen = tuple(int(value.data.reshape(-1)[0]) for value in values)
    bound = max(chosen)
    if chosen == sizes or any(value != min(bound, size) for value, size in zip(chosen, sizes)):
        return None
    if len(set(sizes)) == 1 or fit(sizes, rewrite.candidates) is None:
        return None  # the axis does not follow the dynamic sizes (as a fit): k holds at every size
    bounded = f"onnxnn::bounded_{nodes[0].op_type}_{len(rewrite.prologue)}"
    rewrite.cache["bounded"] = True  # the sizes it decides are the same in every trace, not at run time
    size = _shape_expression(rewrite, [sizes], nodes[0].op_type)
    bound_name = _constant(rewrite, np.array([bound], np.int64), f"{bounded}::bound")
    rewrite.prologue.append(helper.make_node("Min", [bound_name, size], [bounded]))
    return _like(rewrite.prologue, bounded, values[0].data)


def make_shapes_dynamic(
    proto: onnx.ModelProto,
    model,
    args: tuple,
    input_names: list[str],
    output_names: list[str],
    dynamic_axes: dict,
    trace,
    retrace,
) -> None:
    """Rewrites ``proto`` in place so every ``dynamic_axes`` axis may change size at run time."""
    axes = normalize_dynamic_axes(dynamic_axes, list(input_names) + list(output_names))
    if not any(axes.get(name) for name in input_names):
        return
    others, sources = _retraces(args, input_names, axes, retrace)
    for other in others:
        _check_same_structure(trace, other)
    traces = [trace, *others]
    rewrite = _Rewrite(terms(sources))
    graph_nodes = proto.graph.node
    rewired: dict[tuple, str] = {}  # (position, slot) of a recorded op -> the tensor it reads instead
    for position, nodes in enumerate(zip(*(each.plan.nodes for each in traces))):
        op_type = nodes[0].op_type
        for slot, values in enumerate(zip(*(node.inputs for node in nodes))):
            if values[0] is None or values[0].data is None or any(values[0] is arg for arg in trace.arg_values):
                continue
            if values[0].static is not None:
                bounded = _bounded_by_axis(rewrite, nodes, slot, values)
                if bounded is not None:
                    rewired[position, slot] = bounded
                    continue
                if all(value.static == values[0].static for value in values[1:]):
                    continue
                if values[0].data.ndim > 1 or len({value.shape for value in values}) != 1:
                    raise RuntimeError(
                        f"to_onnx: a shape argument of {op_type} depends on a dynamic axis in a way onnxnn "
                        "cannot express"
                    )
                rewired[position, slot] = _sizes_as_values(rewrite, tuple(value.data for value in values), op_type)
                continue
            computed = _dynamic_constant(rewrite, values, op_type, f"{position}_{slot}")
            if computed is not None:
                rewired[position, slot] = computed
    # A graph output that is a constant (``zeros(B, 3)`` returned as is) is read by no recorded op:
    # build_model writes it through an Identity node, which reads the computed tensor instead.
    identities = {node.output[0]: node for node in graph_nodes if node.op_type == "Identity"}
    for index, outputs in enumerate(zip(*(each.plan.outputs for each in traces))):
        name = proto.graph.output[index].name
        if outputs[0].data is None or any(outputs[0] is arg for arg in trace.arg_values) or name not in identities:
            continue
        computed = _dynamic_constant(rewrite, outputs, f"the graph output '{name}'", f"output_{index}")
        if computed is not None:
            identities[name].input[0] = computed

    if rewired:
        by_name = {onnx_node.name: onnx_node for onnx_node in graph_nodes if onnx_node.name}
        for (position, slot), source in rewired.items():
            _reader_of(by_name, position, trace.plan.nodes[position], slot).input[slot] = source
    if rewrite.prologue:
        ordered = rewrite.prologue + list(graph_nodes)
        del graph_nodes[:]
        graph_nodes.extend(ordered)
        proto.graph.initializer.extend(rewrite.initializers)

    _drop_unused_initializers(proto)
    for graph_input in proto.graph.input:
        for axis, symbol in axes.get(graph_input.name, {}).items():
            dims = graph_input.type.tensor_type.shape.dim
            dims[axis % len(dims)].dim_param = symbol
    symbol_by_sizes = {source.sizes: source.symbol for source in sources}
    for index, graph_output in enumerate(proto.graph.output):
        named = axes.get(graph_output.name, {})
        dims = graph_output.type.tensor_type.shape.dim
        for axis, sizes in enumerate(zip(*(each.output_shapes[index] for each in traces))):
            if axis in named or axis - len(dims) in named:
                dims[axis].dim_param = named.get(axis, named.get(axis - len(dims)))
            elif len(set(sizes)) > 1:
                dims[axis].dim_param = symbol_by_sizes.get(sizes, f"{graph_output.name}_dim_{axis}")
    if "bounded" in rewrite.cache:
        _declare_bounded_dims(proto)


def _declare_bounded_dims(proto: onnx.ModelProto) -> None:
    """Makes symbolic every output dim that ONNX shape inference cannot tell from the graph: a
    ``topk(min(k, T))`` length is ``k`` in every trace, yet shorter below ``k``."""
    unshaped = onnx.ModelProto()
    unshaped.CopyFrom(proto)
    for graph_output in unshaped.graph.output:
        graph_output.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(unshaped).graph.output
    for graph_output, inferred_output in zip(proto.graph.output, inferred):
        known = inferred_output.type.tensor_type.shape.dim
        for axis, dim in enumerate(graph_output.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and (axis >= len(known) or not known[axis].HasField("dim_value")):
                dim.dim_param = f"{graph_output.name}_dim_{axis}"


def _drop_unused_initializers(proto: onnx.ModelProto) -> None:
    """Structural constants replaced by computed shapes are no longer read: remove them."""
    used = {name for node in proto.graph.node for name in node.input}
    initializers = proto.graph.initializer
    # Deleted where they stand: re-adding the kept ones would copy every weight.
    for index in reversed(range(len(initializers))):
        if initializers[index].name not in used:
            del initializers[index]
