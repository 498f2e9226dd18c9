"""Replacing a file in one step, so a failed or killed save never leaves a half-written checkpoint.

The data goes to one temporary file beside the target, named ``.<target name>.<pid>.<random>.tmp``,
which is flushed, fsynced and renamed over the target (``os.replace`` is atomic on POSIX and Windows).
While it writes, the saving process holds an exclusive ``flock`` on its temporary file. A process
killed mid-write leaves its temporary behind, and the kernel drops its lock; the next save of the same
target removes the temporaries of that target whose lock it can take, so a live writer's temporary is
never removed, whichever process or thread it belongs to. Where ``flock`` is unavailable (Windows,
some network filesystems) a temporary is removed only when the process its name records is gone.

A write of several files (a model and its external data) stages them in one hidden folder named the
same way (``staging_folder``), locked by its writer in the same manner; a killed writer's folder is
removed by the next save of the target, as its temporary file would be.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
from typing import IO, Callable, Iterator

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]  # None marks a platform without it

__all__ = ["write_atomically", "remove_stale_temporaries", "staging_folder"]

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


def _is_folder(path: str) -> bool:
    """Whether ``path`` is a folder itself (not a symlink to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _remove(path: str, mode: int) -> bool:
    """Removes a temporary file or staging folder; False for anything else (not ours)."""
    if stat.S_ISREG(mode):
        os.remove(path)
    elif stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        return False
    return True


def remove_stale_temporaries(target: str) -> list[str]:
    """Removes the temporaries (files, and staging folders) earlier saves of ``target`` left behind;
    returns their paths."""
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
            # Gone already, or a symlink: not ours. A folder that cannot be opened (Windows) is a
            # dead writer's when the process its name records is gone.
            if fcntl is None and _is_folder(path) and _process_is_gone(int(match.group(1))):
                shutil.rmtree(path, ignore_errors=True)
                if not os.path.lexists(path):
                    removed.append(path)
            continue
        try:
            locked = _lock(descriptor, blocking=False)
            stale = locked if locked is not None else _process_is_gone(int(match.group(1)))
            # The name must still be the file (or folder) we locked, or a new writer may own it.
            if (
                stale
                and os.path.samestat(os.fstat(descriptor), os.lstat(path))
                and _remove(path, os.fstat(descriptor).st_mode)
            ):
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


def _create_staging_folder(target: str) -> tuple[str, int | None]:
    """A new empty folder beside ``target``, named as its temporaries are, and the descriptor that
    holds its lock (None where a folder cannot be opened: the process id in its name marks it)."""
    directory, name = os.path.split(target)
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        path = os.path.join(directory, f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        try:
            descriptor = os.open(path, flags)
        except FileNotFoundError:
            continue  # a concurrent cleaner removed it before it was locked: start again
        except OSError:
            if fcntl is None:
                return path, None
            with contextlib.suppress(OSError):
                os.rmdir(path)
            raise
        _lock(descriptor, blocking=True)
        with contextlib.suppress(OSError):
            # As for a temporary file: a cleaner may have removed the name between mkdir and flock.
            if os.path.samestat(os.fstat(descriptor), os.lstat(path)):
                return path, descriptor
        os.close(descriptor)


@contextlib.contextmanager
def staging_folder(target: str | os.PathLike) -> Iterator[str]:
    """A hidden folder beside ``target`` (``.<target name>.<pid>.<random>.tmp``) to write files in before
    moving them into place, removed on exit; first removes what earlier, killed writes left behind.

    The folder stays locked while it is in use, so a concurrent save of the same target leaves it
    alone; a process killed while writing in it leaves it behind, for the next save to remove.

    Raises:
        OSError: the folder could not be made; the message names ``target``.
    """
    target = os.fspath(target)
    remove_stale_temporaries(target)
    try:
        path, descriptor = _create_staging_folder(target)
    except OSError as error:
        raise _naming(error, target) from error
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        if descriptor is not None:
            os.close(descriptor)  # the lock goes last, once the folder is gone


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
