"""MultiheadAttention: PyTorch's module, its parameters, initialization and options."""

from __future__ import annotations

from typing import Any

from ...runtime.creation import empty
from ...runtime.tensor import Tensor
from .. import functional as F
from ..functional._attention import packed_self_attention
from .. import init
from ..parameter import Parameter
from .linear import Linear
from .module import Module

__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear"]


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear layer; PyTorch's name for MultiheadAttention's output projection (same semantics)."""


class MultiheadAttention(Module):
    """Multi-head attention: ``Concat(head_1, ..., head_h) W^O``, ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.

    Args:
        embed_dim: total dimension of the model.
        num_heads: parallel attention heads; ``embed_dim`` must be divisible by it.
        dropout: dropout probability on the attention weights (training only). Default: 0.0.
        bias: add biases to the input and output projections. Default: ``True``.
        add_bias_kv: add learnable biases to the key and value sequences (one extra key). Default: ``False``.
        add_zero_attn: add a zero key and value (one extra key). Default: ``False``.
        kdim, vdim: feature sizes of key and value. Default: ``embed_dim``.
        batch_first: inputs and outputs are ``(N, L, E)`` rather than ``(L, N, E)``. Default: ``False``.

    Attributes:
        in_proj_weight: ``(3 * embed_dim, embed_dim)`` when ``kdim == vdim == embed_dim``, else
            ``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight``; xavier-uniform initialized.
        in_proj_bias: ``(3 * embed_dim)``, zeros. out_proj: the output Linear (bias zeros).
        bias_k, bias_v: ``(1, 1, embed_dim)``, xavier-normal initialized, with ``add_bias_kv``.

    Example::

        >>> mha = nn.MultiheadAttention(8, 2)
        >>> x = onnxnn.randn(5, 3, 8)
        >>> out, weights = mha(x, x, x)
        >>> out.shape, weights.shape
        (onnxnn.Size([5, 3, 8]), onnxnn.Size([3, 5, 5]))
    """

    __constants__ = ["batch_first"]

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                f"num_heads={num_heads} instead"
            )
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), **factory_kwargs))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), **factory_kwargs))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), **factory_kwargs))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), **factory_kwargs))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **factory_kwargs))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **factory_kwargs)
        if add_bias_kv:
            self.bias_k: Parameter | None = Parameter(empty((1, 1, embed_dim), **factory_kwargs))
            self.bias_v: Parameter | None = Parameter(empty((1, 1, embed_dim), **factory_kwargs))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attends ``query`` to ``key``/``value``; see :func:`onnxnn.nn.functional.multi_head_attention_forward`.

        Returns ``(output, weights)``; weights are None unless ``need_weights``.
        """
        batched = query.dim() == 3
        if (
            batched
            and query is key
            and key is value
            and key_padding_mask is None
            and attn_mask is None
            and not is_causal
            and self._qkv_same_embed_dim
            and self.bias_k is None
            and not self.add_zero_attn
            and query.shape[-1] == self.embed_dim
        ):
            # Plain self-attention (a transformer layer's): the same formula in half the ops.
            return packed_self_attention(
                query,
                self.num_heads,
                self.in_proj_weight,
                self.in_proj_bias,
                self.out_proj.weight,
                self.out_proj.bias,
                self.dropout,
                self.training,
                need_weights,
                average_attn_weights,
                self.batch_first,
            )
        if self.batch_first and batched:
            query, key, value = (t.transpose(1, 0) for t in (query, key, value))
        common: dict[str, Any] = dict(
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )
        if not self._qkv_same_embed_dim:
            output, weights = F.multi_head_attention_forward(
                query,
                key,
                value,
                self.embed_dim,
                self.num_heads,
                self.in_proj_weight,
                self.in_proj_bias,
                self.bias_k,
                self.bias_v,
                self.add_zero_attn,
                self.dropout,
                self.out_proj.weight,
                self.out_proj.bias,
                use_separate_proj_weight=True,
                q_proj_weight=self.q_proj_weight,
                k_proj_weight=self.k_proj_weight,
                v_proj_weight=self.v_proj_weight,
                **common,
            )
        else:
            output, weights = F.multi_head_attention_forward(
                query,
                key,
                value,
                self.embed_dim,
                self.num_heads,
                self.in_proj_weight,
                self.in_proj_bias,
                self.bias_k,
                self.bias_v,
                self.add_zero_attn,
                self.dropout,
                self.out_proj.weight,
                self.out_proj.bias,
                **common,
            )
        if self.batch_first and batched:
            return output.transpose(1, 0), weights
        return output, weights
