"""What the sandbox's supervisor (child.py) reads of its processes and files: the processes
that belong to the sandbox, whether one still runs or holds on, and emptying the writable
places between calls. Standard library only; loaded beside child.py, never imported by the
server (see child.py).
"""

from __future__ import annotations

import os
import signal


def processes(keep: set[int], alone: bool) -> list[int]:
    """Live (not zombie) processes that belong to this sandbox: its whole PID namespace, or
    without one this process's descendants (orphans among them come back to it: it is their
    subreaper). Where the kernel does not list children, the process group this process leads
    (the server starts it in a session of its own; when it does not lead one, none is its to
    end)."""
    if not alone:
        found = descendants(keep)
        if found is not None:
            return found
    group = os.getpgid(0)
    if not alone and group != os.getpid():
        return []
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in keep:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z" and (alone or int(fields[2]) == group):
            found.append(int(entry))
    return found


def descendants(keep: set[int]) -> list[int] | None:
    """Live descendants of this process not in ``keep`` (their own descendants are searched
    all the same), read from /proc/<pid>/task/<tid>/children; None where the kernel has no
    such file. Without a PID namespace this reads a few files, where scanning all of /proc
    would read one per process of the machine, hundreds of idle interpreters' among them."""
    me = os.getpid()
    found, todo, seen = [], [me], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                    todo += [int(child) for child in f.read().split()]
            except FileNotFoundError:
                if pid == me:
                    return None  # no children files here: scan instead
            except (OSError, ValueError):
                continue
        if pid != me and pid not in keep and live(pid):
            found.append(pid)
    return found


def live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def started(pid: int) -> bytes:
    """When the process started; b"" when it is gone, a zombie, or being killed (a process
    with SIGKILL pending can take a while to go, and would be gone by the next call)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        killed = int(fields[28]) & 1 << (signal.SIGKILL - 1)  # its pending signals
    except (OSError, IndexError, ValueError):
        return b""
    return b"" if killed or fields[0] in (b"Z", b"X") else fields[19]


def threads(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def wipe(places: list[str]) -> bool:
    """Empty each writable place; whether they are all empty now."""
    return all([empty(place) for place in places])


def empty(directory: str) -> bool:
    """Remove what ``directory`` holds (the function's own files, whatever their modes);
    whether nothing is left."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return False
    emptied = True
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)  # a directory it made unreadable or read-only
                emptied = empty(entry.path) and emptied
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            emptied = False
    return emptied
