"""The module classes of ``onnxnn.nn``: Module, the containers and the layers."""
from __future__ import annotations

from .module import Module
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .linear import Identity, Linear
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .batchnorm import BatchNorm1d, BatchNorm2d
from .dropout import Dropout
from .flatten import Flatten, Unflatten
# -- activations, normalization, embeddings and dropout (layer library: norm/embedding/activation family)
from .activation import (
    CELU, ELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LogSigmoid, Mish, PReLU, ReLU6, RReLU, SiLU,
    Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanhshrink, Threshold,
)
from .batchnorm import BatchNorm3d
from .dropout import AlphaDropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .normalization import CrossMapLRN2d, GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm
from .sparse import Embedding, EmbeddingBag
# -- end of the norm/embedding/activation family's block

__all__ = [
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "Linear", "Identity",
    "ReLU", "LeakyReLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "GELU",
    "BatchNorm1d", "BatchNorm2d", "Dropout", "Flatten", "Unflatten",
]
# losses (layer family L3)
from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: E402
from .distance import PairwiseDistance  # noqa: E402
from .loss import (  # noqa: E402
    BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, CTCLoss, GaussianNLLLoss, HingeEmbeddingLoss,
    HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss,
    MultiMarginLoss, NLLLoss, NLLLoss2d, PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss, TripletMarginLoss,
    TripletMarginWithDistanceLoss, LinearCrossEntropyLoss,
)
__all__ += [
    "PairwiseDistance", "L1Loss", "NLLLoss", "NLLLoss2d", "PoissonNLLLoss", "GaussianNLLLoss", "KLDivLoss", "MSELoss",
    "BCELoss", "BCEWithLogitsLoss", "HingeEmbeddingLoss", "MultiLabelMarginLoss", "SmoothL1Loss", "HuberLoss",
    "SoftMarginLoss", "CrossEntropyLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
    "MultiMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss", "AdaptiveLogSoftmaxWithLoss",
    "LinearCrossEntropyLoss",
]
# -- activations, normalization, embeddings and dropout (layer library: norm/embedding/activation family)
__all__ += [
    "CELU", "ELU", "GLU", "SELU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LogSigmoid", "Mish", "PReLU",
    "ReLU6", "RReLU", "SiLU", "Softmax2d", "Softmin", "Softplus", "Softshrink", "Softsign", "Tanhshrink", "Threshold",
    "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "CrossMapLRN2d", "GroupNorm", "LayerNorm",
    "LocalResponseNorm", "RMSNorm", "AlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout",
    "Embedding", "EmbeddingBag",
]
# -- end of the norm/embedding/activation family's block
