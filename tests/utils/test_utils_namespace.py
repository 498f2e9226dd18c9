"""``torch.utils.data`` after ``import torch``: onnxnn.utils and its data package load on first use."""

import subprocess
import sys

import pytest

import onnxnn


def test_utils_data_is_reachable_from_the_top_level():
    import onnxnn.utils.data.distributed as distributed

    data = onnxnn.utils.data
    assert data.DataLoader.__module__ == "onnxnn.utils.data.dataloader"
    assert data.DistributedSampler is data.distributed.DistributedSampler is distributed.DistributedSampler


@pytest.mark.parametrize("owner, name", [("onnxnn", "no_such_name"), ("onnxnn.utils", "no_such_module")])
def test_an_unknown_attribute_is_an_attribute_error(owner, name):
    module = sys.modules[owner] if owner in sys.modules else __import__(owner, fromlist=["_"])
    with pytest.raises(AttributeError, match=f"module '{owner}' has no attribute '{name}'"):
        getattr(module, name)


def test_importing_onnxnn_leaves_the_data_package_unloaded():
    # A fresh process: this one's tests have imported it already.
    loaded = "print('onnxnn.utils.data' in sys.modules)"
    code = f"import sys, onnxnn; {loaded}; onnxnn.utils.data.DataLoader; {loaded}"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert output == ["False", "True"]
