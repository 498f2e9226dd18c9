"""Fused updates of SGD, Adamax, NAdam, RAdam, Adadelta, ASGD and Rprop: formulas written once, run three ways.

An optimizer step records one node per group of parameters (``optim/step_recording.py``) instead of
two to sixteen elementwise nodes per parameter, as Adam's, Adagrad's and RMSprop's do
(``runtime/ops/training.py``). The node's inputs are its 0-d hyperparameters, then the parameters,
their gradients and each list of states; its outputs rebind the parameters and the states:

    SGD(lr, weight_decay?, X.., G..; maximize)  (without momentum: ``Momentum`` has it)
    Adamax(step_size, 1-beta1, beta2, epsilon, weight_decay?, X.., G.., M.., U..; maximize)
    NAdam(1-beta1, beta2, 1-beta2, bias_correction2, epsilon, gradient_step, average_step, decay?,
          X.., G.., M.., V..; decoupled_weight_decay, maximize)
    RAdam(1-beta1, beta2, 1-beta2, epsilon, step_size, decay?, X.., G.., M.., V..;
          decoupled_weight_decay, maximize, rectified)
    Adadelta(lr, rho, 1-rho, epsilon, weight_decay?, X.., G.., SQ.., AD..; maximize)
    ASGD(1-lambd*eta, eta, mu?, weight_decay?, X.., G.., AX..; maximize)
    Rprop(etaminus, etaplus, step_size_min, step_size_max, X.., G.., PREV.., STEP..; maximize)

Every factor that depends on the step (bias corrections, NAdam's momentum products, RAdam's
rectification) is computed on the host in Python floats, as PyTorch's step computes it without
``capturable``, and fed as a float64 0-d value, which each tensor's formula reads cast to the
tensor's dtype. (With ``capturable`` the optimizers compute the same values in the graph, in
float64, and feed those.) ``decay`` is ``1 - lr * weight_decay`` with decoupled weight decay, else the L2
coefficient; an omitted one means none. ASGD's ``mu`` is omitted while it is 1 (before ``t0``):
the average is then the new parameter itself.

Each ``formula(xp, x, g, states, factors, attrs)`` returns the new X and new states, in that order.
It uses numpy's names only (``add``, ``subtract``, ``multiply``, ``divide``, ``sqrt``,
``negative``, ``absolute``, ``maximum``, ``minimum``, ``sign``, ``less``, ``greater``,
``where``), with Python numbers as constants of the tensor's dtype, so ``xp`` may be numpy or
CuPy (onnxnn's kernels, ``kernels/training_formulas.py``) or an emitter of the ONNX nodes of the same names (the
decompositions onnxruntime runs, ``runtime/ops/training_formulas.py``). Both executors compute the
same operations on the same operands in the same order: the same bits. The compiled loops
(``kernels/update_loops_template.h``) repeat each formula in C, in that order too. The formulas are
the elementwise Tensor ops these optimizers recorded before their nodes, so fusing changed no result.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

__all__ = ["FusedUpdate", "FUSED_UPDATES"]


class FusedUpdate(NamedTuple):
    """One fused optimizer update: its node's layout and its per-element formula."""

    op_type: str
    hyperparameters: tuple[str, ...]  # the node's 0-d inputs, in order
    optional: frozenset[str]  # those an update may omit (an empty input)
    states: tuple[str, ...]  # the lists of states after X and G
    # formula(xp, x, g, states, factors, attrs) -> (new_x, *new_states); ``factors`` maps each
    # hyperparameter's name to its value in the tensor's dtype (None where omitted).
    formula: Callable[..., tuple]

    @property
    def tensor_lists(self) -> tuple[str, ...]:
        """The lists of tensors after the hyperparameters: X, G, then the states."""
        return ("X", "G", *self.states)


def _gradient(xp, x, g, weight_decay, attrs: dict) -> Any:
    """``G'``: the gradient, negated when maximizing, plus ``X * weight_decay`` (L2 decay) where given."""
    gradient = xp.negative(g) if attrs.get("maximize", 0) else g
    if weight_decay is not None:
        gradient = xp.add(gradient, xp.multiply(x, weight_decay))
    return gradient


def _decayed(xp, x, g, decay, attrs: dict) -> tuple:
    """``(X', G')``: decoupled weight decay scales the parameter (``X * (1 - lr * weight_decay)``),
    L2 decay adds to the gradient (:func:`_gradient`)."""
    if decay is not None and attrs.get("decoupled_weight_decay", 0):
        return xp.multiply(x, decay), _gradient(xp, x, g, None, attrs)
    return x, _gradient(xp, x, g, decay, attrs)


def _first_moment(xp, gradient, m, one_minus_beta1):
    """``M + (G' - M) * (1 - beta1)``: ``exp_avg.lerp_(grad, 1 - beta1)`` as the Tensor ops wrote it."""
    return xp.add(m, xp.multiply(xp.subtract(gradient, m), one_minus_beta1))


def _running_square(xp, gradient, average, rate, one_minus_rate):
    """``A * rate + G' * G' * (1 - rate)``: a running average of squares (Adam's second moment, Adadelta's)."""
    return xp.add(xp.multiply(average, rate), xp.multiply(xp.multiply(gradient, gradient), one_minus_rate))


def _sgd(xp, x, g, states, f, attrs):
    return (xp.subtract(x, xp.multiply(f["lr"], _gradient(xp, x, g, f["weight_decay"], attrs))),)


def _adamax(xp, x, g, states, f, attrs):
    m, u = states
    gradient = _gradient(xp, x, g, f["weight_decay"], attrs)
    new_m = _first_moment(xp, gradient, m, f["1-beta1"])
    new_u = xp.maximum(xp.multiply(u, f["beta2"]), xp.add(xp.absolute(gradient), f["epsilon"]))
    return xp.subtract(x, xp.multiply(xp.divide(new_m, new_u), f["step_size"])), new_m, new_u


def _adam_moments(xp, x, g, states, f, attrs) -> tuple:
    """``(X', G', M_new, V_new)``: the decayed parameter and gradient and Adam's two moments."""
    m, v = states
    x_decayed, gradient = _decayed(xp, x, g, f["decay"], attrs)
    new_m = _first_moment(xp, gradient, m, f["1-beta1"])
    return x_decayed, gradient, new_m, _running_square(xp, gradient, v, f["beta2"], f["1-beta2"])


def _nadam(xp, x, g, states, f, attrs):
    x_decayed, gradient, new_m, new_v = _adam_moments(xp, x, g, states, f, attrs)
    denominator = xp.add(xp.sqrt(xp.divide(new_v, f["bias_correction2"])), f["epsilon"])
    # X' - G' / denominator * gradient_step - M_new / denominator * average_step, left to right
    moved = xp.subtract(x_decayed, xp.multiply(xp.divide(gradient, denominator), f["gradient_step"]))
    return xp.subtract(moved, xp.multiply(xp.divide(new_m, denominator), f["average_step"])), new_m, new_v


def _radam(xp, x, g, states, f, attrs):
    x_decayed, _, new_m, new_v = _adam_moments(xp, x, g, states, f, attrs)
    if attrs.get("rectified", 0):  # rho_t > 5 (capturable steps record both forms and pick in the graph)
        update = xp.multiply(xp.divide(new_m, xp.add(xp.sqrt(new_v), f["epsilon"])), f["step_size"])
    else:
        update = xp.multiply(new_m, f["step_size"])
    return xp.subtract(x_decayed, update), new_m, new_v


def _adadelta(xp, x, g, states, f, attrs):
    square_avg, acc_delta = states
    gradient = _gradient(xp, x, g, f["weight_decay"], attrs)
    new_square_avg = _running_square(xp, gradient, square_avg, f["rho"], f["1-rho"])
    std = xp.sqrt(xp.add(new_square_avg, f["epsilon"]))
    delta = xp.multiply(xp.divide(xp.sqrt(xp.add(acc_delta, f["epsilon"])), std), gradient)
    new_acc_delta = _running_square(xp, delta, acc_delta, f["rho"], f["1-rho"])
    return xp.subtract(x, xp.multiply(delta, f["lr"])), new_square_avg, new_acc_delta


def _asgd(xp, x, g, states, f, attrs):
    (average,) = states
    gradient = _gradient(xp, x, g, f["weight_decay"], attrs)
    new_x = xp.subtract(xp.multiply(x, f["1-lambd*eta"]), xp.multiply(gradient, f["eta"]))
    if f["mu"] is None:
        return new_x, new_x
    return new_x, xp.add(average, xp.multiply(xp.subtract(new_x, average), f["mu"]))


def _rprop(xp, x, g, states, f, attrs):
    previous, step_size = states
    gradient = _gradient(xp, x, g, None, attrs)
    agreement = xp.multiply(gradient, previous)
    flipped = xp.less(agreement, 0.0)
    factor = xp.where(xp.greater(agreement, 0.0), f["etaplus"], xp.where(flipped, f["etaminus"], 1.0))
    new_step_size = xp.minimum(xp.maximum(xp.multiply(step_size, factor), f["step_size_min"]), f["step_size_max"])
    # A flipped sign means the last step overshot: skip this element's step and let the next one
    # count as a fresh start (PyTorch zeroes the gradient where the factor is etaminus).
    kept = xp.where(flipped, 0.0, gradient)
    return xp.subtract(x, xp.multiply(xp.sign(kept), new_step_size)), kept, new_step_size


_DECAY = frozenset({"decay"})
_WEIGHT_DECAY = frozenset({"weight_decay"})

FUSED_UPDATES: dict[str, FusedUpdate] = {
    update.op_type: update
    for update in (
        FusedUpdate("SGD", ("lr", "weight_decay"), _WEIGHT_DECAY, (), _sgd),
        FusedUpdate(
            "Adamax", ("step_size", "1-beta1", "beta2", "epsilon", "weight_decay"), _WEIGHT_DECAY, ("M", "U"), _adamax
        ),
        FusedUpdate(
            "NAdam",
            ("1-beta1", "beta2", "1-beta2", "bias_correction2", "epsilon", "gradient_step", "average_step", "decay"),
            _DECAY,
            ("M", "V"),
            _nadam,
        ),
        FusedUpdate(
            "RAdam", ("1-beta1", "beta2", "1-beta2", "epsilon", "step_size", "decay"), _DECAY, ("M", "V"), _radam
        ),
        FusedUpdate(
            "Adadelta", ("lr", "rho", "1-rho", "epsilon", "weight_decay"), _WEIGHT_DECAY, ("SQ", "AD"), _adadelta
        ),
        FusedUpdate(
            "ASGD", ("1-lambd*eta", "eta", "mu", "weight_decay"), frozenset({"mu", "weight_decay"}), ("AX",), _asgd
        ),
        FusedUpdate(
            "Rprop",
            ("etaminus", "etaplus", "step_size_min", "step_size_max"),
            frozenset(),
            ("PREV", "STEP"),
            _rprop,
        ),
    )
}
