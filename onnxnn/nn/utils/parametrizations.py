"""Ready-made parametrizations (PyTorch's ``torch.nn.utils.parametrizations``): ``orthogonal``,
``weight_norm`` and ``spectral_norm``, each registered with :mod:`.parametrize`.

Every map is built from recorded Tensor ops (the Householder QR, ``matrix_exp`` and ``Solve`` of
the runtime's linear algebra), so the parametrized weight trains, runs on both executors and
exports to ONNX like any other computation.
"""

from __future__ import annotations

import enum

import numpy as np

from ...runtime.random_creation import randn
from ...runtime.grad_mode import no_grad
from ...runtime.internal import constant_tensor
from ...runtime.ops.elementwise import where
from ...runtime.ops.linalg_lu import eye_like, linalg_solve, mask_like
from ...runtime.ops.linalg_qr import geqrf, householder_product, matrix_exp
from ...runtime.ops.shape import cat
from ...runtime.tensor import Tensor
from ..functional import normalize
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ---------------------------------------------------------------------- orthogonal


def _is_orthogonal(Q: Tensor) -> bool:
    """Whether ``Q^T Q = I`` within ten units in the last place per row of Q."""
    n, k = Q.shape[-2], Q.shape[-1]
    gram = (Q.mT @ Q).numpy(force=True)
    tolerance = 10.0 * n * float(np.finfo(gram.dtype).eps)
    return bool(np.allclose(gram, np.eye(k, dtype=gram.dtype), atol=tolerance))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A's QR decomposition, with signs making R's diagonal positive (a unique choice)."""
    reflectors, tau = geqrf(A)
    Q = householder_product(reflectors, tau)
    return Q * reflectors.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _OrthMaps(enum.Enum):
    matrix_exp = enum.auto()
    cayley = enum.auto()
    householder = enum.auto()


class _Orthogonal(Module):
    """Maps an unconstrained (..., n, k) tensor to one with orthonormal columns (rows when n < k).

    ``matrix_exp`` and ``cayley`` read the lower triangle of the tall matrix as a skew-symmetric
    ``A = X - X^T`` and return the first k columns of ``exp(A)`` or of ``(I - A/2)^-1 (I + A/2)``.
    ``householder`` reads the strictly lower triangle as Householder reflectors (with ``tau =
    2 / (1 + ||v||^2)``, so each is a true reflection) and multiplies their product by the signs
    on X's diagonal. With ``use_trivialization`` the result is left-multiplied by the ``base``
    buffer, an orthogonal matrix set by ``right_inverse``, so that any orthogonal matrix can be
    assigned and training moves around it.
    """

    base: Tensor | None

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        # X is tall from here on: (..., n, k) with n >= k.
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:  # a square (..., n, n) matrix whose last n - k columns are zero
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], -1)
            A = X - X.mH  # skew-symmetric
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:  # the Cayley transform (I - A/2)^-1 (I + A/2)
                identity = eye_like(n, A)
                Q = linalg_solve(identity - 0.5 * A, identity + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = householder_product(A, tau)
            # The signs on X's diagonal (1 or -1): cast to int so that no gradient reaches the diagonal.
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        base = getattr(self, "base", None)
        if base is not None:
            Q = base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q: Tensor) -> Tensor:
        if Q.shape != self.shape:
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of shape {Q.shape}."
            )
        assigned = Q
        n, k = Q.shape[-2], Q.shape[-1]
        transposed = n < k
        if transposed:
            Q = Q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
                # Inverting exp or Cayley on the tall-matrix embedding has no closed form.
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential "
                    "or the Cayley parametrizations when use_trivialization=False."
                )
            # Householder: QR of Q, reflectors below the diagonal, and on the diagonal the sign that
            # makes R's diagonal positive, flipped where LAPACK did not reflect (tau == 0).
            A, tau = geqrf(Q)
            signs = A.diagonal(dim1=-2, dim2=-1).sign()
            signs = where(tau.eq(0.0), -signs, signs)
            on_diagonal = mask_like(np.eye(n, k, dtype=bool), A)
            A = where(on_diagonal, signs.unsqueeze(-2), A)
            return A.mT if transposed else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:  # complete the k columns to an n x n orthogonal matrix with random ones
            completion = randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(cat([Q, completion], -1))
        self.base = Q
        # forward(-I) is I for every map (householder reads the -1 diagonal as signs), so the
        # parametrized tensor starts exactly at ``base``.
        negative_identity = -np.eye(*assigned.shape[-2:], dtype=assigned.dtype.numpy_dtype)
        # A tensor of its own (not a shared graph constant): it becomes the value of ``original``.
        array = np.broadcast_to(negative_identity, tuple(assigned.shape)).copy()
        return constant_tensor(array, assigned.dtype, assigned.device)


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: str | None = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """Constrains ``module.<name>`` to be orthogonal: ``Q^T Q = I`` for a tall matrix, ``Q Q^T = I``
    for a wide one (each matrix of a batch).

    Args:
        module: the module whose tensor is parametrized.
        name: the parameter or buffer (at least 2 dimensions). Default: ``"weight"``.
        orthogonal_map: ``"matrix_exp"``, ``"cayley"`` or ``"householder"``. Default:
            ``"matrix_exp"`` for a square (or complex) matrix, ``"householder"`` otherwise.
        use_trivialization: keep a ``base`` orthogonal matrix (a buffer, in the ``state_dict``) that
            the map's result multiplies, so that any orthogonal matrix can be assigned to the
            tensor. Without it only the householder map can be assigned to.

    Returns:
        ``module``, with ``module.parametrizations[name]`` holding the map.

    Raises:
        ValueError: no tensor ``name``, fewer than 2 dimensions, or an unknown map.

    Example::

        >>> layer = orthogonal(nn.Linear(20, 40))
        >>> Q = layer.weight
        >>> onnxnn.dist(Q.T @ Q, onnxnn.eye(20)) < 1e-5
        tensor(True)
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    orthogonal_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orthogonal_enum is None:
        raise ValueError(
            f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: {orthogonal_map}'
        )
    parametrization = _Orthogonal(weight, orthogonal_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, parametrization, unsafe=True)
    return module


# ---------------------------------------------------------------------- weight_norm


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of v over every dimension but ``dim``, kept as size-1 dimensions (``dim=-1``:
    the norm of everything, a 0-d tensor)."""
    if dim == -1:
        return (v * v).sum().sqrt()
    axes = [axis for axis in range(v.dim()) if axis != dim % v.dim()]
    if not axes:
        return v.abs()
    return (v * v).sum(axes, keepdim=True).sqrt()


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """``g * v / ||v||``, the norm over every dimension but ``dim`` (-1: the whole tensor); also the
    old hook-based ``nn.utils.weight_norm``'s weight."""
    return v * (g / _norm_except_dim(v, dim))


class _WeightNorm(Module):
    """``w = g * v / ||v||``, with the norm over every dimension but ``dim``."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Splits ``module.<name>`` into a magnitude ``g`` and a direction ``v``: ``w = g v / ||v||``.

    ``g`` is stored as ``parametrizations.<name>.original0`` and ``v`` as ``original1`` (both
    parameters); a ``state_dict`` written by the old ``nn.utils.weight_norm`` (keys ``<name>_g``,
    ``<name>_v``) loads into it.

    Args:
        module: the module whose tensor is parametrized.
        name: the parameter. Default: ``"weight"``.
        dim: the dimension kept by the norm (one ``g`` per slice along it); None: one norm of the
            whole tensor. Default: 0 (one per output feature of a Linear or Conv).

    Returns:
        ``module``.

    Example::

        >>> layer = weight_norm(nn.Linear(20, 40))
        >>> layer.parametrizations.weight.original0.shape
        onnxnn.Size([40, 1])
    """
    weight = getattr(module, name, None)
    if dim is not None and dim != -1 and isinstance(weight, Tensor):
        weight.size(dim)  # PyTorch's IndexError for a dim out of range, before anything is registered
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def load_old_names(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs) -> None:
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(load_old_names)
    return module


# ---------------------------------------------------------------------- spectral_norm


def _reshape_weight_to_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` as a (size(dim), -1) matrix: dimension ``dim`` (non-negative) moved to the front
    (a vector is one column)."""
    if dim != 0:
        weight = weight.permute(dim, *(axis for axis in range(weight.dim()) if axis != dim))
    return weight.flatten(1) if weight.dim() > 1 else weight.unsqueeze(1)


class _SpectralNorm(Module):
    """``w / sigma(w)``, sigma the largest singular value of w seen as a (size(dim), -1) matrix,
    estimated by power iteration on the ``_u`` and ``_v`` buffers (updated in training mode only)."""

    _u: Tensor
    _v: Tensor

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:  # a vector is normalized exactly, without estimates
            self.n_power_iterations = n_power_iterations
            with no_grad():
                weight_matrix = self._reshape_weight_to_matrix(weight)
                rows, columns = weight_matrix.shape
                u = normalize(weight_matrix.new_empty(rows).normal_(0, 1), dim=0, eps=self.eps)
                v = normalize(weight_matrix.new_empty(columns).normal_(0, 1), dim=0, eps=self.eps)
            self.register_buffer("_u", u)
            self.register_buffer("_v", v)
            # Start from good estimates of the singular vectors.
            self._power_method(weight_matrix, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return _reshape_weight_to_matrix(weight, self.dim)

    def _power_method(self, weight_matrix: Tensor, n_power_iterations: int) -> None:
        # The buffers are written in place (rebound), so the module keeps the same tensor objects.
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(weight_matrix.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(weight_matrix.mH.mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_matrix = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_matrix, self.n_power_iterations)
        # Copies, so that a later forward's in-place update does not change what this one's
        # backward saved (two forwards, one backward: a GAN discriminator's real and fake passes).
        u, v = self._u.clone(), self._v.clone()
        sigma = u.vdot(weight_matrix.mv(v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> Module:
    """Divides ``module.<name>`` by its spectral norm (largest singular value), estimated by power iteration.

    In training mode each read of the weight runs ``n_power_iterations`` steps of the power
    method on the buffers ``parametrizations.<name>.0._u`` and ``._v`` (no gradient flows
    through them); in eval mode the stored estimates are used as they are.

    Args:
        module: the module whose tensor is parametrized.
        name: the parameter. Default: ``"weight"``.
        n_power_iterations: power-method steps per read in training mode. Default: 1.
        eps: the smallest norm a vector is divided by. Default: ``1e-12``.
        dim: the dimension of output channels. Default: 1 for ``ConvTranspose*``, 0 otherwise.

    Returns:
        ``module``.

    Raises:
        ValueError: no tensor ``name``, or ``n_power_iterations`` not positive.
        IndexError: ``dim`` out of range.

    Example::

        >>> layer = spectral_norm(nn.Linear(20, 40))
        >>> sorted(layer.parametrizations.weight[0]._buffers)
        ['_u', '_v']
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
