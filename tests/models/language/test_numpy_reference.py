"""onnxnn's models in float64 against the plain numpy statement of the architectures
(tests/models/language/numpy_reference.py), with padding, on both executors: the numerics are
checked where transformers is not installed too."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

from . import numpy_reference
from .cases import build, reference, token_ids

EXECUTORS = ("onnxruntime", "kernels")
CASES = {"bert_model": numpy_reference.bert, "gpt2_model": numpy_reference.gpt2, "llama_model": numpy_reference.llama}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", list(CASES))
def test_float64_forward_equals_the_numpy_statement(name, executor):
    model = build(name).double()
    with onnxnn.no_grad():  # weights away from the tiny init, so every term matters
        for parameter in model.parameters():
            parameter.add_(onnxnn.randn(*parameter.shape, dtype=onnxnn.float64) * 0.2)
    state = {key: value.numpy() for key, value in model.state_dict().items()}
    ids = token_ids(2, 6)
    mask = np.ones_like(ids)
    mask[1, :2] = 0
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        out = model(onnxnn.tensor(ids), attention_mask=onnxnn.tensor(mask))
        actual = out.last_hidden_state.numpy()
    expected = CASES[name](state, reference(name)["config"], ids, mask)
    if name == "bert_model":
        expected, pooled = expected
        np.testing.assert_allclose(out.pooler_output.numpy(), pooled, rtol=0, atol=1e-10)
    else:
        # Padded query positions attend over masked keys only: arbitrary in both, left out.
        actual, expected = actual[mask.astype(bool)], expected[mask.astype(bool)]
    # float64: a few dozen chained dot products of <= 48 terms, through normalizations that
    # rescale by O(1): rounding stays far below 1e-10 of values of O(1). LLaMA's rotary cos/sin
    # are rounded to float32 (as transformers does), one float32 rounding of O(1) factors.
    tolerance = 1e-10 + (16 * np.finfo(np.float32).eps if name == "llama_model" else 0.0)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance * max(1.0, np.abs(expected).max()))
