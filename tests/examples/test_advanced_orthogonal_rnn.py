"""examples/advanced/orthogonal_rnn.py: the loss falls while the parametrized recurrent weight stays
orthogonal to float32 rounding, and the exported ONNX file computes what the model does."""

from __future__ import annotations

import re

import numpy as np
from example_scripts import EXAMPLES, run_script

SCRIPT = EXAMPLES / "advanced" / "orthogonal_rnn.py"


def test_trains_an_orthogonal_rnn_and_exports_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    output, namespace = run_script(SCRIPT, monkeypatch)
    printed = re.findall(r"^epoch (\d+)  loss ([0-9.]+)  max\|W\^T W - I\| ([0-9.e+-]+)$", output, re.MULTILINE)
    assert [int(epoch) for epoch, _, _ in printed] == list(range(1, namespace["EPOCHS"] + 1))
    losses = [float(loss) for _, loss, _ in printed]
    assert losses == [round(loss, 5) for loss in namespace["losses"]]
    # The variance of the target (uniform on [-1, 1]) is 1/3: the model learns to recall it.
    assert losses[-1] < 0.5 * losses[0]
    # W^T W = I within ten units of float32 roundoff per row (PyTorch's own orthogonality check).
    tolerance = 10 * namespace["HIDDEN_SIZE"] * np.finfo(np.float32).eps
    assert all(float(error) < tolerance for _, _, error in printed)
    assert "ParametrizedRNN.parametrizations.weight_hh_l0" in output
    assert "'rnn.parametrizations.weight_hh_l0.original'" in output
    # onnxruntime's output is the model's within float32 rounding of a short recurrence.
    assert namespace["export_difference"] < 1e-5
