"""An RNN whose hidden-to-hidden weight is constrained to be orthogonal, trained to recall the
first value of a sequence after the whole sequence has gone by.

An orthogonal recurrent matrix neither shrinks nor grows the hidden state it carries, which helps
gradients travel over many time steps (the Modules note's example of a parametrization).
``nn.utils.parametrizations.orthogonal`` stores an unconstrained tensor in
``rnn.parametrizations.weight_hh_l0.original`` and computes ``rnn.weight_hh_l0 = exp(A)`` (A the
skew-symmetric matrix it defines) with recorded ops at every forward pass, so the optimizer trains
the unconstrained tensor and the weight stays orthogonal to float32 rounding.

Run it: ``python examples/advanced/orthogonal_rnn.py``; it prints the loss and
``max |W^T W - I|`` after each epoch, then exports the trained model to ONNX (the matrix exponential
included, computed from the stored tensor) and checks onnxruntime's output against the model's.
"""

from __future__ import annotations

import numpy as np
import onnxruntime

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.nn.utils import parametrizations

SEQUENCE_LENGTH = 12
HIDDEN_SIZE = 16
BATCH_SIZE = 32
EPOCHS = 8
STEPS_PER_EPOCH = 10


class Recall(nn.Module):
    """An Elman RNN over the sequence, and a linear read-out of its last hidden state."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(input_size=1, hidden_size=HIDDEN_SIZE, batch_first=True)
        self.readout = nn.Linear(HIDDEN_SIZE, 1)

    def forward(self, sequence):
        outputs, _ = self.rnn(sequence)
        return self.readout(outputs[:, -1])


def batch(generator: np.random.Generator):
    """Random sequences (batch, time, 1); the target is each sequence's first value."""
    sequence = generator.uniform(-1.0, 1.0, (BATCH_SIZE, SEQUENCE_LENGTH, 1)).astype(np.float32)
    return onnxnn.tensor(sequence), onnxnn.tensor(sequence[:, 0])


def orthogonality_error(weight) -> float:
    W = weight.detach().numpy()
    return float(np.abs(W.T @ W - np.eye(W.shape[1], dtype=W.dtype)).max())


onnxnn.manual_seed(0)
generator = np.random.default_rng(0)
model = Recall()
parametrizations.orthogonal(model.rnn, "weight_hh_l0")  # a square weight: the matrix_exp map
print(f"weight_hh_l0 is computed by {type(model.rnn).__name__}.parametrizations.weight_hh_l0")

optimizer = onnxnn.optim.Adam(model.parameters(), lr=0.02)
losses, orthogonality_errors = [], []
for epoch in range(1, EPOCHS + 1):
    total = 0.0
    for _ in range(STEPS_PER_EPOCH):
        sequence, target = batch(generator)
        loss = ((model(sequence) - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    losses.append(total / STEPS_PER_EPOCH)
    orthogonality_errors.append(orthogonality_error(model.rnn.weight_hh_l0))
    print(f"epoch {epoch}  loss {losses[-1]:.5f}  max|W^T W - I| {orthogonality_errors[-1]:.1e}")

# The export records the parametrization too: the file's initializer is the unconstrained tensor,
# under its state_dict name, and the graph computes the orthogonal weight from it.
model.eval()
sequence, _ = batch(generator)
proto = to_onnx(model, (sequence,), input_names=["sequence"])
session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
(exported,) = session.run(None, {"sequence": sequence.numpy()})
export_difference = float(np.abs(exported - model(sequence).detach().numpy()).max())
stored = sorted(i.name for i in proto.graph.initializer if i.name.startswith("rnn.parametrizations"))
print(f"exported initializers {stored}")
print(f"onnxruntime vs onnxnn: max difference {export_difference:.1e}")
