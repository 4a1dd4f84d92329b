"""How long the `dhub` command takes to answer: `dhub --help` (no server) and `dhub agents
list` (against a fresh `dhub serve` with the examples), wall time of whole processes.

    .venv/bin/python bench/cli_startup.py [--runs 20]

Each command runs once to warm the file cache, then ``--runs`` times; the report gives the
median and the fastest run, in milliseconds, and the modules `dhub --help` imported that it
should not need (httpx, yaml, pydantic, the server's packages). Plain `python -c pass` is
measured the same way, as the floor no command can go below.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
DHUB = Path(sys.executable).parent / "dhub"
HEAVY = ("httpx", "yaml", "pydantic", "sqlalchemy", "fastapi", "jinja2", "jsonschema")
SERVER = ("dhub.api", "dhub.store", "dhub.engine", "dhub.runtime", "dhub.domain", "dhub.sandbox")


def timed(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    subprocess.run(argv, env=env, check=True, capture_output=True)  # warm the file cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def imported_by_help(env: dict[str, str]) -> list[str]:
    """The heavy or server modules `dhub --help` imports."""
    probe = (
        "import sys; from dhub.cli.main import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('\\n'.join(sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    return sorted(m for m in out if m in HEAVY or m.startswith(SERVER))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")}
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [DHUB, "serve", "--port", str(port), "--data-dir", f"{tmp}/data",
             "--examples", str(ROOT / "examples")],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            token = Path(f"{tmp}/data/admin.token").read_text().strip()
            cli_env = env | {"DHUB_URL": url, "DHUB_TOKEN": token}
            rows = [
                ("python -c pass", [sys.executable, "-c", "pass"]),
                ("dhub --help", [str(DHUB), "--help"]),
                ("dhub agents list", [str(DHUB), "agents", "list"]),
            ]
            print(f"{'command':<20} {'median ms':>10} {'min ms':>8}   ({args.runs} runs)")
            for label, argv in rows:
                median, fastest = timed(argv, cli_env, args.runs)
                print(f"{label:<20} {median:>10.0f} {fastest:>8.0f}")
            heavy = imported_by_help(cli_env)
            print(f"`dhub --help` imports: {', '.join(heavy) or 'none of ' + ', '.join(HEAVY)}")
        finally:
            server.terminate()
            server.wait(timeout=15)


if __name__ == "__main__":
    main()
