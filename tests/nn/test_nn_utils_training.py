"""nn.utils training helpers against numpy formulas from PyTorch's documentation.

clip_grad_norm_: total = ||concat(grads)||_p, scale = min(max_norm / (total + 1e-6), 1);
clip_grad_value_: clamp to [-v, v]; parameters_to_vector: concatenated flattened parameters;
fuse_conv_bn_eval: conv(x, W * g / sqrt(v + eps)) + (b - m) * g / sqrt(v + eps) + beta (fuse_linear_bn_eval
the same with x @ W^T);
functional_call: module's forward with the given tensors in place of its own.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from tests.gradcheck import check_gradients
from tests.tolerances import assert_within, gamma

EXECUTORS = ["onnxruntime", "kernels"]
RNG = np.random.default_rng(14)
GRADS = [RNG.standard_normal((3, 4)), RNG.standard_normal(5), RNG.standard_normal((2, 1, 2))]


def _parameters_with_grads(grads=GRADS):
    params = []
    for grad in grads:
        param = nn.Parameter(onnxnn.zeros(grad.shape, dtype=onnxnn.float64))
        param.grad = onnxnn.tensor(grad.copy())
        params.append(param)
    return params


def _numpy_norm(grads, norm_type):
    flat = np.concatenate([g.ravel() for g in grads])
    if math.isinf(norm_type):
        return np.abs(flat).max()
    return (np.abs(flat) ** norm_type).sum() ** (1.0 / norm_type)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_scales_by_the_documented_coefficient(executor, norm_type, max_norm):
    params = _parameters_with_grads()
    with onnxnn.set_executor(executor):
        total = nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type, foreach=True)
        clipped = [p.grad.numpy() for p in params]
        total = total.item()  # realized on ``executor`` (onnxnn is lazy)
    expected_total = _numpy_norm(GRADS, norm_type)
    coef = min(max_norm / (expected_total + 1e-6), 1.0)
    # A p-norm over 17 float64 terms: a few dozen roundings of relative size 2**-53.
    np.testing.assert_allclose(total, expected_total, rtol=1e-13)
    for got, grad in zip(clipped, GRADS):
        np.testing.assert_allclose(got, grad * coef, rtol=1e-13)


def test_get_total_norm_and_clip_grads_with_norm_compose_to_clip_grad_norm_():
    params = _parameters_with_grads()
    total = nn.utils.get_total_norm([p.grad for p in params], 2.0)
    nn.utils.clip_grads_with_norm_(params, 1.0, total)
    expected_total = _numpy_norm(GRADS, 2.0)
    np.testing.assert_allclose(total.item(), expected_total, rtol=1e-13)
    np.testing.assert_allclose(params[1].grad.numpy(), GRADS[1] / (expected_total + 1e-6), rtol=1e-13)
    # A single tensor and an empty list are accepted, as in PyTorch.
    assert nn.utils.get_total_norm([]).item() == 0.0
    single = _parameters_with_grads(GRADS[:1])[0]
    nn.utils.clip_grad_norm_(single, 1e9)
    np.testing.assert_array_equal(single.grad.numpy(), GRADS[0])


def test_parameters_without_grad_are_skipped_and_generators_accepted():
    params = _parameters_with_grads()
    extra = nn.Parameter(onnxnn.zeros(2, dtype=onnxnn.float64))
    total = nn.utils.clip_grad_norm_((p for p in params + [extra]), 0.1)
    np.testing.assert_allclose(total.item(), _numpy_norm(GRADS, 2.0), rtol=1e-13)
    assert extra.grad is None


def test_error_if_nonfinite_raises_pytorchs_error_and_otherwise_scales_by_it():
    params = _parameters_with_grads([np.array([1.0, np.inf])])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is non-finite"):
        nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    total = nn.utils.clip_grad_norm_(params, 1.0)
    assert math.isinf(total.item())
    assert params[0].grad.numpy()[0] == 0.0  # 1 * (1 / inf)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_clip_grad_value_clamps_in_place(executor):
    params = _parameters_with_grads()
    with onnxnn.set_executor(executor):
        assert nn.utils.clip_grad_value_(params, 0.3, foreach=False) is None
        clipped = [p.grad.numpy() for p in params]
    for got, grad in zip(clipped, GRADS):
        np.testing.assert_array_equal(got, np.clip(grad, -0.3, 0.3))


def test_clip_grad_norm_with_a_model_after_backward():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    model(onnxnn.tensor(RNG.standard_normal((5, 3)))).sum().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    total = nn.utils.clip_grad_norm_(model.parameters(), 1e-2)
    np.testing.assert_allclose(total.item(), _numpy_norm(grads, 2.0), rtol=1e-13)
    clipped_norm = _numpy_norm([p.grad.numpy() for p in model.parameters()], 2.0)
    np.testing.assert_allclose(clipped_norm, 1e-2 * total.item() / (total.item() + 1e-6), rtol=1e-12)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_parameters_to_vector_round_trips_and_records_gradients(executor):
    model = nn.Linear(3, 2).double()
    expected = np.concatenate([model.weight.detach().numpy().ravel(), model.bias.detach().numpy()])
    with onnxnn.set_executor(executor):
        vector = nn.utils.parameters_to_vector(model.parameters())
        np.testing.assert_array_equal(vector.detach().numpy(), expected)
        nn.utils.vector_to_parameters(vector * 2, model.parameters())
        np.testing.assert_array_equal(model.weight.detach().numpy().ravel(), 2 * expected[:6])
        np.testing.assert_array_equal(model.bias.detach().numpy(), 2 * expected[6:])
    assert model.weight.requires_grad and model.weight.shape == (2, 3)

    def flat_norm(weight, bias):
        return (nn.utils.parameters_to_vector([weight, bias]) ** 2).sum()

    check_gradients(flat_norm, [RNG.standard_normal((2, 3)), RNG.standard_normal(2)])


def test_vector_to_parameters_rejects_a_non_tensor_like_pytorch():
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        nn.utils.vector_to_parameters([1.0, 2.0], nn.Linear(1, 1).parameters())


def _numpy_conv2d(x, w, b):
    n, c, h, wd = x.shape
    out_c, _, kh, kw = w.shape
    out = np.zeros((n, out_c, h - kh + 1, wd - kw + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            patch = x[:, :, i : i + kh, j : j + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out + b.reshape(1, -1, 1, 1)


def _eval_batch_norm(channels):
    # eps = 2**-10 is exact in float32, so ONNX's float epsilon attribute and numpy agree on it.
    bn = nn.BatchNorm2d(channels, eps=2.0**-10)
    with onnxnn.no_grad():
        bn.running_mean.copy_(onnxnn.tensor(RNG.standard_normal(channels), dtype=onnxnn.float32))
        bn.running_var.copy_(onnxnn.tensor(RNG.uniform(0.5, 2.0, channels), dtype=onnxnn.float32))
        bn.weight.copy_(onnxnn.tensor(RNG.standard_normal(channels), dtype=onnxnn.float32))
        bn.bias.copy_(onnxnn.tensor(RNG.standard_normal(channels), dtype=onnxnn.float32))
    return bn.eval()


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_eval_matches_bn_of_conv(executor, bias):
    conv = nn.Conv2d(2, 3, 3, bias=bias).eval()
    bn = _eval_batch_norm(3)
    x = RNG.standard_normal((2, 2, 5, 5)).astype(np.float32)
    fused = nn.utils.fuse_conv_bn_eval(conv, bn)
    assert isinstance(fused, nn.Conv2d) and fused is not conv
    assert isinstance(fused.weight, nn.Parameter) and fused.weight.requires_grad
    with onnxnn.set_executor(executor):
        got = fused(onnxnn.tensor(x)).detach().numpy()
        unfused = bn(conv(onnxnn.tensor(x))).detach().numpy()
    x64 = x.astype(np.float64)
    scale = bn.weight.detach().numpy().astype(np.float64) / np.sqrt(
        bn.running_var.numpy().astype(np.float64) + 2.0**-10
    )
    conv_b = conv.bias.detach().numpy().astype(np.float64) if bias else np.zeros(3)
    w = conv.weight.detach().numpy().astype(np.float64) * scale.reshape(-1, 1, 1, 1)
    b = (conv_b - bn.running_mean.numpy()) * scale + bn.bias.detach().numpy()
    expected = _numpy_conv2d(x64, w, b)
    # An 18-term float32 dot product plus the bias (19 terms), and each folded weight/bias carries
    # at most 8 more roundings (add eps, sqrt, divide, multiply, subtract, add; or the unfused
    # normalization's steps): gamma(19 + 8) relative to the magnitudes, doubled for two orders.
    magnitude = _numpy_conv2d(np.abs(x64), np.abs(w), np.abs(b)) + np.abs(
        (conv_b.reshape(1, -1, 1, 1) - bn.running_mean.numpy().reshape(1, -1, 1, 1)) * scale.reshape(1, -1, 1, 1)
    )
    bound = 2 * gamma(19 + 8, np.float32) * magnitude
    assert_within(got, expected, bound)
    assert_within(unfused, expected, bound)


def test_fuse_conv_bn_weights_for_a_transposed_convolution_scales_dimension_one():
    w = RNG.standard_normal((2, 3, 2, 2))  # ConvTranspose2d weight: (in, out, kh, kw)
    rm, rv, g, beta = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3), RNG.standard_normal(3), RNG.standard_normal(3)
    fw, fb = nn.utils.fuse_conv_bn_weights(
        onnxnn.tensor(w), None, onnxnn.tensor(rm), onnxnn.tensor(rv), 1e-5, onnxnn.tensor(g), onnxnn.tensor(beta), True
    )
    scale = g / np.sqrt(rv + 1e-5)
    np.testing.assert_allclose(fw.detach().numpy(), w * scale.reshape(1, -1, 1, 1), rtol=1e-15)
    np.testing.assert_allclose(fb.detach().numpy(), -rm * scale + beta, rtol=1e-14)
    assert not fw.requires_grad and not fb.requires_grad  # plain tensors in, as in PyTorch


def test_fuse_conv_bn_eval_refuses_training_modules():
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        nn.utils.fuse_conv_bn_eval(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1))


def _eval_batch_norm1d(features, affine=True):
    bn = nn.BatchNorm1d(features, eps=2.0**-10, affine=affine).double()
    with onnxnn.no_grad():
        bn.running_mean.copy_(onnxnn.tensor(RNG.standard_normal(features)))
        bn.running_var.copy_(onnxnn.tensor(RNG.uniform(0.5, 2.0, features)))
        if affine:
            bn.weight.copy_(onnxnn.tensor(RNG.standard_normal(features)))
            bn.bias.copy_(onnxnn.tensor(RNG.standard_normal(features)))
    return bn.eval()


# (linear bias, bn features, bn affine): bn.num_features is out_features or 1 (one statistic for all)
LINEAR_BN_CASES = {
    "bias": (True, 3, True),
    "no_bias": (False, 3, True),
    "one_feature": (True, 1, True),
    "bn_not_affine": (True, 3, False),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", LINEAR_BN_CASES)
def test_fuse_linear_bn_eval_matches_bn_of_linear(case, executor):
    bias, features, affine = LINEAR_BN_CASES[case]
    linear = nn.Linear(4, 3, bias=bias).double().eval()
    bn = _eval_batch_norm1d(features, affine)
    x = RNG.standard_normal((5, 4))
    fused = nn.utils.fuse_linear_bn_eval(linear, bn)
    assert isinstance(fused, nn.Linear) and fused is not linear and fused.weight.shape == (3, 4)
    assert isinstance(fused.weight, nn.Parameter) and fused.weight.requires_grad
    assert fused.bias.requires_grad == bias  # a missing bias comes back as a constant, as in PyTorch
    with onnxnn.set_executor(executor):
        got = fused(onnxnn.tensor(x)).detach().numpy()
    gamma_ = bn.weight.detach().numpy() if affine else np.ones(features)
    beta = bn.bias.detach().numpy() if affine else np.zeros(features)
    scale = gamma_ / np.sqrt(bn.running_var.numpy() + 2.0**-10)
    linear_b = linear.bias.detach().numpy() if bias else np.zeros(3)
    expected = (x @ linear.weight.detach().numpy().T + linear_b - bn.running_mean.numpy()) * scale + beta
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)


def test_fuse_linear_bn_weights_scales_rows():
    w, b = RNG.standard_normal((3, 4)), RNG.standard_normal(3)
    rm, rv, g, beta = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3), RNG.standard_normal(3), RNG.standard_normal(3)
    fw, fb = nn.utils.fuse_linear_bn_weights(
        onnxnn.tensor(w),
        onnxnn.tensor(b),
        onnxnn.tensor(rm),
        onnxnn.tensor(rv),
        1e-5,
        onnxnn.tensor(g),
        onnxnn.tensor(beta),
    )
    scale = g / np.sqrt(rv + 1e-5)
    np.testing.assert_allclose(fw.detach().numpy(), w * scale[:, None], rtol=1e-15)
    np.testing.assert_allclose(fb.detach().numpy(), (b - rm) * scale + beta, rtol=1e-14)
    assert isinstance(fw, nn.Parameter) and not fw.requires_grad and not fb.requires_grad


LINEAR_BN_ERRORS = {
    "training": (nn.Linear(2, 3), nn.BatchNorm1d(3), "Fusion only for eval!"),
    "features": (
        nn.Linear(2, 3).eval(),
        nn.BatchNorm1d(2).eval(),
        "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, "
        "got linear.out_features=3 and bn.num_features=2",
    ),
    "no_running_stats": (
        nn.Linear(2, 3).eval(),
        nn.BatchNorm1d(3, track_running_stats=False).eval(),
        "bn.running_mean and bn.running_var must not be None",
    ),
}


@pytest.mark.parametrize("case", LINEAR_BN_ERRORS)
def test_fuse_linear_bn_eval_errors(case):
    linear, bn, message = LINEAR_BN_ERRORS[case]
    with pytest.raises(AssertionError, match=message):
        nn.utils.fuse_linear_bn_eval(linear, bn)


def test_fuse_linear_bn_eval_matches_torch():
    torch = pytest.importorskip("torch")
    linear, bn = nn.Linear(4, 3).double().eval(), _eval_batch_norm1d(3)
    torch_linear = torch.nn.Linear(4, 3).double().eval()
    torch_bn = torch.nn.BatchNorm1d(3, eps=2.0**-10).double().eval()
    torch_linear.load_state_dict({k: torch.tensor(v.numpy()) for k, v in linear.state_dict().items()})
    torch_bn.load_state_dict({k: torch.tensor(v.numpy()) for k, v in bn.state_dict().items()})
    fused = nn.utils.fuse_linear_bn_eval(linear, bn)
    torch_fused = torch.nn.utils.fuse_linear_bn_eval(torch_linear, torch_bn)
    assert list(fused.state_dict()) == list(torch_fused.state_dict())
    for key, value in fused.state_dict().items():
        np.testing.assert_allclose(value.numpy(), torch_fused.state_dict()[key].numpy(), rtol=1e-14)


def test_clip_grad_norm_is_the_deprecated_alias_of_clip_grad_norm_():
    params = _parameters_with_grads()
    with pytest.warns(FutureWarning, match=r"`onnxnn.nn.utils.clip_grad_norm` is now deprecated in favor of"):
        total = nn.utils.clip_grad_norm(params, 0.5, norm_type=1.0)
    expected_total = _numpy_norm(GRADS, 1.0)
    np.testing.assert_allclose(total.item(), expected_total, rtol=1e-13)
    for param, grad in zip(params, GRADS):
        np.testing.assert_allclose(param.grad.numpy(), grad * (0.5 / (expected_total + 1e-6)), rtol=1e-13)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_functional_call_uses_the_given_tensors_and_restores_the_module(executor):
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)).double().eval()
    x = RNG.standard_normal((4, 3))
    weight = RNG.standard_normal((2, 3))
    mean = RNG.standard_normal(2)
    original_weight = model[0].weight
    with onnxnn.set_executor(executor):
        out = nn.utils.stateless.functional_call(
            model, ({"0.weight": onnxnn.tensor(weight)}, {"1.running_mean": onnxnn.tensor(mean)}), onnxnn.tensor(x)
        )
        out = out.detach().numpy()  # realized on ``executor`` (onnxnn is lazy)
    bias = model[0].bias.detach().numpy()
    expected = ((x @ weight.T + bias) - mean) / np.sqrt(1 + 1e-5) * model[1].weight.detach().numpy() + model[
        1
    ].bias.detach().numpy()
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    assert model[0].weight is original_weight
    np.testing.assert_array_equal(model[1].running_mean.numpy(), np.zeros(2))

    def through_functional_call(w):
        return nn.utils.stateless.functional_call(model, {"0.weight": w}, (onnxnn.tensor(x),)).sum()

    check_gradients(through_functional_call, [weight])


def test_functional_call_ties_shared_weights_and_checks_keys():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2, bias=False)
            self.b = nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    model = Tied().double()
    x = onnxnn.tensor(RNG.standard_normal((1, 2)))
    eye = onnxnn.eye(2, dtype=onnxnn.float64)
    np.testing.assert_array_equal(
        nn.utils.stateless.functional_call(model, {"a.weight": eye}, x).detach().numpy(), x.numpy()
    )
    untied = nn.utils.stateless.functional_call(model, {"a.weight": eye}, x, tie_weights=False).detach().numpy()
    np.testing.assert_allclose(untied, x.numpy() @ model.a.weight.detach().numpy().T, rtol=1e-14)
    with pytest.raises(ValueError, match="which are tied"):
        nn.utils.stateless.functional_call(model, {"a.weight": eye, "b.weight": eye * 2}, x)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        nn.utils.stateless.functional_call(model, [{"a.weight": eye}, {"a.weight": eye}], x)
    with pytest.raises(RuntimeError, match=r"Error\(s\) in reparametrizing for Tied:\n\tUnexpected key\(s\): 'c'"):
        nn.utils.stateless.functional_call(model, {"a.weight": eye, "c": eye}, x, strict=True)
    with pytest.raises(RuntimeError, match=r"Missing key\(s\): 'a.weight', 'b.weight'"):
        nn.utils.stateless.functional_call(model, {}, x, strict=True, tie_weights=False)


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    for norm_type in (2.0, 1.5, math.inf):
        params = _parameters_with_grads()
        torch_params = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in GRADS]
        for tp, g in zip(torch_params, GRADS):
            tp.grad = torch.tensor(g)
        total = nn.utils.clip_grad_norm_(params, 0.7, norm_type)
        torch_total = torch.nn.utils.clip_grad_norm_(torch_params, 0.7, norm_type)
        np.testing.assert_allclose(total.item(), torch_total.item(), rtol=1e-13)
        for p, tp in zip(params, torch_params):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-13)


def test_clip_grad_norm_of_mixed_dtypes_totals_in_the_promoted_dtype():
    # PyTorch stacks the per-gradient norms with promotion: a float16 gradient first must not
    # cast a float32 one's norm (2e5) to float16, where it overflows and the clip zeroes it.
    small = nn.Parameter(onnxnn.zeros(4, dtype=onnxnn.float16))
    large = nn.Parameter(onnxnn.zeros(4))
    small.grad = onnxnn.full((4,), 0.5, dtype=onnxnn.float16)
    large.grad = onnxnn.full((4,), 1e5)
    total = nn.utils.clip_grad_norm_([small, large], 1.0)
    expected = np.sqrt(4 * 0.5**2 + 4 * 1e10)
    assert total.dtype is onnxnn.float32 and abs(total.item() - expected) <= 4 * 2.0**-24 * expected
    np.testing.assert_allclose(large.grad.numpy(), np.full(4, 1e5 / (expected + 1e-6)), rtol=8 * 2.0**-24)
