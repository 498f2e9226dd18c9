"""What a CUDA run needs, and which part of it is missing: onnxruntime-gpu, the NVIDIA driver, a GPU,
CUDA's libraries and cuDNN.

onnxruntime reports a CUDA provider that cannot load only as a warning, then runs on the CPU; a
user who asked for ``"cuda"`` gets a RuntimeError instead, naming the first missing piece.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import io
import os

__all__ = ["preload_cuda_libraries", "driver_loads", "cuda_runtime", "missing_cuda_component", "cuda_unavailable_error"]


@functools.lru_cache(maxsize=None)
def preload_cuda_libraries() -> None:
    """Loads CUDA's and cuDNN's libraries from the nvidia-* wheels where they are installed (as
    PyTorch's CUDA wheels bring them), so that onnxruntime's CUDA provider finds them."""
    import onnxruntime  # deferred: importing onnxruntime costs ~0.3 s, paid only when CUDA is asked about

    preload = getattr(onnxruntime, "preload_dlls", None)  # onnxruntime >= 1.21
    if preload is None:
        return
    # It prints each library it cannot find; a missing one is named by missing_cuda_component instead.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            preload(cuda=True, cudnn=True, msvc=False)
        except Exception:
            pass


def driver_loads() -> bool:
    """Whether the NVIDIA driver's library (libcuda.so.1) is present."""
    return _load("libcuda.so.1") is None


def _load(name: str, mode: int = 0) -> str | None:
    """None when the shared library ``name`` loads, else the loader's message."""
    try:
        ctypes.CDLL(name, mode=mode)
    except OSError as error:
        return str(error)
    return None


def _visible_gpus() -> str | None:
    """None when the driver reports a GPU, else what it said."""
    driver = ctypes.CDLL("libcuda.so.1")
    status = driver.cuInit(0)
    if status != 0:
        return f"the NVIDIA driver could not initialize CUDA (cuInit returned error {status})"
    count = ctypes.c_int(0)
    status = driver.cuDeviceGetCount(ctypes.byref(count))
    if status != 0 or count.value == 0:
        return "the NVIDIA driver sees no GPU (cuDeviceGetCount found none)"
    return None


def missing_cuda_component() -> str | None:
    """What keeps onnxruntime's CUDA provider from loading here, in words; None when nothing is found
    missing (the provider may still fail, for a reason onnxruntime's log gives)."""
    import onnxruntime  # deferred, as above

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return (
            f"the installed onnxruntime {onnxruntime.__version__} has no CUDA execution provider "
            "(install onnxruntime-gpu instead of onnxruntime)"
        )
    problem = _load("libcuda.so.1")
    if problem is not None:
        return f"no NVIDIA driver: {problem}"
    problem = _visible_gpus()
    if problem is not None:
        return problem
    preload_cuda_libraries()
    capi = os.path.join(os.path.dirname(onnxruntime.__file__), "capi")
    shared = os.path.join(capi, "libonnxruntime_providers_shared.so")
    provider = os.path.join(capi, "libonnxruntime_providers_cuda.so")
    if os.path.exists(shared) and os.path.exists(provider):
        _load(shared, ctypes.RTLD_GLOBAL)
        problem = _load(provider)  # the loader names the first CUDA library it could not find
        if problem is not None:
            return f"CUDA's libraries are missing or of another version: {problem}"
    problem = _load("libcudnn.so.9")
    if problem is not None:
        major = _cuda_major(onnxruntime)
        return f"cuDNN 9 is missing (pip install nvidia-cudnn-cu{major}): {problem}"
    return None


def _cuda_major(onnxruntime) -> str:
    """The CUDA major version the installed onnxruntime-gpu was built for ("13"), or "NN" if unknown."""
    try:
        from onnxruntime.capi import build_and_package_info
    except ImportError:
        return "NN"
    return str(getattr(build_and_package_info, "cuda_version", "NN")).split(".")[0]


def cuda_unavailable_error() -> RuntimeError:
    """The error for a CUDA device asked for where onnxruntime's CUDA provider does not load."""
    missing = missing_cuda_component()
    reason = f": {missing}" if missing else " (see onnxruntime's log for the reason)"
    return RuntimeError(f"CUDA is not available: onnxruntime's CUDA execution provider cannot run here{reason}")


@functools.lru_cache(maxsize=None)
def cuda_runtime() -> ctypes.CDLL:
    """CUDA's runtime library, as loaded by onnxruntime's CUDA provider (the same major version), with
    the two calls onnxnn makes itself: ``cudaMemcpy`` and ``cudaDeviceSynchronize``."""
    import onnxruntime  # deferred, as above

    library = ctypes.CDLL(f"libcudart.so.{_cuda_major(onnxruntime)}")
    library.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    library.cudaMemcpy.restype = ctypes.c_int
    library.cudaDeviceSynchronize.argtypes = []
    library.cudaDeviceSynchronize.restype = ctypes.c_int
    return library
