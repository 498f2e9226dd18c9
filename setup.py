"""Builds onnxnn's compiled loops where a C compiler is present: the optimizer updates
(onnxnn/kernels/update_loops.c, with float_modes.c: the threads' handling of subnormals), and the
layers' loops: the convolutions' weight gradients (convolution_loops.c, depthwise_loops.c), batch
normalization's and ReLU's training passes (normalization_loops.c) and max pooling's gradient
(pooling_loops.c), with the pool of threads they and the updates share (loop_threads.c).

Everything else is in pyproject.toml. The libraries are optional: where one does not build (no
compiler), what it computes runs as before it, as numpy formulas or onnxruntime graphs, with the
same values more slowly (onnxnn/kernels/compiled_updates.py, compiled_convolutions.py). They are
plain C libraries with no Python API, loaded with ctypes, so they need no Python headers.
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The updates: exact IEEE arithmetic in the formulas' order (no fast-math, no FMA contraction), since
# they match numpy's bits; errno-free sqrt so that it vectorizes; only the exported functions visible;
# no debugging information (four times the library's size). The layer loops' weight gradients and
# normalization statistics are sums in an order of their own, as a GEMM's, so their multiply-adds
# may be fused.
_UPDATE_FLAGS = ["-O3", "-g0", "-fno-math-errno", "-ffp-contract=off", "-fvisibility=hidden"]
_FLAGS = {
    "onnxnn.kernels._update_loops": {"unix": _UPDATE_FLAGS, "msvc": ["/O2", "/fp:precise"]},
    # GCC's vector extensions and POSIX threads: no MSVC build (those layers' passes then stay onnxruntime's).
    "onnxnn.kernels._layer_loops": {
        "unix": [*_UPDATE_FLAGS[:3], "-ffp-contract=fast", "-fvisibility=hidden", "-pthread"]
    },
}
_LINK_FLAGS = {"onnxnn.kernels._layer_loops": {"unix": ["-pthread"]}}


class _BuildLoops(build_ext):
    def build_extension(self, extension):
        extension.extra_compile_args = _FLAGS[extension.name].get(self.compiler.compiler_type, [])
        extension.extra_link_args = _LINK_FLAGS.get(extension.name, {}).get(self.compiler.compiler_type, [])
        super().build_extension(extension)

    def get_export_symbols(self, extension):
        return []  # not a Python module: there is no PyInit function to export


setup(
    ext_modules=[
        Extension(
            "onnxnn.kernels._update_loops",
            sources=["onnxnn/kernels/update_loops.c", "onnxnn/kernels/float_modes.c"],
            depends=["onnxnn/kernels/update_loops_template.h"],
            optional=True,
        ),
        Extension(
            "onnxnn.kernels._layer_loops",
            sources=[
                "onnxnn/kernels/convolution_loops.c",
                "onnxnn/kernels/depthwise_loops.c",
                "onnxnn/kernels/normalization_loops.c",
                "onnxnn/kernels/pooling_loops.c",
                "onnxnn/kernels/loop_threads.c",
            ],
            depends=["onnxnn/kernels/convolution_loops.h"],
            optional=True,
        ),
    ],
    cmdclass={"build_ext": _BuildLoops},
)
