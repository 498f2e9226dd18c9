"""The vision zoo's state_dict keys, shapes and dtypes equal torchvision's (JSON from generate_reference_keys.py)."""

from __future__ import annotations

import pytest

from onnxnn.nn import init

from .common import REFERENCE, build, reference

NAMES = sorted(path.stem for path in REFERENCE.glob("*.json"))


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_layout_equals_torchvision(name):
    # The layout does not depend on the initial values; skipping the random fills keeps the deep models fast.
    with init._skipping_initialization():
        model = build(name)
    layout = [
        [key, list(value.shape), str(value.dtype).removeprefix("onnxnn.")] for key, value in model.state_dict().items()
    ]
    expected = reference(name)["state_dict"]
    assert [entry[0] for entry in layout] == [entry[0] for entry in expected]
    assert layout == expected
