"""Swin Transformer (V1) Tiny/Small/Base with torchvision's module tree, parameter names and initialization."""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional

import numpy as np

from ...nn import AdaptiveAvgPool2d, Buffer, Conv2d, Flatten, LayerNorm, Linear, Module, Parameter, Sequential, init
from ...nn import functional as F
from ...runtime.creation import from_numpy, zeros
from ...runtime.ops.arrange import roll
from ...runtime.ops.shape import cat
from ...runtime.tensor import Tensor
from ._layers import StochasticDepth
from ._weights import WeightsPath, load_weights
from .convnext import Permute
from .vit import MLPBlock

__all__ = ["SwinTransformer", "swin_t", "swin_s", "swin_b"]


class PatchMerging(Module):
    """Halves the resolution: each 2x2 neighbourhood's channel vectors concatenated, normalized, projected to 2C."""

    def __init__(self, dim: int, norm_layer: Callable[..., Module] = LayerNorm) -> None:
        super().__init__()
        self.dim = dim
        self.reduction = Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x: Tensor) -> Tensor:
        height, width = x.shape[-3], x.shape[-2]
        x = F.pad(x, (0, 0, 0, width % 2, 0, height % 2))  # odd sizes: pad one zero row/column
        x0 = x[..., 0::2, 0::2, :]
        x1 = x[..., 1::2, 0::2, :]
        x2 = x[..., 0::2, 1::2, :]
        x3 = x[..., 1::2, 1::2, :]
        return self.reduction(self.norm(cat([x0, x1, x2, x3], -1)))


def _relative_position_index(window_size: list[int]) -> np.ndarray:
    """For each (query, key) pair of a window, the row of the bias table of their relative offset."""
    coords = np.stack(np.meshgrid(np.arange(window_size[0]), np.arange(window_size[1]), indexing="ij"))
    coords_flatten = coords.reshape(2, -1)
    relative = (coords_flatten[:, :, None] - coords_flatten[:, None, :]).transpose(1, 2, 0)
    relative[:, :, 0] += window_size[0] - 1
    relative[:, :, 1] += window_size[1] - 1
    relative[:, :, 0] *= 2 * window_size[1] - 1
    return relative.sum(-1).reshape(-1).astype(np.int64)


def _shift_mask(pad_h: int, pad_w: int, window_size: list[int], shift_size: list[int]) -> np.ndarray:
    """-100 where a query and a key of one shifted window came from different regions before the roll, else 0."""
    regions = np.zeros((pad_h, pad_w), dtype=np.float32)
    h_slices = ((0, -window_size[0]), (-window_size[0], -shift_size[0]), (-shift_size[0], None))
    w_slices = ((0, -window_size[1]), (-window_size[1], -shift_size[1]), (-shift_size[1], None))
    count = 0
    for h in h_slices:
        for w in w_slices:
            regions[h[0] : h[1], w[0] : w[1]] = count
            count += 1
    num_windows = (pad_h // window_size[0]) * (pad_w // window_size[1])
    windows = regions.reshape(pad_h // window_size[0], window_size[0], pad_w // window_size[1], window_size[1])
    regions = windows.transpose(0, 2, 1, 3).reshape(num_windows, window_size[0] * window_size[1])
    difference = regions[:, None, :] - regions[:, :, None]
    return np.where(difference != 0, np.float32(-100.0), np.float32(0.0))


class ShiftedWindowAttention(Module):
    """Multi-head self-attention inside (shifted) windows, with a learned relative position bias."""

    def __init__(
        self,
        dim: int,
        window_size: list[int],
        shift_size: list[int],
        num_heads: int,
        qkv_bias: bool = True,
        proj_bias: bool = True,
        attention_dropout: float = 0.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if len(window_size) != 2 or len(shift_size) != 2:
            raise ValueError("window_size and shift_size must be of length 2")
        self.window_size = window_size
        self.shift_size = shift_size
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.qkv = Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = Linear(dim, dim, bias=proj_bias)
        table_rows = (2 * window_size[0] - 1) * (2 * window_size[1] - 1)
        self.relative_position_bias_table = Parameter(zeros(table_rows, num_heads))
        init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.relative_position_index = Buffer(from_numpy(_relative_position_index(window_size)))

    def get_relative_position_bias(self) -> Tensor:
        n = self.window_size[0] * self.window_size[1]
        bias = self.relative_position_bias_table[self.relative_position_index].reshape(n, n, -1)
        return bias.permute(2, 0, 1).unsqueeze(0)

    def forward(self, input: Tensor) -> Tensor:
        window, heads = self.window_size, self.num_heads
        batch, height, width, channels = input.shape
        pad_r = (window[1] - width % window[1]) % window[1]
        pad_b = (window[0] - height % window[0]) % window[0]
        x = F.pad(input, (0, 0, 0, pad_r, 0, pad_b))
        pad_h, pad_w = height + pad_b, width + pad_r
        shift = list(self.shift_size)
        # A window as large as the map sees all of it: shifting would change nothing but the mask.
        if window[0] >= pad_h:
            shift[0] = 0
        if window[1] >= pad_w:
            shift[1] = 0
        if sum(shift) > 0:
            x = roll(x, shifts=(-shift[0], -shift[1]), dims=(1, 2))
        num_windows = (pad_h // window[0]) * (pad_w // window[1])
        tokens = window[0] * window[1]
        x = x.reshape(-1, pad_h // window[0], window[0], pad_w // window[1], window[1], channels)
        x = x.permute(0, 1, 3, 2, 4, 5).reshape(-1, tokens, channels)  # (batch * windows, tokens, C)

        qkv = F.linear(x, self.qkv.weight, self.qkv.bias)
        qkv = qkv.reshape(-1, tokens, 3, heads, channels // heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * (channels // heads) ** -0.5).matmul(k.transpose(-2, -1))
        attn = attn + self.get_relative_position_bias()
        if sum(shift) > 0:
            mask = from_numpy(_shift_mask(pad_h, pad_w, window, shift)).to(attn.dtype)
            attn = attn.reshape(-1, num_windows, heads, tokens, tokens) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.reshape(-1, heads, tokens, tokens)
        attn = F.softmax(attn, dim=-1)
        attn = F.dropout(attn, p=self.attention_dropout, training=self.training)
        x = attn.matmul(v).transpose(1, 2).reshape(-1, tokens, channels)
        x = F.linear(x, self.proj.weight, self.proj.bias)
        x = F.dropout(x, p=self.dropout, training=self.training)

        x = x.reshape(-1, pad_h // window[0], pad_w // window[1], window[0], window[1], channels)
        x = x.permute(0, 1, 3, 2, 4, 5).reshape(-1, pad_h, pad_w, channels)
        if sum(shift) > 0:
            x = roll(x, shifts=(shift[0], shift[1]), dims=(1, 2))
        return x[:, :height, :width, :]


class SwinTransformerBlock(Module):
    """``x + attn(norm1(x))``, then ``+ mlp(norm2(.))``, each branch under stochastic depth."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        window_size: list[int],
        shift_size: list[int],
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        stochastic_depth_prob: float = 0.0,
        norm_layer: Callable[..., Module] = LayerNorm,
    ) -> None:
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = ShiftedWindowAttention(
            dim, window_size, shift_size, num_heads, attention_dropout=attention_dropout, dropout=dropout
        )
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.norm2 = norm_layer(dim)
        self.mlp = MLPBlock(dim, int(dim * mlp_ratio), dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformer(Module):
    """Swin Transformer (arXiv:2103.14030) as torchvision builds it: ``features``, ``norm``, ``head``.

    Args:
        patch_size: the patch embedding's kernel and stride.
        embed_dim: channels after the patch embedding (doubled by each patch merging).
        depths, num_heads: blocks and heads per stage.
        window_size: attention window; odd blocks shift it by half.
        stochastic_depth_prob: the last block's drop probability (earlier blocks' grow linearly to it).
    """

    def __init__(
        self,
        patch_size: list[int],
        embed_dim: int,
        depths: list[int],
        num_heads: list[int],
        window_size: list[int],
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        stochastic_depth_prob: float = 0.1,
        num_classes: int = 1000,
        norm_layer: Optional[Callable[..., Module]] = None,
    ) -> None:
        super().__init__()
        self.num_classes = num_classes
        if norm_layer is None:
            norm_layer = partial(LayerNorm, eps=1e-5)
        layers: list[Module] = [
            Sequential(
                Conv2d(3, embed_dim, kernel_size=(patch_size[0], patch_size[1]), stride=(patch_size[0], patch_size[1])),
                Permute([0, 2, 3, 1]),
                norm_layer(embed_dim),
            )
        ]
        total_stage_blocks = sum(depths)
        stage_block_id = 0
        for i_stage, depth in enumerate(depths):
            stage: list[Module] = []
            dim = embed_dim * 2**i_stage
            for i_layer in range(depth):
                sd_prob = stochastic_depth_prob * float(stage_block_id) / (total_stage_blocks - 1)
                stage.append(
                    SwinTransformerBlock(
                        dim,
                        num_heads[i_stage],
                        window_size=window_size,
                        shift_size=[0 if i_layer % 2 == 0 else w // 2 for w in window_size],
                        mlp_ratio=mlp_ratio,
                        dropout=dropout,
                        attention_dropout=attention_dropout,
                        stochastic_depth_prob=sd_prob,
                        norm_layer=norm_layer,
                    )
                )
                stage_block_id += 1
            layers.append(Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(PatchMerging(dim, norm_layer))
        self.features = Sequential(*layers)
        num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(num_features)
        self.permute = Permute([0, 3, 1, 2])
        self.avgpool = AdaptiveAvgPool2d(1)
        self.flatten = Flatten(1)
        self.head = Linear(num_features, num_classes)
        # Overrides the MLP blocks' own init, as torchvision's constructor does.
        for module in self.modules():
            if isinstance(module, Linear):
                init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.permute(self.norm(self.features(x)))
        return self.head(self.flatten(self.avgpool(x)))


def _swin(embed_dim: int, depths: list[int], num_heads: list[int], sd_prob: float, weights: WeightsPath, kwargs):
    kwargs.setdefault("stochastic_depth_prob", sd_prob)
    model = SwinTransformer([4, 4], embed_dim, depths, num_heads, [7, 7], **kwargs)
    return load_weights(model, weights)


def swin_t(*, weights: WeightsPath = None, **kwargs) -> SwinTransformer:
    """Swin-T. ``weights``: a local torchvision state_dict file; kwargs go to :class:`SwinTransformer`."""
    return _swin(96, [2, 2, 6, 2], [3, 6, 12, 24], 0.2, weights, kwargs)


def swin_s(*, weights: WeightsPath = None, **kwargs) -> SwinTransformer:
    """Swin-S. ``weights``: a local torchvision state_dict file."""
    return _swin(96, [2, 2, 18, 2], [3, 6, 12, 24], 0.3, weights, kwargs)


def swin_b(*, weights: WeightsPath = None, **kwargs) -> SwinTransformer:
    """Swin-B. ``weights``: a local torchvision state_dict file."""
    return _swin(128, [2, 2, 18, 2], [4, 8, 16, 32], 0.5, weights, kwargs)
