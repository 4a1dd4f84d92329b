"""The runs bench/scale.py measures: a chain of ``code`` nodes, a chain of ``llm`` nodes, one
``llm`` node; and the fake model that answers the ``llm`` nodes, tests/support/wire's OpenAI
server in a process of its own (``python bench/scale_workloads.py SECONDS``).
"""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODEL = "gpt-4o-mini"


def chain(nodes: int, wait_s: float) -> dict[str, Any]:
    """start -> ``nodes`` code nodes, each sleeping ``wait_s`` -> end."""
    source = f"import time\n\n\ndef main():\n    time.sleep({wait_s!r})\n    return {{'v': 1}}\n"
    doc: list[dict[str, Any]] = [{"id": "start", "type": "start", "config": {}}]
    for i in range(nodes):
        config = {"source": source, "outputs": {"v": "number"}, "timeout": 60}
        doc.append({"id": f"n{i}", "type": "code", "config": config})
    doc.append({"id": "end", "type": "end", "config": {}})
    edges = [{"source": a["id"], "target": b["id"]} for a, b in itertools.pairwise(doc)]
    return {
        "name": f"scale-{nodes}x{round(wait_s * 1000)}ms",
        "description": "bench/scale.py",
        "mode": "workflow",
        "input_mode": "event",
        "nodes": doc,
        "edges": edges,
    }


def model_call(wait_s: float) -> dict[str, Any]:
    """start -> one ``llm`` node (the fake model server answers after ``wait_s``) -> end."""
    llm = {
        "model_provider": "openai", "model": MODEL, "prompt": "Say ok.", "output": "answer",
    }  # fmt: skip
    return {
        "name": f"scale-model-{round(wait_s * 1000)}ms",
        "description": "bench/scale.py",
        "mode": "workflow",
        "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "ask", "type": "llm", "config": llm},
            {"id": "end", "type": "end", "config": {}},
        ],
        "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
    }


def model_chain(nodes: int, wait_s: float) -> dict[str, Any]:
    """A chain of ``nodes`` ``llm`` nodes, each answered by the fake model after ``wait_s``:
    runs that wait on a model rather than work (``--kind model``)."""
    llm = {"model_provider": "openai", "model": MODEL, "prompt": "Say ok."}
    steps = [{"id": f"ask{i}", "type": "llm", "config": {**llm, "output": f"a{i}"}}
             for i in range(nodes)]  # fmt: skip
    chain_nodes = [{"id": "start", "type": "start", "config": {}}, *steps,
                   {"id": "end", "type": "end", "config": {}}]  # fmt: skip
    edges = [{"source": a["id"], "target": b["id"]} for a, b in itertools.pairwise(chain_nodes)]
    name = f"scale-models-{nodes}x{round(wait_s * 1000)}ms"
    return {"name": name, "description": "", "mode": "workflow", "input_mode": "event",
            "nodes": chain_nodes, "edges": edges}  # fmt: skip


def serve_model(wait_s: float) -> None:
    """The fake model's process (``python bench/scale_workloads.py S``): tests/support/wire's
    OpenAI server, every chat completion answered "ok" after ``wait_s`` (a thread per
    connection sleeps). Prints its base URL and API key; stops when its stdin closes."""
    sys.path.insert(0, str(ROOT))
    from tests.support.wire import OpenAIReply, OpenAIServer
    from tests.support.wire import server as wire
    from tests.support.wire.server import RecordedRequest, Rendered

    wire._HTTPServer.request_queue_size = 4096  # a thousand connections at once
    reply = OpenAIReply(["ok"])

    class Slow(OpenAIServer):
        def scripted(self, request: RecordedRequest) -> Rendered:
            time.sleep(wait_s)
            return reply.render(request)

    server = Slow()
    server.start()
    print(server.base_url, server.api_key, flush=True)
    sys.stdin.read()
    server.stop()


@contextlib.contextmanager
def model_server(wait_s: float) -> Iterator[tuple[dict[str, str], int]]:
    """The fake model server as a subprocess: the environment pointing dhub at it, its pid."""
    argv = [sys.executable, __file__, str(wait_s)]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base_url, key = proc.stdout.readline().split()
        yield {"DHUB_OPENAI_BASE_URL": base_url, "DHUB_OPENAI_API_KEY": key}, proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    serve_model(float(sys.argv[1]))
