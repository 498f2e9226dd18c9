"""Muon: momentum whose update of a matrix is orthogonalized by a Newton-Schulz iteration."""

from __future__ import annotations

import math
from typing import Iterable

from ..ir import dtypes
from ..runtime.grad_mode import no_grad
from ..runtime.internal import record_update
from ..runtime.ops.opmath import REDUCED_FLOATS
from ..runtime.tensor import Tensor
from .optimizer import Optimizer
from .step_recording import OpmathStep, _hyperparameter, _zeros_like

__all__ = ["Muon", "muon"]

# The quintic's coefficients (a, b, c), chosen to maximize its slope at zero (Keller Jordan's Muon).
DEFAULT_NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
DEFAULT_NS_STEPS = 5
EPS = 1e-7


class Muon(Optimizer):
    r"""Implements Muon (MomentUm Orthogonalized by Newton-Schulz), as ``torch.optim.Muon``.

    For each 2-D parameter, with momentum buffer :math:`B`:

    .. math::
        B_t = \mu B_{t-1} + (1 - \mu) g_t, \quad
        \tilde B_t = \begin{cases} g_t + \mu (B_t - g_t) & \text{nesterov} \\ B_t & \text{otherwise} \end{cases}, \quad
        \theta_t = \theta_{t-1}(1 - \gamma\lambda) - \gamma' \, \mathrm{NS}_k(\tilde B_t)

    where :math:`\mathrm{NS}_k` runs ``ns_steps`` iterations of
    :math:`X \leftarrow aX + (bXX^\top + c(XX^\top)^2)X` in bfloat16 from :math:`X = \tilde B / \|\tilde B\|`
    (on the transpose of a tall matrix), which drives every singular value towards 1, and
    :math:`\gamma'` is ``lr`` scaled for the matrix's shape :math:`A \times B` by ``adjust_lr_fn``:
    ``"original"`` (the default) :math:`\sqrt{\max(1, A/B)}`, ``"match_rms_adamw"`` :math:`0.2\sqrt{\max(A, B)}`.
    Muon is meant for hidden layers' weight matrices; optimize biases, embeddings and the other
    parameters with another optimizer (AdamW).

    Args:
        params: 2-D tensors to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-3).
        weight_decay: decoupled weight decay (default: 0.1).
        momentum: momentum factor (default: 0.95).
        nesterov: use Nesterov momentum (default: True).
        ns_coefficients: the quintic's (a, b, c) (default: (3.4445, -4.7750, 2.0315)).
        eps: added to the norm that scales the iteration's start (default: 1e-7).
        ns_steps: Newton-Schulz iterations, fewer than 100 (default: 5).
        adjust_lr_fn: ``None`` or ``"original"``, or ``"match_rms_adamw"``.

    Raises:
        ValueError: a parameter that is not 2-D, or a hyperparameter out of range.

    Example::

        >>> matrices = [p for p in model.parameters() if p.ndim == 2]
        >>> others = [p for p in model.parameters() if p.ndim != 2]
        >>> optimizers = [onnxnn.optim.Muon(matrices, lr=0.02), onnxnn.optim.AdamW(others, lr=3e-4)]
    """

    def __init__(
        self,
        params: Iterable,
        lr: float | Tensor = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = DEFAULT_NS_COEFFICIENTS,
        eps: float = EPS,
        ns_steps: int = DEFAULT_NS_STEPS,
        adjust_lr_fn: str | None = None,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            nesterov=nesterov,
            ns_coefficients=ns_coefficients,
            eps=eps,
            ns_steps=ns_steps,
            adjust_lr_fn=adjust_lr_fn,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            for param in group["params"]:
                if param.ndim != 2:
                    raise ValueError(
                        f"Muon only supports 2D parameters whereas we found a parameter with size: {param.size()}"
                    )

    def _init_group(self, group: dict):
        params, grads, buffers = [], [], []
        for param in group["params"]:
            if param.grad is None:
                continue
            if param.is_complex():
                raise RuntimeError("Muon does not support complex parameters")
            params.append(param)
            grads.append(param.grad)
            state = self.state[param]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = _zeros_like(param.grad)
            buffers.append(state["momentum_buffer"])
        return params, grads, buffers

    def _update_group(self, group: dict) -> list[Tensor]:
        params, grads, buffers = self._init_group(group)
        muon(
            params,
            grads,
            buffers,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            momentum=group["momentum"],
            nesterov=group["nesterov"],
            ns_coefficients=group["ns_coefficients"],
            ns_steps=group["ns_steps"],
            eps=group["eps"],
            adjust_lr_fn=group["adjust_lr_fn"],
        )
        return params + buffers


def zeropower_via_newtonschulz(
    matrix: Tensor, ns_coefficients: tuple[float, float, float], ns_steps: int, eps: float
) -> Tensor:
    """The Newton-Schulz iteration of Muon, in bfloat16: ``matrix`` with its singular values driven
    towards 1 (into about [0.7, 1.2] after five steps, which serves as well as exactly 1).

    Raises:
        ValueError: ``ns_steps`` of 100 or more, a matrix that is not 2-D, or not three coefficients.
    """
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if matrix.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    tall = matrix.shape[0] > matrix.shape[1]
    x = matrix.to(dtypes.bfloat16)
    if tall:  # the Gram matrix of the shorter side is the smaller product
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        # PyTorch's two ``addmm``s: each sums its product and scaled input at float32 and rounds once.
        polynomial = gram.addmm(gram, gram, beta=b, alpha=c)
        x = x.addmm(polynomial, x, beta=a)
    return x.T if tall else x


def _adjusted_lr(lr: float, adjust_lr_fn: str | None, shape) -> float:
    rows, columns = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / columns))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, columns))
    return lr


def muon(
    params: list[Tensor],
    grads: list[Tensor],
    momentum_buffers: list[Tensor],
    *,
    lr: float | Tensor,
    weight_decay: float,
    momentum: float,
    nesterov: bool,
    ns_coefficients: tuple[float, float, float],
    ns_steps: int,
    eps: float,
    adjust_lr_fn: str | None,
) -> None:
    """Functional Muon: records the update of every matrix in ``params`` and of its momentum buffer
    (lazily, in place)."""
    lr = float(lr)
    with no_grad():
        for param, grad, buffer in zip(params, grads, momentum_buffers):
            if grad.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            if param.dtype in REDUCED_FLOATS:
                adjusted_lr = _adjusted_lr(lr, adjust_lr_fn, param.shape)
                _opmath_step(
                    param,
                    grad,
                    buffer,
                    lr,
                    adjusted_lr,
                    weight_decay,
                    momentum,
                    nesterov,
                    (ns_coefficients, ns_steps, eps),
                )
                continue
            new_buffer = buffer + (grad - buffer) * _hyperparameter("1-momentum", 1 - momentum, buffer)
            update = (
                grad + (new_buffer - grad) * _hyperparameter("momentum", momentum, grad) if nesterov else new_buffer
            )
            orthogonal = zeropower_via_newtonschulz(update, ns_coefficients, ns_steps, eps)
            decayed = param * _hyperparameter("1-lr*weight_decay", 1 - lr * weight_decay, param)
            step = orthogonal.to(param.dtype) * _hyperparameter(
                "adjusted lr", _adjusted_lr(lr, adjust_lr_fn, param.shape), param
            )
            record_update(buffer, new_buffer)
            record_update(param, decayed - step)


def _opmath_step(
    param: Tensor,
    grad: Tensor,
    buffer: Tensor,
    lr: float,
    adjusted_lr: float,
    weight_decay: float,
    momentum: float,
    nesterov: bool,
    newton_schulz: tuple,
) -> None:
    """One float16/bfloat16 matrix's step, op for op as ``torch.optim.Muon``'s: each op computed in
    float32 and rounded once to the parameter's dtype, its Python scalars read at float32 (bfloat16's
    ``1 - 0.02 * 0.1`` would be 0.99609375, twice the decay)."""
    step = OpmathStep(param)
    gradient = step.load(grad)
    new_buffer = step.lerp_either(step.load(buffer), gradient, "1-momentum", 1 - momentum)
    update = step.lerp_either(gradient, new_buffer, "momentum", momentum) if nesterov else new_buffer
    # The iteration runs in bfloat16 whatever the parameter's dtype (bfloat16 holds every float16
    # value's exponent, so the float16 -> bfloat16 cast rounds once, as PyTorch's ``.bfloat16()``).
    orthogonal = zeropower_via_newtonschulz(update.to(step.dtype), *newton_schulz)
    weights = step.load(param)
    if weight_decay != 0:  # PyTorch multiplies by 1 always; a product with 1 is exact
        weights = step.multiply(weights, "1-lr*weight_decay", 1 - lr * weight_decay)
    if param.dtype is orthogonal.dtype:
        weights = step.add(weights, step.load(orthogonal), "-adjusted lr", -adjusted_lr)
    else:  # float16 plus bfloat16: PyTorch adds in float32, the common dtype, with alpha at float32
        weights = step.add_wide(weights, orthogonal.to(dtypes.float32), "-adjusted lr", -adjusted_lr)
    step.store(buffer, new_buffer)
    step.store(param, weights)
