"""NAdam, RAdam, Adamax, Adadelta, Adam/AdamW (capturable and fused), RMSprop and SGD on float16/bfloat16
parameters, bit for bit against ``torch.optim``'s single-tensor (for-loop) step on the CPU.

Each of torch's ops there computes in float32 and rounds its result to the parameter's dtype once,
with its Python scalars at float32 (``mul_(beta2)``, ``lerp_``, ``addcmul_``, ``addcdiv_``) or
rounded to the dtype (``add_(eps)``, ``add(param, alpha=...)``). Rounding the hyperparameters to the
dtype instead (bfloat16's 0.99 is 0.98828125) biased the second moments by up to 24%. ``lerp_`` and
``addcmul_`` are fused multiply-adds there, rounded once.

Every tensor has a multiple of 64 elements, so torch's vectorized kernels compute all of them (a
kernel's scalar tail may round once more). torch refuses ``capturable=True`` on the CPU; its
capturable step is run there by letting it accept the CPU as a capturable device.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import onnxnn
from onnxnn import optim
from onnxnn.kernels import update_driver

torch = pytest.importorskip("torch")

STEPS = 60
SHAPES = [(4, 16), (128,)]

CASES = [
    ("NAdam", {"lr": 0.01, "betas": (0.9, 0.99)}),
    ("NAdam", {"lr": 0.02, "weight_decay": 0.1, "momentum_decay": 0.01, "maximize": True, "eps": 1e-3}),
    ("NAdam", {"lr": 0.01, "betas": (0.8, 0.95), "weight_decay": 0.1, "decoupled_weight_decay": True}),
    # beta2 0.99: rectified from step 6 on; the default 0.999: from step 5.
    ("RAdam", {"lr": 0.01, "betas": (0.9, 0.99)}),
    ("RAdam", {"lr": 0.02, "weight_decay": 0.1, "maximize": True, "eps": 1e-3}),
    ("RAdam", {"lr": 0.01, "betas": (0.7, 0.98), "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("Adamax", {"lr": 0.01, "betas": (0.9, 0.99)}),
    ("Adamax", {"lr": 0.02, "betas": (0.3, 0.9), "weight_decay": 0.1, "maximize": True, "eps": 1e-3}),
    ("Adadelta", {"lr": 1.0}),
    ("Adadelta", {"lr": 0.5, "rho": 0.95, "weight_decay": 0.1, "maximize": True, "eps": 1e-4}),
    ("Adam", {"lr": 0.01, "betas": (0.9, 0.99), "capturable": True}),
    ("Adam", {"lr": 0.02, "weight_decay": 0.1, "amsgrad": True, "maximize": True, "eps": 1e-3, "capturable": True}),
    ("AdamW", {"lr": 0.01, "betas": (0.8, 0.95), "weight_decay": 0.1, "capturable": True}),
]


# The fused (one node per group) updates: Adam and AdamW without capturable, RMSprop, SGD's Momentum.
# A fused multiply-add (torch's lerp_ and addcmul_) and a product then a sum, or addcdiv_'s
# ``X + (value * M) / D`` and ``X + value * (M / D)``, round to other float16/bfloat16 values for a few
# element-steps in a million at Adam's default hyperparameters; with these tensors, betas of 0.7
# and 0.3 (lerp_ weights 0.3 and 0.7: either of its formulas) and alpha 0.7 or 0.4, every case but
# SGD's had from 1 to about 100 values differ while those were not torch's.
FUSED_SHAPES = [(64, 64), (8192,)]
FUSED_CASES = [
    ("Adam", {"lr": 0.1, "betas": (0.7, 0.7)}),
    ("Adam", {"lr": 0.1, "betas": (0.7, 0.7), "weight_decay": 0.1, "amsgrad": True, "maximize": True, "eps": 1e-3}),
    ("Adam", {"lr": 0.1, "betas": (0.3, 0.7)}),
    ("AdamW", {"lr": 0.1, "betas": (0.7, 0.7), "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.1, "betas": (0.3, 0.7), "amsgrad": True, "maximize": True}),
    ("RMSprop", {"lr": 0.1, "alpha": 0.7}),
    # eps 1e-3: float16 rounds 1e-8 to 0, so an element whose rounded square_avg - grad_avg**2 is 0
    # would step by infinity (in torch too).
    ("RMSprop", {"lr": 0.05, "alpha": 0.7, "eps": 1e-3, "centered": True, "momentum": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.05, "alpha": 0.4, "eps": 1e-3, "centered": True, "maximize": True}),
    ("RMSprop", {"lr": 0.1, "alpha": 0.7, "eps": 1e-3, "momentum": 0.5}),
    # SGD's products are of two float16/bfloat16 values, exact in float32: it has no fused multiply-add
    # to round differently, and these only guard that.
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.5, "weight_decay": 0.1, "maximize": True}),
]


def case_id(case) -> str:
    name, options = case
    return name + "-" + "-".join(f"{key}={value}" for key, value in options.items())


def problem(dtype_name: str, shapes=SHAPES):
    """Initial values and ``STEPS`` gradients (mean 0.5, so the averages settle), as float32 of the dtype's values."""
    generator = np.random.default_rng(7)
    dtype = getattr(torch, dtype_name)

    def representable(shape, offset=0.0):
        array = torch.tensor(generator.standard_normal(shape).astype(np.float32) + offset).to(dtype)
        return array.float().numpy()

    initial = [representable(shape) for shape in shapes]
    gradients = [[representable(shape, 0.5) for shape in shapes] for _ in range(STEPS)]
    return initial, gradients


def run_onnxnn(name: str, options: dict, dtype_name: str, executor_name: str, initial, gradients):
    dtype = getattr(onnxnn, dtype_name)
    params = [onnxnn.tensor(array).to(dtype).requires_grad_() for array in initial]
    optimizer = getattr(optim, name)(params, **options)
    with onnxnn.set_executor(executor_name):
        for step_gradients in gradients:
            for param, gradient in zip(params, step_gradients):
                param.grad = onnxnn.tensor(gradient).to(dtype)
            optimizer.step()
        return [
            {"param": param.detach().float().numpy()}
            | {key: value.float().numpy() for key, value in optimizer.state[param].items() if key != "step"}
            for param in params
        ]


def run_torch(name: str, options: dict, dtype_name: str, initial, gradients, monkeypatch):
    if options.get("capturable"):
        adam_module = importlib.import_module("torch.optim.adam")
        monkeypatch.setattr(adam_module, "_get_capturable_supported_devices", lambda *args, **kwargs: ["cpu"])
    dtype = getattr(torch, dtype_name)
    params = [torch.tensor(array).to(dtype).requires_grad_() for array in initial]
    optimizer = getattr(torch.optim, name)(params, foreach=False, **options)
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = torch.tensor(gradient).to(dtype)
        optimizer.step()
    return [
        {"param": param.detach().float().numpy()}
        | {key: value.float().numpy() for key, value in optimizer.state[param].items() if key != "step"}
        for param in params
    ]


@pytest.mark.parametrize("executor_name", ["kernels", "onnxruntime"])
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=[case_id(case) for case in CASES])
def test_parameters_and_states_equal_torchs_bit_for_bit(case, dtype_name, executor_name, monkeypatch):
    name, options = case
    initial, gradients = problem(dtype_name)
    results = run_onnxnn(name, options, dtype_name, executor_name, initial, gradients)
    expected = run_torch(name, options, dtype_name, initial, gradients, monkeypatch)
    for index, (result, reference) in enumerate(zip(results, expected)):
        assert sorted(result) == sorted(reference)
        for key in reference:
            differing = int(np.sum(result[key] != reference[key]))
            assert differing == 0, f"parameter {index}: {differing} of {reference[key].size} {key} values differ"


@pytest.mark.parametrize("executor_name", ["kernels", "kernels-one-by-one", "onnxruntime"])
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", FUSED_CASES, ids=[case_id(case) for case in FUSED_CASES])
def test_fused_updates_equal_torchs_bit_for_bit(case, dtype_name, executor_name, monkeypatch):
    name, options = case
    if executor_name == "kernels-one-by-one":  # a large model's path: one tensor at a time, in blocks
        monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
        monkeypatch.setattr(update_driver, "BLOCK_ELEMENTS", 1000)
        executor_name = "kernels"
    initial, gradients = problem(dtype_name, FUSED_SHAPES)
    results = run_onnxnn(name, options, dtype_name, executor_name, initial, gradients)
    expected = run_torch(name, options, dtype_name, initial, gradients, monkeypatch)
    for index, (result, reference) in enumerate(zip(results, expected)):
        assert sorted(result) == sorted(reference)
        for key in reference:
            # NaN where both are: centered RMSprop's rounded square_avg - grad_avg**2 can be negative.
            equal = (result[key] == reference[key]) | (np.isnan(result[key]) & np.isnan(reference[key]))
            differing = int(np.sum(~equal))
            assert differing == 0, f"parameter {index}: {differing} of {reference[key].size} {key} values differ"
