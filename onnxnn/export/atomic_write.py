"""Replacing a file in one step, so a failed or killed save never leaves a half-written checkpoint.

The data goes to one temporary file beside the target, named ``.<target name>.<pid>.<random>.tmp``,
which is flushed, fsynced and renamed over the target (``os.replace`` is atomic on POSIX and Windows).
While it writes, the saving process holds an exclusive ``flock`` on its temporary file. A process
killed mid-write leaves its temporary behind, and the kernel drops its lock; the next save of the same
target removes the temporaries of that target whose lock it can take, so a live writer's temporary is
never removed, whichever process or thread it belongs to. Where ``flock`` is unavailable (Windows,
some network filesystems) a temporary is removed only when the process its name records is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from typing import IO, Callable

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]  # None marks a platform without it

__all__ = ["write_atomically", "remove_stale_temporaries"]

_BUFFER_BYTES = 1 << 20


def _temporary_pattern(name: str) -> re.Pattern:
    return re.compile(rf"\.{re.escape(name)}\.(\d+)\.[0-9a-f]+\.tmp")


def _lock(descriptor: int, blocking: bool) -> bool | None:
    """Takes an exclusive flock: True if taken, False if another holder has it, None if unsupported."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
    except OSError as error:
        if error.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return None
        raise


def _process_is_gone(pid: int) -> bool:
    if pid == os.getpid():
        return False  # another thread of this process may be writing it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: it exists, under another user
        return False
    return False


def remove_stale_temporaries(target: str) -> list[str]:
    """Removes the temporaries earlier saves of ``target`` left behind; returns their paths."""
    directory, name = os.path.split(target)
    pattern = _temporary_pattern(name)
    removed: list[str] = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match is None:
            continue
        path = os.path.join(directory, entry)
        try:
            descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue  # gone already, or a symlink: not ours
        try:
            locked = _lock(descriptor, blocking=False)
            stale = locked if locked is not None else _process_is_gone(int(match.group(1)))
            # The name must still be the file we locked, or a new writer may own it.
            if (
                stale
                and stat.S_ISREG(os.fstat(descriptor).st_mode)
                and os.path.samestat(os.fstat(descriptor), os.lstat(path))
            ):
                os.remove(path)
                removed.append(path)
        except OSError:
            pass
        finally:
            os.close(descriptor)
    return removed


def _create_temporary(target: str) -> tuple[str, int]:
    directory, name = os.path.split(target)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    while True:
        path = os.path.join(directory, f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        # O_EXCL reserves a fresh name; mode 0o666 lets the umask decide permissions, as open() does.
        descriptor = os.open(path, flags, 0o666)
        _lock(descriptor, blocking=True)
        with contextlib.suppress(OSError):
            # A concurrent cleaner may have removed the name between open and flock: start again.
            if os.path.samestat(os.fstat(descriptor), os.lstat(path)):
                return path, descriptor
        os.close(descriptor)


def _naming(error: OSError, target: str) -> OSError:
    """The same error, naming the target rather than the temporary (or nothing)."""
    if error.errno is None:
        return OSError(f"cannot save to {target!r}: {error}")
    return OSError(error.errno, f"cannot save to {target!r}: {error.strerror or os.strerror(error.errno)}", target)


def write_atomically(f: str | os.PathLike, write: Callable[[IO[bytes]], None]) -> None:
    """Runs ``write(file)`` on a temporary file and then moves it over ``f`` in one step.

    Raises:
        RuntimeError: the parent directory of ``f`` does not exist (as ``torch.save``).
        OSError: writing failed (full disk, no permission); the message names ``f``, which is unchanged.
    """
    target = os.path.realpath(os.fspath(f))  # write through symlinks, as open() would
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        raise RuntimeError(f"Parent directory {directory} does not exist.")
    remove_stale_temporaries(target)
    try:
        temporary, descriptor = _create_temporary(target)
    except OSError as error:
        raise _naming(error, target) from error
    try:
        with contextlib.suppress(OSError):
            os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))
        with os.fdopen(os.dup(descriptor), "wb", buffering=_BUFFER_BYTES) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        if isinstance(error, OSError):
            raise _naming(error, target) from error
        raise
    finally:
        os.close(descriptor)  # releases the lock, after the name has moved to the target
    with contextlib.suppress(OSError):  # make the rename itself durable
        directory_descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_descriptor)
        finally:
            os.close(directory_descriptor)
