"""Generation: greedy with the key/value cache equals greedy recomputing the whole prefix each
step; the cache's logits equal the full forward's; sampling is reproducible under manual_seed."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.models.language.generation import _filter_logits

from .cases import DECODERS, build, token_ids

# float64 weights: argmax ties between the cached and uncached paths are then out of reach
# (the two differ by rounding only, ~1e-16 relative).


@pytest.fixture(params=DECODERS)
def decoder(request):
    return build(request.param).double()


def test_greedy_with_the_cache_equals_greedy_without(decoder):
    ids = onnxnn.tensor(token_ids(3, 4))
    cached = decoder.generate(ids, max_new_tokens=6)
    recomputed = decoder.generate(ids, max_new_tokens=6, use_cache=False)
    assert cached.shape == (3, 10)
    np.testing.assert_array_equal(cached.numpy(), recomputed.numpy())
    np.testing.assert_array_equal(cached.numpy()[:, :4], ids.numpy())


def test_greedy_takes_the_argmax_of_the_full_forward(decoder):
    ids = token_ids(2, 3)
    generated = decoder.generate(onnxnn.tensor(ids), max_new_tokens=3).numpy()
    for step in range(3):
        prefix = generated[:, : 3 + step]
        logits = decoder(onnxnn.tensor(prefix)).logits.detach().numpy()
        np.testing.assert_array_equal(generated[:, 3 + step], logits[:, -1].argmax(-1))


def test_cached_logits_equal_the_full_forward(decoder):
    ids = token_ids(2, 7)
    full = decoder(onnxnn.tensor(ids)).logits.detach().numpy()
    prompt = decoder(onnxnn.tensor(ids[:, :4]), use_cache=True)
    step = decoder(onnxnn.tensor(ids[:, 4:]), past_key_values=prompt.past_key_values, use_cache=True)
    # float64 chains of a few dozen dot products: agreement to ~1e-12 of the scale.
    np.testing.assert_allclose(step.logits.detach().numpy(), full[:, 4:], rtol=0, atol=1e-12 * np.abs(full).max())


def test_left_padded_prompts_generate_as_if_unpadded(decoder):
    ids = token_ids(2, 5)
    padded = ids.copy()
    padded[1, :2] = 0
    mask = np.ones_like(ids)
    mask[1, :2] = 0
    batch = decoder.generate(onnxnn.tensor(padded), max_new_tokens=4, attention_mask=onnxnn.tensor(mask)).numpy()
    alone = decoder.generate(onnxnn.tensor(ids[1:, 2:]), max_new_tokens=4).numpy()
    np.testing.assert_array_equal(batch[1, 2:], alone[0])
    uncached = decoder.generate(
        onnxnn.tensor(padded), max_new_tokens=4, attention_mask=onnxnn.tensor(mask), use_cache=False
    )
    np.testing.assert_array_equal(batch, uncached.numpy())


def test_sequences_stop_at_eos_and_are_padded(decoder):
    ids = onnxnn.tensor(token_ids(2, 3))
    free = decoder.generate(ids, max_new_tokens=5).numpy()
    eos = int(free[0, 4])  # a token the first row generates
    stopped = decoder.generate(ids, max_new_tokens=5, eos_token_id=eos, pad_token_id=0).numpy()
    # Each row is the free continuation up to its first eos, then padding; generation ends early
    # only when every row has finished.
    expected = free.copy()
    ends = []
    for row in range(2):
        hits = np.flatnonzero(free[row, 3:] == eos)
        end = 3 + hits[0] + 1 if hits.size else free.shape[1]
        expected[row, end:] = 0
        ends.append(end)
    np.testing.assert_array_equal(stopped, expected[:, : max(ends)])


def test_sampling_is_reproducible_under_manual_seed(decoder):
    ids = onnxnn.tensor(token_ids(2, 3))
    options = {"max_new_tokens": 8, "do_sample": True, "temperature": 2.0, "top_k": 50, "top_p": 0.95}
    onnxnn.manual_seed(123)
    first = decoder.generate(ids, **options).numpy()
    onnxnn.manual_seed(123)
    second = decoder.generate(ids, **options).numpy()
    np.testing.assert_array_equal(first, second)
    onnxnn.manual_seed(124)
    other = decoder.generate(ids, **options).numpy()
    assert not np.array_equal(first, other)  # 16 draws over ~50 tokens each
    generator = onnxnn.Generator().manual_seed(7)
    third = decoder.generate(ids, generator=generator, **options).numpy()
    generator.manual_seed(7)
    np.testing.assert_array_equal(decoder.generate(ids, generator=generator, **options).numpy(), third)


def test_sampling_with_top_k_1_is_greedy(decoder):
    ids = onnxnn.tensor(token_ids(2, 3))
    sampled = decoder.generate(ids, max_new_tokens=4, do_sample=True, top_k=1)
    np.testing.assert_array_equal(sampled.numpy(), decoder.generate(ids, max_new_tokens=4).numpy())


def test_top_p_keeps_the_smallest_set_reaching_p():
    probabilities = np.array([[0.5, 0.3, 0.15, 0.05]])
    kept = np.isfinite(_filter_logits(np.log(probabilities), 1.0, None, 0.75))
    np.testing.assert_array_equal(kept, [[True, True, False, False]])
    kept = np.isfinite(_filter_logits(np.log(probabilities), 1.0, 2, None))
    np.testing.assert_array_equal(kept, [[True, True, False, False]])


def test_generate_refuses_bad_arguments(decoder):
    ids = onnxnn.tensor(token_ids(1, 3))
    with pytest.raises(ValueError, match="strictly positive"):
        decoder.generate(ids, do_sample=True, temperature=0.0)
    with pytest.raises(ValueError, match="top_p"):
        decoder.generate(ids, do_sample=True, top_p=1.5)
    with pytest.raises(ValueError, match="batch_size, sequence_length"):
        decoder.generate(onnxnn.tensor([1, 2, 3]))


def test_a_cache_and_mask_that_disagree_are_refused(decoder):
    ids = onnxnn.tensor(token_ids(1, 3))
    past = decoder(ids, use_cache=True).past_key_values
    with pytest.raises(ValueError, match="past_length \\+ sequence_length\\) = \\(\\*, 4\\)"):
        decoder(onnxnn.tensor([[5]]), past_key_values=past, attention_mask=onnxnn.ones(1, 1, dtype=onnxnn.int64))
    with pytest.raises(ValueError, match="one per layer"):
        decoder(onnxnn.tensor([[5]]), past_key_values=past[:1])
