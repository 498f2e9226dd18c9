"""The implementation-choice flags (foreach, fused, capturable) that torch.optim's optimizers take.

onnxnn computes every step as one fused graph, so these flags select nothing: each optimizer
accepts exactly the flags PyTorch's accepts, records them in ``defaults`` as PyTorch does, and
steps to the same values with any of them. ``maximize`` has its own reference tests beside each
algorithm; ``differentiable=True`` is refused (the step is computed outside autograd).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import onnxnn
from onnxnn import optim

# PyTorch 2.x's constructor flags per optimizer (torch.optim's signatures).
FLAGS = {
    optim.SGD: ("foreach", "fused"),
    optim.Adam: ("foreach", "capturable", "fused"),
    optim.AdamW: ("foreach", "capturable", "fused"),
    optim.RMSprop: ("foreach", "capturable"),
    optim.Adagrad: ("foreach", "fused"),
    optim.Adamax: ("foreach", "capturable"),
    optim.NAdam: ("foreach", "capturable"),
    optim.RAdam: ("foreach", "capturable"),
    optim.Adadelta: ("foreach", "capturable"),
    optim.Rprop: ("foreach", "capturable"),
    optim.ASGD: ("foreach", "capturable"),
}
CASES = [(cls, flag, value) for cls, flags in FLAGS.items() for flag in flags for value in (True, False)]


def _three_steps(optimizer_class, **options) -> np.ndarray:
    parameter = onnxnn.nn.Parameter(onnxnn.tensor(np.linspace(-1.0, 1.0, 6, dtype=np.float32)))
    optimizer = optimizer_class([parameter], lr=0.01, **options)
    for step in range(3):
        optimizer.zero_grad()
        ((parameter - 0.3 * step) ** 2).sum().backward()
        optimizer.step()
    return parameter.detach().numpy().copy()


@pytest.mark.parametrize(
    "optimizer_class, flag, value", CASES, ids=[f"{cls.__name__}-{flag}={value}" for cls, flag, value in CASES]
)
def test_flag_is_accepted_recorded_and_changes_no_value(optimizer_class, flag, value):
    parameter = onnxnn.nn.Parameter(onnxnn.zeros(2))
    assert optimizer_class([parameter], **{flag: value}).defaults[flag] == value
    # capturable keeps the step count and bias corrections in the graph: the same formula,
    # rounded in float32 instead of on the host in float64, so equal to float32's rounding.
    np.testing.assert_allclose(
        _three_steps(optimizer_class, **{flag: value}), _three_steps(optimizer_class), rtol=1e-6, atol=1e-7
    )


@pytest.mark.parametrize("optimizer_class", list(FLAGS), ids=lambda cls: cls.__name__)
def test_differentiable_is_refused_with_the_reason(optimizer_class):
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        optimizer_class([onnxnn.nn.Parameter(onnxnn.zeros(2))], differentiable=True)


@pytest.mark.parametrize("optimizer_class", [*FLAGS, optim.LBFGS], ids=lambda cls: cls.__name__)
def test_signature_and_defaults_are_pytorchs(optimizer_class):
    torch = pytest.importorskip("torch")
    torch_class = getattr(torch.optim, optimizer_class.__name__)
    ours, theirs = inspect.signature(optimizer_class).parameters, inspect.signature(torch_class).parameters
    assert list(ours) == list(theirs)
    for name, parameter in theirs.items():
        if isinstance(parameter.default, (bool, int, float, tuple)) or parameter.default is None:
            assert ours[name].default == parameter.default, name
    torch_defaults = torch_class([torch.nn.Parameter(torch.zeros(2))]).defaults
    assert set(optimizer_class([onnxnn.nn.Parameter(onnxnn.zeros(2))]).defaults) == set(torch_defaults)
