"""examples/advanced/profiling.py (the Modules note's "Profiling Performance"): a small CNN's training
steps profiled with a schedule, the top-10 table printed and a Chrome trace written."""

from __future__ import annotations

import json

from example_scripts import EXAMPLES, run_script

from onnxnn.ir.mode import MODE

SCRIPT = EXAMPLES / "advanced" / "profiling.py"


def test_prints_the_table_and_writes_a_chrome_trace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed, namespace = run_script(SCRIPT, monkeypatch)
    lines = printed.splitlines()
    header = next(line for line in lines if line.startswith("Name"))
    for column in ("Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"):
        assert column in header
    rows = lines[lines.index(header) + 2 : next(i for i, line in enumerate(lines) if line.startswith("Self CPU time"))]
    rows = rows[:-1]  # the closing rule
    assert len(rows) == 10
    by_self_time = sorted(namespace["prof"].key_averages(), key=lambda a: a.self_cpu_time_total, reverse=True)
    assert [row[: len(a.key)] for row, a in zip(rows, by_self_time)] == [a.key[:55] for a in by_self_time[:10]]
    averages = {average.key: average for average in namespace["prof"].key_averages()}
    # Two recorded steps, each with two convolutions forward (the warmup step is not recorded).
    assert sum(e.name == "Conv" and e.module is not None for e in namespace["prof"].events()) == 2 * 2
    assert averages["forward"].count == averages["backward"].count == averages["optimizer_step"].count == 2
    trace = json.loads((tmp_path / "profiling_trace.json").read_text())
    names = {event["name"] for event in trace["traceEvents"]}
    assert {"forward", "backward", "optimizer_step", "Conv", "ProfilerStep#1", "ProfilerStep#2"} <= names
    assert "ProfilerStep#0" not in names
    assert "wrote the Chrome trace to profiling_trace.json" in printed
    assert MODE.profiler is None
