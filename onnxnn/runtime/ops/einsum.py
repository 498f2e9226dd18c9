"""Einsum: the shape and gradient rules of ONNX Einsum, and PyTorch's ``einsum`` that records it.

The gradient of one operand is itself an einsum: the output gradient contracted with the other
operands onto the operand's subscripts. Subscripts of the operand that appear nowhere else were
summed away by the forward node, so the gradient is broadcast back along them. A subscript
repeated within one operand (a diagonal, ``"ii->i"``) reads only the elements whose indices agree:
the gradient is taken for its distinct subscripts, then placed on those diagonals, zeros elsewhere.

Autocast: PyTorch's einsum is not on the CPU autocast list. It folds the operands left to right,
and a step that sums a subscript shared by both sides is a ``bmm``, which autocast lowers; the other
steps are ``mul`` and ``sum``, which keep or promote their inputs' dtype. ``einsum`` casts its
operands to the dtype that fold ends in: lowered after a contraction (``"ij,jk->ik"``, ``"i,i->"``),
as they come otherwise (``"ij,ij->ij"``, ``"i,j->ij"``, ``"ij->ji"``). So the recorded Einsum is on
the CPU list of no policy (PyTorch's CUDA list has einsum itself).
"""

from __future__ import annotations

import math
import string

import numpy as np
from onnx import helper, numpy_helper

from ...ir import dtypes
from ...ir.mode import MODE
from ...ir.registry import gradient_rules, session_lowerings, shape_rules, size_blind_session_lowerings
from ..tensor import autocast_arguments
from ._common import Tensor, apply_op, promote_operands
from .shape import cat

__all__ = ["einsum"]

_ELLIPSIS_LETTERS = string.ascii_uppercase[::-1]  # stand-ins for "...", far from the usual a-z


def explicit_equation(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The operands' subscripts and the output's, with ``...`` spelled as letters and the implicit output filled in.

    Raises ValueError naming the problem for a malformed equation or a rank mismatch.
    """
    equation = equation.replace(" ", "")
    left, arrow, right = equation.partition("->")
    terms = left.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"einsum(): the equation '{equation}' names {len(terms)} operands but {len(ranks)} were given")
    ellipsis_rank = 0
    for term, rank in zip(terms, ranks):
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, rank - (len(term) - 3))
    # Stand-ins the equation does not use itself (an "A..." operand keeps its own A).
    fill = "".join(letter for letter in _ELLIPSIS_LETTERS if letter not in equation)[:ellipsis_rank][::-1]
    operands = []
    for index, (term, rank) in enumerate(zip(terms, ranks)):
        if "..." in term:
            covered = rank - (len(term) - 3)
            term = term.replace("...", fill[len(fill) - covered :] if covered else "")
        if len(term) != rank or not (term.isalpha() or term == ""):  # "" is a 0-d operand's (or output's)
            raise ValueError(f"einsum(): the subscripts '{terms[index]}' do not fit operand {index} of rank {rank}")
        operands.append(term)
    if arrow:
        output = right.replace("...", fill)
        if not output.isalpha() and output:
            raise ValueError(f"einsum(): invalid output subscripts '{right}' in '{equation}'")
    else:
        letters = "".join(operands)
        output = fill + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in fill))
    return operands, output


@shape_rules.register("Einsum")
def _einsum_shape(inputs, attrs):
    operands, output = explicit_equation(attrs["equation"], [len(value.shape) for value in inputs])
    sizes: dict[str, int] = {}
    for term, value in zip(operands, inputs):
        for letter, size in zip(term, value.shape):
            known = sizes.get(letter, 1)
            if size != known and 1 not in (size, known):
                raise ValueError(f"Einsum '{attrs['equation']}': subscript '{letter}' has sizes {known} and {size}")
            sizes[letter] = max(size, known) if 0 not in (size, known) else 0
    for letter in output:
        if letter not in sizes:
            raise ValueError(f"Einsum '{attrs['equation']}': output subscript '{letter}' is in no operand")
    return [(tuple(sizes[letter] for letter in output), inputs[0].dtype)]


@gradient_rules.register("Einsum")
def _einsum_grad(ctx, g):
    values = [ctx.input_value(i) for i in range(ctx.num_inputs)]
    operands, output = explicit_equation(ctx.attrs["equation"], [len(value.shape) for value in values])
    grads = []
    for index, term in enumerate(operands):
        if not ctx.needs_input_grad(index):
            grads.append(None)
            continue
        others = [operands[j] for j in range(len(operands)) if j != index]
        reachable = set(output).union(*others) if others else set(output)
        # The gradient for the distinct subscripts (term itself unless it repeats one), in order.
        distinct = "".join(dict.fromkeys(term))
        shape = tuple(ctx.input_shape(index)[term.index(letter)] for letter in distinct)
        kept = "".join(letter for letter in distinct if letter in reachable)
        equation = ",".join([output] + others) + "->" + kept
        tensors = [g] + [ctx.input(j) for j in range(len(operands)) if j != index]
        grad = apply_op("Einsum", tuple(tensors), {"equation": equation}, "EinsumBackward0")
        # A size-1 dim broadcast against the other operands' sizes gets the sum over them.
        broadcast = [
            axis for axis, letter in enumerate(kept) if shape[distinct.index(letter)] == 1 and grad.shape[axis] != 1
        ]
        if broadcast:
            grad = grad.sum(broadcast, keepdim=True)
        if kept != distinct:
            grad = grad.reshape(tuple(grad.shape[kept.index(letter)] if letter in kept else 1 for letter in distinct))
        if tuple(grad.shape) != shape:  # summed-away letters, and sizes the others broadcast from 1
            grad = grad.expand(shape)
        if distinct != term:
            grad = _onto_diagonals(grad, distinct, term)
        grads.append(grad)
    return tuple(grads)


def _onto_diagonals(grad: Tensor, distinct: str, term: str) -> Tensor:
    """``grad``, one dim per letter of ``distinct`` (``term``'s letters, each once), on the diagonals
    of the letters ``term`` repeats, zeros elsewhere: the gradient of an operand read as ``term``.

    The dims of repeated letters are flattened and gathered, with one zero appended, by an index
    table fixed at record time (as ``diag_embed`` does): an exact scatter, where a product with a
    0/1 mask would turn an infinite entry into NaN off the diagonal, and whose own gradient (Gather's)
    sums each diagonal back.
    """
    sizes = dict(zip(distinct, grad.shape))
    repeated = [letter for letter in distinct if term.count(letter) > 1]
    single = [letter for letter in distinct if term.count(letter) == 1]
    moved = grad.permute([distinct.index(letter) for letter in single + repeated])
    batch = tuple(moved.shape[: len(single)])
    count = math.prod(sizes[letter] for letter in repeated)
    flat = moved.reshape(batch + (count,))
    padded = cat([flat, Tensor._zeros(batch + (1,), flat.dtype, flat.device)], len(batch))
    # The axes of term holding a repeated letter, and each element of theirs: on every diagonal, the
    # flat position of its letters' common indices in ``flat``; off one, ``count`` (the zero).
    axes = [axis for axis, letter in enumerate(term) if letter in repeated]
    indices = np.indices(tuple(sizes[term[axis]] for axis in axes)).reshape(len(axes), -1)
    on_diagonals = np.ones(indices.shape[1], dtype=bool)
    for letter in repeated:
        rows = indices[[position for position, axis in enumerate(axes) if term[axis] == letter]]
        on_diagonals &= (rows == rows[0]).all(axis=0)
    first = [indices[[term[axis] for axis in axes].index(letter)] for letter in repeated]
    flat_positions = np.ravel_multi_index(first, tuple(sizes[letter] for letter in repeated))
    table = np.where(on_diagonals, flat_positions, count).astype(np.int64)
    positions = Tensor._from_array(table, dtypes.int64, grad.device)
    gathered = apply_op("Gather", (padded, positions), {"axis": len(batch)}, "EinsumBackward0")
    placed = gathered.reshape(batch + tuple(sizes[term[axis]] for axis in axes))
    # Dims now: the single letters (in term's order), then term's repeated axes; back to term's order.
    order = [
        single.index(letter) if letter in single else len(single) + axes.index(axis) for axis, letter in enumerate(term)
    ]
    return placed.permute(order)


def einsum(equation: str, *operands) -> Tensor:
    """Sums products of operands' elements over the subscripts the output omits; ONNX Einsum.

    ``...`` stands for broadcast leading dims. Example::

        >>> a, b = onnxnn.ones(2, 3), onnxnn.ones(3, 4)
        >>> onnxnn.einsum("ij,jk->ik", a, b).shape
        onnxnn.Size([2, 4])
    """
    if isinstance(equation, Tensor):  # the sublist format: einsum(a, [0, 1], b, [1, 2], [0, 2])
        equation, operands = _sublist_equation((equation, *operands))
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError(
            "einsum(): must specify the equation string and at least one operand, or at least one operand and its "
            "subscripts list"
        )
    _check_equation(equation, [tuple(operand.shape) for operand in operands])
    terms, output = explicit_equation(equation, [operand.dim() for operand in operands])
    tensors, _ = promote_operands(list(operands))
    if MODE.autocast is not None and len(operands) > 1:
        tensors = _autocast_operands(terms, output, operands, tensors)
    explicit = ",".join(terms) + "->" + output
    return apply_op("Einsum", tuple(tensors), {"equation": explicit}, "EinsumBackward0")


def _check_equation(equation: str, shapes: list[tuple]) -> None:
    """Raises PyTorch's RuntimeError, in its words and order, for an equation that does not fit
    operands of ``shapes``: a character other than a letter, space, ``,``, ``.`` or the arrow, a
    malformed or second ``...`` in one term, a count of terms or of subscripts that does not match the
    operands, an output subscript repeated or in no operand, and sizes of one subscript (or of the dims
    an ellipsis covers) that neither agree nor broadcast (a subscript repeated in one operand: agree)."""
    left, arrow, right = equation.partition("->")
    terms: list[list[str]] = [[]]  # each operand's subscripts, "..." one entry
    position = 0
    while position < len(left):
        character = left[position]
        if character == ".":
            if "..." in terms[-1]:
                raise RuntimeError(
                    f"einsum(): found '.' for operand {len(terms) - 1} for which an ellipsis was already found"
                )
            if left[position : position + 3] != "...":
                raise RuntimeError(f"einsum(): found '.' for operand {len(terms) - 1} that is not part of any ellipsis")
            terms[-1].append("...")
            position += 2
        elif character == ",":
            if len(terms) == len(shapes):
                raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
            terms.append([])
        elif character != " ":
            if not _is_subscript(character):
                raise RuntimeError(
                    f"einsum(): invalid subscript given at index {position} in the equation string, subscripts "
                    "must be in [a-zA-Z]"
                )
            terms[-1].append(character)
        position += 1
    if len(terms) != len(shapes):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    counts: dict[str, int] = {}
    ellipsis_rank = 0
    for index, (term, shape) in enumerate(zip(terms, shapes)):
        labels = [letter for letter in term if letter != "..."]
        for letter in labels:
            counts[letter] = counts.get(letter, 0) + 1
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, len(shape) - len(labels))
            if len(labels) > len(shape):
                raise RuntimeError(
                    f"einsum(): the number of subscripts in the equation ({len(labels)}) is more than the number "
                    f"of dimensions ({len(shape)}) for operand {index}"
                )
        elif len(labels) != len(shape):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({len(labels)}) does not match the number "
                f"of dimensions ({len(shape)}) for operand {index} and no ellipsis was given"
            )
    if arrow:
        output: list[str] = []
        position = 0
        while position < len(right):
            character = right[position]
            if character == ".":
                if "..." in output:
                    raise RuntimeError("einsum(): found '.' for output but an ellipsis (...) was already found")
                if right[position : position + 3] != "...":
                    raise RuntimeError("einsum(): found '.' for output that is not part of any ellipsis (...)")
                output.append("...")
                position += 2
            elif character != " ":
                if not _is_subscript(character):
                    raise RuntimeError(
                        f"einsum(): invalid subscript given at index {len(left) + 2 + position} in the equation "
                        "string, subscripts must be in [a-zA-Z]"
                    )
                if character in output:
                    raise RuntimeError(f"einsum(): output subscript {character} appears more than once in the output")
                if character not in counts:
                    raise RuntimeError(
                        f"einsum(): output subscript {character} does not appear in the equation for any input operand"
                    )
                output.append(character)
            position += 1
    sizes: dict[str, int] = {}
    ellipsis_sizes = [1] * ellipsis_rank
    for index, (term, shape) in enumerate(zip(terms, shapes)):
        # Each term's subscripts against its dims: "..." covers those its letters leave.
        covered = len(shape) - (len(term) - 1) if "..." in term else 0
        dims: list[tuple[str, int]] = []
        for letter in term:
            if letter == "...":
                dims.extend(("...", ellipsis_rank - covered + offset) for offset in range(covered))
            else:
                dims.append((letter, 0))
        own: dict[str, int] = {}
        for (letter, ellipsis_dim), size in zip(dims, shape):
            if letter == "...":
                previous = ellipsis_sizes[ellipsis_dim]
                if size != previous and 1 not in (size, previous):
                    raise RuntimeError(
                        f"einsum(): dimension {ellipsis_dim} covered by ellipsis in operand {index}has size {size} "
                        f"which does not broadcast with previously seen ellipsis with size {previous} for the "
                        "respective dimension"
                    )
                ellipsis_sizes[ellipsis_dim] = size if previous == 1 else previous
                continue
            if letter in own:  # repeated in one operand: a diagonal, of equal sizes (never broadcast)
                if own[letter] != size:
                    raise RuntimeError(
                        f"einsum(): subscript {letter} is repeated for operand {index} but the sizes don't match, "
                        f"{size} != {own[letter]}"
                    )
                continue
            own[letter] = size
            previous = sizes.get(letter, 1)
            if size != previous and 1 not in (size, previous):
                raise RuntimeError(
                    f"einsum(): subscript {letter} has size {size} for operand {index} which does not broadcast "
                    f"with previously seen size {previous}"
                )
            sizes[letter] = size if previous == 1 else previous


def _is_subscript(character: str) -> bool:
    return character in string.ascii_letters


_AUTOCAST_FLOATS = frozenset({dtypes.float32, dtypes.float16, dtypes.bfloat16})


def _autocast_operands(terms: list[str], output: str, operands: tuple, tensors: list) -> list:
    """The (promoted) operands cast as PyTorch's autocast casts them inside its CPU einsum: to the
    dtype its pairwise fold ends in, where each ``bmm`` step is lowered and each ``mul`` promotes."""
    if any(operand.dtype not in _AUTOCAST_FLOATS for operand in operands):
        return tensors  # float64 and integer operands are never cast
    steps = _bmm_steps(terms, output, operands)
    if not any(steps):
        return tensors
    lowered = autocast_arguments("MatMul", tuple(tensors))
    low = lowered[0].dtype  # the operands' own dtype where autocast leaves them alone
    dtype = operands[0].dtype
    for operand, bmm in zip(operands[1:], steps):
        dtype = low if bmm else dtypes.promote_types(dtype, operand.dtype)
    if dtype is low:
        return list(lowered)
    # A float32 operand multiplied in after the last bmm brings the result back to float32.
    return [tensor if tensor.dtype is dtype else tensor.to(dtype) for tensor in tensors]


def _bmm_steps(terms: list[str], output: str, operands: tuple) -> list[bool]:
    """Per operand after the first, whether PyTorch's CPU einsum combines it by a ``bmm``.

    It folds the operands left to right. A subscript seen for the last time in the next operand
    and not in the output is summed by a ``bmm`` when its size exceeds 1 on both sides; a side
    where it is absent or of size 1 is summed first (keeping the dtype), and without such a
    subscript the two sides are multiplied.
    """
    last = {letter: index for index, term in enumerate(terms) for letter in term}
    sizes = dict(zip(terms[0], operands[0].shape))
    steps = []
    for index in range(1, len(terms)):
        other = dict(zip(terms[index], operands[index].shape))
        steps.append(
            any(
                last[letter] == index and letter not in output and size != 1 and sizes.get(letter, 1) != 1
                for letter, size in other.items()
            )
        )
        for letter, size in other.items():
            if sizes.get(letter, 1) == 1:
                sizes[letter] = size
    return steps


def _sublist_equation(arguments: tuple) -> tuple[str, tuple]:
    """The equation and operands of ``einsum(op1, sublist1, op2, sublist2, ..., [sublist_out])``:
    subscripts as integers below 52 (``Ellipsis`` for ``...``), as PyTorch's: 0-25 are A-Z, 26-51 a-z
    (the order of an implicit output's subscripts)."""
    letters = string.ascii_uppercase + string.ascii_lowercase

    def term(sublist) -> str:
        parts = []
        for item in sublist:
            if item is Ellipsis:
                parts.append("...")
            elif isinstance(item, int) and 0 <= item < len(letters):
                parts.append(letters[item])
            else:
                raise ValueError("einsum(): subscript in subscript list is not within the valid range [0, 52)")
        return "".join(parts)

    operands = list(arguments[0::2])
    sublists = arguments[1::2]
    output = operands.pop() if len(operands) > len(sublists) else None  # an odd count: the output's sublist last
    if not all(isinstance(operand, Tensor) for operand in operands):
        raise TypeError("einsum(): the sublist format takes operands and subscript lists in turn")
    equation = ",".join(term(sublist) for sublist in sublists)
    if output is not None:
        equation += "->" + term(output)
    return equation, tuple(operands)


# onnxruntime 1.31's CPU Einsum divides by zero when an operand has a size of 0 in some equations
# (a contracted subscript of 0 in ``"ij,kj->ik"``, ``"ij,bjk->bik"``, ``"i,bik->bk"``; an output one
# of 0 in ``"bij,bkj->bik"``): the process died of SIGFPE (reproduced on a bare model of one Einsum
# with every graph optimization off). With an empty operand every output element is a sum of no
# products or the output is empty, so onnxnn's sessions write zeros of the output's shape instead.
def _zeros(shape: str, dtype, output: str, fresh_name):
    return helper.make_node(
        "ConstantOfShape",
        [shape],
        [output],
        name=fresh_name("ConstantOfShape"),
        value=helper.make_tensor("value", dtype.onnx_type, [1], [0]),
    )


@session_lowerings.register("Einsum")
def _einsum_of_an_empty_operand(node, input_names: list, output_names: list, fresh_name, embedded=None):
    if not any(0 in value.shape for value in node.inputs):
        return None
    ((shape, dtype),) = _einsum_shape(node.inputs, node.attrs)
    shape_name = fresh_name("shape")
    nodes = [_zeros(shape_name, dtype, output_names[0], fresh_name)]
    return nodes, [numpy_helper.from_array(np.array(shape, np.int64), shape_name)]


@size_blind_session_lowerings.register("Einsum")
def _einsum_guarded(node, input_names: list, output_names: list, fresh_name, embedded=None):
    """The Einsum in a graph shared across sizes: an If whose branch for an empty operand writes the
    zeros, their shape the broadcast of the operands' sizes (a zero tensor per operand, its sizes
    under the output's subscripts and 1 elsewhere, all added)."""
    operands, output = explicit_equation(node.attrs["equation"], [len(value.shape) for value in node.inputs])
    ((_, dtype),) = _einsum_shape(node.inputs, node.attrs)
    one, zero, no_dims = fresh_name("one"), fresh_name("zero"), fresh_name("no_dims")
    sizes = [fresh_name("size") for _ in input_names]
    smallest, empty = fresh_name("smallest"), fresh_name("empty")
    nodes = [
        helper.make_node("Size", [name], [size], name=fresh_name("Size")) for name, size in zip(input_names, sizes)
    ]
    nodes += [
        helper.make_node("Min", sizes, [smallest], name=fresh_name("Min")),
        helper.make_node("Equal", [smallest, zero], [empty], name=fresh_name("Equal")),
    ]
    branch_nodes, terms = [], []
    for name, term in zip(input_names, operands):
        extents = []
        for letter in output:
            if letter in term:
                axis = term.index(letter)
                extents.append(fresh_name("extent"))
                branch_nodes.append(
                    helper.make_node("Shape", [name], [extents[-1]], start=axis, end=axis + 1, name=fresh_name("Shape"))
                )
            else:
                extents.append(one)
        shape = no_dims
        if extents:
            shape = fresh_name("shape")
            branch_nodes.append(helper.make_node("Concat", extents, [shape], axis=0, name=fresh_name("Concat")))
        terms.append(fresh_name("zeros"))
        branch_nodes.append(_zeros(shape, dtype, terms[-1], fresh_name))
    total = terms[0]
    for term in terms[1:]:
        summed = fresh_name("zeros")
        branch_nodes.append(helper.make_node("Add", [total, term], [summed], name=fresh_name("Add")))
        total = summed
    value_info = helper.make_tensor_value_info
    then_branch = helper.make_graph(
        branch_nodes, fresh_name("zeros_branch"), [], [value_info(total, dtype.onnx_type, None)]
    )
    product = fresh_name("product")
    einsum = helper.make_node(
        "Einsum", input_names, [product], equation=node.attrs["equation"], name=fresh_name("Einsum")
    )
    else_branch = helper.make_graph(
        [einsum], fresh_name("einsum_branch"), [], [value_info(product, dtype.onnx_type, None)]
    )
    nodes.append(
        helper.make_node(
            "If", [empty], output_names, then_branch=then_branch, else_branch=else_branch, name=fresh_name("If")
        )
    )
    initializers = [
        numpy_helper.from_array(np.array([1], np.int64), one),
        numpy_helper.from_array(np.array(0, np.int64), zero),
        numpy_helper.from_array(np.zeros(0, np.int64), no_dims),
    ]
    return nodes, initializers
