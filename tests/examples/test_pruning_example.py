"""examples/advanced/pruning.py: PyTorch's pruning tutorial on a LeNet, and its smaller ONNX export."""

from __future__ import annotations

import re

import numpy as np
from example_scripts import EXAMPLES, run_script

from onnxnn.nn.utils import prune


def test_pruning_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed, namespace = run_script(EXAMPLES / "advanced" / "pruning.py", monkeypatch)

    # The tutorial's first half: the reparametrization, its history and the permanent removal.
    assert "['weight_orig', 'bias_orig']\n['weight_mask', 'bias_mask']\n" in printed
    assert re.search(r"\[<onnxnn\.nn\.utils\.prune\.RandomUnstructured .*LnStructured object", printed)
    assert "'features.0.weight_orig', 'features.0.bias_orig', 'features.0.weight_mask'" in printed
    assert "['bias_orig', 'weight']\n" in printed

    # The second half: sparsity per layer and overall, as the masks say.
    model = namespace["model"]
    names = ("conv1", "conv2", "fc1", "fc2", "fc3")
    for name, (layer, _) in zip(names, namespace["parameters_to_prune"]):
        expected = 100.0 * float((layer.weight_mask.numpy() == 0).mean())
        assert f"Sparsity in {name}.weight: {expected:.2f}%" in printed
    assert prune.is_pruned(model)
    assert re.search(r"Global sparsity: \d+\.\d\d%", printed)

    # The pruned file: smaller than the dense one by more than the pruned fraction alone would
    # give (channels are gone too), and onnxruntime agrees with the pruned module.
    dense = int(re.search(r"Dense ONNX file: (\d+) bytes", printed).group(1))
    pruned = int(re.search(r"Pruned ONNX file: (\d+) bytes", printed).group(1))
    assert dense == (tmp_path / "lenet_dense.onnx").stat().st_size
    assert pruned == (tmp_path / "lenet_pruned.onnx").stat().st_size
    zeros = namespace["zeros"] / namespace["total"]
    assert pruned < dense * (1.0 - zeros) + 8192
    assert namespace["difference"] < 1e-5
    assert np.isfinite(namespace["exported"]).all()
