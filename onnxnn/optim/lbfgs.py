"""L-BFGS with PyTorch's algorithm: two-loop recursion over a bounded history, and an optional
strong Wolfe line search (cubic interpolation, then zoom), as ``torch.optim.LBFGS``.

The direction and the line search are arithmetic on one flat vector of all parameters, done in
numpy in the parameters' dtype: they are a handful of dot products per iteration between closure
calls, nothing worth recording as a graph. The closure (forward and backward) runs as usual. The
state keeps PyTorch's entries and types (tensors for the vectors and the scalars computed from
them, lists of tensors for the history), so it saves with ``onnxnn.save`` and a state saved by
PyTorch loads and steps; a step reads the tensors' arrays and wraps its results, never copying.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from ..runtime.creation import from_numpy
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.tensor import Tensor
from .optimizer import Optimizer, _check_floating_point

__all__ = ["LBFGS"]


def _as_array(value):
    """A state entry as numpy: a tensor's array is read, not copied; numbers (and None) stay as they are."""
    if isinstance(value, Tensor):
        return value.numpy(force=True)
    return value


def _as_scalar(value):
    """A hyperparameter as the step's arithmetic takes it: a Tensor (one element) as a numpy scalar of
    its dtype, as PyTorch computes with a 0-d tensor; numbers stay as they are."""
    if isinstance(value, Tensor):
        return np.asarray(value.numpy(force=True)).reshape(())[()]
    return value


def _as_tensor(value):
    """A numpy result as a state tensor, sharing its array (never written again); numbers stay as they are."""
    if not isinstance(value, (np.ndarray, np.generic)):
        return value
    array = np.asarray(value)
    array.setflags(write=False)
    return from_numpy(array)


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to ``bounds``.

    Numpy scalars (PyTorch's 0-d tensors) stay numpy scalars and bounds are returned as given, so
    that the step length the state keeps has the type PyTorch's has.
    """
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square < 0:
        return (low + high) / 2.0
    d2 = np.sqrt(d2_square)
    if x1 <= x2:
        minimum = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        minimum = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(minimum, low), high)  # a bound as given (an int stays one), as PyTorch's


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step length ``t`` along ``d`` meeting the strong Wolfe conditions (Nocedal & Wright, Alg. 3.5/3.6).

    Returns (loss, flat gradient, t, function evaluations).
    """
    d_norm = float(np.abs(d).max())
    f_new, g_new = evaluate(t)
    evaluations = 1
    gtd_new = g_new @ d
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd  # an int 0, as PyTorch's: a step length the state keeps
    done = False
    iteration = 0
    bracket: list = []
    bracket_f: list = []
    bracket_g: list = []
    bracket_gtd: list = []
    while iteration < max_ls:
        if f_new > (f + c1 * t * gtd) or (iteration > 1 and f_new >= f_prev):
            bracket, bracket_f, bracket_g, bracket_gtd = (
                [t_prev, t],
                [f_prev, f_new],
                [g_prev, g_new],
                [gtd_prev, gtd_new],
            )
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f, bracket_g, bracket_gtd = (
                [t_prev, t],
                [f_prev, f_new],
                [g_prev, g_new],
                [gtd_prev, gtd_new],
            )
            break
        # Extrapolate: the next trial lies between 1.01 t and 10 t.
        bounds = (t + 0.01 * (t - t_prev), t * 10)
        t_prev, t = t, _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=bounds)
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = evaluate(t)
        evaluations += 1
        gtd_new = g_new @ d
        iteration += 1
    if iteration == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # Zoom: shrink the bracket until a point meets the conditions.
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and iteration < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # Keep away from the bracket's ends, where the interpolation stalls.
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t)
        evaluations += 1
        gtd_new = g_new @ d
        iteration += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evaluations


class LBFGS(Optimizer):
    """Implements L-BFGS, as ``torch.optim.LBFGS`` (heavily memory-hungry: ``history_size`` pairs of
    flat parameter-sized vectors; one param group only).

    Args:
        params: tensors to optimize (one group).
        lr: learning rate, the initial step length (default: 1).
        max_iter: iterations per ``step`` (default: 20).
        max_eval: closure evaluations per ``step`` (default: ``max_iter * 5 // 4``).
        tolerance_grad: stop when the gradient's largest magnitude is at most this (default: 1e-7).
        tolerance_change: stop when the loss or the step changes less than this (default: 1e-9).
        history_size: update pairs kept (default: 100).
        line_search_fn: ``None`` (fixed steps of ``lr``) or ``"strong_wolfe"``.

    Example::

        >>> optimizer = onnxnn.optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")
        >>> def closure():
        ...     optimizer.zero_grad()
        ...     loss = criterion(model(inputs), targets)
        ...     loss.backward()
        ...     return loss
        >>> optimizer.step(closure)
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(
            lr=lr,
            max_iter=max_iter,
            max_eval=max_eval,
            tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change,
            history_size=history_size,
            line_search_fn=line_search_fn,
        )
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self) -> np.ndarray:
        parts = [
            np.zeros(p.numel(), p.numpy(force=True).dtype)
            if p.grad is None
            else np.asarray(p.grad.numpy(force=True)).reshape(-1)
            for p in self._params
        ]
        return np.concatenate(parts)

    def _flat_params(self) -> np.ndarray:
        return np.concatenate([np.asarray(p.numpy(force=True)).reshape(-1) for p in self._params])

    def _set_flat_params(self, flat: np.ndarray) -> None:
        offset = 0
        for p in self._params:
            count = p.numel()
            p.data = from_numpy(
                np.asarray(flat[offset : offset + count].reshape(p.shape), dtype=p.numpy(force=True).dtype, order="C")
            )
            offset += count

    def step(self, closure: Callable[[], Any]):  # type: ignore[override]
        """Runs up to ``max_iter`` L-BFGS iterations.

        Args:
            closure: re-evaluates the model (zeroing the gradients, running backward) and returns the loss.

        Returns:
            The loss of the first closure call.
        """
        group = self.param_groups[0]
        lr, max_iter, max_eval = _as_scalar(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        def evaluate() -> float:
            with enable_grad():
                return float(closure())

        original_loss = None
        with enable_grad():
            original_loss = closure()
        _check_floating_point(self.param_groups)  # the closure assigned the gradients
        loss = float(original_loss)
        evaluations = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return original_loss

        d, t, h_diag, prev_flat_grad = (_as_array(state.get(key)) for key in ("d", "t", "H_diag", "prev_flat_grad"))
        if isinstance(t, np.ndarray):  # a tensor step length, as PyTorch's first one may be
            t = t[()]
        old_dirs, old_steps, ro = (
            [_as_array(v) for v in state.get(key) or ()] for key in ("old_dirs", "old_stps", "ro")
        )
        prev_loss = state.get("prev_loss")
        alphas = None
        iteration = 0
        with no_grad():
            while iteration < max_iter:
                iteration += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = -flat_grad
                    old_dirs, old_steps, ro, h_diag = [], [], [], 1
                else:
                    y = flat_grad - prev_flat_grad
                    s = d * t
                    ys = y @ s
                    if ys > 1e-10:  # curvature condition: only then is the pair a useful update
                        if len(old_dirs) == history_size:
                            old_dirs.pop(0), old_steps.pop(0), ro.pop(0)
                        old_dirs.append(y)
                        old_steps.append(s)
                        ro.append(1.0 / ys)
                        h_diag = ys / (y @ y)
                    # Two-loop recursion: d = -H g with H the L-BFGS inverse Hessian estimate.
                    alphas = [0.0] * len(old_dirs)
                    q = -flat_grad
                    for i in range(len(old_dirs) - 1, -1, -1):
                        alphas[i] = (old_steps[i] @ q) * ro[i]
                        q = q - alphas[i] * old_dirs[i]
                    r = q * h_diag
                    for i in range(len(old_dirs)):
                        beta = (old_dirs[i] @ r) * ro[i]
                        r = r + (alphas[i] - beta) * old_steps[i]
                    d = r
                prev_flat_grad = flat_grad.copy()
                prev_loss = loss
                t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
                gtd = flat_grad @ d
                if gtd > -tolerance_change:  # not a descent direction
                    break
                extra_evaluations = 0
                if line_search_fn is not None:
                    if line_search_fn != "strong_wolfe":  # only once reached, as PyTorch's
                        raise RuntimeError("only 'strong_wolfe' is supported")
                    start = self._flat_params()

                    def along(step_length: float):
                        self._set_flat_params(start + step_length * d)
                        value = evaluate()
                        gradient = self._flat_grad()
                        self._set_flat_params(start)
                        return value, gradient

                    # The line search spends what is left of the step's evaluations, as PyTorch's.
                    loss, flat_grad, t, extra_evaluations = _strong_wolfe(
                        along, t, d, loss, flat_grad, gtd, max_ls=max_eval - evaluations
                    )
                    self._set_flat_params(start + t * d)
                    converged = np.abs(flat_grad).max() <= tolerance_grad
                else:
                    self._set_flat_params(self._flat_params() + t * d)
                    converged = False
                    if iteration != max_iter:
                        loss = evaluate()
                        flat_grad = self._flat_grad()
                        converged = np.abs(flat_grad).max() <= tolerance_grad
                        extra_evaluations = 1
                evaluations += extra_evaluations
                state["func_evals"] += extra_evaluations
                if iteration == max_iter or evaluations >= max_eval or converged:
                    break
                if np.abs(d * t).max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                    break
        if alphas is not None:
            # PyTorch's buffer of the two-loop recursion's coefficients: history_size long, the
            # entries past the history's length never written.
            al = state.get("al") or [None] * history_size
            al[: len(alphas)] = [_as_tensor(alpha) for alpha in alphas]
            state["al"] = al
        state.update(
            d=_as_tensor(d), t=_as_tensor(t), old_dirs=[_as_tensor(v) for v in old_dirs],
            old_stps=[_as_tensor(v) for v in old_steps], ro=[_as_tensor(v) for v in ro], H_diag=_as_tensor(h_diag),
            prev_flat_grad=_as_tensor(prev_flat_grad), prev_loss=prev_loss,
        )  # fmt: skip
        return original_loss
