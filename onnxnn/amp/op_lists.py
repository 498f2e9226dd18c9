"""Which recorded ops autocast runs in low precision, in float32, or at the widest input type.

PyTorch's autocast keeps one list per device type of ATen ops (``autocast_mode.cpp``); onnxnn
intercepts ops where they are recorded, so the lists here are keyed by ONNX op_type: an ATen op
appears through the ONNX ops it records (``F.linear`` records ``Gemm``, ``torch.bmm`` and
``F.scaled_dot_product_attention`` record ``MatMul``, the convolutions ``Conv`` and
``ConvTranspose``). Functions whose recorded ops autocast would treat otherwise than PyTorch treats
the function decide for themselves: ``outside_autocast`` (``unfold`` records a ``Conv`` that
PyTorch's im2col is not), or a cast of their own (``einsum`` lowers only what PyTorch's ``bmm``
inside it lowers). Losses record generic ops (``Sub``, ``ReduceMean``),
so they are found by the name of the ``grad_fn`` their final op carries (``MseLossBackward0``):
that op runs in float32 and the loss comes out float32, as PyTorch's does.

Categories, as PyTorch names its casting policies:

- ``LOWER_PRECISION_FP``: floating inputs (float32, float16, bfloat16) are cast to the autocast
  dtype (matrix products and convolutions: fast, and tolerant of low precision).
- ``FP32``: floating inputs are cast to float32 (reductions and functions whose range or accuracy
  float16 or bfloat16 cannot hold).
- ``PROMOTE``: floating inputs are cast to the widest floating type among the inputs and the
  autocast dtype (ops that need one dtype for all their inputs).

float64 inputs, integer and bool inputs are never cast, under every policy.
"""

from __future__ import annotations

__all__ = ["LOWER_PRECISION_FP", "FP32", "PROMOTE", "AUTOCAST_OPS", "AUTOCAST_NAMED_OPS", "policy_for"]

LOWER_PRECISION_FP = "lower_precision_fp"
FP32 = "fp32"
PROMOTE = "promote"

# The ops whose policy does not depend on the device type.
_LOWER_PRECISION_EVERYWHERE = {
    "MatMul": LOWER_PRECISION_FP,  # matmul, mm, bmm, baddbmm, addmm, scaled_dot_product_attention, RNN cells
    "Gemm": LOWER_PRECISION_FP,  # linear
    "Conv": LOWER_PRECISION_FP,  # conv1d, conv2d, conv3d
    "ConvTranspose": LOWER_PRECISION_FP,  # conv_transpose1d, conv_transpose2d, conv_transpose3d
    "PRelu": LOWER_PRECISION_FP,  # prelu
    "AffineGrid": LOWER_PRECISION_FP,  # affine_grid (unlisted in PyTorch, but a bmm of theta inside)
}
# ``cat`` and ``stack`` are on PyTorch's promote lists, and ``index_copy`` is (by name, below): the
# recorded ``Concat`` and ``ScatterElements`` are not, since many functions record them inside
# (``pad(mode="circular")``, ``diag``, ``embedding_bag``, ``scatter``) and keep their input's dtype
# in PyTorch. Promotion at ``cat`` itself needs no list: it already promotes its inputs to their
# widest type, which is what autocast's promotion gives for every mix PyTorch accepts (it refuses
# float16 beside bfloat16).
_PROMOTE_CUDA = {
    "ScatterElements": PROMOTE,  # scatter_add
    "ScatterND": PROMOTE,  # index_put
}

AUTOCAST_OPS: dict[str, dict[str, str]] = {
    # PyTorch's CPU lists: few float32 ops (softmax, exp, sum, layer_norm keep the input's dtype on CPU).
    "cpu": {
        **_LOWER_PRECISION_EVERYWHERE,
        "ReduceProd": FP32,  # prod
        "GridSample": FP32,  # grid_sampler
        "MaxUnpool": FP32,  # max_unpool2d, max_unpool3d
        "DFT": FP32,  # fft_*
        "STFT": FP32,  # stft
        "Det": FP32,  # linalg_det
    },
    # PyTorch's CUDA lists: transcendental functions, softmax, sums and norms run in float32.
    "cuda": {
        **_LOWER_PRECISION_EVERYWHERE,
        **_PROMOTE_CUDA,
        "Einsum": LOWER_PRECISION_FP,  # einsum (listed on CUDA; on the CPU runtime.ops.einsum decides)
        "GridSample": PROMOTE,  # grid_sampler
        "Acos": FP32,
        "Asin": FP32,
        "Cosh": FP32,
        "Sinh": FP32,
        "Tan": FP32,
        "Exp": FP32,  # exp, expm1
        "Log": FP32,  # log, log10, log2, log1p
        "Reciprocal": FP32,  # reciprocal, rsqrt
        "Pow": FP32,  # pow
        "Softplus": FP32,  # softplus
        "LayerNormalization": FP32,  # layer_norm
        "GroupNormalization": FP32,  # group_norm
        "ReduceL1": FP32,  # norm(p=1)
        "ReduceL2": FP32,  # norm, frobenius_norm, linalg_vector_norm
        "ReduceLogSumExp": FP32,  # logsumexp
        "Softmax": FP32,  # softmax
        "LogSoftmax": FP32,  # log_softmax
        "CumSum": FP32,  # cumsum
        "ReduceSum": FP32,  # sum
        "ReduceProd": FP32,  # prod
    },
}

# Losses (every device type), by the grad_fn name of the op that reduces them.
_FP32_LOSSES = {
    name: FP32
    for name in (
        "MseLossBackward0",
        "L1LossBackward0",
        "SmoothL1LossBackward0",
        "HuberLossBackward0",
        "NllLossBackward0",  # nll_loss, cross_entropy
        "KlDivBackward0",
        "BinaryCrossEntropyBackward0",
        "BinaryCrossEntropyWithLogitsBackward0",
        "PoissonNllLossBackward0",
        "CosineEmbeddingLossBackward0",
        "SoftMarginLossBackward0",
        "MultiMarginLossBackward0",
        "MultilabelMarginLossBackward0",
        "CtcLossBackward0",
        # Composite in PyTorch (no grad_fn of their own) but on its float32 lists: named here for
        # the cast of their inputs (``nn.functional._common.loss_inputs_in_float32``).
        "MarginRankingLoss",
        "HingeEmbeddingLoss",
        "TripletMarginLoss",
    )
}
# Functions on PyTorch's CPU float32 list that record generic ops (or none of their own), by their
# PyTorch names: each is decorated ``outside_autocast(listed_as=name)``, which casts its arguments to
# float32 and leaves the ops it records as they come (linear algebra in bfloat16 is not implemented).
_FP32_FUNCTIONS_CPU = {
    name: FP32
    for name in (
        "cdist",
        "trace",
        "quantile",
        "nanquantile",
        "avg_pool3d",
        "max_pool3d",
        "adaptive_avg_pool3d",
        "adaptive_max_pool3d",
        "fractional_max_pool2d",
        "fractional_max_pool3d",
        "max_unpool2d",
        "max_unpool3d",
        "reflection_pad1d",
        "reflection_pad2d",
        "replication_pad1d",
        "replication_pad2d",
        "replication_pad3d",
        "cholesky",
        "cholesky_inverse",
        "cholesky_solve",
        "inverse",
        "lu_solve",
        "orgqr",
        "ormqr",
        "pinverse",
        "geqrf",
        "qr",
        "svd",
        "triangular_solve",
        "linalg_cond",
        "linalg_matrix_rank",
        "linalg_solve",
        "linalg_cholesky",
        "linalg_cholesky_ex",
        "linalg_svdvals",
        "linalg_eigvalsh",
        "linalg_inv",
        "linalg_inv_ex",
        "linalg_householder_product",
        "linalg_qr",
        "linalg_svd",
        "linalg_eigh",
        "linalg_lstsq",
    )
}
AUTOCAST_NAMED_OPS: dict[str, dict[str, str]] = {
    "cpu": {**_FP32_LOSSES, **_FP32_FUNCTIONS_CPU, "index_copy": PROMOTE},
    "cuda": _FP32_LOSSES,
}


def policy_for(device_type: str, op_type: str, name: str | None = None) -> str | None:
    """The autocast policy of an op recorded on ``device_type`` tensors, or None (left as it is).

    Args:
        device_type: "cpu" or "cuda".
        op_type: the ONNX op type (default domain).
        name: the ``grad_fn`` name the op is recorded with, if any (losses are found by it).

    Returns:
        ``LOWER_PRECISION_FP``, ``FP32``, ``PROMOTE`` or None.

    Example::

        >>> policy_for("cuda", "Softmax")
        'fp32'
    """
    if name is not None:
        policy = AUTOCAST_NAMED_OPS[device_type].get(name)
        if policy is not None:
            return policy
    return AUTOCAST_OPS[device_type].get(op_type)
