"""The differential table's other families, and the whole table ``CASES``: recorded graphs of linear
algebra, indexing, nn layers, small graphs, the Tensor API's ops and resampling that the kernels
executor and onnxruntime must agree on.

The makers (``make``, ``Case``, ``op``) and the elementwise, predicate, reduction, arg-reduction and
shape families are in differential_cases.py, whose docstring describes the table.
"""

from __future__ import annotations

import numpy as np

from onnxnn.runtime.tensor import Tensor

from .differential_cases import (
    ALL_FLOATS,
    ELEMENTWISE_AND_SHAPE_CASES,
    FLOATS,
    HALF,
    Case,
    _with_extremes,
    ints,
    make,
    op,
)

__all__ = ["CASES"]

_LINALG = [
    Case(
        "MatMul_2d",
        "MatMul",
        lambda d: op("MatMul", make((3, 4), d, seed=1), make((4, 5), d, seed=2)),
        ALL_FLOATS + ("int64",),
    ),
    Case(
        "MatMul_batched_broadcast",
        "MatMul",
        lambda d: op("MatMul", make((2, 1, 3, 4), d, seed=1), make((5, 4, 2), d, seed=2)),
        FLOATS,
    ),
    Case("MatMul_vector_matrix", "MatMul", lambda d: op("MatMul", make((4,), d, seed=1), make((4, 5), d, seed=2))),
    Case("MatMul_matrix_vector", "MatMul", lambda d: op("MatMul", make((3, 4), d, seed=1), make((4,), d, seed=2))),
    Case("Gemm_plain", "Gemm", lambda d: op("Gemm", make((3, 4), d, seed=1), make((4, 5), d, seed=2)), FLOATS),
    Case(
        "Gemm_transposed_scaled_bias",
        "Gemm",
        lambda d: op(
            "Gemm",
            make((4, 3), d, seed=1),
            make((5, 4), d, seed=2),
            make((5,), d, seed=3),
            transA=1,
            transB=1,
            alpha=0.5,
            beta=2.0,
        ),
        ("float32", "float64"),
    ),
    Case("Softmax_last", "Softmax", lambda d: op("Softmax", make((3, 5), d, -20, 20)), ALL_FLOATS),
    Case("Softmax_axis0", "Softmax", lambda d: op("Softmax", make((3, 5, 2), d), axis=0), ("float32", "float64")),
    Case("LogSoftmax_last", "LogSoftmax", lambda d: op("LogSoftmax", make((3, 5), d, -50, 50)), FLOATS),
    Case("LogSoftmax_axis1", "LogSoftmax", lambda d: op("LogSoftmax", make((2, 3, 4), d), axis=1)),
    Case("Hardmax", "Hardmax", lambda d: op("Hardmax", make((3, 5), d)), HALF),
    Case("Hardmax_axis0", "Hardmax", lambda d: op("Hardmax", make((3, 5), d), axis=0)),
]


def _indices(values):
    return Tensor._from_array(np.array(values, dtype=np.int64))


_INDEXING = (
    [
        Case(
            "Gather_axis0_negative",
            "Gather",
            lambda d: op("Gather", make((5, 3), d), _indices([[0, -1], [2, 4]])),
            ("float32", "float16", "int64", "bool"),
        ),
        Case("Gather_axis1", "Gather", lambda d: op("Gather", make((2, 5, 3), d), _indices([4, 0, -2]), axis=1)),
        Case("Gather_scalar_index", "Gather", lambda d: op("Gather", make((5, 3), d), _indices(3))),
        Case(
            "GatherElements_axis1",
            "GatherElements",
            lambda d: op("GatherElements", make((3, 4), d), _indices([[0, 3], [-1, 1], [2, 2]]), axis=1),
            ("float32", "int64"),
        ),
        Case("GatherND", "GatherND", lambda d: op("GatherND", make((3, 4, 2), d), _indices([[0, 1], [2, -1]]))),
        Case(
            "GatherND_batch_dims",
            "GatherND",
            lambda d: op("GatherND", make((2, 3, 4), d), _indices([[[1], [2]], [[0], [0]]]), batch_dims=1),
        ),
        Case(
            "ScatterND_replace",
            "ScatterND",
            lambda d: op("ScatterND", make((4, 3), d), _indices([[1], [3]]), make((2, 3), d, seed=5)),
            ("float32", "int64"),
        ),
    ]
    + [
        Case(
            f"ScatterND_{reduction}_duplicates",
            "ScatterND",
            lambda d, reduction=reduction: op(
                "ScatterND", make((4, 3), d), _indices([[1], [1], [-1]]), make((3, 3), d, seed=5), reduction=reduction
            ),
            ("float32", "float64"),
        )
        for reduction in ("add", "mul", "max", "min")
    ]
    + [
        Case(
            "ScatterElements_axis1",
            "ScatterElements",
            lambda d: op(
                "ScatterElements", make((3, 4), d), _indices([[1, 0], [3, -1], [2, 0]]), make((3, 2), d, seed=4), axis=1
            ),
            ("float32", "int64"),
        ),
    ]
    + [
        Case(
            f"ScatterElements_{reduction}_duplicates",
            "ScatterElements",
            lambda d, reduction=reduction: op(
                "ScatterElements",
                make((3, 4), d),
                _indices([[1, 1], [0, 0], [2, 2]]),
                make((3, 2), d, seed=4),
                axis=1,
                reduction=reduction,
            ),
        )
        for reduction in ("add", "mul", "max", "min")
    ]
    + [
        Case("NonZero", "NonZero", lambda d: op("NonZero", make((3, 4), d, -1, 2)), ("float32", "int64", "bool")),
    ]
)


def _batch_norm(d):
    channels = 3
    return op(
        "BatchNormalization",
        make((2, channels, 4, 5), d),
        make((channels,), d, 0.5, 2, 1),
        make((channels,), d, seed=2),
        make((channels,), d, seed=3),
        make((channels,), d, 0.5, 2, 4),
        epsilon=1e-3,
    )


def _conv(d, **attrs):
    return op(
        "Conv",
        make((2, 4, 7, 6), d, seed=1),
        make((6, 4 // attrs.get("group", 1), 3, 2), d, seed=2),
        make((6,), d, seed=3),
        **attrs,
    )


_NN = [
    Case("BatchNormalization_inference", "BatchNormalization", _batch_norm, HALF),
    Case(
        "Conv_padded_strided_dilated",
        "Conv",
        lambda d: _conv(d, pads=[1, 0, 2, 1], strides=[2, 1], dilations=[1, 2]),
        HALF,
    ),
    Case("Conv_groups_same_upper", "Conv", lambda d: _conv(d, group=2, auto_pad="SAME_UPPER")),
    Case(
        "ConvTranspose_strided_output_padding",
        "ConvTranspose",
        lambda d: op(
            "ConvTranspose",
            make((2, 4, 5, 4), d, seed=1),
            make((4, 3, 3, 3), d, seed=2),
            make((3,), d, seed=3),
            strides=[2, 2],
            pads=[1, 0, 0, 1],
            output_padding=[1, 0],
        ),
    ),
    Case(
        "MaxPool_ceil_padded_values_only",
        "MaxPool",
        lambda d: op(
            "MaxPool", make((2, 3, 7, 6), d), kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 0], ceil_mode=1
        )[0],
        ("float32", "float64"),
    ),
    Case(
        "AveragePool_exclude_pad",
        "AveragePool",
        lambda d: op("AveragePool", make((2, 3, 7, 6), d), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    ),
    Case(
        "AveragePool_include_pad",
        "AveragePool",
        lambda d: op(
            "AveragePool",
            make((2, 3, 7, 6), d),
            kernel_shape=[3, 3],
            strides=[2, 1],
            pads=[1, 1, 1, 1],
            count_include_pad=1,
        ),
    ),
    Case("GlobalAveragePool", "GlobalAveragePool", lambda d: op("GlobalAveragePool", make((2, 3, 4, 5), d))),
    Case(
        "LayerNormalization_last_two",
        "LayerNormalization",
        lambda d: op(
            "LayerNormalization", make((2, 3, 4), d), make((3, 4), d, seed=1), make((3, 4), d, seed=2), axis=-2
        ),
        ("float32", "float64", "float16"),
    ),
    Case(
        "GroupNormalization",
        "GroupNormalization",
        lambda d: op(
            "GroupNormalization",
            make((2, 6, 3, 2), d),
            make((6,), d, seed=1),
            make((6,), d, seed=2),
            num_groups=3,
            epsilon=1e-3,
        ),
    ),
    Case(
        "InstanceNormalization",
        "InstanceNormalization",
        lambda d: op("InstanceNormalization", make((2, 3, 4, 5), d), make((3,), d, seed=1), make((3,), d, seed=2)),
    ),
    Case("LRN", "LRN", lambda d: op("LRN", make((2, 5, 3, 3), d), size=3, alpha=0.01, beta=0.6, bias=2.0)),
    # layer library (norm/activation family): ops that gained shape rules with their gradient rules
    Case("LpNormalization_p1_axis0", "LpNormalization", lambda d: op("LpNormalization", make((3, 4), d), p=1, axis=0)),
    Case("LpNormalization_p2", "LpNormalization", lambda d: op("LpNormalization", make((2, 3, 4), d), axis=1)),
    Case(
        "MeanVarianceNormalization",
        "MeanVarianceNormalization",
        lambda d: op("MeanVarianceNormalization", make((2, 3, 2, 2), d)),
    ),
    Case("Shrink_soft", "Shrink", lambda d: op("Shrink", make((3, 5), d), lambd=0.7, bias=0.7), HALF),
    Case("Shrink_hard", "Shrink", lambda d: op("Shrink", make((3, 5), d), lambd=0.5)),
    Case("Dropout_inference", "Dropout", lambda d: op("Dropout", make((3, 4), d))),
    Case(
        "MaxPool_with_indices",
        "MaxPool",
        lambda d: op(
            "MaxPool", make((2, 3, 6, 5), d), kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 1], dilations=[2, 1]
        ),
    ),
    Case(
        "LpPool",
        "LpPool",
        lambda d: op("LpPool", make((2, 3, 6, 5), d), kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], p=3),
    ),
    Case("GlobalMaxPool", "GlobalMaxPool", lambda d: op("GlobalMaxPool", make((2, 3, 4, 5), d))),
    Case("GlobalLpPool", "GlobalLpPool", lambda d: op("GlobalLpPool", make((2, 3, 4, 5), d), p=2)),
    Case(
        "MaxUnpool_output_shape",
        "MaxUnpool",
        lambda d: op(
            "MaxUnpool",
            *op("MaxPool", make((2, 3, 6, 5), d), kernel_shape=[2, 2], strides=[2, 2]),
            ints([2, 3, 6, 5]),
            kernel_shape=[2, 2],
            strides=[2, 2],
        ),
    ),
]
# losses (layer family L3): ONNX's loss ops, with weights, ignore_index and spatial targets.
_NN += [
    Case(
        "NegativeLogLikelihoodLoss_weighted_ignored",
        "NegativeLogLikelihoodLoss",
        lambda d: op(
            "NegativeLogLikelihoodLoss",
            make((4, 3, 2), d),
            make((4, 2), "int64", 0, 3, seed=1),
            make((3,), d, 0.5, 2.0, seed=2),
            ignore_index=1,
        ),
        ("float32", "float64"),
    ),
    Case(
        "SoftmaxCrossEntropyLoss_none_two_outputs",
        "SoftmaxCrossEntropyLoss",
        lambda d: op("SoftmaxCrossEntropyLoss", make((4, 3), d), make((4,), "int64", 0, 3, seed=1), reduction="none"),
        ("float32", "float64"),
    ),
]


def _mlp(d):
    import onnxnn

    x, w1, w2 = make((4, 8), d, seed=1), make((8, 16), d, seed=2), make((16, 3), d, seed=3)
    hidden = onnxnn.relu(x @ w1 + 0.5)
    logits = hidden @ w2
    return onnxnn.log_softmax(logits, dim=-1).sum()


def _shared_intermediate(d):
    x = make((3, 4), d)
    shared = (x * 2).exp()
    return shared + shared.sum(0), shared.mean(1)


_GRAPHS = [
    Case("graph_mlp_loss", "MatMul", _mlp, ("float32", "float64", "bfloat16")),
    Case("graph_shared_intermediate_two_outputs", "Exp", _shared_intermediate, ("float32", "float16")),
]

# Tensor API parity (l5-tensor-api): the ops behind topk/sort, cumsum, einsum, tril/triu and bitwise_*.
_TENSOR_API = [
    Case(
        "TopK_largest",
        "TopK",
        lambda d: op("TopK", make((3, 6), d), ints([2]), axis=-1, largest=1, sorted=1),
        ("float32", "float64", "int64"),
    ),
    Case(
        # The type's minimum and maximum: a reversal by negation wraps the minimum onto itself.
        "TopK_largest_integer_extremes",
        "TopK",
        lambda d: op("TopK", _with_extremes(make((3, 6), d, -5, 5)), ints([4]), axis=-1, largest=1, sorted=1),
        ("int8", "int16", "int32", "int64", "uint8"),  # onnxruntime has no uint64 TopK
    ),
    Case(
        "TopK_smallest_axis0",
        "TopK",
        lambda d: op("TopK", make((5, 3), d), ints([5]), axis=0, largest=0, sorted=1),
        ("float32", "float64"),
    ),
    Case("CumSum", "CumSum", lambda d: op("CumSum", make((3, 5), d), ints(1)), ("float32", "float64", "int64")),
    Case(
        "CumSum_exclusive_reverse",
        "CumSum",
        lambda d: op("CumSum", make((3, 5), d), ints(0), exclusive=1, reverse=1),
        ("float32", "float64"),
    ),
    Case(
        "Einsum_matmul",
        "Einsum",
        lambda d: op("Einsum", make((3, 4), d, seed=1), make((4, 5), d, seed=2), equation="ij,jk->ik"),
        ("float32", "float64"),
    ),
    Case(
        "Einsum_batched_sum_out",
        "Einsum",
        lambda d: op("Einsum", make((2, 3, 4), d, seed=1), make((5,), d, seed=2), equation="bij,k->bk"),
    ),
    Case(
        "Trilu_lower",
        "Trilu",
        lambda d: op("Trilu", make((2, 3, 4), d), ints(1), upper=0),
        ("float32", "float64", "int64"),
    ),
    Case("Trilu_upper", "Trilu", lambda d: op("Trilu", make((4, 3), d), ints(-1), upper=1), ("float32", "float64")),
    *[
        Case(
            f"{name}_int",
            name,
            lambda d, name=name: op(name, make((3, 4), d, -50, 50, 1), make((4,), d, -50, 50, 2)),
            ("int64", "int32"),
        )
        for name in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")
    ],
    # Shift amounts below the narrowest width (8): ONNX leaves wider shifts to the implementation.
    *[
        Case(
            f"BitShift_{direction}",
            "BitShift",
            lambda d, direction=direction: op(
                "BitShift", make((3, 4), d, 0, 200, 1), make((4,), d, 0, 7, 2), direction=direction
            ),
            ("uint8", "uint32", "uint64"),
        )
        for direction in ("LEFT", "RIGHT")
    ],
]

# Resampling and rearranging (padding/resampling family): one case per op the layers record.
_RESAMPLE = [
    Case(
        "Resize_linear_scales",
        "Resize",
        lambda d: op("Resize", make((1, 2, 3, 4), d), None, _floats([1.0, 1.0, 2.0, 1.5]), mode="linear"),
    ),
    Case(
        "Resize_nearest_sizes",
        "Resize",
        lambda d: op("Resize", make((1, 2, 3, 4), d), None, None, ints([1, 2, 5, 7]), mode="nearest"),
    ),
    Case(
        "GridSample_bilinear",
        "GridSample",
        lambda d: op("GridSample", make((1, 2, 4, 5), d, seed=1), make((1, 3, 3, 2), d, -1.0, 1.0, seed=2)),
    ),
    Case("AffineGrid", "AffineGrid", lambda d: op("AffineGrid", make((2, 2, 3), d, -1.0, 1.0), ints([2, 3, 4, 5]))),
    Case(
        "DepthToSpace_crd", "DepthToSpace", lambda d: op("DepthToSpace", make((1, 8, 2, 3), d), blocksize=2, mode="CRD")
    ),
    Case("SpaceToDepth", "SpaceToDepth", lambda d: op("SpaceToDepth", make((1, 2, 4, 6), d), blocksize=2)),
    Case(
        "CenterCropPad", "CenterCropPad", lambda d: op("CenterCropPad", make((5, 6, 3), d), ints([4, 8]), axes=[0, 1])
    ),
]


def _floats(values):
    return Tensor._from_array(np.asarray(values, dtype=np.float32))


CASES = ELEMENTWISE_AND_SHAPE_CASES + _LINALG + _INDEXING + _NN + _GRAPHS + _TENSOR_API + _RESAMPLE
