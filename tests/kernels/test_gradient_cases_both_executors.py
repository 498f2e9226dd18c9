"""Every gradient-check case runs forward and backward on both executors with equal results.

The cases are the gradient table of tests/runtime/gradient_cases.py; here each is computed once
with onnxruntime and once with onnxnn's kernels, and the outputs and input gradients compared at
float32 tolerance (each executor's own correctness is checked elsewhere).
"""

from __future__ import annotations

import numpy as np
import pytest
from runtime.gradient_cases import CASES

import onnxnn

# Cases onnxruntime cannot run (no float64 kernel); their gradients are checked through "auto",
# which gives them to onnxnn's kernels, in tests/runtime/test_gradients_first_order.py.
ONNXRUNTIME_LACKS = {
    "mean_variadic_broadcast": "no float64 Mean kernel in onnxruntime's CPU provider",
    "global_lp_pool_p2_float64": "no float64 GlobalLpPool kernel in onnxruntime's CPU provider",
    **dict.fromkeys(
        ["det_3x3", "det_batched_2x2", "det_1x1", "det_singular"], "no float64 Det kernel in onnxruntime's CPU provider"
    ),
    "one_hot_values": "no OneHot kernel with float64 values in onnxruntime's CPU provider",
}


def _forward_and_backward(case, executor: str):
    with onnxnn.set_executor(executor):
        tensors = [
            onnxnn.tensor(a, dtype=onnxnn.float64, requires_grad=True)
            if np.asarray(a).dtype.kind == "f"
            else onnxnn.tensor(a)
            for a in case.inputs
        ]
        output = case.function(*tensors)
        cotangent = np.random.default_rng(0).standard_normal(output.shape)
        output.backward(onnxnn.tensor(cotangent, dtype=output.dtype))
        grads = [t.grad.numpy() if t.requires_grad and t.grad is not None else None for t in tensors]
        return output.detach().numpy(), grads


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_gradient_case_agrees_across_executors(case):
    if case.id in ONNXRUNTIME_LACKS:
        with pytest.raises(RuntimeError, match="NOT_IMPLEMENTED"):
            _forward_and_backward(case, "onnxruntime")
        return
    ort_output, ort_grads = _forward_and_backward(case, "onnxruntime")
    kernel_output, kernel_grads = _forward_and_backward(case, "kernels")
    # float64 throughout: each case's few dozen roundings differ by ~1e-14 relative between the
    # executors; 1e-5 is a loose constant, far above any rounding difference and far
    # inside the O(1) error of a wrong rule.
    np.testing.assert_allclose(kernel_output, ort_output, rtol=1e-5, atol=1e-6)
    for ort_grad, kernel_grad in zip(ort_grads, kernel_grads):
        assert (ort_grad is None) == (kernel_grad is None)
        if ort_grad is not None:
            np.testing.assert_allclose(kernel_grad, ort_grad, rtol=1e-5, atol=1e-6)
