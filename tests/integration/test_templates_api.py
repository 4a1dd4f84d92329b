"""Templates over HTTP, on SQLite and PostgreSQL: the kind (save-time checks of the body and
its variables), rendering with typed variables, the sandbox and its limits, HTML escaping,
HTML and PDF output with nothing fetched, and who may render."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.test_sharing_api import World, ok

API = "/api/v1"
TEMPLATES = f"{API}/templates"


def report_doc(name: str = "weekly-report", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": "A weekly report",
        "format": "markdown",
        "body": (
            "# Report for {{ customer }}\n\n"
            "Week of {{ week.isoformat() }}, {{ items|length }} items:\n"
            "{% for item in items %}- {{ item.name }}: {{ item.amount }}\n{% endfor %}"
            "Total: {{ total }}{% if urgent %} (urgent){% endif %}\n"
        ),
        "variables": [
            {"name": "customer", "type": "string", "description": "Who it is for"},
            {"name": "week", "type": "date"},
            {"name": "items", "type": "array"},
            {"name": "total", "type": "number"},
            {"name": "urgent", "type": "boolean", "default": False},
        ],
        **extra,
    }


VALUES = {
    "customer": "ACME",
    "week": "2026-11-30",
    "items": [{"name": "bolts", "amount": 3}, {"name": "nuts", "amount": 4}],
    "total": 7,
}


def errors_of(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 422, response.text
    errors: list[dict[str, str]] = response.json()["errors"]
    return errors


def make(client: TestClient, doc: dict[str, Any]) -> str:
    return str(ok(client.post(TEMPLATES, json=doc), 201)["id"])


def render(client: TestClient, template_id: str, body: Any, **headers: str) -> Any:
    return client.post(f"{TEMPLATES}/{template_id}/render", json=body, headers=headers)


# -- the kind -----------------------------------------------------------------------------------


def test_a_template_is_a_kind_with_versions(client: TestClient) -> None:
    made = ok(client.post(TEMPLATES, json=report_doc()), 201)
    assert made["id"].startswith("template.") and made["category"] == "template"
    assert made["format"] == "markdown" and made["version"] == 1
    assert made["variables"][4] == {
        "name": "urgent", "type": "boolean", "description": "", "required": False,
        "default": False,
    }  # fmt: skip
    patched = ok(client.patch(f"{TEMPLATES}/{made['id']}", json={"body": "Hi {{ customer }}"}))
    assert patched["version"] == 2
    versions = ok(client.get(f"{TEMPLATES}/{made['id']}/versions"))["data"]
    assert [v["version"] for v in versions] == [2, 1]
    listed = ok(client.get(TEMPLATES))["data"]
    assert [t["id"] for t in listed] == [made["id"]]
    # An older version renders as it was.
    old = ok(render(client, made["id"], {"variables": VALUES, "version": 1}))
    assert old["version"] == 1 and old["text"].startswith("# Report for ACME")
    assert ok(render(client, made["id"], {"variables": VALUES}))["text"] == "Hi ACME"


def test_a_body_that_does_not_parse_is_refused_with_its_line(client: TestClient) -> None:
    doc = report_doc(body="Hello\n{% for x in items %}\n{{ x }\n", variables=[{"name": "items"}])
    errors = errors_of(client.post(TEMPLATES, json=doc))
    assert [(e["loc"], e["code"]) for e in errors] == [("/body", "syntax")]
    assert errors[0]["message"].startswith("Line 3:"), errors


def test_undeclared_variables_are_named(client: TestClient) -> None:
    doc = report_doc(body="{{ customer }} {{ secret }} {% for r in rows %}{{ r }}{% endfor %}")
    doc["variables"] = [{"name": "customer"}]
    errors = errors_of(client.post(TEMPLATES, json=doc))
    assert [(e["loc"], e["code"]) for e in errors] == [("/body", "undeclared_variable")]
    assert "'rows', 'secret'" in errors[0]["message"]
    # The template language's own globals (range, dict) need no declaration; cycler is gone.
    make(client, report_doc(body="{% for i in range(3) %}{{ i }}{% endfor %}", variables=[]))
    cycler = report_doc(name="c", body="{{ cycler.__init__.__globals__ }}", variables=[])
    assert "'cycler'" in errors_of(client.post(TEMPLATES, json=cycler))[0]["message"]


@pytest.mark.parametrize(
    "body",
    ["{% include 'other' %}", "{% import 'macros' as m %}", "{% extends 'base' %}",
     "{% from 'm' import x %}"],
)  # fmt: skip
def test_nothing_is_included_imported_or_extended(client: TestClient, body: str) -> None:
    errors = errors_of(client.post(TEMPLATES, json=report_doc(body=body, variables=[])))
    assert ("/body", "include") in [(e["loc"], e["code"]) for e in errors]


def test_variables_are_checked_when_saved(client: TestClient) -> None:
    doc = report_doc(
        body="{{ a }}",
        variables=[
            {"name": "a", "type": "integer", "default": "three"},
            {"name": "a"},
            {"name": "run_id"},
            {"name": "range"},
            {"name": "1x"},
            {"name": "b", "type": "money"},
        ],
    )
    found = {(e["loc"], e["code"]) for e in errors_of(client.post(TEMPLATES, json=doc))}
    assert {
        ("/variables/0/default", "wrong_type"),
        ("/variables/1/name", "duplicate_variable"),
        ("/variables/2/name", "reserved_name"),
        ("/variables/3/name", "reserved_name"),
        ("/variables/4/name", "invalid_name"),
    } <= found
    assert any(loc == "/variables/5/type" for loc, _ in found)


# -- rendering ----------------------------------------------------------------------------------


def test_render_with_typed_variables(client: TestClient) -> None:
    template_id = make(client, report_doc())
    done = ok(render(client, template_id, {"variables": VALUES}))
    assert done == {
        "template_id": template_id,
        "version": 1,
        "format": "markdown",
        "media_type": "text/markdown; charset=utf-8",
        "text": "# Report for ACME\n\nWeek of 2026-11-30, 2 items:\n- bolts: 3\n- nuts: 4\n"
        "Total: 7\n",
    }
    urgent = ok(render(client, template_id, {"variables": {**VALUES, "urgent": True}}))
    assert urgent["text"].endswith("Total: 7 (urgent)\n")


@pytest.mark.parametrize(
    ("values", "loc", "code", "words"),
    [
        ({k: v for k, v in VALUES.items() if k != "customer"}, "/variables/customer",
         "missing_variable", "'customer' (string) is required"),
        ({**VALUES, "total": "7"}, "/variables/total", "wrong_type", "'total' must be a number"),
        ({**VALUES, "total": True}, "/variables/total", "wrong_type", "must be a number"),
        ({**VALUES, "week": "30/11/2026"}, "/variables/week", "wrong_type", "YYYY-MM-DD"),
        ({**VALUES, "items": {"a": 1}}, "/variables/items", "wrong_type", "must be an array"),
        ({**VALUES, "urgent": "yes"}, "/variables/urgent", "wrong_type", "must be a boolean"),
        ({**VALUES, "extra": 1}, "/variables/extra", "unknown_variable", "no variable 'extra'"),
    ],
)  # fmt: skip
def test_wrong_values_name_the_variable(
    client: TestClient, values: dict[str, Any], loc: str, code: str, words: str
) -> None:
    template_id = make(client, report_doc())
    errors = errors_of(render(client, template_id, {"variables": values}))
    assert [(e["loc"], e["code"]) for e in errors] == [(loc, code)]
    assert words in errors[0]["message"], errors


def test_bad_render_bodies(client: TestClient) -> None:
    template_id = make(client, report_doc())
    for body, loc in (
        ({"variables": VALUES, "output": "docx"}, "/output"),
        ({"variables": [1]}, "/variables"),
        ({"variables": VALUES, "version": 0}, "/version"),
        ({"variables": VALUES, "colour": "red"}, "/colour"),
    ):
        assert [e["loc"] for e in errors_of(render(client, template_id, body))] == [loc]
    missing = render(client, template_id, {"variables": VALUES, "version": 9})
    assert missing.status_code == 404, missing.text


@pytest.mark.parametrize(
    "body",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ x.__class__.__base__.__subclasses__() }}",
        "{{ x.__init__.__globals__ }}",
        "{{ x.pop() }}",
    ],
)
def test_sandbox_escapes_are_refused(client: TestClient, body: str) -> None:
    doc = report_doc(body=body, variables=[{"name": "x", "type": "array", "default": [1]}])
    template_id = make(client, doc)
    errors = errors_of(render(client, template_id, {}))
    assert errors[0]["code"] == "unsafe", errors


DOUBLING = (
    "{% macro f(s, n) %}{{ f(s ~ s, n - 1) if n else s|length }}{% endmacro %}{{ f('ab', 60) }}"
)
GIF = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("{% for i in range(10**9) %}x{% endfor %}", "too_large"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
         "too_long"),
        ("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", "too_large"),
        ("{{ 'x' * 10**9 }}", "too_large"),
        ("{{ 2 ** 100000000 }}", "too_large"),
        ("{{ 'ab'|center(10**9) }}", "too_large"),
        ("{{ '{:>999999999}'.format(1) }}", "too_large"),
        (DOUBLING, "too_large"),
    ],
)  # fmt: skip
def test_renders_are_bounded(client: TestClient, body: str, code: str) -> None:
    template_id = make(client, report_doc(body=body, variables=[]))
    started = time.monotonic()
    errors = errors_of(render(client, template_id, {}))
    assert errors[0]["code"] == code, errors
    assert time.monotonic() - started < 30


def test_html_escapes_what_it_inserts(client: TestClient) -> None:
    doc = report_doc(
        format="html",
        body="<p>{{ note }}</p><p>{{ trusted|safe }}</p>",
        variables=[{"name": "note"}, {"name": "trusted"}],
    )
    template_id = make(client, doc)
    values = {"note": "<script>alert(1)</script> & co", "trusted": "<b>bold</b>"}
    done = ok(render(client, template_id, {"variables": values}))
    assert done["text"] == (
        "<p>&lt;script&gt;alert(1)&lt;/script&gt; &amp; co</p><p><b>bold</b></p>"
    )
    assert done["media_type"] == "text/html; charset=utf-8"
    # Markdown and text insert text as it is; Markdown's HTML escapes raw HTML.
    doc = report_doc(name="md", body="*{{ note }}*", variables=[{"name": "note"}])
    markdown = make(client, doc)
    note = {"note": values["note"]}
    as_html = ok(render(client, markdown, {"variables": note, "output": "html"}))
    assert "<em>&lt;script&gt;alert(1)&lt;/script&gt; &amp; co</em>" in as_html["text"]
    assert as_html["media_type"] == "text/html; charset=utf-8"


class _Listener:
    """A TCP server on the loopback that counts the connections it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_pdf_is_made_and_nothing_is_fetched(client: TestClient, tmp_path: Any) -> None:
    listener = _Listener()
    secret = tmp_path / "secret.css"
    secret.write_text("body { color: red }")
    try:
        url = f"http://127.0.0.1:{listener.port}"
        doc = report_doc(
            format="html",
            body=(
                f'<link rel="stylesheet" href="{url}/style.css">'
                f'<link rel="stylesheet" href="file://{secret}">'
                f"<style>@import url('{url}/imported.css');</style>"
                f'<h1>{{{{ title }}}}</h1><img src="{url}/logo.png">'
                f'<img src="{GIF}">'
            ),
            variables=[{"name": "title"}],
        )
        template_id = make(client, doc)
        response = render(client, template_id, {"variables": {"title": "Q4"}, "output": "pdf"})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/pdf"
        assert response.headers["content-disposition"] == 'attachment; filename="weekly-report.pdf"'
        assert response.content.startswith(b"%PDF")
        time.sleep(0.3)
        assert listener.connections == 0
    finally:
        listener.close()
    # Markdown and text make PDFs too.
    for fmt in ("markdown", "text"):
        other = make(client, report_doc(name=f"r-{fmt}", format=fmt, body="# Hi", variables=[]))
        pdf = render(client, other, {"output": "pdf"})
        assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF"), pdf.text


# -- access -------------------------------------------------------------------------------------


def test_who_may_render(client: TestClient) -> None:
    w = World(client)
    alice, bob = w.user("alice"), w.user("bob")
    template_id = make(client, report_doc())
    fake = "template.01nosuchthing000000000000000"
    body = {"variables": VALUES}
    hidden = w.call(alice, "POST", f"{TEMPLATES}/{template_id}/render", body)
    random = w.call(alice, "POST", f"{TEMPLATES}/{fake}/render", body)
    assert hidden.status_code == random.status_code == 404
    assert hidden.text == random.text.replace(fake, template_id)
    # A viewer may render; a marking hides it again, even from a viewer.
    ok(client.post(f"{TEMPLATES}/{template_id}/grants",
                   json={"principal_id": bob, "scope": "viewer"}), 201)  # fmt: skip
    assert ok(w.call(bob, "POST", f"{TEMPLATES}/{template_id}/render", body))["text"]
    marking = w.marking("secret")
    ok(client.post(f"{TEMPLATES}/{template_id}/markings", json={"marking_id": marking}))
    marked = w.call(bob, "POST", f"{TEMPLATES}/{template_id}/render", body)
    assert marked.status_code == 404 and marked.text == random.text.replace(fake, template_id)
    # An id of another kind is no template.
    agent = w.agent("a")
    assert w.call(BUILDER_, "POST", f"{TEMPLATES}/{agent}/render", body).status_code == 404


BUILDER_ = "user.admin"
