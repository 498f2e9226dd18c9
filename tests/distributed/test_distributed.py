"""onnxnn.distributed in real MPI jobs: ``mpiexec -n 2`` runs the scripts beside this file.

Each job writes one JSON file per rank; the tests compare them with numpy recomputations, with a
single-process run on the concatenated batches (DistributedDataParallel), and check that a failing
rank ends the whole job within its timeout. Jobs are grouped (one launch per script and executor)
because starting MPI costs about a second.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from tests.tolerances import gamma, unit_roundoff

pytest.importorskip("mpi4py")  # the ``distributed`` extra (in ``test``): mpi4py and MPICH's wheel

from tests.distributed.collectives_job import UNSIGNED, rank_bool, rank_unsigned  # noqa: E402 - needs mpi4py
from tests.distributed.ddp_job import LR, PER_RANK, STEPS  # noqa: E402 - needs mpi4py
from tests.distributed.mpi_jobs import WORLD, launch  # noqa: E402

HERE = Path(__file__).resolve().parent
# Generous for a 2-core machine running other work; a hang would run into it, not pass.
JOB_SECONDS = 90


def _launch(script: str, *args: str, timeout: float = JOB_SECONDS):
    return launch(HERE / script, *args, timeout=timeout)


def _run_job(script: str, executor: str, tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp(script.replace(".py", ""))
    result = _launch(script, executor, str(folder))
    assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads((folder / f"rank{rank}.json").read_text()) for rank in range(WORLD)]


@pytest.fixture(scope="module", params=["kernels", "onnxruntime"])
def collectives(request, tmp_path_factory):
    return _run_job("collectives_job.py", request.param, tmp_path_factory)


@pytest.fixture(scope="module", params=["kernels", "onnxruntime"])
def ddp(request, tmp_path_factory):
    return _run_job("ddp_job.py", request.param, tmp_path_factory)


def _rank_data(rank: int) -> np.ndarray:  # collectives_job.rank_data
    return _rank_data_shaped(rank, (2, 3))


def _rank_data_shaped(rank: int, shape: tuple) -> np.ndarray:
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 10 * rank + 1


# ---------------------------------------------------------------------------------- collectives
def test_process_group_queries(collectives):
    for rank, out in enumerate(collectives):
        assert (out["rank"], out["size"], out["initialized"], out["initialized_after"]) == (rank, WORLD, True, False)
    assert [(out["group_rank"], out["group_size"]) for out in collectives] == [(0, 1), (-1, -1)]


def test_all_reduce_every_op(collectives):
    inputs = np.stack([_rank_data(rank) for rank in range(WORLD)])
    expected = {
        "SUM": inputs.sum(0),
        "AVG": inputs.sum(0) / WORLD,
        "MAX": inputs.max(0),
        "MIN": inputs.min(0),
        "PRODUCT": inputs.prod(0),
    }
    for out in collectives:
        for op, value in expected.items():
            np.testing.assert_array_equal(out[f"all_reduce_{op}"], value, err_msg=op)  # small integers: exact
        np.testing.assert_array_equal(out["all_reduce_async"], inputs.sum(0))
        assert out["async_type"] == "Work" and out["async_completed"]
        assert out["all_reduce_int64"] == [1 * 2, 25]


def test_data_movement(collectives):
    inputs = [_rank_data(rank) for rank in range(WORLD)]
    total = np.sum(inputs, axis=0)
    for rank, out in enumerate(collectives):
        np.testing.assert_array_equal(out["broadcast"], inputs[1])
        np.testing.assert_array_equal(out["all_gather"], inputs)
        np.testing.assert_array_equal(out["all_gather_into_tensor"], np.concatenate(inputs))
        np.testing.assert_array_equal(out["reduce_scatter_tensor"], total[rank : rank + 1])
        np.testing.assert_array_equal(out["scatter"], inputs[rank] * 2)
    np.testing.assert_array_equal(collectives[0]["gather"], inputs)
    assert collectives[1]["gather"] is None
    assert collectives[1]["recv_from"] == 0
    np.testing.assert_array_equal(collectives[1]["recv"], _rank_data(7))


# numpy's element-wise form of each ReduceOp on integers (unsigned ones wrap modulo 2**bits, as MPI's).
_INTEGER_REDUCTIONS = {
    "SUM": np.add,
    "MAX": np.maximum,
    "MIN": np.minimum,
    "PRODUCT": np.multiply,
    "BAND": np.bitwise_and,
    "BOR": np.bitwise_or,
    "BXOR": np.bitwise_xor,
}
# PyTorch's (gloo's) meaning of each ReduceOp on bool.
_BOOL_REDUCTIONS = {
    "SUM": np.logical_or,
    "MAX": np.logical_or,
    "BOR": np.logical_or,
    "PRODUCT": np.logical_and,
    "MIN": np.logical_and,
    "BAND": np.logical_and,
    "BXOR": np.logical_xor,
}


@pytest.mark.parametrize(
    ("case", "data", "reductions"),
    [
        *(
            (f"unsigned_{dtype}", functools.partial(rank_unsigned, dtype=dtype), _INTEGER_REDUCTIONS)
            for dtype in UNSIGNED
        ),
        ("bool", rank_bool, _BOOL_REDUCTIONS),
    ],
)
def test_reductions_are_exact_for_unsigned_and_bool(collectives, case, data, reductions):
    inputs = [data(rank) for rank in range(WORLD)]
    for rank, out in enumerate(collectives):
        assert isinstance(out[case], dict), out[case]  # else the error the job caught
        for op, combine in reductions.items():
            expected = functools.reduce(combine, inputs)
            np.testing.assert_array_equal(out[case][f"all_reduce_{op}"], expected, err_msg=op)
            np.testing.assert_array_equal(out[case][f"reduce_{op}"], expected if rank == 1 else inputs[rank], op)
            share = expected[2 * rank : 2 * rank + 2]
            np.testing.assert_array_equal(out[case][f"reduce_scatter_tensor_{op}"], share, err_msg=op)


def test_collectives_outside_the_group_warn_and_do_nothing(collectives):
    outside = collectives[1]["outside_group"]
    assert isinstance(outside, dict), outside
    assert set(outside) >= {"all_reduce", "all_to_all", "barrier", "gather_object", "isend", "irecv", "recv"}
    for name, (returned, tensor, warnings) in outside.items():
        assert returned == (-1 if name == "recv" else None), (name, returned)
        assert tensor == [5.0], name
        operation = "irecv" if name == "recv" else name
        assert warnings == [f"Running {operation} on global rank 1 which does not belong to the given group."], name
    for name, (returned, _, warnings) in collectives[0]["outside_group"].items():  # a group of one: runs
        assert (returned, warnings) == (None, []), name


def test_all_to_all_reduce_scatter_object_scatter_and_gather(collectives):
    new = [out["new_collectives"] for out in collectives]
    assert all(isinstance(out, dict) for out in new), new
    # all_to_all: rank r's output j is rank j's input r, [1, 2] + 10 j + 2 r.
    for rank, out in enumerate(new):
        assert out["all_to_all"] == [[1.0 + 10 * j + 2 * rank, 2.0 + 10 * j + 2 * rank] for j in range(WORLD)]
    # PyTorch's (gloo's) results for its uneven example.
    assert [out["all_to_all_single_uneven"] for out in new] == [[0, 100, 101, 102], [1, 2, 103]]
    inputs = [_rank_data_shaped(rank, (4, 2)) for rank in range(WORLD)]
    for rank, out in enumerate(new):
        np.testing.assert_array_equal(
            out["all_to_all_single_even"], np.concatenate([x[2 * rank : 2 * rank + 2] for x in inputs])
        )
        assert out["all_to_all_single_result"] == [True]
    assert [out["reduce_scatter"] for out in new] == [[1.0 + 2.0, 2.0 + 3.0], [3.0 + 6.0, 4.0 + 8.0]]
    assert [out["gather_object"] for out in new] == [None, [{"rank": 0}, {"rank": 1}]]
    assert [out["scatter_object_list"] for out in new] == [[{"a": 1}], [[2, 3]]]


def test_group_rank_translation_and_work_results(collectives):
    new = [out["new_collectives"] for out in collectives]
    assert all(isinstance(out, dict) for out in new), new
    # The default group translates by identity without a check, as PyTorch's; rank 0 also has the group [0].
    assert [out["ranks"] for out in new] == [[7, 7, [0, 1], 0, 0, [0]], [7, 7, [0, 1]]]
    # Work.result(): [count, whether each is the call's own output tensor], PyTorch's (gloo's) counts.
    for rank, out in enumerate(new):
        assert out["result"] == {
            "all_reduce": [1, [True]],
            "broadcast": [1, [True]],
            "reduce": [1, [True]],
            "all_gather": [2, [True, True]],
            "gather": [2, [True, True]] if rank == 0 else [0, []],
            "scatter": [1, [True]],
            "barrier": [0, []],
        }


def test_object_collectives_rebuild_plain_data_only(collectives):
    for out in collectives:
        assert out["broadcast_object_list"] == [{"lr": 0.1, "steps": [1, 2]}, ["a", 3], "tuple"]
        assert out["all_gather_object"] == [{"rank": r, "name": f"r{r}"} for r in range(WORLD)]
        assert out["pickle_allowed"] == 1.5
    assert collectives[0]["unsafe_refused"] is True  # the sender keeps its list
    refused = collectives[1]["unsafe_refused"]
    assert refused.startswith("UnpicklingError") and "allow_pickle=True" in refused


def test_sampler_covers_the_dataset_once_per_epoch(collectives):
    for epoch in range(2):
        shares = [out["sampler"][epoch] for out in collectives]
        assert sorted(shares[0] + shares[1]) == list(range(10))
        assert all(len(share) == out["sampler_len"] == 5 for share, out in zip(shares, collectives))
    assert collectives[0]["sampler"][0] != collectives[0]["sampler"][1]  # set_epoch reshuffles


# ---------------------------------------------------------------------------------- DistributedDataParallel
def test_wrapping_broadcasts_rank0_state(ddp):
    for out in ddp:
        for after, initial in zip(out["after_wrap"], ddp[0]["initial_rank0"]):
            np.testing.assert_array_equal(after, initial)
        assert out["buckets"] > 1
        assert out["state_dict_keys"] == ["module.0.weight", "module.0.bias", "module.2.weight", "module.2.bias"]


def _gradient_bound(magnitude, samples: int) -> np.ndarray:
    # A gradient entry is a sum over the samples of per-sample terms, each through the MLP's chain
    # (4 + 8 + 2 products forward and back, tanh and its derivative a few ulps): the two runs sum
    # in different orders (per rank, then across ranks), so each is within gamma(n) * sum|terms|.
    return 2 * gamma(samples + 32) * np.asarray(magnitude)


def test_ddp_training_matches_one_process_on_the_concatenated_batches(ddp):
    reference = ddp[0]
    samples = PER_RANK * WORLD
    for index, expected in enumerate(reference["reference_params"]):
        expected = np.asarray(expected)
        # Each step's update differs by lr * the gradient bound, plus one rounding of the update on
        # each side; doubled for the steps' effect on later gradients (3 steps, lr 0.1, |Hessian| < 1).
        bound = sum(LR * _gradient_bound(step[index], samples) for step in reference["magnitudes"])
        bound = 2 * (bound + 2 * STEPS * unit_roundoff(np.float32) * np.abs(expected))
        for out in ddp:
            actual = np.asarray(out["ddp_params"][index])
            assert np.all(np.abs(actual - expected) <= bound), (index, np.abs(actual - expected).max(), bound.max())
        np.testing.assert_array_equal(ddp[0]["ddp_params"][index], ddp[1]["ddp_params"][index])


def test_no_sync_accumulates_locally_then_averages(ddp):
    local = [np.asarray(ddp[rank]["local_grads_after_no_sync"][0]) for rank in range(WORLD)]
    assert not np.array_equal(local[0], local[1])  # no communication inside no_sync
    reference = ddp[0]
    for index, expected in enumerate(reference["no_sync_reference"]):
        bound = _gradient_bound(reference["no_sync_magnitudes"][index], 2 * PER_RANK * WORLD)
        for out in ddp:
            actual = np.asarray(out["no_sync_grads"][index])
            assert np.all(np.abs(actual - np.asarray(expected)) <= bound), index


def test_find_unused_parameters(ddp):
    for out in ddp:
        assert out["unused_grad_is_none"] is True
        np.testing.assert_array_equal(out["used_grad"], ddp[0]["used_grad"])
        assert out["strict_error"].startswith("Expected to have finished reduction in the prior iteration")
        assert "find_unused_parameters=True" in out["strict_error"]
        # The head only rank 0 used: (rank 0's gradient + rank 1's zeros) / 2, on both ranks; its
        # gradient is rank 0's data summed, the same as rank 0's local gradient of the other head.
        np.testing.assert_array_equal(out["half_used_grad"], np.asarray(ddp[0]["local_used_grad"]) / 2)


# ---------------------------------------------------------------------------------- failures end the job
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("raise", "ValueError: rank 1 found a bad batch"),
        ("stall", "all_reduce on rank 0 timed out after 1 s"),
    ],
)
def test_a_failing_rank_ends_the_job(mode, message):
    # Rank 1 raising (or stalling past the 1 s timeout) while rank 0 waits in all_reduce must end
    # both ranks through MPI_Abort, long before rank 1's 60 s sleep or the launch timeout.
    result = _launch("failing_job.py", mode, timeout=30)
    assert result.returncode != 0
    assert "was not stopped" not in result.stdout
    assert "aborting the job (MPI_Abort) after an uncaught error" in result.stderr
    assert message in result.stderr, result.stderr[-2000:]


def test_broadcast_buffers(ddp):
    trained = [np.asarray(out["buffers_True"][0]) for out in ddp]
    assert not np.array_equal(trained[0], trained[1])  # different batches, different statistics
    for out in ddp:  # the next forward starts from rank 0's buffers
        np.testing.assert_array_equal(out["buffers_True"][1], trained[0])
        np.testing.assert_array_equal(out["buffers_False"][1], out["buffers_False"][0])
    assert ddp[0]["buffers_False"][1] != ddp[1]["buffers_False"][1]


@pytest.mark.parametrize("mode", ["no_grad", "no_sync"])
def test_buffers_are_broadcast_only_after_a_synced_training_forward(ddp, mode):
    for out in ddp:
        kept, local, after_sync = out[f"buffers_{mode}"]
        np.testing.assert_array_equal(kept, local)  # this rank's own statistics, never rank 0's
        np.testing.assert_array_equal(after_sync, ddp[0][f"buffers_{mode}"][0])
    assert ddp[0][f"buffers_{mode}"][0] != ddp[1][f"buffers_{mode}"][0]  # different batches


def test_buffers_at_wrap_time(ddp):
    for rank, out in enumerate(ddp):
        assert out["wrap_broadcast_buffers_false"] == [float(rank)] * 3  # each rank keeps its own
        assert out["wrap_forward_sync_buffers_false"] == [0.0] * 3  # still synced at wrap, as PyTorch


def test_sync_batchnorm_matches_batchnorm_on_the_concatenated_batches(ddp):
    # float64 runs: every state entry after the 3 steps is a chain of sums of at most samples + 64
    # roundings; 64 x gamma covers the chain over 3 steps and BatchNorm's 1/std (< 8 here) amplification.
    samples = PER_RANK * WORLD
    assert ddp[0]["sync_bn_type"] == "SyncBatchNorm"
    for key, expected in ddp[0]["sync_bn_reference"].items():
        expected = np.asarray(expected)
        bound = 64 * gamma(samples + 64, np.float64) * (1 + np.abs(expected))
        for out in ddp:
            actual = np.asarray(out["sync_bn_state"][key])
            assert np.all(np.abs(actual - expected) <= bound), (key, np.abs(actual - expected).max())
