"""Fits y = 3x + 2 with onnxnn Tensors, backward() and a manual update under no_grad().

Every step records the forward pass as ONNX nodes, backward() turns it into one ONNX gradient
graph, and the update runs as one more; after the first step each is a session-cache hit.

A progress bar (tqdm, on stderr) shows the running loss; at the end the loss curve is saved as
``linear_regression_loss.png`` in the current folder when matplotlib is installed
(``pip install 'onnxnn[plot]'``), and skipped with a note otherwise.
"""

from __future__ import annotations

from tqdm import tqdm

import onnxnn

onnxnn.manual_seed(0)
x = onnxnn.rand(256, 1) * 4 - 2
y = 3 * x + 2 + 0.1 * onnxnn.randn(256, 1)

weight = onnxnn.zeros(1, requires_grad=True)
bias = onnxnn.zeros(1, requires_grad=True)
learning_rate = 0.1
losses = []

progress = tqdm(range(201), desc="training", unit="step")
for step in progress:
    prediction = x * weight + bias
    loss = ((prediction - y) ** 2).mean()
    loss.backward()
    with onnxnn.no_grad():
        weight -= learning_rate * weight.grad
        bias -= learning_rate * bias.grad
    weight.grad = None
    bias.grad = None
    losses.append(loss.item())
    progress.set_postfix(loss=f"{losses[-1]:.5f}")
    if step % 20 == 0:
        progress.write(f"step {step:3d}  loss {losses[-1]:.5f}")  # above the bar, which stays at the bottom
progress.close()

print(f"fitted: y = {weight.item():.3f} x + {bias.item():.3f}  (true: y = 3 x + 2)")

try:
    from matplotlib.figure import Figure  # the object API: no GUI backend, no global pyplot state
except ImportError:
    print("matplotlib is not installed: skipped the loss-curve plot (pip install 'onnxnn[plot]')")
else:
    figure = Figure(figsize=(6, 4))
    axes = figure.add_subplot()
    axes.plot(losses)
    axes.set(xlabel="step", ylabel="mean squared error", yscale="log", title="linear regression")
    figure.savefig("linear_regression_loss.png", dpi=100, bbox_inches="tight")
    print("saved the loss curve to linear_regression_loss.png")
