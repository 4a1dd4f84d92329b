"""Templates and run artifacts from the SDK and the CLI (SQLite and PostgreSQL): what a person
sees, names for ids, errors naming the variable, files written where asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.client import Artifact, Client, InvalidInput, NotFound
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_template_runs import EXPECTED, INPUTS, ITEMS, report_flow
from tests.integration.test_templates_api import report_doc

VALUES = {"customer": "ACME", "week": "2026-11-30", "items": ITEMS, "total": 7}


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    runner = CliRunner()

    def run(*args: str | Path) -> Result:
        return runner.invoke(app, [str(a) for a in args], obj=api)

    return run


def finished(api: Client, agent_id: str) -> str:
    import time

    run = api.start_run(agent_id, INPUTS)
    for _ in range(600):
        if api.get_run(run.id).finished:
            return run.id
        time.sleep(0.02)
    raise AssertionError("the run did not finish")


def test_the_sdk_renders_and_downloads(api: Client) -> None:
    made = api.create_template(report_doc())
    assert api.get_template("weekly-report")["id"] == made["id"]
    assert [t["id"] for t in api.iter_templates()] == [made["id"]]
    rendered = api.render_template("weekly-report", VALUES)
    assert rendered.text == EXPECTED and rendered.media_type.startswith("text/markdown")
    as_html = api.render_template(made["id"], VALUES, output="html")
    assert "<h1>Report for ACME</h1>" in as_html.text
    assert api.render_template_pdf(made["id"], VALUES).startswith(b"%PDF")
    with pytest.raises(InvalidInput) as caught:
        api.render_template(made["id"], {**VALUES, "total": "seven"})
    assert caught.value.errors[0].loc == "/variables/total"

    agent = api.create_agent(report_flow(made["id"]))
    run_id = finished(api, agent["id"])
    [artifact] = api.list_artifacts(run_id)
    assert isinstance(artifact, Artifact) and artifact.name == "weekly-report.md"
    got = api.download_artifact(run_id, artifact.id)
    assert (got.name, got.content.decode()) == ("weekly-report.md", EXPECTED)
    pdf = api.download_artifact(run_id, artifact.id, format="pdf")
    assert pdf.name == "weekly-report.pdf" and pdf.content.startswith(b"%PDF")
    with pytest.raises(NotFound):
        api.list_artifacts("run.01nosuchthing000000000000000")


def test_the_cli_lists_renders_and_saves(
    dhub: Any, api: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = tmp_path / "report.json"
    document.write_text(json.dumps(report_doc()))
    created = dhub("templates", "create", document)
    assert created.exit_code == 0 and created.output.startswith("created template.")
    listed = dhub("templates", "list")
    assert "weekly-report" in listed.output and "customer, week, items, total, urgent" in (
        listed.output
    )
    shown = dhub("templates", "get", "weekly-report")
    assert "urgent (boolean, optional)" in shown.output and "{% for item in items %}" in (
        shown.output
    )
    items = json.dumps(ITEMS)
    args = ("customer=ACME", "week=2026-11-30", f"items={items}", "total=7")
    rendered = dhub("templates", "render", "weekly-report", *args)
    assert rendered.exit_code == 0 and rendered.stdout == EXPECTED
    wrong = dhub("templates", "render", "weekly-report", *args[:-1], "total=seven")
    assert wrong.exit_code != 0 and "'total' must be a number" in wrong.output
    no_file = dhub("templates", "render", "weekly-report", *args, "--as", "pdf")
    assert no_file.exit_code != 0 and "-o FILE.pdf" in no_file.output

    agent = api.create_agent(report_flow(api.get_template("weekly-report")["id"]))
    run_id = finished(api, agent["id"])
    table = dhub("runs", "artifacts", run_id)
    assert "weekly-report.md" in table.output and "text/markdown" in table.output
    [artifact] = api.list_artifacts(run_id)
    monkeypatch.chdir(tmp_path)
    saved = dhub("runs", "artifact", run_id, artifact.id)
    assert saved.exit_code == 0, saved.output
    assert (tmp_path / "weekly-report.md").read_text() == EXPECTED
    pdf = dhub("runs", "artifact", run_id, artifact.id, "--as", "pdf", "-o", tmp_path / "r.pdf")
    assert pdf.exit_code == 0 and (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF")
    missing = dhub("runs", "artifacts", "run.01nosuchthing000000000000000")
    assert missing.exit_code != 0 and "No run with id" in missing.output


def test_the_cli_updates_versions_shares_and_deletes(
    dhub: Any, api: Client, tmp_path: Path
) -> None:
    made = api.create_template(report_doc())
    change = tmp_path / "change.yaml"
    change.write_text("description: Every Monday\nbody: 'Hi {{ customer }}'\n")
    updated = dhub("templates", "update", "weekly-report", change)
    assert updated.exit_code == 0, updated.output
    assert updated.output == f"updated weekly-report ({made['id']}) (version 2)\n"
    assert api.get_template(made["id"])["body"] == "Hi {{ customer }}"
    # What `get --json` printed goes back as it is: the envelope is left out of the patch.
    shown = tmp_path / "shown.json"
    shown.write_text(dhub("templates", "get", made["id"], "--json").stdout)
    again = dhub("templates", "update", made["id"], shown)
    assert again.exit_code == 0, again.output
    assert api.get_template(made["id"])["version"] == 2  # nothing changed, no version

    listed = dhub("templates", "versions", "weekly-report")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split() == ["VERSION", "CREATED", "BY"]
    assert [line.split()[0] for line in lines[1:]] == ["2", "1"]
    first = json.loads(dhub("templates", "versions", "weekly-report", "1").stdout)
    assert (first["version"], first["body"]) == (1, report_doc()["body"])
    assert first == api.resource_version(made["id"], 1)
    assert [v.version for v in api.resource_versions(made["id"])] == [2, 1]
    gone = dhub("templates", "versions", "weekly-report", "3")
    assert gone.exit_code == 1 and "versions 1 to 2" in gone.output

    shared = dhub("templates", "share", "weekly-report", "public.all")
    assert shared.output == f"shared weekly-report ({made['id']}) with public.all as viewer\n"
    assert [g["principal_id"] for g in api.list_grants(made["id"])] == ["public.all"]
    assert dhub("templates", "unshare", "weekly-report", "public.all").exit_code == 0
    assert api.list_grants(made["id"]) == []

    broken = tmp_path / "broken.yaml"
    broken.write_text("body: '{{ nobody }}'\n")
    refused = dhub("templates", "update", "weekly-report", broken)
    assert refused.exit_code == 1 and "nobody" in refused.output
    deleted = dhub("templates", "delete", "weekly-report")
    assert deleted.output == f"deleted weekly-report ({made['id']})\n"
    with pytest.raises(NotFound):
        api.get_template(made["id"])
    unknown = dhub("templates", "delete", "weekly-report")
    assert unknown.exit_code == 1 and "no template named 'weekly-report'" in unknown.output
