"""What several subcommands share: the expected-failure error, model arguments, input shapes, progress bars."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

from ..export import to_onnx
from ..import_.external_data import load_external_data
from ..runtime.creation import from_numpy
from ..runtime.grad_mode import no_grad

__all__ = [
    "CommandError",
    "INPUT_DTYPES",
    "add_input_dtype_argument",
    "add_model_arguments",
    "example_inputs",
    "existing_file",
    "export_module",
    "input_shapes_of",
    "load_factory",
    "load_model",
    "parse_shape",
    "progress",
    "random_feeds",
    "read_onnx",
]


class CommandError(Exception):
    """An expected failure of a subcommand: printed as one line (and a hint), exit status 2.

    Args:
        message: what was wrong, naming the file or argument.
        hint: what to do about it, or ``None``.
    """

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def existing_file(path: str, extensions: tuple[str, ...], what: str) -> Path:
    """``path`` as a Path, after checking it has one of ``extensions`` and exists."""
    file = Path(path)
    if file.suffix.lower() not in extensions:
        raise CommandError(
            f"'{path}': expected {what} ({', '.join(extensions)}), not a '{file.suffix or 'extensionless'}' file"
        )
    if not file.is_file():
        raise CommandError(f"'{path}': no such file")
    return file


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,3,32,32"`` (or ``"1x3x32x32"``) -> ``(1, 3, 32, 32)``; an argparse ``type``."""
    parts = text.replace("x", ",").split(",")
    try:
        shape = tuple(int(part) for part in parts if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a shape like 1,3,32,32") from None
    if not shape or any(size < 0 for size in shape):
        raise argparse.ArgumentTypeError(f"'{text}' is not a shape like 1,3,32,32")
    return shape


def add_model_arguments(parser: argparse.ArgumentParser, factory: bool = True) -> None:
    """MODEL (an ONNX file, or a ``module:factory`` path) and ``--input-shape``."""
    parser.add_argument(
        "model",
        metavar="MODEL",
        help="an .onnx file" + (", or a Python 'module:factory' path (with --input-shape)" if factory else ""),
    )
    parser.add_argument(
        "--input-shape",
        action="append",
        type=parse_shape,
        default=None,
        metavar="SHAPE",
        help="shape of an input, e.g. 1,3,32,32; once per input, in order. For an ONNX file it fixes the "
        "dynamic axes (which are 1 otherwise)",
    )
    if factory:
        add_input_dtype_argument(parser)


# The dtypes a factory's example inputs can have: floats are standard normal, integers in [0, 4)
# (valid token ids and indices for any embedding), booleans fair coin flips.
INPUT_DTYPES = ("float32", "float64", "float16", "int64", "int32", "bool")


def add_input_dtype_argument(parser: argparse.ArgumentParser) -> None:
    """``--input-dtype``: once for all inputs, or once per input in order."""
    parser.add_argument(
        "--input-dtype",
        action="append",
        choices=INPUT_DTYPES,
        default=None,
        metavar="DTYPE",
        help=f"dtype of a 'module:factory' model's inputs ({', '.join(INPUT_DTYPES)}; default float32): "
        "once for all inputs or once per input",
    )


def load_factory(spec: str):
    """Calls the zero-argument callable named by ``spec`` (``package.module:name`` or ``file.py:name``)."""
    module_name, _, attribute = spec.rpartition(":")
    if not module_name or not attribute:
        raise CommandError(f"'{spec}': expected a 'module:factory' path such as 'mypackage.models:make_model'")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            location = Path(module_name)
            if not location.is_file():
                raise CommandError(f"'{spec}': no such file '{module_name}'")
            module_spec = importlib.util.spec_from_file_location(location.stem, location)
            # Not None: a .py file's location always gives a spec with a source loader.
            module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
            module_spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            if os.getcwd() not in sys.path:  # the console script, unlike `python -m`, leaves the cwd out
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except CommandError:
        raise
    except ImportError as error:
        raise CommandError(
            f"'{spec}': cannot import '{module_name}': {error}", hint="is its folder the current one or on PYTHONPATH?"
        ) from error
    except Exception as error:  # the user's module failed as it ran (a SyntaxError, a NameError, ...)
        raise CommandError(
            f"'{spec}': importing '{module_name}' raised {type(error).__name__}: {error}",
            hint="--debug shows the traceback",
        ) from error
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise CommandError(f"'{spec}': module '{module_name}' has no callable '{attribute}'")
    try:
        return factory()
    except Exception as error:  # the factory is the user's code: say which call failed, not where inside
        raise CommandError(
            f"'{spec}': calling '{attribute}()' raised {type(error).__name__}: {error}",
            hint="the factory must take no arguments; --debug shows the traceback",
        ) from error


def read_onnx(path: str) -> onnx.ModelProto:
    """An ``.onnx`` file as written (no opset conversion), its external data read only from its own folder."""
    file = existing_file(path, (".onnx",), "an ONNX model")
    try:
        model = onnx.load(str(file), load_external_data=False)
    except Exception as error:  # protobuf's DecodeError derives from Exception only
        raise CommandError(f"'{path}': not a valid ONNX model ({' '.join(str(error).split())})") from None
    # onnx.load would follow any location, '../../secret' included; from_onnx's reader refuses those.
    load_external_data(model, str(file.resolve().parent), f"'{path}'")
    return model


def load_model(
    spec: str, input_shapes: list[tuple[int, ...]] | None, input_dtypes: list[str] | None = None
) -> tuple[onnx.ModelProto, str]:
    """The ONNX model a MODEL argument names, and a display name.

    An ``.onnx`` file is read as it is (its external data too); a ``module:factory`` path is built,
    put in eval mode and exported with inputs of ``input_shapes``.
    """
    if spec.lower().endswith(".onnx"):
        return read_onnx(spec), spec
    if ":" not in spec:
        raise CommandError(
            f"'{spec}': expected an .onnx file or a 'module:factory' path",
            hint="e.g. 'model.onnx' or 'mypackage.models:make_model --input-shape 1,4'",
        )
    if not input_shapes:
        raise CommandError(f"'{spec}': a 'module:factory' model needs --input-shape (e.g. --input-shape 1,4)")
    module = load_factory(spec)
    if not callable(module):
        raise CommandError(f"'{spec}': the factory returned {type(module).__name__}, not a module")
    if hasattr(module, "eval"):
        module.eval()
    return export_module(module, input_shapes, input_dtypes), spec


def example_inputs(input_shapes: list, input_dtypes: list[str] | None) -> tuple:
    """Seeded random tensors of ``input_shapes`` and ``input_dtypes`` (one for all, or one per shape)."""
    input_dtypes = list(input_dtypes or ["float32"])
    if len(input_dtypes) == 1:
        input_dtypes *= len(input_shapes)
    if len(input_dtypes) != len(input_shapes):
        raise CommandError(f"{len(input_dtypes)} --input-dtype for {len(input_shapes)} --input-shape")
    rng = np.random.default_rng(0)
    arrays = []
    for shape, name in zip(input_shapes, input_dtypes):
        dtype = np.dtype(name)
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(rng.integers(0, 4, shape).astype(dtype))
    return tuple(from_numpy(array) for array in arrays)


def export_module(
    module, input_shapes, input_dtypes: list[str] | None = None, path: str | None = None, **options
) -> onnx.ModelProto:
    """Exports ``module`` called on random inputs (see ``example_inputs``), to ``path`` if given."""
    inputs = example_inputs(input_shapes, input_dtypes)
    with no_grad():
        if path is not None:
            return to_onnx(module, inputs, path, **options)
        with tempfile.TemporaryDirectory() as folder:  # weights over 2 GB go to external data beside it
            target = os.path.join(folder, "model.onnx")
            to_onnx(module, inputs, target, **options)
            return onnx.load(target)


def input_shapes_of(model: onnx.ModelProto, overrides: list[tuple[int, ...]] | None) -> dict[str, tuple]:
    """Each graph input's shape: ``overrides`` in order where given, else the declared one with dynamic axes 1."""
    initializers = {initializer.name for initializer in model.graph.initializer}
    inputs = [graph_input for graph_input in model.graph.input if graph_input.name not in initializers]
    if overrides and len(overrides) != len(inputs):
        raise CommandError(f"the model has {len(inputs)} inputs but {len(overrides)} --input-shape were given")
    shapes = {}
    for index, graph_input in enumerate(inputs):
        if graph_input.type.WhichOneof("value") != "tensor_type":
            raise CommandError(f"input '{graph_input.name}' is not a tensor; only tensor inputs can be fed")
        dims = graph_input.type.tensor_type.shape.dim
        declared = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
        shape = overrides[index] if overrides else declared
        if len(shape) != len(dims):
            raise CommandError(
                f"--input-shape {','.join(map(str, shape))} has {len(shape)} dimensions; "
                f"input '{graph_input.name}' has {len(dims)}"
            )
        shapes[graph_input.name] = tuple(shape)
    return shapes


def random_feeds(model: onnx.ModelProto, shapes: dict[str, tuple], seed: int) -> dict[str, np.ndarray]:
    """Random arrays for the graph inputs: standard normal floats, booleans, small integers."""
    rng = np.random.default_rng(seed)
    types = {graph_input.name: graph_input.type.tensor_type.elem_type for graph_input in model.graph.input}
    feeds = {}
    for name, shape in shapes.items():
        dtype = onnx.helper.tensor_dtype_to_np_dtype(types[name])
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[name] = rng.random(shape) < 0.5
        else:
            feeds[name] = rng.integers(0, 4, shape).astype(dtype)
    return feeds


def progress(iterable=None, **options):
    """A tqdm progress bar on stderr, drawn only when stderr is a terminal (so logs and pipes stay clean)."""
    from tqdm import tqdm  # deferred: only the long-running commands draw bars, --help never does

    options.setdefault("disable", None)  # None: off when stderr is not a TTY
    options.setdefault("leave", False)
    return tqdm(iterable, **options)
