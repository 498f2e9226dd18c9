"""Run under ``mpiexec -n 2``: DistributedDataParallel against a single-process run.

Each rank writes ``rank<r>.json`` into the folder argv[2].

Every rank trains its replica on its slice of a global batch; rank 0 also trains a plain copy on the
whole (concatenated) batch and reports, per step, the sum over samples of the absolute per-sample
gradients, from which the test bounds the float32 rounding difference of the two summation orders.
"""

import json
import os
import sys
import warnings

import numpy as np

import onnxnn
import onnxnn.distributed as dist
from onnxnn import nn

STEPS, LR, PER_RANK = 3, 0.1, 4


def make_model(seed: int) -> nn.Module:
    onnxnn.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def data(size: int, seed: int):
    generator = np.random.default_rng(seed)
    x = generator.standard_normal((size * PER_RANK, 4)).astype(np.float32)
    y = generator.standard_normal((size * PER_RANK, 2)).astype(np.float32)
    return x, y


def params(model) -> list:
    return [p.detach().numpy().tolist() for p in model.parameters()]


def grads(model) -> list:
    return [p.grad.numpy().tolist() for p in model.parameters()]


def per_sample_magnitude(model, x, y) -> list:
    """For each parameter, the sum over samples of |that sample's gradient of the mean loss|."""
    totals = [np.zeros(tuple(p.shape)) for p in model.parameters()]
    for row in range(x.shape[0]):
        model.zero_grad()
        loss = nn.functional.mse_loss(model(onnxnn.tensor(x[row : row + 1])), onnxnn.tensor(y[row : row + 1]))
        (loss / x.shape[0]).backward()
        for total, p in zip(totals, model.parameters()):
            total += np.abs(p.grad.numpy())
    model.zero_grad()
    return [t.tolist() for t in totals]


def main() -> None:
    onnxnn.set_executor(sys.argv[1])
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    out = {"rank": rank}
    mine = slice(rank * PER_RANK, (rank + 1) * PER_RANK)

    # 1. Wrapping broadcasts rank 0's parameters: each rank starts from its own seed.
    local = make_model(100 + rank)
    out["initial_rank0"] = params(make_model(100))
    model = dist.DistributedDataParallel(local, bucket_cap_mb=100 / 2**20)  # ~100 bytes: several buckets
    out["buckets"] = len(model._buckets)
    out["after_wrap"] = params(model)
    out["state_dict_keys"] = list(model.state_dict().keys())

    # 2. N steps of SGD against the single-process run on the concatenated batches.
    x, y = data(size, 7)
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=LR)
    for _ in range(STEPS):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(onnxnn.tensor(x[mine])), onnxnn.tensor(y[mine])).backward()
        optimizer.step()
    out["ddp_params"] = params(model)
    if rank == 0:
        reference = make_model(100)
        reference_optimizer = onnxnn.optim.SGD(reference.parameters(), lr=LR)
        magnitudes = []
        for _ in range(STEPS):
            magnitudes.append(per_sample_magnitude(reference, x, y))
            reference_optimizer.zero_grad()
            nn.functional.mse_loss(reference(onnxnn.tensor(x)), onnxnn.tensor(y)).backward()
            reference_optimizer.step()
        out["reference_params"] = params(reference)
        out["magnitudes"] = magnitudes

    # 3. no_sync: two micro-batches accumulate locally, the second backward averages the sum.
    x2, y2 = data(size, 8)
    accumulating = dist.DistributedDataParallel(make_model(5))
    with accumulating.no_sync():
        nn.functional.mse_loss(accumulating(onnxnn.tensor(x[mine])), onnxnn.tensor(y[mine])).backward()
    out["local_grads_after_no_sync"] = grads(accumulating)
    nn.functional.mse_loss(accumulating(onnxnn.tensor(x2[mine])), onnxnn.tensor(y2[mine])).backward()
    out["no_sync_grads"] = grads(accumulating)
    if rank == 0:
        reference = make_model(5)
        first, second = per_sample_magnitude(reference, x, y), per_sample_magnitude(reference, x2, y2)
        out["no_sync_magnitudes"] = [(np.array(a) + np.array(b)).tolist() for a, b in zip(first, second)]
        nn.functional.mse_loss(reference(onnxnn.tensor(x)), onnxnn.tensor(y)).backward()
        nn.functional.mse_loss(reference(onnxnn.tensor(x2)), onnxnn.tensor(y2)).backward()
        out["no_sync_reference"] = grads(reference)

    # 4. find_unused_parameters: a branch the forward skips.
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(4, 2)
            self.unused = nn.Linear(4, 2)

        def forward(self, inputs, both: bool = False):
            return self.used(inputs) + self.unused(inputs) if both else self.used(inputs)

    onnxnn.manual_seed(3)
    finding = dist.DistributedDataParallel(TwoHeads(), find_unused_parameters=True)
    for _ in range(2):
        finding.zero_grad()
        finding(onnxnn.tensor(x[mine])).sum().backward()
    out["unused_grad_is_none"] = finding.module.unused.weight.grad is None
    out["used_grad"] = finding.module.used.weight.grad.numpy().tolist()
    # Used on rank 0 only: both ranks get the average of rank 0's gradient and rank 1's zeros.
    finding.zero_grad()
    finding(onnxnn.tensor(x[mine]), both=rank == 0).sum().backward()
    out["half_used_grad"] = finding.module.unused.weight.grad.numpy().tolist()
    local = TwoHeads()
    local.load_state_dict(finding.module.state_dict())
    local.used(onnxnn.tensor(x[mine])).sum().backward()
    out["local_used_grad"] = local.used.weight.grad.numpy().tolist()

    onnxnn.manual_seed(3)
    strict = dist.DistributedDataParallel(TwoHeads())
    strict(onnxnn.tensor(x[mine])).sum().backward()
    try:
        strict(onnxnn.tensor(x[mine]))
        out["strict_error"] = None
    except RuntimeError as error:
        out["strict_error"] = str(error)

    # 5. broadcast_buffers: rank 0's BatchNorm statistics replace the others' before every forward.
    for broadcast in (True, False):
        onnxnn.manual_seed(2)
        with_buffers = dist.DistributedDataParallel(
            nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)), broadcast_buffers=broadcast
        )
        with_buffers(onnxnn.tensor(x[mine]))  # training: each rank's statistics move with its own batch
        after_training = with_buffers.module[1].running_mean.numpy().tolist()
        with_buffers.eval()
        with onnxnn.no_grad():
            with_buffers(onnxnn.tensor(x[mine]))  # evaluation: no update, only the broadcast
        out[f"buffers_{broadcast}"] = [after_training, with_buffers.module[1].running_mean.numpy().tolist()]

    # 5b. PyTorch's rule: a forward broadcasts rank 0's buffers only if the forward before it was a synced
    # training forward (the first forward counts as one). After no_grad or no_sync forwards each rank
    # keeps its own statistics, through the next synced forward too; a plain local copy replays them.
    def batch_normed() -> nn.Module:
        onnxnn.manual_seed(2)
        return nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))

    batches = [onnxnn.tensor(x[mine] + step) for step in range(4)]
    for mode in ("no_grad", "no_sync"):
        wrapped, plain = dist.DistributedDataParallel(batch_normed()), batch_normed()
        for batch in batches[:3]:
            with onnxnn.no_grad() if mode == "no_grad" else wrapped.no_sync():
                prediction = wrapped(batch)
                if mode == "no_sync":
                    prediction.sum().backward()
            plain(batch)
        wrapped(batches[3]).sum().backward()  # synced, but the forward before it was not: no broadcast yet
        plain(batches[3])
        kept = [wrapped.module[1].running_mean.numpy().tolist(), plain[1].running_mean.numpy().tolist()]
        wrapped.eval()
        with onnxnn.no_grad():
            wrapped(batches[3])  # after a synced training forward: rank 0's buffers, not updated in eval
        out[f"buffers_{mode}"] = [*kept, wrapped.module[1].running_mean.numpy().tolist()]
    # At wrap time: broadcast_buffers=False keeps each rank's buffers, forward_sync_buffers=False does not.
    for keyword in ("broadcast_buffers", "forward_sync_buffers"):
        local = batch_normed()
        local[1].running_mean.fill_(float(rank))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # broadcast_buffers is deprecated, as in PyTorch
            dist.DistributedDataParallel(local, **{keyword: False})
        out[f"wrap_{keyword}_false"] = local[1].running_mean.numpy().tolist()

    # 6. SyncBatchNorm (converted from BatchNorm1d) against BatchNorm1d on the concatenated batch, in float64.
    def normalized(seed: int) -> nn.Module:
        onnxnn.manual_seed(seed)
        return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 2)).double()

    synced = dist.DistributedDataParallel(dist.SyncBatchNorm.convert_sync_batchnorm(normalized(11)))
    out["sync_bn_type"] = type(synced.module[1]).__name__
    sync_optimizer = onnxnn.optim.SGD(synced.parameters(), lr=LR)
    for _ in range(STEPS):
        sync_optimizer.zero_grad()
        prediction = synced(onnxnn.tensor(x[mine].astype(np.float64)))
        nn.functional.mse_loss(prediction, onnxnn.tensor(y[mine].astype(np.float64))).backward()
        sync_optimizer.step()
    out["sync_bn_state"] = {k: v.numpy().tolist() for k, v in synced.module.state_dict().items()}
    if rank == 0:
        plain = normalized(11)
        plain_optimizer = onnxnn.optim.SGD(plain.parameters(), lr=LR)
        for _ in range(STEPS):
            plain_optimizer.zero_grad()
            prediction = plain(onnxnn.tensor(x.astype(np.float64)))
            nn.functional.mse_loss(prediction, onnxnn.tensor(y.astype(np.float64))).backward()
            plain_optimizer.step()
        out["sync_bn_reference"] = {k: v.numpy().tolist() for k, v in plain.state_dict().items()}

    dist.destroy_process_group()
    with open(os.path.join(sys.argv[2], f"rank{rank}.json"), "w") as file:  # ranks' stdout interleave
        json.dump(out, file)


if __name__ == "__main__":
    main()
