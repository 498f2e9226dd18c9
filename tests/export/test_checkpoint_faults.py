"""Specification: saving survives being killed, a full disk and a busy directory.

A save writes one temporary file beside its target (``.<name>.<pid>.<random>.tmp``) under an
exclusive flock, fsyncs it and renames it over the target. Killed mid-write, it leaves the previous
file intact and its temporary behind; the next save of that target removes temporaries whose writer
is gone and never one whose writer still runs. Write errors are OSErrors naming the target.
The kills are real: a child process is stopped with SIGKILL in the middle of writing.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import onnxnn
from onnxnn.export import atomic_write, checkpoint, load, save

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and rlimits")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPORARY = re.compile(r"\.ckpt\.pt\.(\d+)\.[0-9a-f]+\.tmp")


def state(value: float, size: int = 4) -> dict:
    return {"w": onnxnn.tensor(np.full(size, value, np.float32))}


def temporaries(directory) -> list[str]:
    return sorted(name for name in os.listdir(directory) if TEMPORARY.fullmatch(name))


def loaded_value(path) -> float:
    return float(load(path)["w"].numpy()[0])


def start_blocked_writer(target) -> subprocess.Popen:
    """A child that saves ``target``, writes part of the file and then waits to be killed."""
    script = textwrap.dedent(f"""
        import sys, time
        import numpy as np
        import onnxnn
        from onnxnn.export import checkpoint

        def stalled(obj, write, is_parameter):
            write(b"PK" + b"\\0" * 2_000_000)   # half a file, past the write buffer
            print("writing", flush=True)
            time.sleep(600)

        checkpoint.write_torch_zip = stalled
        onnxnn.save({{"w": onnxnn.tensor(np.full(4, 2.0, np.float32))}}, {str(target)!r})
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT)
    )
    assert child.stdout.readline() == b"writing\n"
    return child


def kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    child.stdout.close()


def test_save_killed_mid_write_keeps_the_old_file_and_the_next_save_cleans_up(tmp_path):
    target = tmp_path / "ckpt.pt"
    save(state(1.0), target)
    child = start_blocked_writer(target)
    kill(child)
    assert loaded_value(target) == 1.0
    leftovers = temporaries(tmp_path)
    assert len(leftovers) == 1 and TEMPORARY.fullmatch(leftovers[0]).group(1) == str(child.pid)
    assert os.path.getsize(tmp_path / leftovers[0]) >= 2_000_000
    save(state(3.0), target)
    assert temporaries(tmp_path) == [] and loaded_value(target) == 3.0


def test_a_live_writers_temporary_is_never_removed(tmp_path):
    target = tmp_path / "ckpt.pt"
    child = start_blocked_writer(target)
    try:
        busy = temporaries(tmp_path)
        assert len(busy) == 1
        save(state(5.0), target)  # a concurrent save of the same target
        assert temporaries(tmp_path) == busy and loaded_value(target) == 5.0
    finally:
        kill(child)
    save(state(6.0), target)
    assert temporaries(tmp_path) == []


def test_other_targets_temporaries_are_left_alone(tmp_path):
    others = [".other.pt.1.ab.tmp", ".ckpt.pt.bak", "ckpt.pt.1.ab.tmp", ".ckpt.pt.x.ab.tmp"]
    for name in others:
        (tmp_path / name).write_bytes(b"not ours")
    save(state(1.0), tmp_path / "ckpt.pt")
    assert sorted(os.listdir(tmp_path)) == sorted(others + ["ckpt.pt"])


def test_without_flock_only_temporaries_of_dead_processes_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic_write, "fcntl", None)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead_pid = int(finished.stdout)
    dead, alive, own = (f".ckpt.pt.{pid}.0a1b.tmp" for pid in (dead_pid, os.getppid(), os.getpid()))
    for name in (dead, alive, own):
        (tmp_path / name).write_bytes(b"half")
    save(state(1.0), tmp_path / "ckpt.pt")
    assert temporaries(tmp_path) == sorted([alive, own])


def test_full_disk_is_an_oserror_naming_the_target_and_keeps_the_old_file(tmp_path):
    # RLIMIT_FSIZE makes write() fail with EFBIG once a file would pass 64 KiB, as a full disk fails it.
    target = tmp_path / "ckpt.pt"
    save(state(1.0), target)
    script = textwrap.dedent(f"""
        import json, resource, signal
        import numpy as np
        import onnxnn
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))
        try:
            onnxnn.save({{"w": onnxnn.tensor(np.full(1 << 18, 2.0, np.float32))}}, {str(target)!r})
            print(json.dumps({{"raised": None}}))
        except BaseException as error:
            print(json.dumps({{"raised": type(error).__name__, "errno": getattr(error, "errno", None),
                              "message": str(error)}}))
    """)
    finished = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        cwd=ROOT,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    outcome = json.loads(finished.stdout.decode().strip().splitlines()[-1])
    assert outcome["raised"] == "OSError" and outcome["errno"] == errno.EFBIG, outcome
    assert str(target) in outcome["message"]
    assert loaded_value(target) == 1.0 and temporaries(tmp_path) == []


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_no_space_left_is_an_oserror_naming_the_target(tmp_path, monkeypatch, suffix):
    target = tmp_path / f"ckpt{suffix}"
    save(state(1.0), target)
    before = target.read_bytes()

    def no_space(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint, "write_torch_zip", no_space)
    monkeypatch.setattr(checkpoint, "write_safetensors", no_space)
    with pytest.raises(OSError) as raised:
        save(state(2.0), target)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(target)
    assert str(target) in str(raised.value)
    assert target.read_bytes() == before and os.listdir(tmp_path) == [target.name]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_folder_is_a_permission_error_naming_the_target(tmp_path):
    target = tmp_path / "ckpt.pt"
    save(state(1.0), target)
    os.chmod(tmp_path, 0o555)
    try:
        with pytest.raises(PermissionError, match=re.escape(str(target))):
            save(state(2.0), target)
    finally:
        os.chmod(tmp_path, 0o755)
    assert loaded_value(target) == 1.0
