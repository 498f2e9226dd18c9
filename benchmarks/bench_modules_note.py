"""The modules note's training loop (Net, SGD with momentum and weight decay), timed per step.

Runs the loop in onnxnn and, where PyTorch is installed, the same loop in PyTorch eager in the
same process, and prints both times per step and their ratio as JSON.

Run: python benchmarks/bench_modules_note.py [steps]   (default 10000, as in the note)
"""

from __future__ import annotations

import json
import statistics
import sys
import time


def _note_loop(library, steps: int) -> float:
    """Builds the note's Net with ``library`` (onnxnn or torch) and returns seconds per step."""
    return _NoteLoop(library).run(steps)


class _NoteLoop:
    """The note's Net, its SGD optimizer and one training step, for ``library`` (onnxnn or torch)."""

    def __init__(self, library):
        nn = library.nn
        functional = library.nn.functional

        class MyLinear(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.weight = nn.Parameter(library.randn(in_features, out_features))
                self.bias = nn.Parameter(library.randn(out_features))

            def forward(self, input):
                return (input @ self.weight) + self.bias

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.l0 = MyLinear(4, 3)
                self.l1 = MyLinear(3, 1)

            def forward(self, x):
                return self.l1(functional.relu(self.l0(x)))

        library.manual_seed(0)
        self.library = library
        self.net = Net()
        self.optimizer = library.optim.SGD(self.net.parameters(), lr=1e-4, weight_decay=1e-2, momentum=0.9)
        self.run(20)  # warm caches (onnxnn compiles its few graphs here)

    def step(self):
        input = self.library.randn(4)
        output = self.net(input)
        loss = self.library.abs(output)
        self.net.zero_grad()
        loss.backward()
        self.optimizer.step()

    def run(self, steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        float(self.net.l1.weight.detach().sum())  # make sure every pending value was computed
        return (time.perf_counter() - start) / steps


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    import onnxnn

    loops = {"onnxnn": _NoteLoop(onnxnn)}
    result = {"steps": steps}
    try:
        import torch
    except ImportError:
        result["torch"] = "not installed (pip install torch==2.13.0 to compare)"
    else:
        torch.set_num_threads(1)
        result["torch_version"] = torch.__version__
        loops["torch"] = _NoteLoop(torch)
    # Interleaved chunks, alternating which library goes first, so the drifting load of a shared
    # machine falls on both alike. The ratio is the median of the per-round ratios (each round's two
    # chunks ran back to back), which is steadier than a ratio of medians.
    samples = {name: [] for name in loops}
    chunks = 20
    names = list(loops)
    for round_index in range(chunks):
        for name in names if round_index % 2 == 0 else names[::-1]:
            samples[name].append(loops[name].run(max(steps // chunks, 1)))
    for name, values in samples.items():
        result[f"{name}_us_per_step"] = statistics.median(values) * 1e6
    if "torch" in loops:
        ratios = [mine / theirs for mine, theirs in zip(samples["onnxnn"], samples["torch"])]
        result["ratio_onnxnn_to_torch"] = statistics.median(ratios)
        result["ratio_quartiles"] = statistics.quantiles(ratios, n=4)[::2]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
