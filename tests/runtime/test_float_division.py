"""Float floor division and remainder: exact, as PyTorch's and numpy's, on both executors.

``a // b`` is not ``floor(a / b)``, whose quotient is rounded first (88.8 // 0.3 in float32 is 295,
the rounded quotient 296.0), and ``a % b`` is C's exact fmod moved to the divisor's sign, not
``a - floor(a / b) * b`` (wrong in the last bits for most inputs, and NaN for 0 % inf). numpy's
``floor_divide`` and ``remainder`` compute both exactly: they are the expectation.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

EXECUTORS = ["onnxruntime", "kernels"]
SPECIAL = [np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e38, -1e38, 88.8, 0.3, -0.3, 3.0, -3.0, 7.5, np.nan]


def _operands(dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special values, then random ones with zeros among the divisors."""
    rng = np.random.default_rng(0)
    special_a, special_b = (np.array(v, dtype) for v in zip(*[(a, b) for a in SPECIAL for b in SPECIAL]))
    random_a = (rng.standard_normal(4000) * 100).astype(dtype)
    random_b = (rng.standard_normal(4000) * 3).astype(dtype)
    random_b[::97] = 0
    return np.concatenate([special_a, random_a]), np.concatenate([special_b, random_b])


CASES = [
    ("floor_divide", lambda a, b: a // b, np.floor_divide),
    ("div floor", lambda a, b: onnxnn.div(a, b, rounding_mode="floor"), np.floor_divide),
    ("remainder", lambda a, b: a % b, np.remainder),
    ("a scalar divisor", lambda a, b: a % 0.3, lambda a, b: np.remainder(a, a.dtype.type(0.3))),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("call, expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_float_division_is_exact(executor, dtype, call, expected):
    a, b = _operands(dtype)
    with onnxnn.set_executor(executor):
        result = call(onnxnn.tensor(a), onnxnn.tensor(b)).numpy()
    with np.errstate(all="ignore"):
        want = expected(a, b)
    assert result.dtype == want.dtype
    np.testing.assert_array_equal(result, want)


def test_the_rounded_quotient_is_not_floored():
    assert (onnxnn.tensor([88.8]) // 0.3).item() == 295.0
    assert (onnxnn.tensor([-1e-45]) // 3.0).item() == -1.0


def test_remainder_gradients_are_pytorchs():
    # d(a % b)/da = 1 and d(a % b)/db = -(a // b), away from the jumps.
    a = onnxnn.tensor([5.5, -7.25, 2.0], requires_grad=True)
    b = onnxnn.tensor([2.0, 3.0, -0.75], requires_grad=True)
    (a % b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(b.grad.numpy(), -np.floor_divide(a.detach().numpy(), b.detach().numpy()))
