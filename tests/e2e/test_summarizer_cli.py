"""The issue's "done when": with only DHUB_OPENAI_API_KEY (or only an Ollama-style base URL)
set, `dhub run` on the summarizer example streams the headline in; with nothing set, the error
says exactly what to set. The CLI runs as a real process; the model is the local server that
speaks OpenAI's wire protocol (in the test process, on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.support.wire import OpenAIReply
from tests.support.wire.openai_wire import OpenAIServer

DHUB = Path(sys.executable).parent / "dhub"
EXAMPLE = ROOT / "examples" / "incident_summarizer.json"
HEADLINE = ["Disk ", "almost ", "full ", "on ", "db-1"]


def dhub_run(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")}
    clean["DHUB_DATA_DIR"] = str(tmp_path / "data")
    return subprocess.run(
        [str(DHUB), "run", str(EXAMPLE),
         "--input", 'alert={"host": "db-1", "disk": 97}'],
        env={**clean, **env}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_with_only_an_openai_key_the_headline_streams_in(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.queue(OpenAIReply(HEADLINE))
    env = {"DHUB_OPENAI_API_KEY": str(openai_server.api_key),
           "DHUB_OPENAI_BASE_URL": openai_server.base_url}  # fmt: skip
    done = dhub_run(env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"headline": "Disk almost full on db-1"}
    assert "summarize ▸ Disk almost full on db-1" in done.stderr
    assert openai_server.last.header("authorization") == f"Bearer {openai_server.api_key}"


def test_with_only_a_local_server_url_the_headline_streams_in(
    openai_compatible_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_compatible_server.queue(OpenAIReply(HEADLINE, usage=None))
    done = dhub_run({"DHUB_OPENAI_BASE_URL": openai_compatible_server.base_url}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"headline": "Disk almost full on db-1"}
    body = openai_compatible_server.last.json
    assert body["model"] == "gpt-4o-mini" and "max_completion_tokens" not in body


def test_without_any_key_the_error_says_what_to_set(tmp_path: Path) -> None:
    done = dhub_run({}, tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: node 'summarize' failed (no_provider)")
    assert "set DHUB_OPENAI_API_KEY (or DHUB_OPENAI_BASE_URL" in last
    assert "--model-replies FILE" in last
