"""The layer chains of the small test models, as ``tolerances.chain_bound`` steps."""

from __future__ import annotations

import numpy as np

from onnxnn import nn

from tolerances import TRANSCENDENTAL_ULPS, assert_within, chain_bound

__all__ = ["chain_steps", "assert_same_model_output"]


def _relu(v):
    return np.maximum(v, 0)


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def chain_steps(module, shape=None) -> list:
    """Steps of a module built from Linear, BatchNorm1d (eval), Dropout (eval) and 1-Lipschitz activations.

    A module with its own ``forward`` lists its steps in a ``chain_steps(shape)`` method.
    """
    if hasattr(module, "chain_steps"):
        return module.chain_steps(shape)
    if isinstance(module, nn.Sequential):
        return [step for layer in module for step in chain_steps(layer, shape)]
    if isinstance(module, nn.Linear):
        bias = None if module.bias is None else module.bias.detach().numpy()
        return [("affine", module.weight.detach().numpy().T, bias)]
    if isinstance(module, nn.BatchNorm1d):
        scale = module.weight.detach().numpy() / np.sqrt(module.running_var.numpy().astype(np.float64) + module.eps)
        return [("scale", scale, module.bias.detach().numpy() - module.running_mean.numpy() * scale)]
    if isinstance(module, nn.ReLU):
        return [("apply", _relu, 0)]
    if isinstance(module, nn.Tanh):
        return [("apply", np.tanh, TRANSCENDENTAL_ULPS)]
    if isinstance(module, nn.Sigmoid):  # 1/4-Lipschitz: carrying errors through at 1 over-bounds them
        return [("apply", _sigmoid, TRANSCENDENTAL_ULPS)]
    if isinstance(module, nn.Dropout):  # the identity in eval
        return []
    raise NotImplementedError(f"no chain steps for {type(module).__name__}")


def relu_step() -> tuple:
    return ("apply", _relu, 0)


def assert_same_model_output(actual, model, x) -> None:
    """``actual`` is ``model(x)`` up to the rounding two float32 computations of its layer chain may do."""
    import onnxnn

    x = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    with onnxnn.no_grad():
        expected = model(onnxnn.tensor(x)).numpy()
    actual = actual.numpy() if hasattr(actual, "numpy") else actual
    assert_within(actual, expected, 2 * chain_bound(x, chain_steps(model, x.shape)))
