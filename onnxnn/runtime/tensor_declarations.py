"""Type declarations of the Tensor methods that ``tensor_api.py`` attaches from its name tables.

``tensor_api.py`` writes torch.Tensor's one-call methods as rows of tables (``DELEGATED``, the
``IN_PLACE*`` tables) and attaches them with ``setattr``, which type checkers cannot follow. This
class declares them for type checkers only: ``TensorAPI`` derives from it under ``TYPE_CHECKING``
and from ``object`` at run time, so Tensor's classes and lookups are unchanged.

A delegated method ``x.name(...)`` is ``onnxnn.name(x, ...)``, so it is declared as that function:
a type checker binds its first parameter to the tensor and checks the rest of the call against the
function's signature. An in-place method rebinds the tensor and returns it. It also declares the
members of Tensor that ``TensorAPI``'s own methods use, so those type-check inside the mixin.
``tests/test_types.py`` checks that the declared names are exactly the tables' names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..ir import dtypes
from ..ir.device import device as _Device  # aliased: a property here is named device
from . import ops

if TYPE_CHECKING:
    from .tensor import Size, Tensor

__all__ = ["TensorDeclarations"]


class TensorDeclarations:
    """The attached methods of :class:`~onnxnn.Tensor`, declared for type checkers."""

    __slots__ = ()

    # Tensor's own members that TensorAPI's methods use (defined in tensor.py and tensor_methods.py).
    if TYPE_CHECKING:  # declarations only: Tensor defines them

        @property
        def shape(self) -> Size: ...

        @property
        def dtype(self) -> dtypes.dtype: ...

        @property
        def device(self) -> _Device: ...

        def dim(self) -> int: ...

        def numel(self) -> int: ...

        def element_size(self) -> int: ...

        def _alias(self) -> Tensor: ...

        def _assign(self, result: Tensor) -> Tensor: ...

        def _fill_random(self, array) -> Tensor: ...

    # DELEGATED: ``x.name(...)`` is ``onnxnn.name(x, ...)``.
    topk = ops.topk
    sort = ops.sort
    argsort = ops.argsort
    msort = ops.msort
    kthvalue = ops.kthvalue
    median = ops.median
    nanmedian = ops.nanmedian
    cumsum = ops.cumsum
    cumprod = ops.cumprod
    logcumsumexp = ops.logcumsumexp
    cummax = ops.cummax
    cummin = ops.cummin
    addmm = ops.addmm
    addbmm = ops.addbmm
    baddbmm = ops.baddbmm
    addmv = ops.addmv
    addr = ops.addr
    mv = ops.mv
    outer = ops.outer
    ger = ops.ger
    inner = ops.inner
    kron = ops.kron
    tril = ops.tril
    triu = ops.triu
    diagonal = ops.diagonal
    diag = ops.diag
    diag_embed = ops.diag_embed
    diagflat = ops.diagflat
    trace = ops.trace
    cross = ops.cross
    vdot = ops.vdot
    roll = ops.roll
    fliplr = ops.fliplr
    flipud = ops.flipud
    rot90 = ops.rot90
    tensor_split = ops.tensor_split
    hsplit = ops.hsplit
    vsplit = ops.vsplit
    dsplit = ops.dsplit
    repeat_interleave = ops.repeat_interleave
    movedim = ops.movedim
    moveaxis = ops.moveaxis
    swapaxes = ops.swapaxes
    swapdims = ops.swapdims
    unfold = ops.unfold
    select = ops.select
    ravel = ops.ravel
    index_add = ops.index_add
    index_copy = ops.index_copy
    index_fill = ops.index_fill
    masked_scatter = ops.masked_scatter
    addcmul = ops.addcmul
    addcdiv = ops.addcdiv
    nan_to_num = ops.nan_to_num
    square = ops.square
    log1p = ops.log1p
    expm1 = ops.expm1
    log2 = ops.log2
    log10 = ops.log10
    exp2 = ops.exp2
    logaddexp = ops.logaddexp
    logaddexp2 = ops.logaddexp2
    xlogy = ops.xlogy
    hypot = ops.hypot
    deg2rad = ops.deg2rad
    rad2deg = ops.rad2deg
    frac = ops.frac
    fmod = ops.fmod
    remainder = ops.remainder
    floor_divide = ops.floor_divide
    clamp_min = ops.clamp_min
    clamp_max = ops.clamp_max
    sgn = ops.sgn
    positive = ops.positive
    negative = ops.negative
    absolute = ops.absolute
    multiply = ops.multiply
    subtract = ops.subtract
    divide = ops.divide
    true_divide = ops.true_divide
    greater = ops.greater
    greater_equal = ops.greater_equal
    less = ops.less
    less_equal = ops.less_equal
    not_equal = ops.not_equal
    float_power = ops.float_power
    heaviside = ops.heaviside
    signbit = ops.signbit
    nansum = ops.nansum
    nanmean = ops.nanmean
    logit = ops.logit
    isposinf = ops.isposinf
    isneginf = ops.isneginf
    isreal = ops.isreal
    logical_xor = ops.logical_xor
    bitwise_and = ops.bitwise_and
    bitwise_or = ops.bitwise_or
    bitwise_xor = ops.bitwise_xor
    bitwise_not = ops.bitwise_not
    diff = ops.diff
    count_nonzero = ops.count_nonzero
    aminmax = ops.aminmax
    tan = ops.tan
    asin = ops.asin
    arcsin = ops.arcsin
    acos = ops.acos
    arccos = ops.arccos
    atan = ops.atan
    arctan = ops.arctan
    sinh = ops.sinh
    cosh = ops.cosh
    asinh = ops.asinh
    arcsinh = ops.arcsinh
    acosh = ops.acosh
    arccosh = ops.arccosh
    atanh = ops.atanh
    arctanh = ops.arctanh
    atan2 = ops.atan2
    arctan2 = ops.arctan2
    copysign = ops.copysign
    fmax = ops.fmax
    fmin = ops.fmin
    erfc = ops.erfc
    sinc = ops.sinc
    fix = ops.fix
    ldexp = ops.ldexp
    quantile = ops.quantile
    nanquantile = ops.nanquantile
    cov = ops.cov
    corrcoef = ops.corrcoef
    dist = ops.dist
    unique = ops.unique
    unique_consecutive = ops.unique_consecutive
    bincount = ops.bincount
    histc = ops.histc
    mode = ops.mode
    matrix_power = ops.matrix_power
    index_put = ops.index_put
    put = ops.put
    scatter_reduce = ops.scatter_reduce
    select_scatter = ops.select_scatter
    slice_scatter = ops.slice_scatter
    diagonal_scatter = ops.diagonal_scatter
    renorm = ops.renorm
    histogram = ops.histogram
    nonzero_static = ops.nonzero_static
    bernoulli = ops.bernoulli
    unsafe_split_with_sizes = ops.unsafe_split_with_sizes
    is_inference = ops.is_inference
    stft = ops.stft
    istft = ops.istft
    hash_tensor = ops.hash_tensor
    lgamma = ops.lgamma
    digamma = ops.digamma
    mvlgamma = ops.mvlgamma
    erfinv = ops.erfinv
    i0 = ops.i0
    igamma = ops.igamma
    igammac = ops.igammac
    gcd = ops.gcd
    lcm = ops.lcm
    bitwise_left_shift = ops.bitwise_left_shift
    bitwise_right_shift = ops.bitwise_right_shift
    frexp = ops.frexp
    nextafter = ops.nextafter
    multinomial = ops.multinomial
    index_reduce = ops.index_reduce
    det = ops.det
    slogdet = ops.slogdet
    logdet = ops.logdet
    inverse = ops.inverse
    cholesky = ops.cholesky
    cholesky_solve = ops.cholesky_solve
    cholesky_inverse = ops.cholesky_inverse
    triangular_solve = ops.triangular_solve
    lu = ops.lu
    lu_solve = ops.lu_solve
    matrix_exp = ops.matrix_exp
    qr = ops.qr
    geqrf = ops.geqrf
    orgqr = ops.orgqr
    ormqr = ops.ormqr
    svd = ops.svd
    pinverse = ops.pinverse

    # IN_PLACE_ARITHMETIC, IN_PLACE, IN_PLACE_RESHAPING: ``x.name_(...)`` rebinds ``x`` to ``x.name(...)``.
    addmm_: Callable[..., Tensor]
    addbmm_: Callable[..., Tensor]
    baddbmm_: Callable[..., Tensor]
    addmv_: Callable[..., Tensor]
    addr_: Callable[..., Tensor]
    square_: Callable[..., Tensor]
    log1p_: Callable[..., Tensor]
    expm1_: Callable[..., Tensor]
    log2_: Callable[..., Tensor]
    log10_: Callable[..., Tensor]
    exp2_: Callable[..., Tensor]
    xlogy_: Callable[..., Tensor]
    hypot_: Callable[..., Tensor]
    deg2rad_: Callable[..., Tensor]
    rad2deg_: Callable[..., Tensor]
    frac_: Callable[..., Tensor]
    fmod_: Callable[..., Tensor]
    remainder_: Callable[..., Tensor]
    floor_divide_: Callable[..., Tensor]
    clamp_min_: Callable[..., Tensor]
    clamp_max_: Callable[..., Tensor]
    sgn_: Callable[..., Tensor]
    negative_: Callable[..., Tensor]
    absolute_: Callable[..., Tensor]
    multiply_: Callable[..., Tensor]
    subtract_: Callable[..., Tensor]
    divide_: Callable[..., Tensor]
    true_divide_: Callable[..., Tensor]
    reciprocal_: Callable[..., Tensor]
    rsqrt_: Callable[..., Tensor]
    sign_: Callable[..., Tensor]
    sin_: Callable[..., Tensor]
    cos_: Callable[..., Tensor]
    tan_: Callable[..., Tensor]
    asin_: Callable[..., Tensor]
    arcsin_: Callable[..., Tensor]
    acos_: Callable[..., Tensor]
    arccos_: Callable[..., Tensor]
    atan_: Callable[..., Tensor]
    arctan_: Callable[..., Tensor]
    sinh_: Callable[..., Tensor]
    cosh_: Callable[..., Tensor]
    asinh_: Callable[..., Tensor]
    arcsinh_: Callable[..., Tensor]
    acosh_: Callable[..., Tensor]
    arccosh_: Callable[..., Tensor]
    atanh_: Callable[..., Tensor]
    arctanh_: Callable[..., Tensor]
    erf_: Callable[..., Tensor]
    floor_: Callable[..., Tensor]
    ceil_: Callable[..., Tensor]
    round_: Callable[..., Tensor]
    trunc_: Callable[..., Tensor]
    logit_: Callable[..., Tensor]
    nan_to_num_: Callable[..., Tensor]
    index_add_: Callable[..., Tensor]
    cumsum_: Callable[..., Tensor]
    cumprod_: Callable[..., Tensor]
    float_power_: Callable[..., Tensor]
    heaviside_: Callable[..., Tensor]
    atan2_: Callable[..., Tensor]
    arctan2_: Callable[..., Tensor]
    copysign_: Callable[..., Tensor]
    erfc_: Callable[..., Tensor]
    sinc_: Callable[..., Tensor]
    fix_: Callable[..., Tensor]
    ldexp_: Callable[..., Tensor]
    index_put_: Callable[..., Tensor]
    put_: Callable[..., Tensor]
    scatter_reduce_: Callable[..., Tensor]
    renorm_: Callable[..., Tensor]
    lgamma_: Callable[..., Tensor]
    digamma_: Callable[..., Tensor]
    mvlgamma_: Callable[..., Tensor]
    erfinv_: Callable[..., Tensor]
    i0_: Callable[..., Tensor]
    polygamma_: Callable[..., Tensor]
    nextafter_: Callable[..., Tensor]
    index_reduce_: Callable[..., Tensor]
    igamma_: Callable[..., Tensor]
    igammac_: Callable[..., Tensor]
    tril_: Callable[..., Tensor]
    triu_: Callable[..., Tensor]
    index_copy_: Callable[..., Tensor]
    index_fill_: Callable[..., Tensor]
    masked_scatter_: Callable[..., Tensor]
    eq_: Callable[..., Tensor]
    ne_: Callable[..., Tensor]
    lt_: Callable[..., Tensor]
    le_: Callable[..., Tensor]
    gt_: Callable[..., Tensor]
    ge_: Callable[..., Tensor]
    greater_: Callable[..., Tensor]
    greater_equal_: Callable[..., Tensor]
    less_: Callable[..., Tensor]
    less_equal_: Callable[..., Tensor]
    not_equal_: Callable[..., Tensor]
    logical_and_: Callable[..., Tensor]
    logical_or_: Callable[..., Tensor]
    logical_not_: Callable[..., Tensor]
    logical_xor_: Callable[..., Tensor]
    bitwise_and_: Callable[..., Tensor]
    bitwise_or_: Callable[..., Tensor]
    bitwise_xor_: Callable[..., Tensor]
    bitwise_not_: Callable[..., Tensor]
    gcd_: Callable[..., Tensor]
    lcm_: Callable[..., Tensor]
    bitwise_left_shift_: Callable[..., Tensor]
    bitwise_right_shift_: Callable[..., Tensor]
    squeeze_: Callable[..., Tensor]
    unsqueeze_: Callable[..., Tensor]
    t_: Callable[..., Tensor]
    transpose_: Callable[..., Tensor]
    swapaxes_: Callable[..., Tensor]
    swapdims_: Callable[..., Tensor]
