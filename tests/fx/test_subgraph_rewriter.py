"""replace_pattern swaps each occurrence of a traced pattern for a replacement."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import fx, nn


class Swishes(nn.Module):
    def forward(self, x, y):
        a = onnxnn.sigmoid(x) * x  # matches
        b = onnxnn.sigmoid(y) * y  # matches
        gate = onnxnn.sigmoid(a)
        c = gate * a  # matches too (with a as the placeholder)
        kept = onnxnn.sigmoid(b)
        d = kept * b + kept  # kept is used outside the pattern: not replaced
        return c + d


def pattern(x):
    return onnxnn.sigmoid(x) * x


def replacement(x):
    return F.silu(x)


def test_every_clean_occurrence_is_replaced_and_outputs_are_kept():
    gm = fx.symbolic_trace(Swishes())
    x, y = onnxnn.randn(5), onnxnn.randn(5)
    before = gm(x, y).numpy()
    matches = fx.replace_pattern(gm, pattern, replacement)
    # As in torch.fx, the anchor is the pattern's returned node; nodes_map gives the replaced node.
    assert {match.anchor.name for match in matches} == {"mul"}
    assert [match.nodes_map[match.anchor].name for match in matches] == ["mul", "mul_1", "mul_2"]
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(F.silu) == 3 and targets.count(onnxnn.sigmoid) == 1
    # silu(v) = v * sigmoid(v): float32 rounding of a different op order
    np.testing.assert_allclose(gm(x, y).numpy(), before, rtol=1e-5, atol=1e-6)


def test_patterns_and_replacements_must_agree_on_their_arguments():
    gm = fx.symbolic_trace(Swishes())
    with pytest.raises(ValueError, match="takes 1 arguments, the replacement 2"):
        fx.replace_pattern(gm, pattern, lambda x, y: x + y)
