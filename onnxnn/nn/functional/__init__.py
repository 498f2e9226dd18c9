"""Functional forms of the layers: ``onnxnn.nn.functional`` (PyTorch's ``torch.nn.functional``).

Every function records standard ONNX nodes through Tensor ops. Composite operations decompose into
ops onnxruntime runs fast (Softmax, ReduceMean, MatMul, ...), so few extra gradient rules are
needed; batch normalization in evaluation is one ``BatchNormalization`` node.

Example::

    >>> import onnxnn.nn.functional as F
    >>> x = onnxnn.randn(4, 3)
    >>> F.relu(x).shape
    onnxnn.Size([4, 3])
"""
from __future__ import annotations

from ._activation import (
    elu, gelu, hardtanh, leaky_relu, leaky_relu_, log_softmax, logsigmoid, relu, relu6, relu_, sigmoid, silu,
    softmax, softplus, tanh,
)
# -- activations, normalization, embeddings and dropout (layer library: norm/embedding/activation family)
from ._activation import (
    celu, celu_, elu_, glu, gumbel_softmax, hardshrink, hardsigmoid, hardswish, hardtanh_, mish, prelu, rrelu,
    rrelu_, selu, selu_, softmin, softshrink, softsign, tanhshrink, threshold, threshold_,
)
from ._normalization import normalize, rms_norm
from ._dropout import alpha_dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout
from ._embedding import embedding, embedding_bag
# -- end of the norm/embedding/activation family's block
from ._dropout import dropout
from ._linear import linear
from ._loss import (
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss, nll_loss, one_hot,
)
from ._normalization import batch_norm
from ...runtime.ops.normalization import group_norm, instance_norm, layer_norm, local_response_norm
# convolution and pooling
from ._conv import (
    conv1d, conv2d, conv3d, conv_tbc, conv_transpose1d, conv_transpose2d, conv_transpose3d, fold, unfold,
)
from ._pooling import (
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices, adaptive_max_pool2d, adaptive_max_pool2d_with_indices, adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices, avg_pool1d, avg_pool2d, avg_pool3d, fractional_max_pool2d,
    fractional_max_pool2d_with_indices, fractional_max_pool3d, fractional_max_pool3d_with_indices, lp_pool1d,
    lp_pool2d, lp_pool3d, max_pool1d, max_pool1d_with_indices, max_pool2d, max_pool2d_with_indices, max_pool3d,
    max_pool3d_with_indices, max_unpool1d, max_unpool2d, max_unpool3d,
)

__all__ = [
    "linear", "relu", "relu_", "leaky_relu", "leaky_relu_", "sigmoid", "tanh", "gelu", "silu", "elu",
    "softplus", "hardtanh", "relu6", "logsigmoid", "softmax", "log_softmax", "dropout", "batch_norm",
    "one_hot", "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "layer_norm", "group_norm", "instance_norm", "local_response_norm",
    # convolution and pooling
    "fold", "unfold", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "fractional_max_pool2d", "fractional_max_pool3d", "conv_tbc", "max_pool1d_with_indices",
    "max_pool2d_with_indices", "max_pool3d_with_indices", "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices", "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d_with_indices",
]
# losses (layer family L3)
from ._loss_ctc import ctc_loss  # noqa: E402
from ._loss_linear import linear_cross_entropy  # noqa: E402
from ._loss_margin import (  # noqa: E402
    cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss, multi_margin_loss, multilabel_margin_loss,
    multilabel_soft_margin_loss, pairwise_distance, soft_margin_loss, triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from ._loss_regression import gaussian_nll_loss, huber_loss, kl_div, poisson_nll_loss, smooth_l1_loss  # noqa: E402
__all__ += [
    "huber_loss", "smooth_l1_loss", "poisson_nll_loss", "gaussian_nll_loss", "kl_div", "pairwise_distance",
    "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
    "multilabel_margin_loss", "multi_margin_loss", "cosine_embedding_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss", "ctc_loss", "linear_cross_entropy",
]
# -- activations, normalization, embeddings and dropout (layer library: norm/embedding/activation family)
__all__ += [
    "celu", "celu_", "elu_", "glu", "gumbel_softmax", "hardshrink", "hardsigmoid", "hardswish", "hardtanh_", "mish",
    "prelu", "rrelu", "rrelu_", "selu", "selu_", "softmin", "softshrink", "softsign", "tanhshrink", "threshold",
    "threshold_",
    "rms_norm", "normalize", "alpha_dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout",
    "embedding", "embedding_bag",
]
# -- end of the norm/embedding/activation family's block
