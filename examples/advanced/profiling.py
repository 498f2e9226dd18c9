"""Profiling Performance (the Modules note): profile a small CNN's training steps.

Prints the ops that took the most time and writes a Chrome trace (open it in https://ui.perfetto.dev
or chrome://tracing). onnxnn is lazy: each op records an ONNX node, and the graph runs when a value
is read, so the table shows onnxnn's phases (module forwards recording, planning, compilation,
runs, backward) next to the time onnxruntime or onnxnn's kernels spent in each node.
"""

import onnxnn as torch
from onnxnn import nn
from onnxnn.profiler import ProfilerActivity, profile, record_function, schedule

torch.manual_seed(0)

model = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(16, 10),
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
images = torch.randn(16, 1, 28, 28)
labels = torch.randint(0, 10, (16,))


def train_step() -> float:
    with record_function("forward"):
        loss = loss_fn(model(images), labels)
    with record_function("backward"):
        optimizer.zero_grad()
        loss.backward()
    with record_function("optimizer_step"):
        optimizer.step()
    return loss.item()  # reading the loss runs what is still pending


# One step unprofiled warms up onnxnn's session cache; the schedule skips one more (its profiled
# sessions compile during warmup) and records two.
train_step()
with profile(
    activities=[ProfilerActivity.CPU],
    schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
    record_shapes=True,
    profile_memory=True,
) as prof:
    for _ in range(3):
        loss = train_step()
        prof.step()

print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
prof.export_chrome_trace("profiling_trace.json")
print(f"loss {loss:.4f}; wrote the Chrome trace to profiling_trace.json")
