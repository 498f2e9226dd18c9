"""examples/advanced/quantization.py quantizes a trained classifier three ways: each quantized model
is smaller, agrees with the float model on most test inputs and keeps its accuracy, and the script
prints one row per model."""

from __future__ import annotations

import re

from example_scripts import EXAMPLES, run_script

SCRIPT = EXAMPLES / "advanced" / "quantization.py"


def test_quantized_models_are_smaller_and_agree_with_float(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    output, namespace = run_script(SCRIPT, monkeypatch)
    results = namespace["results"]
    assert list(results) == ["float", "dynamic int8", "static int8", "QAT int8"]
    rows = re.findall(
        r"^ *(.+?): +[0-9.]+ KiB +[0-9.]+ ms/batch .* accuracy ([0-9.]+) +agrees with float on", output, re.M
    )
    assert [name for name, _ in rows] == list(results)
    float_row = results["float"]
    assert float_row["accuracy"] > 0.5  # ten classes: chance is 0.1
    for name in ("dynamic int8", "static int8"):
        row = results[name]
        # Weights dominate the file: int8 storage makes it about 4x smaller.
        assert float_row["bytes"] / row["bytes"] > 3.5
        assert row["agreement"] > 0.95 and row["accuracy"] > float_row["accuracy"] - 0.03
    # QAT fine-tunes the weights (a different model), exported as float weights with Q/DQ pairs.
    assert results["QAT int8"]["accuracy"] > float_row["accuracy"] - 0.05
    assert list(tmp_path.iterdir()) == []  # nothing written
