"""Fine-tunes a zoo model (torchvision's resnet18 layout) on scikit-learn's digits, then exports it to ONNX.

The 8x8 digit images are upsampled to 16x16 (small enough to train on a CPU in a minute or two),
repeated over three channels and normalized as ImageNet inputs are. Pass a torchvision checkpoint to
start from pretrained weights: the ImageNet head is dropped and a fresh 10-class ``fc`` is trained::

    python examples/finetune_digits.py [steps] [resnet18.pth]

(save the checkpoint once with torchvision: ``torch.save(torchvision.models.resnet18(weights="DEFAULT").state_dict(),
"resnet18.pth")``). Without one the model starts from torchvision's random initialization. The
environment variable ONNXNN_EXAMPLE_STEPS sets the number of steps too (default 100), as the test does.
At the end it prints the test accuracy, exports the model with a dynamic batch axis and checks that
plain onnxruntime gives the same predictions.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import onnxruntime
from sklearn.datasets import load_digits

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.models import resnet18
from onnxnn.models.vision.transforms import IMAGENET_MEAN, IMAGENET_STD

BATCH = 32


def digits_as_images() -> tuple[np.ndarray, np.ndarray]:
    """The 1797 digits as (N, 3, 16, 16) float32 ImageNet-normalized images, and their labels."""
    digits = load_digits()
    images = digits.images.astype(np.float32) / 16.0  # pixel values are 0..16
    images = images.repeat(2, axis=1).repeat(2, axis=2)  # 8x8 -> 16x16, nearest neighbour
    images = np.stack([images] * 3, axis=1)
    mean = np.asarray(IMAGENET_MEAN, np.float32)[None, :, None, None]
    std = np.asarray(IMAGENET_STD, np.float32)[None, :, None, None]
    return (images - mean) / std, digits.target.astype(np.int64)


def build_model(checkpoint: str | None) -> nn.Module:
    """resnet18 with a 10-class head; from a torchvision checkpoint when one is given."""
    if checkpoint is None:
        return resnet18(num_classes=10)
    model = resnet18(weights=checkpoint)  # the ImageNet model, 1000 classes
    model.fc = nn.Linear(model.fc.in_features, 10)
    return model


def progress(step: int, total: int, loss: float) -> None:
    done = int(30 * step / total)
    print(f"\r[{'#' * done}{'.' * (30 - done)}] step {step}/{total} loss {loss:.3f}", end="", flush=True)


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("ONNXNN_EXAMPLE_STEPS", "100"))
    checkpoint = sys.argv[2] if len(sys.argv) > 2 else None
    onnxnn.manual_seed(0)
    rng = np.random.default_rng(0)
    images, labels = digits_as_images()
    order = rng.permutation(len(labels))
    test_index, train_index = order[:360], order[360:]

    model = build_model(checkpoint)
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    model.train()
    for step in range(1, steps + 1):
        batch = rng.choice(train_index, BATCH, replace=False)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(onnxnn.from_numpy(images[batch])), onnxnn.from_numpy(labels[batch]))
        loss.backward()
        optimizer.step()
        progress(step, steps, float(loss))
    print()

    model.eval()
    with onnxnn.no_grad():
        logits = np.concatenate(
            [model(onnxnn.from_numpy(images[test_index[i : i + 120]])).numpy() for i in range(0, 360, 120)]
        )
    accuracy = float((logits.argmax(1) == labels[test_index]).mean())
    print(f"test accuracy: {accuracy:.3f} on {len(test_index)} held-out digits")

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "digits_resnet18.onnx")
        to_onnx(
            model,
            onnxnn.from_numpy(images[:2]),
            path,
            input_names=["images"],
            output_names=["logits"],
            dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
        )
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        (exported,) = session.run(None, {"images": images[test_index[:120]]})
    agreement = float((exported.argmax(1) == logits[:120].argmax(1)).mean())
    print(f"onnxruntime agrees with onnxnn on {agreement:.1%} of 120 predictions")


if __name__ == "__main__":
    main()
