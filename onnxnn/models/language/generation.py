"""Text generation for the decoders: greedy and sampled, with or without a key/value cache.

With the cache (the default), the prompt is run once and each later step feeds only the newest
token, attending to the keys and values the earlier steps left in ``past_key_values``; without it,
every step recomputes the whole sequence. Both give the same tokens: the cache only saves work.

Sampling draws from onnxnn's random generator (``onnxnn.manual_seed`` makes it reproducible, or
pass ``generator=``), after transformers' logits processors in their order: temperature, top-k,
top-p.
"""

from __future__ import annotations

import numpy as np

from ...runtime.creation import tensor
from ...runtime.grad_mode import no_grad
from ...runtime.ops.random_samplers import multinomial
from ...runtime.tensor import Tensor

__all__ = ["GenerationMixin", "generate"]


def _positions(mask: np.ndarray) -> np.ndarray:
    """Each token's position counting only attended tokens (left padding), as transformers' generate."""
    positions = np.cumsum(mask, axis=-1) - 1
    return np.where(mask == 0, 1, positions).astype(np.int64)


def _filter_logits(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    """Temperature, then top-k, then top-p (nucleus) filtering: removed tokens get ``-inf``."""
    logits = logits / temperature
    if top_k is not None and top_k > 0:
        k = min(top_k, logits.shape[-1])
        kth = -np.sort(-logits, axis=-1)[:, k - 1 : k]
        logits = np.where(logits < kth, -np.inf, logits)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(logits, axis=-1, kind="stable")  # ascending, as transformers' TopPLogitsWarper
        ordered = np.take_along_axis(logits, order, axis=-1)
        shifted = np.exp(ordered - ordered[:, -1:])
        cumulative = np.cumsum(shifted / shifted.sum(-1, keepdims=True), axis=-1)
        remove = cumulative <= 1 - top_p
        remove[:, -1] = False  # always keep the most likely token
        removed = np.zeros_like(remove)
        np.put_along_axis(removed, order, remove, axis=-1)
        logits = np.where(removed, -np.inf, logits)
    return logits


def generate(
    model,
    input_ids: Tensor,
    max_new_tokens: int = 20,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    attention_mask: Tensor | None = None,
    use_cache: bool = True,
    generator=None,
) -> Tensor:
    """Continues each prompt in ``input_ids`` by up to ``max_new_tokens`` tokens.

    Args:
        model: a causal LM whose forward takes ``(input_ids, past_key_values=, attention_mask=,
            position_ids=, use_cache=)`` and returns ``logits`` (and ``past_key_values``).
        input_ids: ``(batch, length)`` int64 prompts (left-padded when their lengths differ, with
            ``attention_mask`` marking the real tokens).
        max_new_tokens: the most tokens to add.
        do_sample: sample from the softmax of the filtered logits instead of taking the argmax.
        temperature, top_k, top_p: sampling's logits processors (ignored when greedy).
        eos_token_id: a sequence that produced it gets ``pad_token_id`` afterwards; generation
            stops once every sequence has.
        pad_token_id: what finished sequences are padded with (default: ``eos_token_id``).
        attention_mask: ``(batch, length)`` 1 for prompt tokens, 0 for padding.
        use_cache: reuse keys and values between steps (same tokens, less work).
        generator: the ``onnxnn.Generator`` to sample with (default: the global one).

    Returns:
        ``(batch, length + new)`` int64 tensor: the prompts and their continuations.

    Example::

        >>> onnxnn.manual_seed(0)
        >>> model.generate(onnxnn.tensor([[1, 2, 3]]), max_new_tokens=5, do_sample=True, top_k=10)
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be (batch_size, sequence_length), got shape {list(input_ids.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"`max_new_tokens` must be a non-negative integer, got {max_new_tokens}")
    if do_sample and not temperature > 0:
        raise ValueError(f"`temperature` (={temperature}) has to be a strictly positive float")
    if top_p is not None and not 0.0 <= top_p <= 1.0:
        raise ValueError(f"`top_p` has to be a float > 0 and < 1, but is {top_p}")
    if pad_token_id is None:
        pad_token_id = eos_token_id
    ids = np.asarray(input_ids.numpy(force=True), dtype=np.int64)
    mask = None if attention_mask is None else np.asarray(attention_mask.numpy(force=True), dtype=np.int64)
    finished = np.zeros(ids.shape[0], dtype=bool)
    past, step_ids = None, ids
    with no_grad():
        for _ in range(max_new_tokens):
            kwargs = {}
            if mask is not None:
                positions = _positions(mask)
                kwargs["attention_mask"] = tensor(mask)
                kwargs["position_ids"] = tensor(positions[:, -step_ids.shape[1] :] if use_cache else positions)
            if use_cache:
                out = model(tensor(step_ids), past_key_values=past, use_cache=True, **kwargs)
                past = out.past_key_values
            else:
                out = model(tensor(ids), **kwargs)
            logits = np.asarray(out.logits[:, -1, :].float().numpy(force=True), dtype=np.float64)
            if do_sample:
                filtered = _filter_logits(logits, temperature, top_k, top_p)
                probabilities = np.exp(filtered - filtered.max(-1, keepdims=True))
                chosen = multinomial(tensor(probabilities), 1, generator=generator).numpy(force=True)[:, 0]
            else:
                chosen = logits.argmax(-1)
            chosen = chosen.astype(np.int64)
            if eos_token_id is not None:
                chosen = np.where(finished, pad_token_id, chosen)  # type: ignore[arg-type]  # set with eos_token_id
                finished |= chosen == eos_token_id
            ids = np.concatenate([ids, chosen[:, None]], axis=1)
            if mask is not None:
                mask = np.concatenate([mask, np.ones((mask.shape[0], 1), dtype=np.int64)], axis=1)
            step_ids = chosen[:, None]
            if finished.all():
                break
    return tensor(ids)


class GenerationMixin:
    """Gives a causal LM ``generate`` (see :func:`generate`)."""

    def generate(self, input_ids: Tensor, max_new_tokens: int = 20, **kwargs) -> Tensor:
        """Continues the prompts in ``input_ids``; see :func:`onnxnn.models.language.generation.generate`."""
        return generate(self, input_ids, max_new_tokens, **kwargs)
