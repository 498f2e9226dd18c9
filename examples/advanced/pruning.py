"""Pruning a LeNet, as PyTorch's pruning tutorial does, then exporting it as a smaller ONNX file.

The first half follows the tutorial on one layer: unstructured pruning of a conv's weight and
bias, iterative (structured) pruning on top, what the state_dict holds, making a pruning
permanent. The second half prunes a fresh model (structured pruning of channels, then global
magnitude pruning across every weight), prints the sparsity per layer and overall, and writes a
dense and a pruned ONNX file: ``onnxnn.export.to_onnx_pruned`` drops the emptied channels and
stores the remaining zeros sparsely. onnxruntime checks that the pruned file computes what the
pruned module computes.
"""

import os

import numpy as np
import onnxruntime

import onnxnn as torch
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.export.sparse_export import to_onnx_pruned
from onnxnn.nn.utils import prune

torch.manual_seed(0)


class LeNet(nn.Module):
    """LeNet on 28x28 images; the layers sit in two Sequentials so the export can drop channels."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 3), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10)
        )

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


# ---------------------------------------------------------------- one layer, step by step
model = LeNet()
module = model.features[0]
print(list(module.named_parameters()))

prune.random_unstructured(module, name="weight", amount=0.3)
prune.l1_unstructured(module, name="bias", amount=3)
print([name for name, _ in module.named_parameters()])  # weight_orig, bias_orig
print([name for name, _ in module.named_buffers()])  # weight_mask, bias_mask
print(module.bias)  # three zeros: the smallest in magnitude
print(module._forward_pre_hooks)

# Iterative pruning: half of the output channels go, on top of the random mask.
prune.ln_structured(module, name="weight", amount=0.5, n=2, dim=0)
for hook in module._forward_pre_hooks.values():
    if hook._tensor_name == "weight":
        break
print(list(hook))  # the PruningContainer's history: RandomUnstructured, LnStructured
print(model.state_dict().keys())

prune.remove(module, "weight")  # permanent: weight is a Parameter again, with its zeros
print([name for name, _ in module.named_parameters()])


# ---------------------------------------------------------------- a whole model
def sparsity(tensor) -> float:
    return float((tensor == 0).sum()) / tensor.numel()


model = LeNet().eval()
images = torch.randn(4, 1, 28, 28)
dense_path = "lenet_dense.onnx"
to_onnx(model, images, dense_path, input_names=["images"])

conv1, conv2 = model.features[0], model.features[3]
fc1, fc2, fc3 = model.classifier[0], model.classifier[2], model.classifier[4]
prune.l1_unstructured(conv1, "weight", amount=0.3)
prune.ln_structured(conv1, "weight", amount=0.5, n=2, dim=0)
prune.ln_structured(fc1, "weight", amount=0.5, n=1, dim=0)
prune.ln_structured(fc2, "weight", amount=0.5, n=1, dim=0)
parameters_to_prune = [(conv1, "weight"), (conv2, "weight"), (fc1, "weight"), (fc2, "weight"), (fc3, "weight")]
prune.global_unstructured(parameters_to_prune, pruning_method=prune.L1Unstructured, amount=0.6)

for name, layer in [("conv1", conv1), ("conv2", conv2), ("fc1", fc1), ("fc2", fc2), ("fc3", fc3)]:
    print(f"Sparsity in {name}.weight: {100.0 * sparsity(layer.weight):.2f}%")
zeros = sum(float((layer.weight == 0).sum()) for layer, _ in parameters_to_prune)
total = sum(layer.weight.numel() for layer, _ in parameters_to_prune)
print(f"Global sparsity: {100.0 * zeros / total:.2f}%")

pruned_path = "lenet_pruned.onnx"
to_onnx_pruned(model, images, pruned_path, input_names=["images"])
dense_bytes, pruned_bytes = os.path.getsize(dense_path), os.path.getsize(pruned_path)
print(f"Dense ONNX file: {dense_bytes} bytes")
print(f"Pruned ONNX file: {pruned_bytes} bytes ({100.0 * pruned_bytes / dense_bytes:.1f}% of dense)")

session = onnxruntime.InferenceSession(pruned_path, providers=["CPUExecutionProvider"])
(exported,) = session.run(None, {"images": images.numpy()})
difference = float(np.abs(exported - model(images).detach().numpy()).max())
print(f"Largest difference between onnxruntime and the pruned module: {difference:.2e}")
