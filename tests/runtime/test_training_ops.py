"""onnxnn's Momentum op: the ONNX ai.onnx.preview.training spec's formulas on both executors, bad input.

Its hyperparameters are inputs (the spec's attributes), an omitted beta meaning 1 and an omitted
norm_coefficient no weight decay. onnxruntime runs it through onnxnn's decomposition (standard
Mul/Add/Sub nodes); the kernels executor runs its own kernel. Expected values are the spec's pseudo
code in numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

from tolerances import assert_within, gamma
from onnxnn.ir import dtypes
from onnxnn.ir.graph import constant, static_constant
from onnxnn.runtime.realization import data_of
from onnxnn.runtime.recording import record
from onnxnn.runtime.ops.training import TRAINING_DOMAIN

SHAPES = [(3, 2), (4,), ()]


def spec_momentum(r, t, xs, gs, vs, alpha, beta, norm_coefficient, mode):
    """The pseudo code of the ONNX Momentum operator, in float64."""
    new_xs, new_vs = [], []
    for x, g, v in zip(xs, gs, vs):
        regularized = norm_coefficient * x + g
        beta_adjusted = beta if t > 0 else 1.0
        v_new = alpha * v + beta_adjusted * regularized
        direction = regularized + alpha * v_new if mode == "nesterov" else v_new
        new_xs.append(x - r * direction)
        new_vs.append(v_new)
    return new_xs, new_vs


CASES = [
    dict(alpha=0.9, beta=1.0, norm_coefficient=0.0, mode="standard", t=0),
    dict(alpha=0.9, beta=1.0, norm_coefficient=0.01, mode="standard", t=3),
    dict(alpha=0.5, beta=0.25, norm_coefficient=0.1, mode="standard", t=0),
    dict(alpha=0.5, beta=0.25, norm_coefficient=0.1, mode="standard", t=1),
    dict(alpha=0.8, beta=0.5, norm_coefficient=0.2, mode="nesterov", t=2),
    dict(alpha=0.8, beta=1.0, norm_coefficient=0.0, mode="nesterov", t=0),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels", "kernels-one-by-one"])
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=lambda case: "-".join(f"{k}={v}" for k, v in case.items()))
def test_momentum_follows_the_spec(case, dtype, executor, monkeypatch):
    if executor == "kernels-one-by-one":  # the kernel's path for large models: no flat buffer
        from onnxnn.kernels import update_driver

        monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
        executor = "kernels"
    generator = np.random.default_rng(0)
    arrays = [[generator.standard_normal(shape) for shape in SHAPES] for _ in range(3)]
    xs, gs, vs = ([constant(np.asarray(a, dtype.numpy_dtype), dtype) for a in group] for group in arrays)

    def scalar(value):
        return constant(np.array(value, dtype.numpy_dtype), dtype)

    hyperparameters = (
        scalar(0.1),
        static_constant(case["t"], dtypes.int64),
        scalar(case["alpha"]),
        scalar(case["beta"]) if case["beta"] != 1 else None,
        scalar(case["norm_coefficient"]) if case["norm_coefficient"] != 0 else None,
    )
    outputs = record("Momentum", (*hyperparameters, *xs, *gs, *vs), {"mode": case["mode"]}, TRAINING_DOMAIN)
    with onnxnn.set_executor(executor):
        results = [data_of(output) for output in outputs]
    attributes = {k: case[k] for k in ("alpha", "beta", "norm_coefficient", "mode")}
    expected_xs, expected_vs = spec_momentum(0.1, case["t"], *arrays, **attributes)
    # Elementwise: at most 6 roundings per element (the weight decay's product and sum, alpha * v,
    # beta * g, their sum, the step's product and difference), each relative to the largest
    # quantity it combines, which the inputs' and the result's magnitudes bound. The reference is
    # float64 on the unrounded inputs: the factor 2 covers rounding the inputs and
    # hyperparameters to the dtype (one more rounding each).
    scale = max(np.abs(array).max() for group in arrays for array in group)
    for result, expected in zip(results, expected_xs + expected_vs):
        assert result.dtype == dtype.numpy_dtype and result.shape == expected.shape
        assert_within(result, expected, 2 * gamma(6, dtype.numpy_dtype) * (np.abs(expected) + scale))


def _values(shapes, dtype=onnxnn.float32):
    return [constant(np.zeros(shape, dtype.numpy_dtype), dtype) for shape in shapes]


def _hyperparameters():
    return (*_values([(), (), ()]), None, None)


@pytest.mark.parametrize(
    "inputs, message",
    [
        (lambda: (*_hyperparameters(), *_values([(2,), (2,)])), "takes R, T, alpha, beta, norm_coefficient and then"),
        (lambda: (*_hyperparameters(), *_values([(2,), (3,), (2,)])), "tensor 0 has X float32[2], G float32[3]"),
        (lambda: (*_hyperparameters(), *_values([(2,), (2,)]), *_values([(2,)], onnxnn.float64)), "they must agree"),
    ],
    ids=["count", "shapes", "dtypes"],
)
def test_momentum_rejects_inconsistent_inputs(inputs, message):
    with pytest.raises(RuntimeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        record("Momentum", inputs(), {"mode": "standard"}, TRAINING_DOMAIN)


def test_momentum_rejects_an_unknown_mode():
    with pytest.raises(RuntimeError, match="mode must be 'standard' or 'nesterov'"):
        record("Momentum", (*_hyperparameters(), *_values([(2,), (2,), (2,)])), {"mode": "heavy"}, TRAINING_DOMAIN)
