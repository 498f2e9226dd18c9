"""The ``onnxnn`` command: a table of subcommands (``onnxnn/commands/``), and how failures are shown.

Usage::

    onnxnn --help                  # the subcommands, one line each
    onnxnn COMMAND --help          # a subcommand's options and examples
    onnxnn summary model.onnx      # layer table: output shapes, parameters, MACs, memory
    onnxnn check model.onnx        # run it on onnxnn and on onnxruntime with random inputs, compare

Exit status: 0 on success; 1 when ``check`` finds a mismatch; 2 when the input is wrong (a missing
or broken file, a wrong extension, a bad ``module:factory`` path, a bad option); 130 on Ctrl-C.
An expected failure is one line on stderr (red on a terminal) naming what was wrong, with a hint
where there is one, and no traceback; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from .commands import bench, check, convert, export, export_triton, graph, inspect, serve, summary
from .commands.common import CommandError

__all__ = ["main", "COMMANDS"]

# name -> module with DESCRIPTION, EPILOG, add_arguments(parser) and run(args); in --help's order.
COMMANDS = {
    "summary": summary,
    "inspect": inspect,
    "check": check,
    "convert": convert,
    "export": export,
    "bench": bench,
    "graph": graph,
    "serve": serve,
    "export-triton": export_triton,
}

EXIT_MISMATCH = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

# The library's own exceptions for bad input are these: ModelLoadError and CheckpointError are
# ValueErrors, FileNotFoundError an OSError, NotImplementedError a RuntimeError.
EXPECTED_ERRORS = (CommandError, OSError, ValueError, TypeError, RuntimeError)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``onnxnn`` and all its subcommands."""
    parser = argparse.ArgumentParser(
        prog="onnxnn",
        description="PyTorch's nn.Module API on ONNX: look into, check, convert, export, time and draw models.",
        epilog="exit status: 0 success, 1 'check' found a mismatch, 2 bad input (one line on stderr), 130 Ctrl-C.\n"
        "Run 'onnxnn COMMAND --help' for a command's options and examples.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        subparser = commands.add_parser(
            name,
            help=module.DESCRIPTION,
            description=module.DESCRIPTION[0].upper() + module.DESCRIPTION[1:] + ".",
            epilog=module.EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        # Accepted after the command too (`onnxnn summary m.onnx --debug`); SUPPRESS keeps the top-level value.
        subparser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        module.add_arguments(subparser)
    return parser


def _error_line(command: str, arguments: argparse.Namespace, error: BaseException) -> str:
    message = " ".join(str(error).split()) or type(error).__name__
    model = getattr(arguments, "model", None)
    # CommandErrors name what was wrong themselves; the library's errors get the model's name.
    if isinstance(model, str) and model not in message and not isinstance(error, CommandError):
        message = f"'{model}': {message}"
    hint = getattr(error, "hint", None)
    return f"onnxnn {command}: {message}" + (f" (hint: {hint})" if hint else "")


def _print_error(line: str) -> None:
    # Colour only for a person at a terminal; NO_COLOR (no-color.org) turns it off there too.
    if sys.stderr.isatty() and not os.environ.get("NO_COLOR"):
        line = f"\033[31m{line}\033[0m"
    print(line, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Runs ``onnxnn`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    arguments = build_parser().parse_args(argv)
    try:
        return COMMANDS[arguments.command].run(arguments)
    except KeyboardInterrupt:
        _print_error(f"onnxnn {arguments.command}: interrupted")
        return EXIT_INTERRUPTED
    except EXPECTED_ERRORS as error:
        if arguments.debug:
            traceback.print_exc()
        _print_error(_error_line(arguments.command, arguments, error))
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
