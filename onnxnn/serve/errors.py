"""The two ways a request fails: the client's fault (400) or the model's (503)."""

from __future__ import annotations

__all__ = ["BadRequest", "ModelUnavailable"]


class BadRequest(ValueError):
    """The request is wrong (unknown model, dtype, shape, count, malformed body): HTTP 400."""

    status_code = 400


class ModelUnavailable(RuntimeError):
    """The model failed to load or to run: HTTP 503, the other models keep serving."""

    status_code = 503
