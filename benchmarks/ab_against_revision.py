"""A benchmark of this checkout against another revision, as the median of per-pair ratios.

A shared machine's speed drifts between runs by far more than the few percent a change may cost,
so one run of each tree says little. This checks the other revision out in a temporary worktree,
then runs a benchmark script (one printing JSON) in fresh processes alternating the two trees,
pair after pair, and prints each timing's median ratio head/base over the pairs.

The other revision's C extensions (the optimizer updates' loops) are built in its worktree, as
installing it would build them: without them it would run the numpy updates, and a comparison of
anything that trains would compare those instead. ``base_built`` in the output says whether that
worked (False: no compiler, or that revision has none to build and compares as it is).

Run: python benchmarks/ab_against_revision.py REVISION PAIRS SCRIPT [ARGS...]
     e.g. python benchmarks/ab_against_revision.py HEAD~1 8 benchmarks/bench_runtime.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _timings(report: dict, prefix: str = ""):
    """The report's numbers whose names say they are times (``_us``, ``_ms``, ``us_per``...)."""
    for key, value in report.items():
        if isinstance(value, dict):
            yield from _timings(value, f"{prefix}{key}.")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and ("us" in key or "ms" in key):
            yield f"{prefix}{key}", float(value)


def _run(tree: Path, script: str, arguments: list[str]) -> dict:
    completed = subprocess.run(
        [sys.executable, script, *arguments],
        cwd=tree,
        env={"PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    # One JSON object (indented over many lines: bench_runtime.py's), or one per line
    # (bench_vs_torch.py's workloads), each named by its workload.
    text = completed.stdout
    try:
        return dict(_timings(json.loads(text[text.index("{") :])))
    except json.JSONDecodeError:  # "Extra data": several objects, one per line
        reports = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    timings = {}
    for report in reports:
        timings.update(_timings(report, f"{report.get('workload', len(timings))}.threads={report.get('threads')}."))
    return timings


def _build_extensions(tree: Path) -> bool:
    """Builds ``tree``'s C extensions in place (as ``pip install -e`` does); whether it did."""
    if not (tree / "setup.py").exists():
        return False
    completed = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, capture_output=True, text=True
    )
    if completed.returncode != 0:
        print(f"the base's extensions did not build:\n{completed.stderr[-2000:]}", file=sys.stderr)
    return completed.returncode == 0


def main() -> None:
    revision, pairs, script, arguments = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    with tempfile.TemporaryDirectory() as directory:
        base = Path(directory) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), revision], check=True)
        try:
            base_built = _build_extensions(base)
            samples: dict[str, list[tuple[float, float]]] = {}
            for pair in range(pairs):
                order = ["base", "head"] if pair % 2 == 0 else ["head", "base"]
                reports = {name: _run(base if name == "base" else ROOT, script, arguments) for name in order}
                for key, value in reports["base"].items():
                    if key in reports["head"] and value > 0:
                        samples.setdefault(key, []).append((value, reports["head"][key]))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=True)
    result = {"revision": revision, "pairs": pairs, "script": script, "base_built": base_built}
    for key, values in samples.items():
        result[key] = {
            "base": statistics.median(b for b, _ in values),
            "head": statistics.median(h for _, h in values),
            "median_ratio_head_over_base": statistics.median(h / b for b, h in values),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
