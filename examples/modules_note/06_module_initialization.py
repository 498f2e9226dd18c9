"""Module Initialization: device and dtype arguments, skip_init, and buffers that follow dtype."""

import onnxnn as torch
from onnxnn import nn

# Initialize module directly onto GPU (where onnxruntime's CUDA provider works here).
if torch.cuda.is_available():
    m = nn.Linear(5, 3, device="cuda")

# Initialize module with 16-bit floating point parameters.
m = nn.Linear(5, 3, dtype=torch.half)
print(m.weight.dtype)

# Skip default parameter initialization and perform custom (e.g. orthogonal) initialization.
m = torch.nn.utils.skip_init(nn.Linear, 5, 3)
nn.init.orthogonal_(m.weight)
print(m.weight @ m.weight.T)

m = nn.BatchNorm2d(3, dtype=torch.half)
print(m.running_mean)
