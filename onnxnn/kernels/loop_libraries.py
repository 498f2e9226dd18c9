"""onnxnn's optional C libraries (setup.py): each loaded on first use through ctypes, or why it is missing.

The libraries are plain C with no Python API. Where one was not built (no C compiler at install),
does not load, or was built from older sources than this onnxnn (an editable install keeps the
library until it is reinstalled), what it computes runs as before it, and ``reason`` says why.
"""

from __future__ import annotations

import ctypes
import importlib.util

__all__ = ["LoopLibrary"]


class LoopLibrary:
    """The library ``module`` (a package path) built from ``source``, whose ``onnxnn_<source stem>_version()``
    must return ``version``.

    Subclasses bind its functions in ``bind``. ``fallback`` ends each reason: what runs instead.
    """

    def __init__(self, module: str, source: str, version: int, fallback: str):
        self.module = module
        self.source = source  # the C file, whose stem names the version function
        self.version = version
        self.fallback = fallback
        self.loaded = False
        self.library: ctypes.CDLL | None = None
        self.reason: str | None = None

    def get(self) -> ctypes.CDLL | None:
        """The loaded library, or None (``reason`` says why)."""
        if not self.loaded:
            self.loaded = True
            self.library = self._load()
            if self.library is not None:
                self.bind(self.library)
        return self.library

    def bind(self, library: ctypes.CDLL) -> None:
        """Declares the functions' argument and result types (by the subclass)."""

    def _load(self) -> ctypes.CDLL | None:
        spec = importlib.util.find_spec(self.module)
        if spec is None or spec.origin is None:
            self.reason = f"{self.module} was not built (no C compiler when onnxnn was installed); {self.fallback}"
            return None
        try:
            library = ctypes.CDLL(spec.origin)
        except OSError as error:
            self.reason = f"{spec.origin} does not load ({error}); {self.fallback}"
            return None
        version = getattr(library, f"onnxnn_{self.source.removesuffix('.c')}_version", None)
        if version is None or version() != self.version:
            self.reason = f"{spec.origin} was built from an older {self.source} (reinstall onnxnn); {self.fallback}"
            return None
        return library
