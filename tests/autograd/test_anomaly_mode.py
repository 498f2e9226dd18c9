"""Anomaly detection, as ``torch.autograd.detect_anomaly``: where a failing backward node's forward was.

Inside ``detect_anomaly`` every backward node remembers its forward call's stack; a node whose
gradient holds a NaN raises naming itself (``check_nan``), and any failure in a node's backward
warns with that stack. Outside it, nothing is checked and backwards are replayed as usual.
"""

from __future__ import annotations

import math

import pytest

import onnxnn
from onnxnn.autograd import detect_anomaly, set_detect_anomaly


def _nan_at_zero():
    x = onnxnn.tensor([0.0, 1.0], requires_grad=True)
    return x, (onnxnn.sqrt(x) * 0).sum()  # d sqrt/dx at 0 is inf; times 0 gives NaN


def test_a_nan_gradient_raises_naming_the_node_and_its_forward_line():
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        with detect_anomaly():
            x, loss = _nan_at_zero()
            with pytest.warns(
                UserWarning, match=r"Error detected in SqrtBackward0\. Traceback of forward call"
            ) as caught:
                with pytest.raises(
                    RuntimeError, match=r"Function 'SqrtBackward0' returned nan values in its 0th output"
                ):
                    loss.backward()
    forward_stack = str(caught[-1].message)
    assert "_nan_at_zero" in forward_stack and "onnxnn.sqrt(x) * 0" in forward_stack
    assert not onnxnn.is_anomaly_enabled()


def test_without_anomaly_mode_the_nan_reaches_grad():
    x, loss = _nan_at_zero()
    loss.backward()
    first, second = x.grad.numpy().tolist()
    assert math.isnan(first) and second == 0.0


def test_check_nan_false_only_watches_for_errors():
    with pytest.warns(UserWarning):
        with detect_anomaly(check_nan=False):
            assert onnxnn.is_anomaly_enabled() and not onnxnn.is_anomaly_check_nan_enabled()
            x, loss = _nan_at_zero()
            loss.backward()
    assert math.isnan(x.grad.numpy()[0])
    assert onnxnn.is_anomaly_check_nan_enabled()  # the default again


def test_an_error_in_a_custom_backward_warns_with_the_forward_stack():
    class Failing(onnxnn.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, gradient):
            raise ValueError("boom")

    with pytest.warns(UserWarning):
        with detect_anomaly():
            y = Failing.apply(onnxnn.ones(2, requires_grad=True))
            with pytest.warns(UserWarning, match="Error detected in FailingBackward. Traceback of forward call"):
                with pytest.raises(ValueError, match="boom"):
                    y.sum().backward()


def test_a_node_made_before_anomaly_mode_has_no_forward_information():
    x, loss = _nan_at_zero()
    with set_detect_anomaly(True):
        with pytest.warns(UserWarning, match="No forward pass information available"):
            with pytest.raises(RuntimeError, match="returned nan values"):
                loss.backward()
    assert not onnxnn.is_anomaly_enabled()


def test_every_backward_is_checked_even_a_structure_replayed_before():
    weight = onnxnn.tensor([4.0], requires_grad=True)
    for _ in range(4):  # a replayed structure by now
        (onnxnn.sqrt(weight) * 0).sum().backward()
    with set_detect_anomaly(True):
        weight.data = onnxnn.tensor([0.0])
        with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="SqrtBackward0"):
            (onnxnn.sqrt(weight) * 0).sum().backward()


def test_set_detect_anomaly_takes_effect_at_once_and_restores_on_exit():
    switch = set_detect_anomaly(True, check_nan=False)
    assert onnxnn.is_anomaly_enabled() and not onnxnn.is_anomaly_check_nan_enabled()
    with switch:
        pass
    assert not onnxnn.is_anomaly_enabled() and onnxnn.is_anomaly_check_nan_enabled()
    onnxnn.set_anomaly_enabled(True)
    assert onnxnn.is_anomaly_enabled()
    onnxnn.set_anomaly_enabled(False)


def test_detect_anomaly_decorates_functions():
    @detect_anomaly()
    def inside():
        return onnxnn.is_anomaly_enabled()

    with pytest.warns(UserWarning):
        assert inside()
    assert not onnxnn.is_anomaly_enabled()
