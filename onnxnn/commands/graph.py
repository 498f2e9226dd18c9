"""``onnxnn graph MODEL -o graph.svg``: a picture of the graph, nodes grouped by module, drawn by Graphviz."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import CommandError, add_model_arguments, input_shapes_of, load_model
from .layers import analyze

__all__ = ["DESCRIPTION", "EPILOG", "add_arguments", "run"]

DESCRIPTION = "draw the graph grouped by module with Graphviz (-o graph.svg, .png, .pdf or .dot)"
EPILOG = """Each module (from the state_dict names of the parameters a node reads, or PyTorch exporter's node
names) is a box around its nodes; edges carry the shapes shape inference finds. Writing .dot needs only
the 'graphviz' Python package (pip install 'onnxnn[graph]'); .svg, .png and .pdf also need Graphviz's
'dot' program: apt install graphviz, brew install graphviz, or conda install -c conda-forge graphviz.

examples:
  onnxnn graph model.onnx -o model.svg
  onnxnn graph model.onnx -o model.dot && dot -Tpng model.dot -o model.png
  onnxnn graph mypackage.models:make_model --input-shape 1,4 -o model.png
"""

_FORMATS = (".dot", ".gv", ".svg", ".png", ".pdf")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command\'s arguments to its parser (the protocol of :mod:`onnxnn.commands`)."""
    add_model_arguments(parser)
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="graph.svg, .png, .pdf or .dot")
    parser.add_argument(
        "--rankdir", choices=("TB", "LR"), default="TB", help="top to bottom (default) or left to right"
    )


def run(args: argparse.Namespace) -> int:
    """Runs the command; returns its exit status (failures raise, and :mod:`onnxnn.cli` prints them)."""
    output = Path(args.output)
    if output.suffix.lower() not in _FORMATS:
        raise CommandError(
            f"'{args.output}': cannot draw a '{output.suffix or 'extensionless'}' file; "
            f"use one of {', '.join(_FORMATS)}"
        )
    try:
        import graphviz  # deferred: an optional extra, which only this command needs
    except ImportError:
        raise CommandError(
            "the 'graphviz' Python package is not installed", hint="pip install 'onnxnn[graph]'"
        ) from None
    model, name = load_model(args.model, args.input_shape, args.input_dtype)
    analysis = analyze(model, input_shapes_of(model, args.input_shape))
    drawing = _draw(graphviz, model, analysis, args.rankdir)
    if output.suffix.lower() in (".dot", ".gv"):
        output.write_text(drawing.source)
    else:
        try:
            output.write_bytes(drawing.pipe(format=output.suffix.lower()[1:]))
        except graphviz.ExecutableNotFound:
            raise CommandError(
                f"'{args.output}': drawing {output.suffix} needs Graphviz's 'dot' program, which is not on PATH",
                hint="apt install graphviz / brew install graphviz / conda install -c conda-forge graphviz, "
                "or write a .dot file",
            ) from None
    print(
        f"wrote {output}: {len(model.graph.node)} nodes in {len({s for s in analysis.scope_of.values() if s})} modules"
    )
    return 0


def _shape_label(shape) -> str:
    return "" if shape is None else "[" + ", ".join(str(size) for size in shape) + "]"


def _draw(graphviz, model, analysis, rankdir: str):
    graph = model.graph
    drawing = graphviz.Digraph(graph.name or "model", graph_attr={"rankdir": rankdir, "fontname": "Helvetica"})
    drawing.attr("node", shape="box", style="rounded,filled", fillcolor="#e8eef7", fontname="Helvetica", fontsize="11")
    initializers = {initializer.name: initializer for initializer in graph.initializer}
    producer = {}
    clusters: dict = {}  # scope -> list of (node id, label)
    # Plain identifiers: DOT reads "a:b" in an edge as node a's port b.
    for index, graph_input in enumerate(graph.input):
        if graph_input.name not in initializers:
            drawing.node(f"input{index}", graph_input.name, shape="ellipse", fillcolor="#d5f0d5")
            producer[graph_input.name] = f"input{index}"
    for index, node in enumerate(graph.node):
        node_id = f"n{index}"
        weights = [
            f"{name.rpartition('.')[2]} {list(initializers[name].dims)}" for name in node.input if name in initializers
        ]
        label = "\n".join([node.op_type] + weights)
        clusters.setdefault(analysis.scope_of[index] or "", []).append((node_id, label))
        for name in node.output:
            producer[name] = node_id
    _add_clusters(drawing, clusters)
    for index, node in enumerate(graph.node):
        for name in node.input:
            if name in producer:
                drawing.edge(producer[name], f"n{index}", label=_shape_label(analysis.shapes.get(name)), fontsize="9")
    for index, graph_output in enumerate(graph.output):
        drawing.node(f"output{index}", graph_output.name, shape="ellipse", fillcolor="#f7e0d5")
        if graph_output.name in producer:
            label = _shape_label(analysis.shapes.get(graph_output.name))
            drawing.edge(producer[graph_output.name], f"output{index}", label=label, fontsize="9")
    return drawing


def _add_clusters(drawing, clusters: dict) -> None:
    """Nested ``cluster_`` subgraphs, one per module scope (``layer1`` holds ``layer1.0``)."""
    tree: dict = {}
    for scope in clusters:
        level = tree
        for part in scope.split(".") if scope else []:
            level = level.setdefault(part, {})

    def fill(target, prefix: str, children: dict) -> None:
        for node_id, label in clusters.get(prefix, []):
            target.node(node_id, label)
        for part, grandchildren in children.items():
            scope = f"{prefix}.{part}" if prefix else part
            with target.subgraph(name=f"cluster_{scope}") as cluster:
                cluster.attr(label=scope, style="rounded", color="#7a8ca8", fontname="Helvetica")
                fill(cluster, scope, grandchildren)

    fill(drawing, "", tree)
