"""Every README snippet runs as written: the shell and Python blocks of README.md and
examples/README.md (all of them, but for the few named in EXCLUDED), and the blocks of docs/*.md
marked with the line ``<!-- runs in tests/e2e/test_readme.py -->`` right above their fence,
run in order, each file in one bash session, against a real `dhub serve` started as `make run`
starts it, from a directory laid out like the repository root (``examples/``, ``.venv/``,
``.dhub/`` with the admin token).

What differs from a person's terminal, and why:
- the server listens on a free port, not 8000 (other tests run at the same time): the blocks'
  ``http://127.0.0.1:8000`` is rewritten to it, and DHUB_URL points the CLI at it;
- bash runs with ``set -eo pipefail``, so any command that fails fails its block; a command
  whose comment says it ``exits N`` must exit N instead;
- ``curl`` reports each HTTP status on stderr, and only the error statuses the text shows
  (README.md's 422 for the broken document) are allowed;
- stdin is empty, so `dhub chat` at the prompt ends at once, as Ctrl-D would;
- docs/*.md blocks get DHUB_TOKEN set, as the README's first steps tell users to do.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.test_serve import Server

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- runs in tests/e2e/test_readme.py -->"
WHOLE = ("README.md", "examples/README.md")  # every block runs, unless excluded below
MARKED = tuple(sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
# (file, the start of the block's first line) -> why it does not run here.
EXCLUDED = {
    ("README.md", "make run"): "starts the server and runs the whole suite (this test serves "
    "as `make run` does)",
    ("README.md", "export DHUB_OPENAI_API_KEY=sk-..."): "needs a model provider's key",
    ("README.md", ".venv/bin/dhub chat support-assistant"): "a conversation across two "
    "terminals (the chat waits for an approval given from the other)",
    ("README.md", "DHUB_DATABASE_URL=postgresql://dhub@"): "needs a PostgreSQL server",
    ("examples/README.md", "DHUB_OPENAI_API_KEY=sk-..."): "needs a model provider's key (the "
    "offline block after it runs)",
}
# What the text says some blocks print (in their comments or the output shown after them).
SAYS = {
    "README.md": [
        '"summary": "bug from anonymous"',  # dhub run, the routine ticket
        "URGENT bug from acme; escalate=True",  # the server's run, after the form's answer
        "you> hello\n#1: HELLO\nyou> again\n#2: AGAIN\n",  # the piped chat
        "{'turns': 2}",  # the SDK's conversation
    ],
    "examples/README.md": [
        '"headline": "Disk almost full on db-1"',
        '"title": "Hello, browser"',
        "# Weekly report: ACME",
        "Total units by region (computed by query_table from the 50 rows of table 'sales')",
        "north: 9; south: 7.",
        "- placed_by: C-001 (Ada Lovelace)",
    ],
    "docs/workflows.md": ['"total": 14'],
    "docs/api.md": ['"label": "billing"', '"summarizer-copy"'],
    # the models listed, then the demo model's answer, read through the official client
    "docs/openai.md": ["'support-assistant'", "Order A-1001: order_id A-1001"],
    "docs/mcp.md": ['"outputs":{"category":"bug","summary":"bug from anonymous"}'],
    # the example script twice (a retry: the same run), the signed Python and curl deliveries
    "docs/triggers.md": ["(a retry: the first run)", "202 run.", "started run."],
}
# Error statuses the text shows on purpose, by file: {status: how many times}.
HTTP_ERRORS_SHOWN = {"README.md": {422: 1}, "docs/triggers.md": {401: 1}}
SHELLS, PYTHONS = ("sh", "bash", "shell"), ("python", "py")


@dataclass(frozen=True)
class Block:
    file: str
    line: int  # of the opening fence
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.lstrip().splitlines()[0] if self.text.strip() else ""


def blocks(file: str) -> list[Block]:
    """The file's fenced shell and Python blocks, in order (marked ones only in docs/)."""
    found, lines = [], (ROOT / file).read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"^```(\w*)", lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        language = opening.group(1)
        marked = i > 0 and lines[i - 1].strip() == MARKER
        if language in SHELLS + PYTHONS and (file in WHOLE or marked):
            found.append(Block(file, i + 1, language, "\n".join(lines[i + 1 : end]) + "\n"))
        i = end + 1
    return found


def excluded(block: Block) -> bool:
    return any(f == block.file and block.first_line.startswith(start) for f, start in EXCLUDED)


def to_run(file: str) -> list[Block]:
    return [b for b in blocks(file) if not excluded(b)]


def test_each_exclusion_names_one_block() -> None:
    for file, start in EXCLUDED:
        matching = [b for b in blocks(file) if b.first_line.startswith(start)]
        assert len(matching) == 1, (file, start, matching)


def test_the_marker_only_marks_blocks_that_run() -> None:
    for file in MARKED:
        lines = (ROOT / file).read_text(encoding="utf-8").splitlines()
        assert lines.count(MARKER) == len(blocks(file)), file  # (an indented one is quoted)


EXPECTED_EXIT = re.compile(r"^(?P<command>[^#'\"]+?)\s+#.*\bexits (?P<status>\d+)\b")


def shell_text(block: Block, url: str) -> str:
    text = block.text.replace("http://127.0.0.1:8000", url)
    if block.language in PYTHONS:
        return f".venv/bin/python - <<'DHUB_README_PY'\n{text}DHUB_README_PY\n"
    out = []
    for line in text.splitlines():
        expected = EXPECTED_EXIT.match(line)
        if expected is None:
            out.append(line)
            continue
        command, status = expected.group("command"), expected.group("status")
        out.append(
            f"set +e; {command}; __status=$?; set -e; [ $__status -eq {status} ] || "
            f"{{ echo 'expected exit {status}, got '$__status >&2; false; }}"
        )
    return "\n".join(out) + "\n"


def script(file: str, url: str) -> str:
    parts = [
        "set -eo pipefail",
        # Each HTTP status on a line of its own on stderr: checked after the run.
        "curl() { command curl -w '%{stderr}HTTP %{http_code}\\n' \"$@\"; }",
    ]
    for index, block in enumerate(to_run(file)):
        parts.append(f"echo '::block {index}::' >&2")
        parts.append(shell_text(block, url))
    return "\n".join(parts) + "\n"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory laid out like the repository root after `make run` started."""
    root = tmp_path / "dhub"
    root.mkdir()
    (root / "examples").symlink_to(ROOT / "examples")
    (root / ".venv").symlink_to(Path(sys.executable).parent.parent)  # not resolved: the venv
    return root


@pytest.mark.parametrize("file", [*WHOLE, *(f for f in MARKED if blocks(f))])
def test_the_snippets_run_as_written(checkout: Path, file: str) -> None:
    server = Server(checkout / ".dhub")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")}
        env["DHUB_URL"] = server.url
        if file not in WHOLE:  # the README's first steps export it
            env["DHUB_TOKEN"] = (checkout / ".dhub" / "admin.token").read_text().strip()
        done = subprocess.run(
            ["bash", "-c", script(file, server.url)], cwd=checkout, env=env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        log = server.stop()
    if done.returncode != 0:
        started = re.findall(r"^::block (\d+)::$", done.stderr, re.MULTILINE)
        block = to_run(file)[int(started[-1])] if started else None
        where = f"{file}:{block.line}\n{block.text}" if block else file
        pytest.fail(
            f"A snippet failed (exit {done.returncode}) at {where}\n--- stdout\n"
            f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}\n--- server\n{log[-2000:]}"
        )
    statuses = [int(s) for s in re.findall(r"^HTTP (\d{3})$", done.stderr, re.MULTILINE)]
    errors = [s for s in statuses if s >= 400]
    shown = HTTP_ERRORS_SHOWN.get(file, {})
    assert sorted(errors) == sorted(s for s, n in shown.items() for _ in range(n)), done.stderr
    assert "Traceback" not in done.stderr
    for said in SAYS.get(file, []):
        assert said in done.stdout, (said, done.stdout[-3000:])
