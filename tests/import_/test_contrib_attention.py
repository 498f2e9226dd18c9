"""GroupQueryAttention's cache semantics in imported models (onnxnn/import_/contrib_attention.py).

The decoding case with sequences of different lengths in one batch (``seqlens_k`` per sequence
with a past cache, possibly longer than every sequence as when the cache is preallocated),
right-padded first prompts, ``position_ids`` for the rotary embedding, ``attention_bias``,
non-causal attention and the softmax sinks (``smooth_softmax``, ``head_sink``): each a one-node
model run by onnxruntime's CPU provider as the reference, on both executors, gradients by float64
central differences; tolerances as in ``contrib_cases.py`` (its module docstring), whose
helpers run the checks.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from onnxnn.import_ import from_onnx

from .contrib_cases import (
    GQA_COS,
    GQA_HEAD,
    GQA_SIN,
    HEADS,
    Case,
    _arrays,
    _inputs,
    _model,
    _normal,
    _onnxruntime_outputs,
    check_first_output_gradients,
    check_forward,
    check_reexport,
    gradient_runs,
)

BATCH, PAST = 2, 3


def _lengths(seqlens_k, total):
    return np.array(seqlens_k, np.int32), np.array(total, np.int32)


# onnxruntime's CPU kernel reads no past when the present outputs are not asked for: with a past,
# cases ask for all three outputs.
def _decoding(seqlens_k, total=PAST + 1, capacity=PAST, rotary=True, extra=()):
    """Inputs of one decoding step: query, key, value of one position, a cache of ``capacity``."""
    return _inputs(
        _normal(BATCH, 1, HEADS * GQA_HEAD),
        _normal(BATCH, 1, GQA_HEAD),
        _normal(BATCH, 1, GQA_HEAD),
        _normal(BATCH, 1, capacity, GQA_HEAD),
        _normal(BATCH, 1, capacity, GQA_HEAD),
        *_lengths(seqlens_k, total),
        *((GQA_COS, GQA_SIN) if rotary else (None, None)),
        *extra,
    )


def _prompt(seqlens_k, length=4, rotary=False, extra=()):
    """Inputs of a first prompt of ``length`` positions (no cache), right-padded to it."""
    return _inputs(
        _normal(BATCH, length, HEADS * GQA_HEAD),
        _normal(BATCH, length, GQA_HEAD),
        _normal(BATCH, length, GQA_HEAD),
        None,
        None,
        *_lengths(seqlens_k, length),
        *((GQA_COS, GQA_SIN) if rotary else (None, None)),
        *extra,
    )


def _gqa(inputs, id: str, num_outputs: int = 3, **attrs) -> Case:
    return Case(
        "GroupQueryAttention",
        inputs,
        {"num_heads": HEADS, "kv_num_heads": 1, **attrs},
        num_outputs=num_outputs,
        terms=30,
        scale=16.0,
        id=id,
    )


def _positions(*rows):
    return np.array(rows, np.int64)


GQA_CASES = [
    _gqa(_decoding([3, 2]), "GroupQueryAttention-decoding-ragged-rotary", do_rotary=1),
    _gqa(
        _decoding([3, 1], extra=(_positions([7], [4]),)),
        "GroupQueryAttention-decoding-ragged-position_ids",
        do_rotary=1,
    ),
    _gqa(_decoding([4, 2], total=5, capacity=6, rotary=False), "GroupQueryAttention-decoding-preallocated-cache"),
    _gqa(_decoding([3, 2], rotary=False), "GroupQueryAttention-decoding-ragged-window", local_window_size=2),
    _gqa(_prompt([3, 1]), "GroupQueryAttention-prompt-right-padded"),
    # The first prompt reads only position_ids' first element; the other positions follow it.
    _gqa(
        _prompt([3, 3], rotary=True, extra=(_positions([2, 4, 6, 8], [1, 1, 1, 1]),)),
        "GroupQueryAttention-prompt-position_ids",
        do_rotary=1,
    ),
    _gqa(
        _prompt([3, 2], extra=(None, _normal(1, HEADS, 4, 4))),
        "GroupQueryAttention-prompt-attention_bias-softcap",
        softcap=2.0,
    ),
    _gqa(
        _decoding([3, 2], rotary=False, extra=(None, _normal(BATCH, 1, 1, 4))),
        "GroupQueryAttention-decoding-attention_bias",
    ),
    _gqa(_prompt([3, 2]), "GroupQueryAttention-prompt-not-causal", causal=0),
    _gqa(_prompt([3, 3]), "GroupQueryAttention-smooth_softmax", num_outputs=1, smooth_softmax=1),
    _gqa(
        _decoding([3, 2], rotary=False, extra=(None, None, _normal(HEADS))),
        "GroupQueryAttention-decoding-head_sink",
    ),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case", GQA_CASES, ids=str)
def test_forward_matches_onnxruntime(case, executor):
    check_forward(case, executor)


@pytest.mark.parametrize("case, executor", gradient_runs(GQA_CASES), ids=lambda value: str(value))
def test_gradients_match_finite_differences(case, executor):
    check_first_output_gradients(case, executor)


def _module_and_inputs(case: Case, **replaced):
    """The imported case with some inputs replaced (position: array) after onnxruntime typed its outputs."""
    outputs = [(output.shape, output.dtype) for output in _onnxruntime_outputs(case)]
    arrays = _arrays(case, np.float32)
    for position, array in replaced.items():
        arrays[int(position.removeprefix("in_"))] = array
    return from_onnx(_model(case, arrays, outputs)), [array for array in arrays if array is not None]


def test_sequence_lengths_that_do_not_fit_the_cache_are_refused_naming_the_node():
    module, feeds = _module_and_inputs(GQA_CASES[0], in_5=np.array([3, 5], np.int32))
    with pytest.raises(ValueError, match="GroupQueryAttention node 'GroupQueryAttention_0'.*seqlens_k \\[3, 5\\]"):
        module(*feeds)


@pytest.mark.parametrize(
    "attrs, message",
    [({"k_quant_type": "PER_TENSOR"}, "k_quant_type='PER_TENSOR'"), ({"sliding_window_cache": 1}, "sliding_window")],
)
def test_quantized_or_windowed_cache_is_refused_naming_node_and_attribute(attrs, message):
    case = dataclasses.replace(GQA_CASES[2], attrs={**GQA_CASES[2].attrs, **attrs})
    outputs = [(output.shape, output.dtype) for output in _onnxruntime_outputs(GQA_CASES[2])]
    arrays = _arrays(case, np.float32)
    module = from_onnx(_model(case, arrays, outputs))
    with pytest.raises(NotImplementedError, match=f"GroupQueryAttention node 'GroupQueryAttention_0'.*{message}"):
        module(*[array for array in arrays if array is not None])


@pytest.mark.parametrize("case", [GQA_CASES[1], GQA_CASES[2], GQA_CASES[4]], ids=str)
def test_reexported_module_runs_in_onnxruntime(case):
    # The lengths seqlens_k gives are read when the module runs: the export holds them as constants.
    check_reexport(case)
