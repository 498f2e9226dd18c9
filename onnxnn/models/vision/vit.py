"""Vision Transformer with torchvision's module tree, parameter names and initialization."""

from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial
from typing import Callable, Optional

from ...nn import (
    GELU,
    Conv2d,
    Dropout,
    LayerNorm,
    Linear,
    Module,
    MultiheadAttention,
    Parameter,
    Sequential,
    Tanh,
    init,
)
from ...runtime.creation import empty, zeros
from ...runtime.ops.shape import cat
from ...runtime.tensor import Tensor
from ._weights import WeightsPath, load_weights

__all__ = ["VisionTransformer", "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14"]


class MLPBlock(Sequential):
    """Linear, GELU, Dropout, Linear, Dropout (named ``0``..``4``), as torchvision's ``MLP``."""

    def __init__(self, in_dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__(Linear(in_dim, mlp_dim), GELU(), Dropout(dropout), Linear(mlp_dim, in_dim), Dropout(dropout))
        for module in self.modules():
            if isinstance(module, Linear):
                init.xavier_uniform_(module.weight)
                init.normal_(module.bias, std=1e-6)


class EncoderBlock(Module):
    """Pre-norm transformer block: ``x + attention(ln_1(x))``, then ``+ mlp(ln_2(.))``."""

    def __init__(
        self,
        num_heads: int,
        hidden_dim: int,
        mlp_dim: int,
        dropout: float,
        attention_dropout: float,
        norm_layer: Callable[..., Module] = partial(LayerNorm, eps=1e-6),
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = MultiheadAttention(hidden_dim, num_heads, dropout=attention_dropout, batch_first=True)
        self.dropout = Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() != 3:
            raise AssertionError(f"Expected (batch_size, seq_length, hidden_dim) got {tuple(input.shape)}")
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        return x + self.mlp(self.ln_2(x))


class Encoder(Module):
    """Adds the learned position embedding, runs the blocks (``layers.encoder_layer_<i>``), then ``ln``."""

    def __init__(
        self,
        seq_length: int,
        num_layers: int,
        num_heads: int,
        hidden_dim: int,
        mlp_dim: int,
        dropout: float,
        attention_dropout: float,
        norm_layer: Callable[..., Module] = partial(LayerNorm, eps=1e-6),
    ) -> None:
        super().__init__()
        self.pos_embedding = Parameter(empty(1, seq_length, hidden_dim))
        init.normal_(self.pos_embedding, std=0.02)  # from BERT
        self.dropout = Dropout(dropout)
        layers: OrderedDict[str, Module] = OrderedDict()
        for i in range(num_layers):
            layers[f"encoder_layer_{i}"] = EncoderBlock(
                num_heads, hidden_dim, mlp_dim, dropout, attention_dropout, norm_layer
            )
        self.layers = Sequential(layers)
        self.ln = norm_layer(hidden_dim)

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() != 3:
            raise AssertionError(f"Expected (batch_size, seq_length, hidden_dim) got {tuple(input.shape)}")
        return self.ln(self.layers(self.dropout(input + self.pos_embedding)))


class VisionTransformer(Module):
    """Vision Transformer (arXiv:2010.11929) as torchvision builds it.

    Args:
        image_size: input height and width (fixed: the position embedding has one row per patch).
        patch_size: side of the square patches; must divide ``image_size``.
        num_layers, num_heads, hidden_dim, mlp_dim: the encoder's size. Smaller configurations are
            built here directly, e.g. ``VisionTransformer(32, 16, 2, 2, 32, 64)``.
        representation_size: if set, a ``pre_logits`` Linear + Tanh before the head.

    Example::

        >>> model = VisionTransformer(32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64)
        >>> model(onnxnn.randn(1, 3, 32, 32)).shape
        onnxnn.Size([1, 1000])
    """

    def __init__(
        self,
        image_size: int,
        patch_size: int,
        num_layers: int,
        num_heads: int,
        hidden_dim: int,
        mlp_dim: int,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        num_classes: int = 1000,
        representation_size: Optional[int] = None,
        norm_layer: Callable[..., Module] = partial(LayerNorm, eps=1e-6),
    ) -> None:
        super().__init__()
        if image_size % patch_size != 0:
            raise ValueError("Input shape indivisible by patch size!")
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.mlp_dim = mlp_dim
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.num_classes = num_classes
        self.representation_size = representation_size
        self.norm_layer = norm_layer
        self.conv_proj = Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2
        self.class_token = Parameter(zeros(1, 1, hidden_dim))
        seq_length += 1
        self.encoder = Encoder(
            seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout, norm_layer
        )
        self.seq_length = seq_length
        heads_layers: OrderedDict[str, Module] = OrderedDict()
        if representation_size is None:
            heads_layers["head"] = Linear(hidden_dim, num_classes)
        else:
            heads_layers["pre_logits"] = Linear(hidden_dim, representation_size)
            heads_layers["act"] = Tanh()
            heads_layers["head"] = Linear(representation_size, num_classes)
        self.heads = Sequential(heads_layers)

        fan_in = self.conv_proj.in_channels * self.conv_proj.kernel_size[0] * self.conv_proj.kernel_size[1]
        init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
        init.zeros_(self.conv_proj.bias)  # type: ignore[arg-type]  # Conv2d's default bias=True
        if representation_size is not None:
            fan_in = self.heads.pre_logits.in_features
            init.trunc_normal_(self.heads.pre_logits.weight, std=math.sqrt(1 / fan_in))
            init.zeros_(self.heads.pre_logits.bias)
        init.zeros_(self.heads.head.weight)
        init.zeros_(self.heads.head.bias)

    def _process_input(self, x: Tensor) -> Tensor:
        n, c, h, w = x.shape
        p = self.patch_size
        if h != self.image_size or w != self.image_size:
            raise AssertionError(f"Wrong image size! Expected {self.image_size} but got {h} x {w}")
        # (n, c, h, w) -> (n, hidden_dim, n_h * n_w) -> (n, seq, hidden_dim): the encoder's layout.
        x = self.conv_proj(x)
        x = x.reshape(n, self.hidden_dim, (h // p) * (w // p))
        return x.permute(0, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        x = self._process_input(x)
        n = x.shape[0]
        batch_class_token = self.class_token.expand(n, -1, -1)
        x = cat([batch_class_token, x], dim=1)
        x = self.encoder(x)
        # The class token's output classifies the image.
        return self.heads(x[:, 0])


def _vision_transformer(
    patch_size: int, num_layers: int, num_heads: int, hidden_dim: int, mlp_dim: int, weights: WeightsPath, **kwargs
) -> VisionTransformer:
    image_size = kwargs.pop("image_size", 224)
    model = VisionTransformer(
        image_size=image_size,
        patch_size=patch_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        mlp_dim=mlp_dim,
        **kwargs,
    )
    return load_weights(model, weights)


def vit_b_16(*, weights: WeightsPath = None, **kwargs) -> VisionTransformer:
    """ViT-B/16. ``weights``: a local torchvision state_dict file; kwargs go to :class:`VisionTransformer`."""
    return _vision_transformer(16, 12, 12, 768, 3072, weights, **kwargs)


def vit_b_32(*, weights: WeightsPath = None, **kwargs) -> VisionTransformer:
    """ViT-B/32. ``weights``: a local torchvision state_dict file."""
    return _vision_transformer(32, 12, 12, 768, 3072, weights, **kwargs)


def vit_l_16(*, weights: WeightsPath = None, **kwargs) -> VisionTransformer:
    """ViT-L/16. ``weights``: a local torchvision state_dict file."""
    return _vision_transformer(16, 24, 16, 1024, 4096, weights, **kwargs)


def vit_l_32(*, weights: WeightsPath = None, **kwargs) -> VisionTransformer:
    """ViT-L/32. ``weights``: a local torchvision state_dict file."""
    return _vision_transformer(32, 24, 16, 1024, 4096, weights, **kwargs)


def vit_h_14(*, weights: WeightsPath = None, **kwargs) -> VisionTransformer:
    """ViT-H/14. ``weights``: a local torchvision state_dict file."""
    return _vision_transformer(14, 32, 16, 1280, 5120, weights, **kwargs)
