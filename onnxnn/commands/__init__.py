"""The ``onnxnn`` command's subcommands, one module each (layer 5, beside :mod:`onnxnn.cli`).

Each module exposes the same four names, which :mod:`onnxnn.cli` reads to build the parser:

- ``DESCRIPTION: str``: one line, shown in ``onnxnn --help``;
- ``EPILOG: str``: examples, shown at the end of ``onnxnn NAME --help``;
- ``add_arguments(parser: argparse.ArgumentParser) -> None``;
- ``run(args: argparse.Namespace) -> int``: the exit status.

Expected failures (a missing file, a wrong extension, a bad ``module:factory`` path) raise
:class:`onnxnn.commands.common.CommandError`, or the OSError/ValueError/TypeError/RuntimeError the
library raises; :mod:`onnxnn.cli` prints them as one line. Heavy third-party packages (onnxruntime,
tqdm, matplotlib, graphviz) are imported inside the command that needs them, so ``onnxnn --help``
does not pay for them.
"""
