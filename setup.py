"""Builds the optimizer updates' loops (onnxnn/kernels/update_loops.c) where a C compiler is present.

Everything else is in pyproject.toml. The library is optional: where it does not build (no
compiler), the optimizers run their numpy formulas, which give the same bits more slowly
(onnxnn/kernels/compiled_updates.py). It is a plain C library with no Python API, loaded with
ctypes, so it needs no Python headers.
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Exact IEEE arithmetic in the formulas' order (no fast-math, no FMA contraction); errno-free sqrt so
# that it vectorizes; only the exported functions visible; no debugging information (four times the
# library's size).
_FLAGS = {
    "unix": ["-O3", "-g0", "-fno-math-errno", "-ffp-contract=off", "-fvisibility=hidden"],
    "msvc": ["/O2", "/fp:precise"],
}


class _BuildUpdateLoops(build_ext):
    def build_extension(self, extension):
        extension.extra_compile_args = _FLAGS.get(self.compiler.compiler_type, [])
        super().build_extension(extension)

    def get_export_symbols(self, extension):
        return []  # not a Python module: there is no PyInit function to export


setup(
    ext_modules=[
        Extension(
            "onnxnn.kernels._update_loops",
            sources=["onnxnn/kernels/update_loops.c"],
            depends=["onnxnn/kernels/update_loops_template.h"],
            optional=True,
        )
    ],
    cmdclass={"build_ext": _BuildUpdateLoops},
)
