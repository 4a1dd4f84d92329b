"""Inside the sandbox: become a program that is no function (a stdio MCP server, issue 20).

Started as a file (``python -I -S child_exec.py FD``) by isolation.py, never imported by the
server, standard library only. It reads its setup ``{"argv", "env", "uid", "limits"}`` from
the pipe ``FD`` (the server writes it there, so the secrets in ``env`` are on no command line),
drops to the sandbox's unprivileged user (a root server), sets the limits every process of
the sandbox then inherits, and replaces itself with the program: stdin and stdout stay the
server's MCP channel. Under bubblewrap the seccomp filter is already in force.
"""

from __future__ import annotations

import json
import os
import resource
import sys

# Limit name in the setup -> the resource it sets.
LIMITS = {
    "memory": resource.RLIMIT_AS,
    "processes": resource.RLIMIT_NPROC,
    "file_size": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
    "cpu": resource.RLIMIT_CPU,
}


def main() -> None:
    fd = int(sys.argv[1])
    with os.fdopen(fd, "rb") as pipe:
        setup = json.loads(pipe.read())
    uid = setup.get("uid")
    if uid is not None and os.getuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    for name, value in (setup.get("limits") or {}).items():
        if name in LIMITS and value:
            resource.setrlimit(LIMITS[name], (value, value))
    argv = [str(a) for a in setup["argv"]]
    env = {str(k): str(v) for k, v in (setup.get("env") or {}).items()}
    try:
        os.execve(argv[0], argv, env)
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[0]}: {exc.strerror}\n")
        sys.exit(127)


if __name__ == "__main__":
    main()
