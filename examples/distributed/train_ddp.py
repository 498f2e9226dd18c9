"""Data-parallel training of a small MLP with onnxnn.distributed on MPI.

Launch (any number of ranks; one rank also works with plain ``python``):

    mpiexec -n 2 python examples/distributed/train_ddp.py

Every rank builds the same model (DistributedDataParallel copies rank 0's parameters to the others),
reads its own share of the data set through DistributedSampler, and averages gradients with the
others on every backward. Rank 0 prints the loss averaged over all ranks and saves a checkpoint,
which every rank then loads, as a resumed job would.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

import onnxnn
import onnxnn.distributed as dist
from onnxnn import nn
from onnxnn.utils.data.distributed import DistributedSampler

EPOCHS, BATCH, SAMPLES = 5, 16, 256


def make_data() -> tuple[np.ndarray, np.ndarray]:
    """y = sin(x0) + x1 * x2 plus noise: the same data on every rank (each reads its own share)."""
    generator = np.random.default_rng(0)
    x = generator.uniform(-2, 2, (SAMPLES, 3)).astype(np.float32)
    y = (np.sin(x[:, :1]) + x[:, 1:2] * x[:, 2:3] + 0.05 * generator.standard_normal((SAMPLES, 1))).astype(np.float32)
    return x, y


def main() -> float:
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    onnxnn.manual_seed(rank)  # different on purpose: wrapping broadcasts rank 0's parameters
    model = dist.DistributedDataParallel(nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 1)))
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = make_data()
    sampler = DistributedSampler(range(SAMPLES), shuffle=True, seed=0)
    loss = onnxnn.zeros(())
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        indices = np.fromiter(sampler, dtype=np.int64)
        total = onnxnn.zeros(())
        for start in range(0, len(indices), BATCH):
            rows = indices[start : start + BATCH]
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(onnxnn.tensor(x[rows])), onnxnn.tensor(y[rows]))
            loss.backward()
            optimizer.step()
            total = total + loss.detach()
        mean = total / ((len(indices) + BATCH - 1) // BATCH)
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch}: mean loss over {world} rank(s) {mean.item():.4f}")
    final = mean.item()

    # Checkpoint: rank 0 writes; the others wait for it, then every rank loads the same state.
    folder = [tempfile.mkdtemp(prefix="onnxnn-ddp-") if rank == 0 else None]
    dist.broadcast_object_list(folder, src=0)
    path = os.path.join(folder[0], "model.pt")
    if rank == 0:
        onnxnn.save(model.state_dict(), path)  # keys start with "module.", as PyTorch's
    dist.barrier()
    model.load_state_dict(onnxnn.load(path))
    dist.barrier()  # every rank has read the file before rank 0 removes it
    if rank == 0:
        print(f"saved and reloaded {path} on every rank")
        shutil.rmtree(folder[0])
    dist.destroy_process_group()
    return final


if __name__ == "__main__":
    main()
