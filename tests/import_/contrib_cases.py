"""The contrib-op tests' case type, input makers and checks (test_contrib_ops_forward_gradients.py,
test_contrib_ops_quantized_forward.py, test_contrib_attention.py, test_contrib_layouts.py,
test_contrib_quantized.py).

A case is a one-node model (opset_import ai.onnx 21 and com.microsoft 1) imported with ``from_onnx``,
which must compute what onnxruntime's own kernel computes on the same model, on both of onnxnn's
executors (:func:`check_forward`, :func:`check_quantized_forward`), survive re-export
(:func:`check_reexport`), and have gradients matching float64 central differences
(:func:`gradient_runs`, :func:`check_first_output_gradients`).

Forward tolerance: both sides round each of the ``terms`` operations of the longest chain
(reductions count their length) once in float32, so they differ by at most
``2 * gamma(terms) * magnitude`` plus a few ulps of the transcendental functions; ``magnitude``
bounds the absolute values the chain sums (``1 + |result|`` times the row's ``scale``, the
largest sum of absolute products relative to the result: inputs are standard normal).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime
from gradcheck import check_gradients
from onnx import TensorProto, helper
from tolerances import accumulation_bound, assert_within, ulps

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx

MS = "com.microsoft"


OPSETS = [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]


@dataclasses.dataclass
class Case:
    op_type: str
    make_inputs: Callable[[np.random.Generator], list]  # arrays (None: an omitted optional input)
    attrs: dict = dataclasses.field(default_factory=dict)
    num_outputs: int = 1
    terms: int = 8  # rounded operations along the longest chain (see the module docstring)
    scale: float = 4.0  # magnitude of the summed terms relative to 1 + |result|
    id: str = ""
    # For ops onnxruntime's CPU provider lacks (its CUDA provider has them): the op's definition
    # in numpy, float64, from onnxruntime's contrib op documentation.
    reference: Callable | None = None
    # onnxruntime's CPU provider has no float64 Conv: FusedConv's float64 gradients run on the kernels.
    gradient_executors: tuple = ("onnxruntime", "kernels")
    # onnxruntime writes a few contrib ops in the default domain (see onnxnn/import_/validation.py).
    domain: str = MS
    opset: int = 21

    def __str__(self) -> str:
        return self.id or self.op_type


def _normal(*shape):
    return lambda rng: rng.standard_normal(shape)


def _inputs(*makers):
    def make(rng):
        return [None if maker is None else maker(rng) if callable(maker) else maker for maker in makers]

    return make


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _bias_split_gelu(x, bias):
    left, right = np.split(x + bias, 2, axis=-1)
    return [left * _gelu(right)]


def _mask(batch, length, valid):
    """A [batch, length] int32 key mask: 1 for the first ``valid[b]`` keys of each row."""
    return lambda rng: (np.arange(length)[None, :] < np.array(valid)[:, None]).astype(np.int32)


HIDDEN, HEADS = 8, 2


def _integers(high, *shape, dtype=np.int64):
    return lambda rng: rng.integers(0, high, shape).astype(dtype)


def _angles(positions, half):
    """cos and sin caches [positions, half] of RoPE's angles (base 10000)."""
    angles = np.arange(positions)[:, None] * 10000.0 ** (-np.arange(half)[None, :] / half)
    return (lambda rng: np.cos(angles)), (lambda rng: np.sin(angles))


COS, SIN = _angles(8, 2)


COS_PARTIAL, SIN_PARTIAL = _angles(8, 1)


CONV = {"pads": [1, 1, 1, 1], "kernel_shape": [3, 3]}


SEQUENCE = 4


GQA_HEAD = 16  # onnxruntime's CPU kernel wants head sizes that are multiples of 16 (with rotary)


GQA_COS, GQA_SIN = _angles(8, GQA_HEAD // 2)


GQA_LENGTHS = (np.full(2, SEQUENCE - 1, np.int32), np.array(SEQUENCE, np.int32))  # seqlens_k, total_sequence_length


_ONNX_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.int16): TensorProto.INT16,
}


def _model(case: Case, arrays: list, output_types=None) -> onnx.ModelProto:
    """The one-node model; onnx's checker wants output shapes, which onnxruntime's run tells
    (``output_types``: (shape, dtype) pairs; None for the model that onnxruntime runs first)."""
    names = ["" if array is None else f"in_{position}" for position, array in enumerate(arrays)]
    while names and not names[-1]:
        names.pop()
    outputs = [f"out_{position}" for position in range(case.num_outputs)]
    node = helper.make_node(case.op_type, names, outputs, domain=case.domain, **case.attrs)
    graph = helper.make_graph(
        [node],
        "contrib",
        [
            helper.make_tensor_value_info(name, _ONNX_TYPES[array.dtype], array.shape)
            for name, array in zip(names, arrays)
            if name
        ],
        [onnx.ValueInfoProto(name=name) for name in outputs]
        if output_types is None
        else [
            helper.make_tensor_value_info(name, _ONNX_TYPES[dtype], shape)
            for name, (shape, dtype) in zip(outputs, output_types)
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset), OPSETS[1]], ir_version=10)


def _arrays(case: Case, dtype) -> list:
    arrays = case.make_inputs(np.random.default_rng(0))
    return [None if array is None else array.astype(dtype) if array.dtype.kind == "f" else array for array in arrays]


def _onnxruntime_outputs(case: Case) -> list:
    """onnxruntime's outputs for the float32 inputs of ``case`` (or its reference's, rounded to float32)."""
    arrays = _arrays(case, np.float32)
    if case.reference is not None:
        outputs = case.reference(*(a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays if a is not None))
        return [output if output.dtype.kind in "iu" else np.asarray(output, np.float32) for output in outputs]
    session = onnxruntime.InferenceSession(_model(case, arrays).SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {f"in_{i}": a for i, a in enumerate(arrays) if a is not None})


def _imported(case: Case, dtype):
    """(module, its inputs) for ``case`` with floating inputs of ``dtype``."""
    arrays = _arrays(case, dtype)
    types = [
        (output.shape, np.dtype(dtype) if output.dtype.kind == "f" else output.dtype)
        for output in _onnxruntime_outputs(case)
    ]
    return from_onnx(_model(case, arrays, types)), [array for array in arrays if array is not None]


def _as_tuple(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


def check_forward(case: Case, executor: str) -> None:
    """The imported node's outputs on ``executor`` against onnxruntime's (or the case's reference)."""
    expected = _onnxruntime_outputs(case)
    module, feeds = _imported(case, np.float32)
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        # Realized inside the block: onnxnn is lazy, and a graph run after it would run on "auto".
        actual = [output.numpy() for output in _as_tuple(module(*feeds))]
    assert len(actual) == len(expected)
    for position, (got, want) in enumerate(zip(actual, expected)):
        assert got.dtype == want.dtype, f"output {position}"
        bound = accumulation_bound((1 + np.abs(want)) * case.scale, case.terms) + ulps(want)
        assert_within(got, want, bound, f"output {position} of {case}")


def check_reexport(case: Case) -> None:
    """The imported node re-exported (``to_onnx``: standard ops only) and run by onnxruntime gives
    the imported module's outputs: floats within the forward tolerance, quantized within one step."""
    module, feeds = _imported(case, np.float32)
    module.eval()
    with onnxnn.no_grad():
        expected = [output.numpy() for output in _as_tuple(module(*feeds))]
    proto = to_onnx(module, tuple(onnxnn.tensor(array) for array in feeds))
    assert all(node.domain in ("", "ai.onnx") for node in proto.graph.node)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    given = {f"input_{position}": array for position, array in enumerate(feeds)}
    actual = session.run(None, {graph_input.name: given[graph_input.name] for graph_input in session.get_inputs()})
    assert len(actual) == len(expected)
    for position, (got, want) in enumerate(zip(actual, expected)):
        assert got.dtype == want.dtype, f"output {position}"
        if want.dtype.kind in "iu":
            assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
        else:
            bound = accumulation_bound((1 + np.abs(want)) * case.scale, case.terms) + ulps(want)
            assert_within(got, want, bound, f"re-exported output {position} of {case}")


def gradient_runs(cases: list) -> list:
    """(case, executor) pairs: every case on the kernels executor, the first case of each op on
    onnxruntime's too (both run the same recorded graph and gradient rules; once per op checks
    onnxruntime's kernels on it and keeps the file's run time down)."""
    runs, seen = [], set()
    for case in cases:
        for executor in case.gradient_executors:
            if executor == "kernels" or case.op_type not in seen:
                runs.append((case, executor))
        seen.add(case.op_type)
    return runs


def check_first_output_gradients(case: Case, executor: str) -> None:
    """The gradients of the imported node's first output (float64) against central differences."""
    module, feeds = _imported(case, np.float64)
    differentiable = [array.dtype.kind == "f" for array in feeds]

    def first_output(*tensors):
        return _as_tuple(module(*tensors))[0]

    with onnxnn.set_executor(executor):
        check_gradients(first_output, feeds, requires_grad=differentiable)


def _quantized(dtype, *shape):
    info = np.iinfo(dtype)
    return lambda rng: rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _scalar(value, dtype=np.float32):
    return np.array(value, dtype)


def _pack(values: np.ndarray, bits: int) -> np.ndarray:
    """Packs ``bits``-bit values along the last axis into bytes, low bits first (MatMulNBits' layout)."""
    per_byte = 8 // bits
    grouped = values.reshape(*values.shape[:-1], -1, per_byte).astype(np.uint8)
    return np.bitwise_or.reduce(grouped << (np.arange(per_byte, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


def _nbits_inputs(bits, blocks, block_size, n, zero_points):
    def make(rng):
        k = blocks * block_size
        quantized = rng.integers(0, 2**bits, (n, blocks, block_size))
        arrays = [
            rng.standard_normal((3, k)).astype(np.float32),
            _pack(quantized, bits),
            (rng.uniform(0.01, 0.1, n * blocks)).astype(np.float32),
        ]
        if zero_points == "float":
            arrays.append(rng.uniform(-0.5, 0.5, n * blocks).astype(np.float32))
        elif zero_points:
            arrays.append(_pack(rng.integers(0, 2**bits, (n, blocks + (-blocks) % (8 // bits))), bits).reshape(-1))
        return arrays

    return make


def check_quantized_forward(case: Case, executor: str) -> None:
    """Quantized results within one quantization step of onnxruntime's (see contrib_quantized's
    docstring); float results of the matrix products within float32 rounding of the sums."""
    expected = _onnxruntime_outputs(case)
    arrays = _arrays(case, np.float32)
    module = from_onnx(_model(case, arrays, [(output.shape, output.dtype) for output in expected]))
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        # Realized inside the block: onnxnn is lazy, and a graph run after it would run on "auto".
        actual = [output.numpy() for output in _as_tuple(module(*[array for array in arrays if array is not None]))]
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype
        if want.dtype.kind in "iu":
            assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
        else:
            assert_within(got, want, accumulation_bound((1 + np.abs(want)) * case.scale, case.terms))
