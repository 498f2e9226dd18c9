"""The op families. Importing this package registers every shape and gradient rule.

The functions exported here are the tensor-level API (PyTorch names) that ``Tensor`` methods and
``onnxnn``'s top level call.
"""

from __future__ import annotations

from .elementwise import *  # noqa: F401,F403
from .clamping import *  # noqa: F401,F403
from .division import *  # noqa: F401,F403
from .activations import *  # noqa: F401,F403
from .comparison import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .variance import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .splitting import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .adaptive_pooling import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403

# Tensor and top-level API parity (issue #12, l5-tensor-api)
from .sorting import *  # noqa: F401,F403
from .einsum import *  # noqa: F401,F403
from .matrix import *  # noqa: F401,F403
from .arrange import *  # noqa: F401,F403

# pointwise's true_divide (no rounding_mode, as torch.true_divide) replaces elementwise's alias of div.
from .pointwise import *  # type: ignore[assignment]  # noqa: F401,F403
from .fused_pointwise import *  # noqa: F401,F403  (lerp, addcmul, addcdiv)
from .searching import *  # noqa: F401,F403  (bucketize, searchsorted, isin, diff, aminmax, count_nonzero)
from .stats import *  # noqa: F401,F403
from .quantiles import *  # noqa: F401,F403
from .scatter_ops import *  # noqa: F401,F403
from .extras import *  # noqa: F401,F403
from .finite_differences import *  # noqa: F401,F403
from .spectral import *  # noqa: F401,F403
from .segments import *  # noqa: F401,F403
from .special_functions import *  # noqa: F401,F403  (lgamma, digamma, polygamma, zeta: issue #12)
from .incomplete_gamma import *  # noqa: F401,F403
from .error_functions import *  # noqa: F401,F403  (erfc, erfcx, erfinv)
from .bessel import *  # noqa: F401,F403  (torch.special's bessel_j0/j1, modified_bessel_k0/k1)
from .orthogonal_polynomials import *  # noqa: F401,F403  (torch.special's polynomials)
from .integer_ops import *  # noqa: F401,F403  (gcd, lcm, shifts, frexp, nextafter: issue #12)
from .index_reduce import *  # noqa: F401,F403  (index_reduce: issue #12)
from .random_samplers import *  # noqa: F401,F403  (multinomial, poisson, binomial, random fills: issue #12)
from .linalg_lu import *  # noqa: F401,F403  (LU, determinants, solves, inverses)
from .linalg_cholesky import *  # noqa: F401,F403  (Cholesky factors, solves and inverses)
from .linalg_qr import *  # noqa: F401,F403  (Householder QR, least squares, matrix_exp)
from .linalg_jacobi import *  # noqa: F401,F403  (svd, eigh and what singular values define)
from .nn_ops import *  # noqa: F401,F403,E402  (BatchNormalization rules; hardshrink, prelu)
from . import training  # noqa: F401,E402  (Momentum: the fused SGD update)
from . import training_formulas  # noqa: F401,E402  (update_formulas.py's fused updates)
from . import batch_norm_training  # noqa: F401,E402  (F.batch_norm's training node)
from . import relu_gradient  # noqa: F401,E402  (ReLU's gradient as one node)
from . import abs_gradient  # noqa: F401,E402  (Abs's gradient as one node)
from . import recurrent_cells  # noqa: F401,E402  (LSTM and GRU cells' elementwise work as one node)
from . import clip_bounds  # noqa: F401,E402  (a missing Clip bound is infinite, as in PyTorch)
from . import max_pool_nan  # noqa: F401,E402  (NaN wins a max pool's window on onnxruntime, as in PyTorch)
from . import batch_norm_epsilon  # noqa: F401,E402  (float64 BatchNormalization adds PyTorch's epsilon)
from . import reduction_accuracy  # noqa: F401,E402  (long float sums in blocks on onnxruntime, as accurate as PyTorch's)
from . import integer_sums  # noqa: F401,E402  (integer sums, products, powers exact on onnxruntime, wrapping as PyTorch's)
from . import integer_widened  # noqa: F401,E402  (int8, uint8, int16 ops onnxruntime lacks, computed in int32)
from . import activation_accuracy  # noqa: F401,E402  (Sigmoid, Elu, Selu, Celu, HardSigmoid, HardSwish as accurate as PyTorch's)
from . import group_normalization  # noqa: F401,E402  (GroupNormalization's variance in two passes)
from . import float64_decompositions  # noqa: F401,E402  (float64 Atan, Erf, Sinh, ... for onnxruntime)
from . import hardtanh  # noqa: F401,E402  (hardtanh: a Clip with PyTorch's hardtanh gradient)
from . import binary_cross_entropy  # noqa: F401,E402  (binary_cross_entropy's loss with PyTorch's gradient)
from . import derivative_formulas  # noqa: F401,E402  (hypot and atan2 with PyTorch's derivative formulas)
from . import where_widened  # noqa: F401,E402  (Where of bools and other dtypes onnxruntime lacks)
from . import conv_weight_gradient  # noqa: F401,E402  (a convolution's weight gradient as one node)
from . import conv_lowering  # noqa: F401,E402  (a Conv over small images as one GEMM, in onnxnn's sessions)
from . import float64_convolutions  # noqa: F401,E402  (float64 Conv, ConvTranspose, AveragePool for onnxruntime)
from . import loss  # noqa: F401,E402  (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss rules)
from . import resample  # noqa: F401,E402  (Resize rules)
from . import sampling  # noqa: F401,E402  (GridSample, AffineGrid rules)
from . import rearrange  # noqa: F401,E402  (DepthToSpace, SpaceToDepth, CenterCropPad rules)
from . import unary_math  # noqa: F401,E402  (trigonometric, hyperbolic and Mod gradient rules)
from . import imported  # noqa: F401,E402  (rules of ops only imported models record: TopK, CumSum, ...)
from . import recurrent  # noqa: F401,E402  (RNN, LSTM, GRU: backward through the unrolled recurrence)
from . import detection  # noqa: F401,E402  (RoiAlign, DeformConv: backward through the re-recorded sampling)
