"""Fits y = 3x + 2 with onnxnn Tensors, backward() and a manual update under no_grad().

Every step records the forward pass as ONNX nodes, backward() turns it into one ONNX gradient
graph, and the update runs as one more; after the first step each is a session-cache hit.
"""

from __future__ import annotations

import onnxnn

onnxnn.manual_seed(0)
x = onnxnn.rand(256, 1) * 4 - 2
y = 3 * x + 2 + 0.1 * onnxnn.randn(256, 1)

weight = onnxnn.zeros(1, requires_grad=True)
bias = onnxnn.zeros(1, requires_grad=True)
learning_rate = 0.1

for step in range(201):
    prediction = x * weight + bias
    loss = ((prediction - y) ** 2).mean()
    loss.backward()
    with onnxnn.no_grad():
        weight -= learning_rate * weight.grad
        bias -= learning_rate * bias.grad
    weight.grad = None
    bias.grad = None
    if step % 20 == 0:
        print(f"step {step:3d}  loss {loss.item():.5f}")

print(f"fitted: y = {weight.item():.3f} x + {bias.item():.3f}  (true: y = 3 x + 2)")
