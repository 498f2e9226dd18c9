"""The module classes of ``onnxnn.nn``: Module, the containers and the layers, by family."""
from __future__ import annotations

from .module import Module
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .lazy import LazyModuleMixin, UninitializedBuffer, UninitializedParameter
from .linear import Identity, LazyLinear, Linear
from .flatten import Flatten, Unflatten
from .activation import (
    CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish,
    PReLU, ReLU, ReLU6, RReLU, Sigmoid, SiLU, Softmax, Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh,
    Tanhshrink, Threshold,
)
from .conv import (
    Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, LazyConv1d, LazyConv2d, LazyConv3d,
    LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
)
from .fold import Fold, Unfold
from .pooling import (
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d,
    AvgPool1d, AvgPool2d, AvgPool3d, FractionalMaxPool2d, FractionalMaxPool3d, LPPool1d, LPPool2d, LPPool3d,
    MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d,
)
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d
from .instancenorm import (
    InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d,
)
from .normalization import CrossMapLRN2d, GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm
from .dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout
from .sparse import Embedding, EmbeddingBag
from .distance import PairwiseDistance
from .loss import (
    BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, CTCLoss, GaussianNLLLoss, HingeEmbeddingLoss,
    HuberLoss, KLDivLoss, L1Loss, LinearCrossEntropyLoss, MarginRankingLoss, MSELoss, MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, NLLLoss2d, PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss,
    TripletMarginLoss, TripletMarginWithDistanceLoss,
)
from .adaptive import AdaptiveLogSoftmaxWithLoss
# padding, resampling, shuffles, bilinear and cosine similarity
from .padding import (
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
    ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
    ZeroPad3d,
)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .channelshuffle import ChannelShuffle
from .bilinear import Bilinear
from .distance import CosineSimilarity
# recurrent layers
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
# attention and transformers
from .attention import MultiheadAttention, NonDynamicallyQuantizableLinear
from .transformer import (
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
)

__all__ = [
    # modules and containers
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "LazyModuleMixin", "UninitializedBuffer", "UninitializedParameter",
    # linear and shape layers
    "Linear", "LazyLinear", "Identity", "Flatten", "Unflatten",
    # activations
    "CELU", "ELU", "GELU", "GLU", "SELU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
    "LogSigmoid", "LogSoftmax", "Mish", "PReLU", "ReLU", "ReLU6", "RReLU", "Sigmoid", "SiLU", "Softmax", "Softmax2d",
    "Softmin", "Softplus", "Softshrink", "Softsign", "Tanh", "Tanhshrink", "Threshold",
    # convolution, folding and pooling
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
    "Fold", "Unfold",
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
    "FractionalMaxPool2d", "FractionalMaxPool3d",
    # normalization
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "GroupNorm", "LayerNorm", "RMSNorm", "LocalResponseNorm", "CrossMapLRN2d",
    # dropout
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    # embeddings and distances
    "Embedding", "EmbeddingBag", "PairwiseDistance",
    # losses
    "L1Loss", "MSELoss", "CrossEntropyLoss", "NLLLoss", "NLLLoss2d", "PoissonNLLLoss", "GaussianNLLLoss", "KLDivLoss",
    "BCELoss", "BCEWithLogitsLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "MultiLabelMarginLoss", "HuberLoss",
    "SmoothL1Loss", "SoftMarginLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MultiMarginLoss",
    "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss", "AdaptiveLogSoftmaxWithLoss",
    "LinearCrossEntropyLoss",
    # padding, resampling, shuffles, bilinear and cosine similarity
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ReflectionPad1d",
    "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
    "CircularPad2d", "CircularPad3d", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle",
    "PixelUnshuffle", "ChannelShuffle", "Bilinear", "CosineSimilarity",
    # recurrent layers
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
    # attention and transformers
    "MultiheadAttention", "NonDynamicallyQuantizableLinear", "Transformer", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer",
]
