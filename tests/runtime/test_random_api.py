"""Random creation functions and fills against PyTorch 2.13's semantics: ``normal`` with tensor arguments
(broadcast draws, dtype, zero gradients), the exclusive high of ``random_``/``randint`` in narrow float
dtypes, ``bernoulli_`` with a tensor ``p``, keyword and ``generator=`` forms, and PyTorch's errors.

Statistical checks use 6 standard errors of the sample size: a correct sampler fails one with
probability about 2e-9. Expected values and messages are PyTorch 2.13's (CPU), written out.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
SIGMAS = 6


def _assert_standard_normal(samples: np.ndarray, label: str) -> None:
    """Mean 0 and variance 1 within 6 standard errors (the variance's is sqrt(2 / n): mu4 = 3)."""
    samples = np.asarray(samples, dtype=np.float64).ravel()
    mean_error = SIGMAS / math.sqrt(samples.size)
    variance_error = SIGMAS * math.sqrt(2 / samples.size)
    assert abs(samples.mean()) <= mean_error, f"{label}: mean {samples.mean()}"
    assert abs(samples.var() - 1) <= variance_error, f"{label}: variance {samples.var()}"


# ---------------------------------------------------------------- normal with tensor arguments

# (id, mean, std, shape): each element of the broadcast result is its own draw.
BROADCAST_NORMALS = [
    ("column-mean-row-std", lambda: onnxnn.zeros(400, 1), lambda: onnxnn.ones(1, 20), (400, 20)),
    ("vector-mean-matrix-std", lambda: onnxnn.zeros(20), lambda: onnxnn.ones(400, 20), (400, 20)),
    ("matrix-mean-vector-std", lambda: onnxnn.zeros(400, 20), lambda: onnxnn.ones(20), (400, 20)),
    ("scalar-mean-tensor", lambda: 0.0, lambda: onnxnn.ones(400, 20), (400, 20)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, mean, std, shape", BROADCAST_NORMALS, ids=[m[0] for m in BROADCAST_NORMALS])
def test_normal_of_broadcast_tensors_draws_every_element(executor, name, mean, std, shape):
    onnxnn.manual_seed(0)
    with onnxnn.set_executor(executor):
        samples = onnxnn.normal(mean(), std()).numpy()
    assert samples.shape == shape
    # Repeated noise along a broadcast axis makes rows (or columns) equal; independent float draws
    # collide with probability far below 1e-9.
    assert len({row.tobytes() for row in samples}) == shape[0], "rows repeat"
    assert len({column.tobytes() for column in samples.T}) == shape[1], "columns repeat"
    _assert_standard_normal(samples, name)
    # Neighbouring rows are independent: their correlation is within 6 / sqrt(n) of zero.
    correlation = np.corrcoef(samples[:-1].ravel(), samples[1:].ravel())[0, 1]
    assert abs(correlation) <= SIGMAS / math.sqrt(samples[1:].size)


# (mean, std, dtype of the result): ATen writes into a tensor like mean (else like std).
NORMAL_DTYPES = [
    (lambda: onnxnn.zeros(3, dtype=onnxnn.float64), lambda: onnxnn.ones(3), onnxnn.float64),
    (lambda: onnxnn.zeros(3), lambda: onnxnn.ones(3, dtype=onnxnn.float64), onnxnn.float32),
    (lambda: 2.0, lambda: onnxnn.ones(3, dtype=onnxnn.float64), onnxnn.float64),
    (lambda: onnxnn.zeros(3, dtype=onnxnn.float16), lambda: 1.0, onnxnn.float16),
]


@pytest.mark.parametrize("mean, std, dtype", NORMAL_DTYPES)
def test_normal_of_tensors_has_the_dtype_of_the_first_tensor(mean, std, dtype):
    assert onnxnn.normal(mean(), std()).dtype == dtype


@pytest.mark.parametrize("overload", ["tensor-tensor", "tensor-float", "float-tensor"])
def test_normal_of_tensors_has_zero_gradients_as_pytorch(overload):
    # derivatives.yaml: normal is not reparameterized; the result requires grad, its gradients are zeros.
    mean = onnxnn.zeros(3, requires_grad=True)
    std = onnxnn.ones(3, requires_grad=True)
    arguments = {"tensor-tensor": (mean, std), "tensor-float": (mean, 2.0), "float-tensor": (0.0, std)}[overload]
    result = onnxnn.normal(*arguments)
    assert result.requires_grad
    (result * 3.0).sum().backward()
    for argument in arguments:
        if isinstance(argument, onnxnn.Tensor):
            assert argument.grad is not None and argument.grad.tolist() == [0.0, 0.0, 0.0]
    with onnxnn.no_grad():
        assert not onnxnn.normal(*arguments).requires_grad


# ---------------------------------------------------------------- random_ and randint in float dtypes

# (id, draw, the values PyTorch 2.13 draws from): a float dtype rounds the drawn integer to nearest, so
# PyTorch lowers ``to`` until ``to - 1`` rounds below ``to``; the range stays below ``to``.
ROUNDED_RANGES = [
    (
        "bfloat16-random_-0-300",
        lambda n: onnxnn.empty(n, dtype=onnxnn.bfloat16).random_(0, 300),
        set(range(256)) | set(range(256, 297, 2)),
    ),
    (
        "bfloat16-randint-0-300",
        lambda n: onnxnn.randint(0, 300, (n,), dtype=onnxnn.bfloat16),
        set(range(256)) | set(range(256, 297, 2)),
    ),
    (
        "float16-2040-2056",
        lambda n: onnxnn.empty(n, dtype=onnxnn.float16).random_(2040, 2056),
        set(range(2040, 2049)) | {2050, 2052},
    ),
    ("float16-2049-2050", lambda n: onnxnn.empty(n, dtype=onnxnn.float16).random_(2049, 2050), {2048}),
    (
        "float32-above-2**24",
        lambda n: onnxnn.empty(n, dtype=onnxnn.float32).random_(2**24 + 1, 2**24 + 3),
        {2**24, 2**24 + 2},
    ),
]


@pytest.mark.parametrize("name, draw, support", ROUNDED_RANGES, ids=[m[0] for m in ROUNDED_RANGES])
def test_random_in_a_float_dtype_never_reaches_the_exclusive_high(name, draw, support):
    onnxnn.manual_seed(0)
    with pytest.warns(UserWarning, match=r"out of bounds \[-\(2\^\d+\), 2\^\d+\]. Due to precision limitations"):
        values = set(draw(100_000).numpy().astype(np.float64).tolist())
    # Every value of the support has probability at least 1/300 per draw: missing one in 1e5 draws
    # has probability below 300 * exp(-333).
    assert values == support


# ---------------------------------------------------------------- bernoulli_ with a tensor p


@pytest.mark.parametrize("executor", EXECUTORS)
def test_bernoulli_fill_with_a_tensor_probability(executor):
    onnxnn.manual_seed(0)
    n = 20_000
    with onnxnn.set_executor(executor):
        flat = onnxnn.zeros(n).bernoulli_(onnxnn.full((n,), 0.3, dtype=onnxnn.float64)).numpy()
        # A (4,) probability broadcast over (n/4, 4): columns never, always, and half the time.
        p = onnxnn.tensor([0.0, 1.0, 0.5, 0.5])
        grid = onnxnn.zeros(n // 4, 4).bernoulli_(p).numpy()
    assert flat.dtype == np.float32 and set(flat.tolist()) <= {0.0, 1.0}
    assert abs(flat.mean() - 0.3) <= SIGMAS * math.sqrt(0.3 * 0.7 / n)
    assert grid[:, 0].max() == 0 and grid[:, 1].min() == 1
    assert abs(grid[:, 2:].mean() - 0.5) <= SIGMAS * math.sqrt(0.25 / (n // 2))


def test_bernoulli_fill_repeats_with_a_generator():
    p = onnxnn.full((100,), 0.5)
    first = onnxnn.zeros(100).bernoulli_(p, generator=onnxnn.Generator().manual_seed(3)).numpy()
    second = onnxnn.zeros(100).bernoulli_(p, generator=onnxnn.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(first, second)


# A number p: each draw is True where numpy's float32 uniform (the top 24 bits of a 32-bit draw, times
# 2**-24) from the same seed is below p, though the draws are compared as integers.
NUMBER_PROBABILITIES = [0.1, 0.5, 0.9, 1 / 3, 1e-7, 1 - 2**-25, 0.0, 1.0, 2.0, float("inf"), float("nan"), -1.0]


@pytest.mark.parametrize("p", NUMBER_PROBABILITIES)
@pytest.mark.parametrize("shape", [(4097,), (3, 5, 7), (0, 4)])
def test_bernoulli_with_a_number_is_the_float32_uniform_below_it(p, shape):
    from onnxnn.ir import random as generator_module

    drawn = generator_module.bernoulli(shape, p, onnxnn.Generator().manual_seed(11))
    expected = np.random.Generator(np.random.PCG64(11)).random(shape, dtype=np.float32) < p
    assert drawn.dtype == np.bool_ and drawn.shape == shape
    np.testing.assert_array_equal(drawn, expected)


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64, onnxnn.float16, onnxnn.bfloat16])
@pytest.mark.parametrize("p", [0.1, 1 / 3, 0.77])
def test_dropout_scales_kept_elements_by_the_rounded_inverse_keep_rate(dtype, p):
    x = onnxnn.ones(64, 64, dtype=dtype)
    onnxnn.manual_seed(5)
    output = onnxnn.nn.functional.dropout(x, p).float().numpy()
    kept = np.random.Generator(np.random.PCG64(5)).random((64, 64), dtype=np.float32) < np.float32(1 - p)
    scale = np.asarray(1 / (1 - p), dtype=dtype.numpy_dtype).astype(np.float32)  # rounded once to the dtype
    np.testing.assert_array_equal(output, np.where(kept, scale, np.float32(0)))


# ---------------------------------------------------------------- keyword and generator forms


@pytest.mark.parametrize("function", ["randn_like", "rand_like", "randint_like"])
def test_like_functions_take_a_generator(function):
    draw = getattr(onnxnn, function)
    extra = (10,) if function == "randint_like" else ()
    before = onnxnn.get_rng_state()
    first = draw(onnxnn.zeros(50), *extra, generator=onnxnn.Generator().manual_seed(5)).numpy()
    second = draw(onnxnn.zeros(50), *extra, generator=onnxnn.Generator().manual_seed(5)).numpy()
    np.testing.assert_array_equal(first, second)
    after = onnxnn.get_rng_state()
    assert before["state"] == after["state"]  # the default generator is left alone


# (id, call, shape, bounds of the values)
KEYWORD_FORMS = [
    ("randint_like-high", lambda: onnxnn.randint_like(onnxnn.zeros(1000), high=5), (1000,), (0, 4)),
    ("randint_like-low-high", lambda: onnxnn.randint_like(onnxnn.zeros(1000), low=2, high=5), (1000,), (2, 4)),
    ("rand-size", lambda: onnxnn.rand(size=(2, 3)), (2, 3), (0, 1)),
    ("randn-size", lambda: onnxnn.randn(size=[4]), (4,), (-math.inf, math.inf)),
]


@pytest.mark.parametrize("name, call, shape, bounds", KEYWORD_FORMS, ids=[m[0] for m in KEYWORD_FORMS])
def test_keyword_forms(name, call, shape, bounds):
    values = call().numpy()
    assert values.shape == shape
    assert bounds[0] <= values.min() and values.max() <= bounds[1]


# ---------------------------------------------------------------- PyTorch's errors

# (id, call, exception, message): PyTorch 2.13's type and text (re.escape'd).
ERRORS = [
    (
        "randint-empty-range",
        lambda: onnxnn.randint(5, 5, (5,)),
        RuntimeError,
        "random_ expects 'from' to be less than 'to', but got from=5 >= to=5",
    ),
    ("randperm-float-n", lambda: onnxnn.randperm(5.0), TypeError, "randperm(): argument 'n' (position 1) must be int"),
    ("randperm-bool-n", lambda: onnxnn.randperm(True), TypeError, "must be int, not bool"),
    ("rand-generator-int", lambda: onnxnn.rand(2, generator=5), TypeError, "generator"),
    ("randn-generator-str", lambda: onnxnn.randn(2, generator="x"), TypeError, "generator"),
    # C1: bounds outside the dtype
    (
        "uint8-from",
        lambda: onnxnn.empty(2, dtype=onnxnn.uint8).random_(-5, 10),
        RuntimeError,
        "from is out of bounds for unsigned char",
    ),
    (
        "int8-to",
        lambda: onnxnn.randint(0, 300, (2,), dtype=onnxnn.int8),
        RuntimeError,
        "to - 1 is out of bounds for signed char",
    ),
    (
        "int16-to",
        lambda: onnxnn.empty(2, dtype=onnxnn.int16).random_(0, 2**62),
        RuntimeError,
        "to - 1 is out of bounds for short int",
    ),
    (
        "int32-to",
        lambda: onnxnn.empty(2, dtype=onnxnn.int32).random_(0, 2**62),
        RuntimeError,
        "to - 1 is out of bounds for int",
    ),
    (
        "bool-to",
        lambda: onnxnn.empty(2, dtype=onnxnn.bool).random_(10),
        RuntimeError,
        "to - 1 is out of bounds for bool",
    ),
    (
        "uint8-like",
        lambda: onnxnn.randint_like(onnxnn.zeros(2, dtype=onnxnn.uint8), 300),
        RuntimeError,
        "to - 1 is out of bounds for unsigned char",
    ),
    (
        "float16-to",
        lambda: onnxnn.empty(2, dtype=onnxnn.float16).random_(0, 70000),
        RuntimeError,
        "to - 1 is out of bounds for c10::Half",
    ),
    (
        "float16-from",
        lambda: onnxnn.empty(2, dtype=onnxnn.float16).random_(70000, 70002),
        RuntimeError,
        "from is out of bounds for c10::Half",
    ),
    (
        "empty-int8",
        lambda: onnxnn.empty(0, dtype=onnxnn.int8).random_(1000),
        RuntimeError,
        "to - 1 is out of bounds for signed char",
    ),
    # C2: randperm against the dtype
    (
        "randperm-half",
        lambda: onnxnn.randperm(3000, dtype=onnxnn.float16),
        RuntimeError,
        "n cannot be greater than 2049 for Half type.",
    ),
    (
        "randperm-float",
        lambda: onnxnn.randperm(2**24 + 2, dtype=onnxnn.float32),
        RuntimeError,
        "n cannot be greater than 2^24+1 for Float type.",
    ),
    (
        "randperm-int8",
        lambda: onnxnn.randperm(300, dtype=onnxnn.int8),
        RuntimeError,
        "value cannot be converted to type int8_t without overflow",
    ),
    (
        "randperm-uint8",
        lambda: onnxnn.randperm(257, dtype=onnxnn.uint8),
        RuntimeError,
        "value cannot be converted to type uint8_t without overflow",
    ),
    (
        "randperm-bool",
        lambda: onnxnn.randperm(2, dtype=onnxnn.bool),
        NotImplementedError,
        "\"randperm\" not implemented for 'Bool'",
    ),
    (
        "randperm-negative",
        lambda: onnxnn.randperm(-1),
        RuntimeError,
        "Trying to create tensor with negative dimension -1: [-1]",
    ),
    # C3: bernoulli_'s probability
    (
        "bernoulli-above",
        lambda: onnxnn.zeros(3).bernoulli_(1.5),
        RuntimeError,
        "bernoulli_ expects p to be in [0, 1], but got p=1.5",
    ),
    (
        "bernoulli-below",
        lambda: onnxnn.zeros(3).bernoulli_(-0.1),
        RuntimeError,
        "bernoulli_ expects p to be in [0, 1], but got p=-0.1",
    ),
    (
        "bernoulli-nan",
        lambda: onnxnn.zeros(3).bernoulli_(math.nan),
        RuntimeError,
        "bernoulli_ expects p to be in [0, 1], but got p=nan",
    ),
    (
        "bernoulli-tensor-above",
        lambda: onnxnn.zeros(3).bernoulli_(onnxnn.tensor([0.5, 1.5, 0.2])),
        RuntimeError,
        "Expected p_in >= 0 && p_in <= 1 to be true, but got false.",
    ),
    (
        "bernoulli-tensor-nan",
        lambda: onnxnn.zeros(3).bernoulli_(onnxnn.tensor([0.5, math.nan, 0.2])),
        RuntimeError,
        "Expected p_in >= 0 && p_in <= 1 to be true, but got false.",
    ),
    (
        "bernoulli-tensor-int",
        lambda: onnxnn.zeros(3).bernoulli_(onnxnn.tensor([1, 0, 1])),
        NotImplementedError,
        "\"bernoulli_tensor_cpu_p_\" not implemented for 'Long'",
    ),
    ("bernoulli-tensor-wider", lambda: onnxnn.zeros(4).bernoulli_(onnxnn.full((2, 4), 0.3)), RuntimeError, "expand"),
    # C4: normal's standard deviation
    (
        "normal-tensor-float",
        lambda: onnxnn.normal(onnxnn.zeros(3), -1.0),
        RuntimeError,
        "normal expects std >= 0.0, but found std -1",
    ),
    (
        "normal-empty-tensor",
        lambda: onnxnn.normal(onnxnn.zeros(0), -1.0),
        RuntimeError,
        "normal expects std >= 0.0, but found std -1",
    ),
    (
        "normal-tensor-tensor",
        lambda: onnxnn.normal(onnxnn.zeros(3), onnxnn.tensor([1.0, -1.0, 1.0])),
        RuntimeError,
        "normal expects all elements of std >= 0.0",
    ),
    (
        "normal-float-tensor-nan",
        lambda: onnxnn.normal(0.0, onnxnn.tensor([1.0, math.nan])),
        RuntimeError,
        "normal expects all elements of std >= 0.0",
    ),
    (
        "normal-sized",
        lambda: onnxnn.normal(0.0, -1.5, (3,)),
        RuntimeError,
        "normal expects std >= 0.0, but found std -1.5",
    ),
    ("normal_", lambda: onnxnn.zeros(3).normal_(0, -1), RuntimeError, "normal expects std >= 0.0, but found std -1"),
    (
        "normal_-nan",
        lambda: onnxnn.zeros(3).normal_(0, math.nan),
        RuntimeError,
        "normal expects std >= 0.0, but found std nan",
    ),
    (
        "normal-int-mean",
        lambda: onnxnn.normal(onnxnn.zeros(3, dtype=onnxnn.int64), 1.0),
        NotImplementedError,
        "\"normal_kernel_cpu\" not implemented for 'Long'",
    ),
    (
        "normal-broadcast-mismatch",
        lambda: onnxnn.normal(onnxnn.zeros(3), onnxnn.ones(4)),
        RuntimeError,
        "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0",
    ),
]


@pytest.mark.parametrize("name, call, exception, message", ERRORS, ids=[m[0] for m in ERRORS])
def test_pytorch_s_errors(name, call, exception, message):
    with pytest.raises(exception, match=re.escape(message)):
        call()


def test_in_range_bounds_draw_without_warnings():
    # A guard against false alarms: within 2**digits a float dtype holds every integer.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = onnxnn.empty(1000, dtype=onnxnn.float16).random_(-2048, 2049).numpy()
        assert -2048 <= values.min() and values.max() <= 2048
        assert set(onnxnn.randperm(2049, dtype=onnxnn.float16).numpy().tolist()) == set(range(2049))
        assert onnxnn.zeros(3).bernoulli_(True).tolist() == [1.0, 1.0, 1.0]
        assert onnxnn.normal(onnxnn.zeros(3), 0.0).tolist() == [0.0, 0.0, 0.0]
