"""onnxnn: PyTorch's nn.Module API on ONNX.

Every tensor operation records an ONNX node; onnxruntime runs the recorded graph; backward passes
are ONNX graphs generated from the forward graph.

Example::

    >>> import onnxnn
    >>> x = onnxnn.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([2., 4., 6.])
"""

from __future__ import annotations

from . import kernels  # noqa: F401  (registers the "kernels" executor)
from . import runtime
from .ir.caches import clear_caches
from .runtime import ops as _ops
from .runtime.fastpath import is_fast_path_enabled, set_fast_path
from .runtime.threads import get_num_interop_threads, get_num_threads, set_num_interop_threads, set_num_threads
from .float_modes import get_float32_matmul_precision, set_float32_matmul_precision, set_flush_denormal
from .determinism import (
    are_deterministic_algorithms_enabled,
    get_deterministic_debug_mode,
    is_deterministic_algorithms_warn_only_enabled,
    set_deterministic_debug_mode,
    use_deterministic_algorithms,
)
from .runtime.type_queries import can_cast, result_type, typename
from .ir.type_info import finfo, iinfo
from .runtime.legacy_tensor_types import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled
from .runtime.creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    scalar_tensor,
    tensor,
    zeros,
    zeros_like,
)
from .runtime.random_creation import normal, rand, rand_like, randint, randint_like, randn, randn_like, randperm
from .ir.device import device, get_default_device, set_default_device
from .runtime.realization import get_executor, set_executor
from .ir.dtypes import (
    bfloat16,
    bool,
    double,
    dtype,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    promote_types,
    set_default_dtype,
    short,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .runtime.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .runtime.printing import set_printoptions
from .ir.random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .runtime.tensor import Size, Tensor
from .runtime.ops import (  # noqa: F401  (the math functions of the top level)
    abs,
    add,
    all,
    allclose,
    amax,
    amin,
    any,
    argmax,
    argmin,
    bmm,
    broadcast_to,
    cat,
    ceil,
    chunk,
    clamp,
    clip,
    clone,
    concat,
    cos,
    div,
    dot,
    eq,
    equal,
    erf,
    exp,
    expand_as,
    flatten,
    flip,
    floor,
    floor_divide,
    gather,
    ge,
    gelu,
    gt,
    index_select,
    isclose,
    isfinite,
    isinf,
    isnan,
    le,
    leaky_relu,
    log,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    logsumexp,
    lt,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mm,
    mul,
    narrow,
    ne,
    neg,
    norm,
    permute,
    pow,
    prod,
    reciprocal,
    relu,
    remainder,
    reshape,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    softmax,
    split,
    sqrt,
    squeeze,
    stack,
    std,
    sub,
    sum,
    t,
    tanh,
    tile,
    transpose,
    trunc,
    unbind,
    unsqueeze,
    var,
    where,
    nonzero,
    argwhere,
    take,
    take_along_dim,
    scatter,
    scatter_add,
    masked_select,
)

# Tensor and top-level API parity (issue #12, l5-tensor-api): see docs/api_status.md
from .runtime.creation import asarray, empty_permuted, logspace  # noqa: E402,F401
from .runtime.ops.view_copies import *  # noqa: E402,F401,F403  (torch's *_copy functions)
from .ir.memory_formats import channels_last, channels_last_3d, contiguous_format, memory_format  # noqa: E402,F401
from .ir.memory_formats import preserve_format  # noqa: E402,F401
from .runtime.ops import (  # noqa: E402,F401
    absolute,
    acos,
    acosh,
    adaptive_avg_pool1d,
    addbmm,
    addcdiv,
    addcmul,
    addmm,
    addmv,
    addr,
    aminmax,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctanh,
    argsort,
    asin,
    asinh,
    atan,
    atanh,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    avg_pool1d,
    baddbmm,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    bucketize,
    clamp_max,
    clamp_min,
    column_stack,
    concatenate,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    cosh,
    count_nonzero,
    cross,
    cummax,
    cummin,
    cumprod,
    cumsum,
    deg2rad,
    diag,
    diag_embed,
    diagflat,
    diagonal,
    diff,
    divide,
    dsplit,
    dstack,
    einsum,
    exp2,
    expm1,
    fliplr,
    flipud,
    float_power,
    fmod,
    frac,
    ger,
    greater,
    greater_equal,
    group_norm,
    heaviside,
    hsplit,
    hstack,
    hypot,
    index_add,
    index_copy,
    index_fill,
    inner,
    instance_norm,
    isneginf,
    isposinf,
    isreal,
    kron,
    kthvalue,
    layer_norm,
    lerp,
    less,
    less_equal,
    log10,
    log1p,
    log2,
    logaddexp,
    logaddexp2,
    logcumsumexp,
    logit,
    masked_fill,
    masked_scatter,
    max_pool1d,
    max_pool2d,
    max_pool3d,
    median,
    meshgrid,
    moveaxis,
    movedim,
    msort,
    multiply,
    mv,
    nan_to_num,
    nanmean,
    nanmedian,
    nansum,
    negative,
    not_equal,
    outer,
    positive,
    rad2deg,
    ravel,
    repeat_interleave,
    roll,
    rot90,
    row_stack,
    searchsorted,
    select,
    sgn,
    signbit,
    sinh,
    sort,
    square,
    subtract,
    swapaxes,
    swapdims,
    tan,
    tensor_split,
    topk,
    trace,
    tril,
    triu,
    true_divide,
    vdot,
    vsplit,
    vstack,
    xlogy,
    arctan2,
    atan2,
    bincount,
    block_diag,
    broadcast_shapes,
    broadcast_tensors,
    cartesian_prod,
    chain_matmul,
    combinations,
    copysign,
    corrcoef,
    cov,
    cdist,
    cumulative_trapezoid,
    diagonal_scatter,
    dist,
    erfc,
    fix,
    fmax,
    fmin,
    histc,
    index_put,
    isin,
    ldexp,
    matrix_power,
    mode,
    nanquantile,
    put,
    quantile,
    rsub,
    scatter_reduce,
    select_scatter,
    sinc,
    slice_scatter,
    std_mean,
    tensordot,
    trapezoid,
    trapz,
    tril_indices,
    triu_indices,
    unique,
    unique_consecutive,
    var_mean,
    adjoint,
    bernoulli,
    frobenius_norm,
    get_device,
    histogram,
    is_inference,
    is_same_size,
    is_signed,
    nonzero_static,
    pdist,
    range,
    renorm,
    split_with_sizes,
    unflatten,
    unravel_index,
    unsafe_chunk,
    unsafe_split,
    unsafe_split_with_sizes,
    vander,
    gradient,
    hash_tensor,
    histogramdd,
    istft,
    segment_reduce,
    stft,
    digamma,
    erfinv,
    i0,
    igamma,
    igammac,
    lgamma,
    mvlgamma,
    polygamma,
    bitwise_left_shift,
    bitwise_right_shift,
    frexp,
    gcd,
    lcm,
    nextafter,
    binomial,
    multinomial,
    poisson,
    index_reduce,
    cholesky,
    cholesky_inverse,
    cholesky_solve,
    det,
    geqrf,
    inverse,
    logdet,
    lu,
    lu_solve,
    lu_unpack,
    matrix_exp,
    orgqr,
    ormqr,
    qr,
    slogdet,
    triangular_solve,
    svd,
    pinverse,
    nuclear_norm,
)
from .runtime.views import VIEW_OPS as _VIEW_OPS, view_function as _view_function  # noqa: E402

# onnxnn.transpose(x, 0, 1), onnxnn.split(x, 2), ...: the same linked views as the methods make.
for _name in _VIEW_OPS:
    if _name in globals():
        globals()[_name] = _view_function(_name, globals()[_name], Tensor)
del _name

from .runtime.windows import (  # noqa: E402,F401
    bartlett_window,
    blackman_window,
    hamming_window,
    hann_window,
    kaiser_window,
)
from . import autograd, cuda, linalg, special  # noqa: E402
from .errors import CheckpointError, ModelLoadError  # noqa: E402
from .export.checkpoint import load, save  # noqa: E402
from . import nn, optim  # noqa: E402
from . import backend, import_  # noqa: E402
from . import fx, profiler  # noqa: E402
from . import amp  # noqa: E402
from . import quantization  # noqa: E402
from . import onnx  # noqa: E402  (torch.onnx's names: export, is_in_onnx_export, TrainingMode)
from .quantization import qint8, qint32, quint8  # noqa: E402
from .amp import (  # noqa: E402
    GradScaler,
    autocast,
    clear_autocast_cache,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .compile import compile  # noqa: E402,A001

# torch's top-level forms of nn.functional ops and of in-place methods (l5-tensor-api; docs/api_status.md)
from .nn.functional import (  # noqa: E402,F401
    alpha_dropout,
    celu,
    dropout,
    feature_alpha_dropout,
    hardshrink,
    pairwise_distance,
    prelu,
    rms_norm,
    rrelu,
    selu,
    threshold,
)

# torch's top-level forms of nn.functional ops with torch's own signatures (batch_norm, embedding, the losses'
# integer reductions, native_*) and its low-level recurrent functions
from .nn.torch_aliases import (  # noqa: E402,F401
    adaptive_max_pool1d,
    affine_grid_generator,
    batch_norm,
    bilinear,
    binary_cross_entropy_with_logits,
    channel_shuffle,
    constant_pad_nd,
    conv_tbc,
    convolution,
    cosine_embedding_loss,
    cosine_similarity,
    ctc_loss,
    embedding,
    embedding_bag,
    embedding_renorm_,
    feature_dropout,
    feature_dropout_,
    grid_sampler,
    grid_sampler_2d,
    grid_sampler_3d,
    hinge_embedding_loss,
    kl_div,
    margin_ranking_loss,
    max_pool1d_with_indices,
    native_batch_norm,
    native_channel_shuffle,
    native_dropout,
    native_group_norm,
    native_layer_norm,
    norm_except_dim,
    pixel_shuffle,
    pixel_unshuffle,
    poisson_nll_loss,
    triplet_margin_loss,
)
from .nn.torch_recurrent import (  # noqa: E402,F401
    gru,
    gru_cell,
    lstm,
    lstm_cell,
    rnn_relu,
    rnn_relu_cell,
    rnn_tanh,
    rnn_tanh_cell,
)
from .runtime.top_level_in_place import top_level_in_place as _top_level_in_place  # noqa: E402

globals().update(
    _top_level_in_place(
        {
            name: getattr(nn.functional, name)
            for name in ("selu", "celu", "threshold", "dropout", "alpha_dropout", "feature_alpha_dropout", "rrelu")
        },
    )
)

__version__ = "0.1.0"


def numel(input: Tensor) -> _builtins.int:
    return input.numel()


def is_tensor(obj) -> _builtins.bool:
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> _builtins.bool:
    return input.is_floating_point()


def is_nonzero(input: Tensor) -> _builtins.bool:
    return input.is_nonzero()


import builtins as _builtins  # noqa: E402
import gc as _gc  # noqa: E402

builtins_int, builtins_bool = _builtins.int, _builtins.bool


# ``import torch`` makes ``torch.utils.data``, ``torch.distributions``, ``torch.testing`` and
# ``torch.random`` usable. Importing them costs onnxnn's import (onnxnn.utils.data ~16 ms, its
# worker processes' machinery; onnxnn.distributions ~100 ms), so each is imported on first use.
_LAZY_SUBPACKAGES = frozenset(("utils", "distributions", "testing", "random"))


def __getattr__(name: str):
    if name in _LAZY_SUBPACKAGES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Python's cycle collector makes its first full collection after a fixed number of allocations
# since the interpreter started (about 70,000 container objects), and a full collection traverses
# every object alive. Importing numpy, onnx and onnxnn makes about 45,000, so that collection came
# a little later, in a user's first training step, and took 11 ms of an MLP's 23 ms. Collecting
# once here pays it with the import, and the next full collection waits until the program has
# added a quarter as many long-lived objects again (CPython's rule).
_gc.collect()
