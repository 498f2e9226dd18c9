"""Run under ``mpiexec -n 2``: one rank fails while the other waits in a collective.

argv[1] is ``raise`` (rank 1 raises; its abort hook must end rank 0's all_reduce) or ``stall``
(rank 1 sleeps past the 1 s timeout; rank 0's all_reduce must time out and end the job).
"""

import datetime
import sys
import time

import onnxnn
import onnxnn.distributed as dist


def main() -> None:
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=1))
    rank = dist.get_rank()
    if rank == 1:
        if sys.argv[1] == "raise":
            raise ValueError("rank 1 found a bad batch")
        time.sleep(60)  # longer than the test waits: only an abort ends this rank in time
    dist.all_reduce(onnxnn.ones(3))
    print("rank", rank, "was not stopped", flush=True)


if __name__ == "__main__":
    main()
