"""A workflow's template node naming a stored template, on SQLite and PostgreSQL: it renders for
the run's user, the document is kept as a run artifact, listed and downloaded (as stored, as
HTML, as PDF), and seen by exactly who may read the run; a template the saver or the runner
cannot read gets the one unreachable message, at save and at run."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.test_runs_api import until
from tests.integration.test_sharing_api import World, ok
from tests.integration.test_templates_api import report_doc

API = "/api/v1"
FAKE_RUN = "run.01nosuchthing000000000000000"


def report_flow(template_id: str, name: str = "weekly", **config: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Fills the weekly report",
        "mode": "workflow",
        "nodes": [
            {"id": "start", "type": "start", "config": {"variables": [
                {"name": "customer", "type": "string"},
                {"name": "items", "type": "array"},
            ]}},
            {"id": "fill", "type": "template", "config": {
                "template": template_id,
                "output": "report",
                "variables": config.pop("variables", {
                    "customer": "{{ customer }}",
                    "week": "2026-11-30",
                    "items": "{{ items }}",
                    "total": "{{ items | sum(attribute='amount') }}",
                }),
                **config,
            }},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "report", "type": "string", "value": "{{ report }}"},
            ]}},
        ],
        "edges": [{"source": "start", "target": "fill"}, {"source": "fill", "target": "end"}],
    }  # fmt: skip


ITEMS = [{"name": "bolts", "amount": 3}, {"name": "nuts", "amount": 4}]
INPUTS = {"customer": "ACME", "items": ITEMS}
EXPECTED = "# Report for ACME\n\nWeek of 2026-11-30, 2 items:\n- bolts: 3\n- nuts: 4\nTotal: 7\n"


def run(client: TestClient, agent_id: str, **headers: str) -> dict[str, Any]:
    started = client.post(f"{API}/agents/{agent_id}/runs", json={"inputs": INPUTS}, headers=headers)
    run_id = ok(started, 202)["id"]
    return until(client, run_id, "succeeded", "failed", **headers)


def test_a_template_node_renders_a_stored_template_into_an_artifact(client: TestClient) -> None:
    template_id = ok(client.post(f"{API}/templates", json=report_doc()), 201)["id"]
    agent_id = ok(client.post(f"{API}/agents", json=report_flow(template_id)), 201)["id"]
    done = run(client, agent_id)
    assert done["status"] == "succeeded", done
    assert done["outputs"] == {"report": EXPECTED}
    listed = ok(client.get(f"{API}/runs/{done['id']}/artifacts"))["data"]
    assert len(listed) == 1
    artifact = listed[0]
    assert artifact["id"].startswith("artifact.") and artifact["run_id"] == done["id"]
    assert {k: artifact[k] for k in ("name", "media_type", "format", "size", "node_id")} == {
        "name": "weekly-report.md", "media_type": "text/markdown; charset=utf-8",
        "format": "markdown", "size": len(EXPECTED.encode()), "node_id": "fill",
    }  # fmt: skip
    assert artifact["template_id"] == template_id and artifact["template_version"] == 1
    assert artifact["created_by"] == "user.admin"
    # The log says so, without the content.
    events = ok(client.get(f"{API}/runs/{done['id']}/events"))["data"]
    made = [e for e in events if e["type"] == "artifact.created"]
    assert [e["data"]["artifact_id"] for e in made] == [artifact["id"]]
    assert "content" not in made[0]["data"]

    url = f"{API}/runs/{done['id']}/artifacts/{artifact['id']}"
    download = client.get(url)
    assert download.status_code == 200
    assert download.text == EXPECTED
    assert download.headers["content-type"] == "text/markdown; charset=utf-8"
    assert download.headers["content-disposition"] == 'attachment; filename="weekly-report.md"'
    html = client.get(url, params={"format": "html"})
    assert html.status_code == 200 and "<h1>Report for ACME</h1>" in html.text
    assert html.headers["content-disposition"] == 'attachment; filename="weekly-report.html"'
    pdf = client.get(url, params={"format": "pdf"})
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    assert pdf.headers["content-type"] == "application/pdf"
    assert client.get(url, params={"format": "docx"}).status_code == 422
    missing = client.get(f"{API}/runs/{done['id']}/artifacts/artifact.01nosuch")
    assert missing.status_code == 404

    # A later version of the template applies to later runs; old artifacts stay as made.
    ok(client.patch(f"{API}/templates/{template_id}", json={"body": "Hi {{ customer }}"}))
    again = run(client, agent_id)
    assert again["outputs"] == {"report": "Hi ACME"}
    newer = ok(client.get(f"{API}/runs/{again['id']}/artifacts"))["data"]
    assert [a["template_version"] for a in newer] == [2]
    assert client.get(url).text == EXPECTED


def test_artifacts_are_seen_by_exactly_who_may_read_the_run(client: TestClient) -> None:
    w = World(client)
    alice, bob = w.user("alice"), w.user("bob")
    template_id = ok(client.post(f"{API}/templates", json=report_doc()), 201)["id"]
    agent_id = ok(client.post(f"{API}/agents", json=report_flow(template_id)), 201)["id"]
    done = run(client, agent_id)
    artifact_id = ok(client.get(f"{API}/runs/{done['id']}/artifacts"))["data"][0]["id"]
    paths = [
        ("/artifacts", "/artifacts"),
        (f"/artifacts/{artifact_id}", f"/artifacts/{artifact_id}"),
        (f"/artifacts/{artifact_id}?format=pdf", f"/artifacts/{artifact_id}?format=pdf"),
    ]
    # Bob may not read the agent, so not its runs: he learns what a random id would tell him.
    for seen_path, fake_path in paths:
        seen = w.call(bob, "GET", f"{API}/runs/{done['id']}{seen_path}")
        fake = w.call(bob, "GET", f"{API}/runs/{FAKE_RUN}{fake_path}")
        assert seen.status_code == fake.status_code == 404, seen.text
        assert seen.text == fake.text.replace(FAKE_RUN, done["id"])
    # Whoever may read the agent reads its runs (services/runs.py), artifacts included.
    ok(client.post(f"{API}/agents/{agent_id}/grants",
                   json={"principal_id": alice, "scope": "runner"}), 201)  # fmt: skip
    for seen_path, _ in paths:
        assert w.call(alice, "GET", f"{API}/runs/{done['id']}{seen_path}").status_code == 200
    # Alice's own run of it is hers to read, artifact and all (the template is shared).
    ok(client.post(f"{API}/templates/{template_id}/grants",
                   json={"principal_id": alice, "scope": "viewer"}), 201)  # fmt: skip
    hers = run(client, agent_id, **w.as_(alice))
    assert hers["status"] == "succeeded", hers
    listed = ok(w.call(alice, "GET", f"{API}/runs/{hers['id']}/artifacts"))["data"]
    assert [a["created_by"] for a in listed] == [alice]
    got = w.call(alice, "GET", f"{API}/runs/{hers['id']}/artifacts/{listed[0]['id']}")
    assert got.status_code == 200 and got.text == EXPECTED
    # An artifact id of another run is no artifact of this one.
    other = w.call(alice, "GET", f"{API}/runs/{hers['id']}/artifacts/{artifact_id}")
    assert other.status_code == 404
    # A marking on the agent hides its runs, and their artifacts, from the runner: bob's
    # answers again.
    marking = w.marking("m")
    ok(client.post(f"{API}/agents/{agent_id}/markings", json={"marking_id": marking}))
    for seen_path, fake_path in paths:
        hidden = w.call(alice, "GET", f"{API}/runs/{done['id']}{seen_path}")
        fake = w.call(alice, "GET", f"{API}/runs/{FAKE_RUN}{fake_path}")
        assert hidden.status_code == 404, hidden.text
        assert hidden.text == fake.text.replace(FAKE_RUN, done["id"])


def test_a_template_the_user_cannot_read_is_unreachable_at_save_and_at_run(
    client: TestClient,
) -> None:
    w = World(client)
    alice = w.user("alice")
    template_id = ok(client.post(f"{API}/templates", json=report_doc()), 201)["id"]
    fake = "template.01nosuchthing000000000000000"
    at = "/nodes/1/config/template"

    def refused(doc: dict[str, Any]) -> dict[str, Any]:
        response = w.call(alice, "POST", f"{API}/agents", doc)
        assert response.status_code == 422, response.text
        errors = [e for e in response.json()["errors"] if e["loc"] == at]
        assert len(errors) == 1, response.text
        found: dict[str, Any] = errors[0]
        return found

    hidden, unknown = refused(report_flow(template_id)), refused(report_flow(fake))
    assert hidden["message"] == unknown["message"].replace(fake, template_id)
    assert hidden["message"].startswith(f"No template '{template_id}' that you can read")

    # Shared, alice saves it; unshared, her next run is refused with the same message.
    grant = {"principal_id": alice, "scope": "viewer"}
    ok(client.post(f"{API}/templates/{template_id}/grants", json=grant), 201)
    agent_id = ok(w.call(alice, "POST", f"{API}/agents", report_flow(template_id)), 201)["id"]
    assert run(client, agent_id, **w.as_(alice))["status"] == "succeeded"
    assert client.delete(f"{API}/templates/{template_id}/grants/{alice}").status_code == 204
    started = w.call(alice, "POST", f"{API}/agents/{agent_id}/runs", {"inputs": INPUTS})
    assert started.status_code == 422, started.text
    errors = [e for e in started.json()["errors"] if e["loc"] == at]
    assert errors and errors[0]["message"] == hidden["message"]
    # A marking does the same.
    ok(client.post(f"{API}/templates/{template_id}/grants", json=grant), 201)
    marking = w.marking("m")
    ok(client.post(f"{API}/templates/{template_id}/markings", json={"marking_id": marking}))
    started = w.call(alice, "POST", f"{API}/agents/{agent_id}/runs", {"inputs": INPUTS})
    assert started.status_code == 422
    assert [e["message"] for e in started.json()["errors"] if e["loc"] == at] == [hidden["message"]]


@pytest.mark.parametrize(
    ("variables", "loc", "code"),
    [
        ({"customer": "{{ customer }}"}, "/nodes/1/config/variables", "missing_variable"),
        ({**{"customer": "x", "week": "2026-01-01", "items": [], "total": 1}, "colour": "red"},
         "/nodes/1/config/variables/colour", "unknown_variable"),
    ],
)  # fmt: skip
def test_bindings_are_checked_at_save(
    client: TestClient, variables: dict[str, Any], loc: str, code: str
) -> None:
    template_id = ok(client.post(f"{API}/templates", json=report_doc()), 201)["id"]
    response = client.post(f"{API}/agents", json=report_flow(template_id, variables=variables))
    assert response.status_code == 422, response.text
    assert (loc, code) in [(e["loc"], e["code"]) for e in response.json()["errors"]]


def test_values_of_the_wrong_type_fail_the_node_naming_the_variable(client: TestClient) -> None:
    template_id = ok(client.post(f"{API}/templates", json=report_doc()), 201)["id"]
    variables = {"customer": "{{ customer }}", "week": "soon", "items": "{{ items }}", "total": 1}
    doc = report_flow(template_id, variables=variables)
    agent_id = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
    done = run(client, agent_id)
    assert done["status"] == "failed"
    message = done["error"]["message"]
    assert "'week'" in message and "YYYY-MM-DD" in message, message
    assert ok(client.get(f"{API}/runs/{done['id']}/artifacts"))["data"] == []


def test_variables_need_a_stored_template(client: TestClient) -> None:
    doc = report_flow("Hello {{ customer }}", variables={"customer": "x"})
    response = client.post(f"{API}/agents", json=doc)
    assert response.status_code == 422
    codes = [(e["loc"], e["code"]) for e in response.json()["errors"]]
    assert ("/nodes/1/config/variables", "variables_without_template") in codes
    # Inline text renders as before, and makes no artifact.
    inline = report_flow("Hello {{ customer }}", variables={})
    del inline["nodes"][1]["config"]["variables"]
    agent_id = ok(client.post(f"{API}/agents", json=inline), 201)["id"]
    done = run(client, agent_id)
    assert done["outputs"] == {"report": "Hello ACME"}
    assert ok(client.get(f"{API}/runs/{done['id']}/artifacts"))["data"] == []
