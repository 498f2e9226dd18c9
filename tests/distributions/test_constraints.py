"""constraints: what each one accepts, its event dimensions and its repr (PyTorch's)."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.distributions import constraints


def _t(values, dtype=onnxnn.float64) -> onnxnn.Tensor:
    return onnxnn.tensor(values, dtype=dtype)


NAN, INF = float("nan"), float("inf")
EYE = [[1.0, 0.0], [0.0, 1.0]]

CHECKS = [
    ("real", constraints.real, [0.0, -INF, NAN], [True, True, False]),
    ("positive", constraints.positive, [1.0, 0.0, -1.0], [True, False, False]),
    ("nonnegative", constraints.nonnegative, [1.0, 0.0, -1.0], [True, True, False]),
    ("greater_than", constraints.greater_than(2.0), [2.5, 2.0], [True, False]),
    ("greater_than_eq", constraints.greater_than_eq(2.0), [2.5, 2.0, 1.0], [True, True, False]),
    ("less_than", constraints.less_than(2.0), [1.5, 2.0], [True, False]),
    ("unit_interval", constraints.unit_interval, [0.0, 1.0, 1.5], [True, True, False]),
    ("interval", constraints.interval(-1.0, 1.0), [-1.0, 0.0, 1.0, 1.1], [True, True, True, False]),
    ("half_open_interval", constraints.half_open_interval(-1.0, 1.0), [-1.0, 1.0], [True, False]),
    ("boolean", constraints.boolean, [0.0, 1.0, 0.5], [True, True, False]),
    ("integer_interval", constraints.integer_interval(0, 3), [0.0, 3.0, 1.5, 4.0], [True, True, False, False]),
    ("nonnegative_integer", constraints.nonnegative_integer, [0.0, 7.0, -1.0, 0.5], [True, True, False, False]),
    ("positive_integer", constraints.positive_integer, [1.0, 0.0], [True, False]),
    ("simplex", constraints.simplex, [[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1]], [True, False, False]),
    ("one_hot", constraints.one_hot, [[0.0, 1.0], [1.0, 1.0], [0.5, 0.5]], [True, False, False]),
    ("real_vector", constraints.real_vector, [[0.0, 1.0], [NAN, 1.0]], [True, False]),
    ("independent", constraints.independent(constraints.positive, 1), [[1.0, 2.0], [1.0, -2.0]], [True, False]),
    ("multinomial", constraints.multinomial(3), [[1.0, 2.0], [2.0, 2.0], [-1.0, 2.0]], [True, False, False]),
    (
        "lower_triangular",
        constraints.lower_triangular,
        [[[1.0, 0.0], [2.0, -1.0]], [[1.0, 1.0], [0.0, 1.0]]],
        [True, False],
    ),
    (
        "lower_cholesky",
        constraints.lower_cholesky,
        [[[1.0, 0.0], [2.0, 1.0]], [[1.0, 0.0], [2.0, -1.0]]],
        [True, False],
    ),
    ("square", constraints.square, [EYE], [True]),
    ("symmetric", constraints.symmetric, [[[1.0, 2.0], [2.0, 1.0]], [[1.0, 2.0], [0.0, 1.0]]], [True, False]),
    (
        "positive_definite",
        constraints.positive_definite,
        [[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]]],
        [True, False],
    ),
    (
        "positive_semidefinite",
        constraints.positive_semidefinite,
        [[[1.0, 1.0], [1.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]]],
        [True, False],
    ),
    ("cat", constraints.cat([constraints.positive, constraints.real], 0, [1, 1]), [1.0, -1.0], [True, True]),
    ("stack", constraints.stack([constraints.positive, constraints.real], 0), [-1.0, -1.0], [False, True]),
]


@pytest.mark.parametrize("name, constraint, values, expected", CHECKS, ids=[case[0] for case in CHECKS])
def test_check(name, constraint, values, expected):
    result = constraint.check(_t(values))
    assert result.dtype == onnxnn.bool
    assert result.numpy().tolist() == expected


def test_integer_constraints_accept_integer_tensors():
    assert constraints.nonnegative_integer.check(_t([0, 3, -1], onnxnn.int64)).numpy().tolist() == [True, True, False]


@pytest.mark.parametrize(
    "constraint, text",
    [
        (constraints.real, "Real()"),
        (constraints.positive, "GreaterThan(lower_bound=0.0)"),
        (constraints.unit_interval, "Interval(lower_bound=0.0, upper_bound=1.0)"),
        (constraints.half_open_interval(0.0, 1.0), "HalfOpenInterval(lower_bound=0.0, upper_bound=1.0)"),
        (constraints.real_vector, "IndependentConstraint(Real(), 1)"),
        (constraints.simplex, "Simplex()"),
        (constraints.integer_interval(0, 3), "IntegerInterval(lower_bound=0, upper_bound=3)"),
        (constraints.nonnegative_integer, "IntegerGreaterThan(lower_bound=0)"),
        (constraints.lower_cholesky, "LowerCholesky()"),
        (constraints.positive_definite, "PositiveDefinite()"),
        (constraints.boolean, "Boolean()"),
        (constraints.dependent, "Dependent()"),
    ],
)
def test_repr_is_pytorchs(constraint, text):
    assert repr(constraint) == text


def test_event_dims_and_discreteness():
    assert constraints.real.event_dim == 0 and not constraints.real.is_discrete
    assert constraints.simplex.event_dim == 1 and constraints.positive_definite.event_dim == 2
    assert constraints.independent(constraints.simplex, 2).event_dim == 3
    assert constraints.boolean.is_discrete and constraints.integer_interval(0, 1).is_discrete
    assert constraints.independent(constraints.nonnegative_integer, 1).is_discrete
    assert constraints.cat([constraints.real, constraints.boolean]).is_discrete


def test_dependent_constraints_cannot_be_checked():
    assert constraints.is_dependent(constraints.dependent) and not constraints.is_dependent(constraints.real)
    with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
        constraints.dependent.check(_t([0.0]))
    with pytest.raises(NotImplementedError, match="cannot be determined statically"):
        constraints.dependent.event_dim
    customized = constraints.dependent(is_discrete=True, event_dim=1)
    assert customized.is_discrete and customized.event_dim == 1

    class Holder:
        @constraints.dependent_property(is_discrete=False, event_dim=0)
        def support(self):
            return constraints.interval(0.0, self.high)

        high = 2.0

    # On the class a dependent constraint (validation skips it), on an instance the property's value.
    assert constraints.is_dependent(Holder.support) and Holder.support.event_dim == 0
    assert repr(Holder().support) == "Interval(lower_bound=0.0, upper_bound=2.0)"


def test_independent_needs_enough_dimensions():
    with pytest.raises(ValueError, match="Expected value.dim\\(\\) >= 2 but got 1"):
        constraints.independent(constraints.real, 2).check(_t([1.0]))


def test_bounds_may_be_tensors():
    inside = constraints.interval(_t([0.0, 1.0]), _t([1.0, 2.0])).check(_t([0.5, 0.5]))
    assert inside.numpy().tolist() == [True, False]
    np.testing.assert_array_equal(constraints.greater_than(_t([0.0, 1.0])).check(_t([0.5, 0.5])).numpy(), [True, False])


# (constraint, value of fewer than 2 dimensions, PyTorch's error): the triangular ones call tril first,
# the square ones read shape[-2].
MATRIX_CONSTRAINTS_ON_LOW_RANKS = [
    ("lower_triangular 1-D", constraints.lower_triangular, [1.0], RuntimeError, "at least 2 dimensions"),
    ("lower_triangular 0-D", constraints.lower_triangular, 1.0, RuntimeError, "at least 2 dimensions"),
    ("lower_cholesky 1-D", constraints.lower_cholesky, [1.0], RuntimeError, "at least 2 dimensions"),
    ("lower_cholesky 0-D", constraints.lower_cholesky, 1.0, RuntimeError, "at least 2 dimensions"),
    ("square 1-D", constraints.square, [1.0], IndexError, "tuple index out of range"),
    ("symmetric 1-D", constraints.symmetric, [1.0], IndexError, "tuple index out of range"),
    ("positive_semidefinite 0-D", constraints.positive_semidefinite, 1.0, IndexError, "tuple index out of range"),
    ("positive_definite 1-D", constraints.positive_definite, [1.0], IndexError, "tuple index out of range"),
]


@pytest.mark.parametrize(
    "name, constraint, value, error, message",
    MATRIX_CONSTRAINTS_ON_LOW_RANKS,
    ids=[case[0] for case in MATRIX_CONSTRAINTS_ON_LOW_RANKS],
)
def test_matrix_constraints_refuse_fewer_than_two_dimensions_like_pytorch(name, constraint, value, error, message):
    with pytest.raises(error, match=message):
        constraint.check(_t(value))
