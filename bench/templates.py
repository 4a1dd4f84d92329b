"""Rendering templates: what the sandbox's bounds (a tracer on the template's own lines, the
checked operators and calls) cost against plain Jinja2 rendering the same body, and how long
the conversions take: Markdown to HTML, and HTML to PDF with WeasyPrint.

The body is examples/knowledge/weekly_report.yaml with 10, 100 and 1000 orders. Prints the
median and p99 of each, and writes bench/results/templates-<time>.json.

    .venv/bin/python bench/templates.py
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from dhub.domain.documents import check_values, render
from dhub.domain.resources import TemplateSpec
from dhub.knowledge import formats

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"


def timings(work: Callable[[], Any], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def main() -> None:
    spec = TemplateSpec.model_validate(
        yaml.safe_load((ROOT / "examples" / "knowledge" / "weekly_report.yaml").read_text())
    )
    plain = ImmutableSandboxedEnvironment(undefined=StrictUndefined).from_string(spec.body)
    rows: list[dict[str, Any]] = []
    for count in (10, 100, 1000):
        orders = [
            {"item": f"item {i}", "quantity": i % 7 + 1, "price": 1.5 + i} for i in range(count)
        ]
        values = check_values(spec.variables, {"customer": "ACME", "week": "2026-11-30",
                                               "orders": orders, "total": 1.0})  # fmt: skip
        text = render(spec.body, spec.format, values)
        repeat = 200 if count < 1000 else 40
        cases = {
            "jinja2 (immutable sandbox, no bounds)": (
                lambda values=values: plain.render(values),
                repeat,
            ),
            "dhub render (bounded)": (
                lambda values=values: render(spec.body, spec.format, values),
                repeat,
            ),
            "markdown to HTML": (lambda text=text: formats.to_html(text, "markdown"), repeat),
            "HTML to PDF (WeasyPrint)": (
                lambda text=text: formats.to_pdf(text, "markdown"),
                5 if count < 1000 else 3,
            ),
        }
        for name, (work, times) in cases.items():
            p50, p99 = timings(work, times)
            rows.append({"orders": count, "case": name, "p50_ms": p50 * 1000, "p99_ms": p99 * 1000})
            print(
                f"{count:>5} orders  {name:<40} p50 {p50 * 1000:9.2f} ms  p99 {p99 * 1000:9.2f} ms"
            )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"templates-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(rows, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
