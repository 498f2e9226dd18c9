"""Dynamic axes for exported graphs, found by tracing at three sizes.

Python code such as ``x.view(x.size(0), -1)`` turns a size into a structural constant when it is
recorded. Tracing twice more with every dynamic axis resized (each by its own amounts) shows which
constants follow which axis: each such constant ``k * size + c`` (or ``k * size * other_size + c``)
is replaced by a small ``Shape -> Gather -> Mul -> Add -> Concat`` subgraph over the graph input,
so the exported model runs at any size; a size used as a value (``y.sum(0) / y.shape[0]``) is that
expression as a scalar of the constant's dtype. Graph inputs and outputs get symbolic dimensions. A
tensor that follows an axis some other way (float arithmetic on a size) raises: written as traced,
it would be wrong at every other size.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..runtime.creation import as_tensor

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


# Two more traces, each dynamic size (each symbol: inputs sharing one grow together) grown by its
# own amount: consecutive primes, so that a shape constant's growth names the size it follows (with
# every size grown alike, ``T - 1`` fits ``B + c`` as well and the first input's axis won), and the
# third trace checks the fit (``B * T`` fits a line through two traces, never through three).
# A model may need its sizes to keep a divisor (``x.view(B, T // 2, 2)``): the growths are tried
# as they are, then doubled, then times 8, and last the same for every size (sizes the model needs
# equal under different symbols), where the first fit found stands.
_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71)
_MULTIPLES = (1, 2, 8)


class _Source:
    """One dynamic axis of one input, and its sizes in the three traces."""

    __slots__ = ("name", "axis", "symbol", "sizes")

    def __init__(self, name: str, axis: int, symbol: str, sizes: tuple):
        self.name, self.axis, self.symbol, self.sizes = name, axis, symbol, sizes


def _growths(symbols: list, multiple: int | None) -> dict:
    """``{symbol: (first growth, second growth)}``; ``multiple`` None: the same for every symbol."""
    if multiple is None:
        return {symbol: (2, 4) for symbol in symbols}
    if len(symbols) >= len(_PRIMES):
        raise ValueError(f"to_onnx: at most {len(_PRIMES) - 1} dynamic axis names, got {len(symbols)}")
    return {symbol: (multiple * _PRIMES[i], multiple * _PRIMES[i + 1]) for i, symbol in enumerate(symbols)}


def _resized_arguments(args: tuple, input_names: list[str], axes: dict, growths: dict, which: int) -> tuple:
    """Copies of the example arguments with every dynamic axis grown by its symbol's ``which``-th growth."""
    resized = []
    for arg, name in zip(args, input_names):
        dims = axes.get(name, {})
        if not dims:
            resized.append(arg)
            continue
        new_shape = list(arg.shape)
        for axis, symbol in dims.items():
            new_shape[axis % len(new_shape)] += growths[symbol][which]
        data = np.resize(arg.numpy(force=True), new_shape).astype(arg.dtype.numpy_dtype)
        resized.append(as_tensor(data))
    return tuple(resized)


def _sources(args: tuple, input_names: list[str], axes: dict, growths: dict) -> list:
    sources = []
    for arg, name in zip(args, input_names):
        for axis, symbol in axes.get(name, {}).items():
            axis %= len(arg.shape)
            size = arg.shape[axis]
            sources.append(_Source(name, axis, symbol, (size, size + growths[symbol][0], size + growths[symbol][1])))
    return sources


def _retraces(args: tuple, input_names: list[str], axes: dict, retrace) -> tuple:
    """The second and third traces and the dynamic axes' sources (see ``_PRIMES``)."""
    symbols = list(dict.fromkeys(symbol for name in input_names for symbol in axes.get(name, {}).values()))
    first_error = None
    for multiple in (*_MULTIPLES, None):
        growths = _growths(symbols, multiple)
        try:
            second = retrace(_resized_arguments(args, input_names, axes, growths, 0))
            third = retrace(_resized_arguments(args, input_names, axes, growths, 1))
        except Exception as error:  # the model refused those sizes: try sizes it may take
            first_error = first_error or error
            continue
        return second, third, _sources(args, input_names, axes, growths)
    raise RuntimeError(
        f"to_onnx: the model does not run with its dynamic axes resized ({first_error}); export with fixed sizes"
    ) from first_error


def _terms(sources: list) -> list:
    """The sizes a shape constant may follow: each dynamic size, and each product of two of them
    (``x.reshape(B * T, -1)``), one source per symbol; as ``(factors, sizes in the three traces)``."""
    by_symbol = list({source.symbol: source for source in sources}.values())
    terms: list[tuple[tuple, tuple]] = [((source,), source.sizes) for source in by_symbol]
    for i, first in enumerate(by_symbol):
        for second in by_symbol[i:]:
            terms.append(((first, second), tuple(a * b for a, b in zip(first.sizes, second.sizes))))
    return terms


def _fit(values: tuple, terms: list) -> tuple | None:
    """The simplest ``(factors, k, c)`` with ``value = k * product(factors) + c`` in all three traces."""
    best = None
    for factors, sizes in terms:
        if (values[1] - values[0]) % (sizes[1] - sizes[0]):
            continue
        k = (values[1] - values[0]) // (sizes[1] - sizes[0])
        c = values[0] - k * sizes[0]
        if k == 0 or values[2] != k * sizes[2] + c:
            continue
        score = (len(factors), c != 0, abs(k) != 1)
        if best is None or score < best[0]:
            best = (score, factors, k, c)
    return None if best is None else best[1:]


def _size_expression(graph_nodes: list, initializers: list, cache: dict, factors: tuple, k: int, c: int) -> str:
    """Appends nodes computing ``k * product of the factors' sizes + c`` as a 1-element int64 tensor;
    returns its name."""
    key = (tuple((source.name, source.axis) for source in factors), k, c)
    if key in cache:
        return cache[key]
    result = None
    for source in factors:
        size = _input_size(graph_nodes, initializers, cache, source.name, source.axis)
        if result is None:
            result = size
        else:
            product = f"{result}::times::{size}"
            graph_nodes.append(helper.make_node("Mul", [result, size], [product]))
            result = product
    assert result is not None  # a term has at least one factor
    if k != 1:
        factor = f"{result}::times_{k}"
        initializers.append(numpy_helper.from_array(np.array([k], np.int64), factor + "::factor"))
        graph_nodes.append(helper.make_node("Mul", [result, factor + "::factor"], [factor]))
        result = factor
    if c != 0:
        shifted = f"{result}::plus_{c}"
        initializers.append(numpy_helper.from_array(np.array([c], np.int64), shifted + "::offset"))
        graph_nodes.append(helper.make_node("Add", [result, shifted + "::offset"], [shifted]))
        result = shifted
    cache[key] = result
    return result


def _input_size(graph_nodes: list, initializers: list, cache: dict, name: str, axis: int) -> str:
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


def _shape_expression(prologue: list, initializers: list, cache: dict, terms: list, sizes, op_type: str) -> str:
    """Appends nodes computing a shape whose elements took ``sizes`` (triples, one per trace): a
    constant where all three agree, else a fitted expression of the dynamic sizes; returns its name."""
    pieces = []
    for element_a, element_b, element_c in sizes:
        if element_a == element_b == element_c:
            constant_name = f"onnxnn::dim_constant_{element_a}"
            if constant_name not in cache:
                initializers.append(numpy_helper.from_array(np.array([element_a], np.int64), constant_name))
                cache[constant_name] = constant_name
            pieces.append(constant_name)
            continue
        fitted = _fit((element_a, element_b, element_c), terms)
        if fitted is None:
            raise RuntimeError(
                f"to_onnx: a size used by {op_type} ({element_a} at the traced size) is not a multiple "
                "of a dynamic axis, or of a product of two, plus a constant"
            )
        pieces.append(_size_expression(prologue, initializers, cache, *fitted))
    computed = f"onnxnn::dynamic_shape_{len(prologue)}"
    prologue.append(helper.make_node("Concat", pieces, [computed], axis=0))
    return computed


def _whole_numbers(values: np.ndarray) -> bool:
    return values.dtype.kind in "iu" or (values.dtype.kind == "f" and bool(np.all(np.mod(values, 1) == 0)))


def _sizes_as_values(prologue: list, initializers: list, cache: dict, terms: list, traced: tuple, node) -> str:
    """Appends nodes computing a constant of at most one axis whose elements follow the dynamic sizes
    (``traced``: its three traces' arrays), in its own shape and dtype; returns its name.

    A size used as a value (``y.sum(0) / y.shape[0]``, an imported model's ``Range`` limit) is a scalar
    of the forward's dtype, not a shape."""
    flat = [array.reshape(-1) for array in traced]
    if not all(map(_whole_numbers, flat)):
        raise RuntimeError(
            f"to_onnx: a constant read by {node.op_type} depends on a dynamic axis and is not a whole "
            f"number ({flat[0].tolist()} at the traced size), which onnxnn cannot write as a computation "
            "of the axes' sizes"
        )
    elements = zip(*(values.astype(np.int64).tolist() for values in flat))
    return _like(prologue, _shape_expression(prologue, initializers, cache, terms, elements, node.op_type), traced[0])


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


def _filled(*values) -> bool:
    """Whether the three traces' values are one value (the same in each) over shapes of one rank
    that differ."""
    first = values[0].data
    if first.size == 0 or len({value.data.ndim for value in values}) != 1:
        return False
    if len({value.shape for value in values}) == 1:
        return False
    fill = first.reshape(-1)[0]
    return all(value.data.size and np.all(value.data == fill) for value in values)


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
    second, third, sources = _retraces(args, input_names, axes, retrace)
    _check_same_structure(trace, second)
    _check_same_structure(trace, third)
    terms = _terms(sources)

    prologue: list
    new_initializers: list
    cache: dict
    prologue, new_initializers, cache = [], [], {}
    graph_nodes = proto.graph.node
    rewired: dict[tuple, str] = {}  # (position, slot) of a recorded op -> the tensor it reads instead
    for position, (node_a, node_b, node_c) in enumerate(zip(trace.plan.nodes, second.plan.nodes, third.plan.nodes)):
        for slot, (value_a, value_b, value_c) in enumerate(zip(node_a.inputs, node_b.inputs, node_c.inputs)):
            if value_a is None or value_a.data is None:
                continue
            if value_a.static is not None:
                if value_b.static == value_a.static and value_c.static == value_a.static:
                    continue
                if value_a.data.ndim > 1 or not value_a.shape == value_b.shape == value_c.shape:
                    raise RuntimeError(
                        f"to_onnx: a shape argument of {node_a.op_type} depends on a dynamic axis "
                        "in a way onnxnn cannot express"
                    )
                sizes = (value_a.data, value_b.data, value_c.data)
                rewired[position, slot] = _sizes_as_values(prologue, new_initializers, cache, terms, sizes, node_a)
            elif any(value_a is arg for arg in trace.arg_values):
                continue
            elif _filled(value_a, value_b, value_c):
                # zeros_like(x), full_like(x, v), ones(x.shape[0], 3): one value over a shape that
                # follows the dynamic axes, written as that value expanded to the computed shape.
                axes_sizes = zip(value_a.shape, value_b.shape, value_c.shape)
                shape = _shape_expression(prologue, new_initializers, cache, terms, axes_sizes, node_a.op_type)
                fill = f"onnxnn::fill_{position}_{slot}"
                new_initializers.append(numpy_helper.from_array(value_a.data.reshape(-1)[:1].reshape(()), fill))
                prologue.append(helper.make_node("Expand", [fill, shape], [f"{fill}::expanded"]))
                rewired[position, slot] = f"{fill}::expanded"
            elif value_a.shape != value_b.shape or not np.array_equal(value_a.data, value_b.data):
                if value_a.data.ndim <= 1 and value_a.shape == value_b.shape == value_c.shape:
                    sizes = (value_a.data, value_b.data, value_c.data)
                    rewired[position, slot] = _sizes_as_values(prologue, new_initializers, cache, terms, sizes, node_a)
                    continue
                # Written as it was traced, it would be silently wrong at every other size (an imported
                # model's Resize sizes from float arithmetic on its input's shape, say).
                raise RuntimeError(
                    f"to_onnx: a tensor read by {node_a.op_type} was computed from the size of a dynamic "
                    "axis in a way onnxnn cannot write as a computation of that size, so the exported "
                    "graph would be wrong at every other size; export without that dynamic axis, or "
                    "compute the tensor from the input's shape with integer arithmetic"
                )

    if rewired:
        by_name = {onnx_node.name: onnx_node for onnx_node in graph_nodes if onnx_node.name}
        for (position, slot), source in rewired.items():
            _reader_of(by_name, position, trace.plan.nodes[position], slot).input[slot] = source
    if prologue:
        nodes = prologue + list(graph_nodes)
        del graph_nodes[:]
        graph_nodes.extend(nodes)
        proto.graph.initializer.extend(new_initializers)

    _drop_unused_initializers(proto)
    for graph_input in proto.graph.input:
        for axis, symbol in axes.get(graph_input.name, {}).items():
            dims = graph_input.type.tensor_type.shape.dim
            dims[axis % len(dims)].dim_param = symbol
    symbol_by_sizes = {source.sizes: source.symbol for source in sources}
    for index, graph_output in enumerate(proto.graph.output):
        named = axes.get(graph_output.name, {})
        dims = graph_output.type.tensor_type.shape.dim
        shapes = zip(trace.output_shapes[index], second.output_shapes[index], third.output_shapes[index])
        for axis, sizes in enumerate(shapes):
            if axis in named or axis - len(dims) in named:
                dims[axis].dim_param = named.get(axis, named.get(axis - len(dims)))
            elif len(set(sizes)) > 1:
                dims[axis].dim_param = symbol_by_sizes.get(sizes, f"{graph_output.name}_dim_{axis}")


def _drop_unused_initializers(proto: onnx.ModelProto) -> None:
    """Structural constants replaced by computed shapes are no longer read: remove them."""
    used = {name for node in proto.graph.node for name in node.input}
    initializers = proto.graph.initializer
    # Deleted where they stand: re-adding the kept ones would copy every weight.
    for index in reversed(range(len(initializers))):
        if initializers[index].name not in used:
            del initializers[index]
