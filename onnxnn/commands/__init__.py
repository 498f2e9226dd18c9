"""The ``onnxnn`` command's subcommands, one module each.

Each module exposes ``DESCRIPTION`` (one line, for ``onnxnn --help``), ``EPILOG`` (examples for the
subcommand's ``--help``), ``add_arguments(parser)`` and ``run(args) -> int`` (the exit status);
``onnxnn/cli.py`` keeps the table of names to modules.
"""
