"""The pure parts of dhub's MCP client (domain/mcp.py) and its address check."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dhub.domain.knowledge import TOOL_NAME
from dhub.domain.mcp import BOUND, body_problems, mcp_tool, model_name, split_arguments
from dhub.services.mcp_client import refused_address


@given(st.text(max_size=40), st.text(min_size=0, max_size=200))
def test_every_tool_gets_a_name_model_providers_accept(prefix: str, tool: str) -> None:
    assert TOOL_NAME.fullmatch(model_name(prefix[:32], tool))


def test_names_keep_what_providers_accept_and_replace_the_rest() -> None:
    assert model_name("gh_", "search_issues") == "gh_search_issues"
    assert model_name("", "files/read.text") == "files_read_text"


@given(st.dictionaries(st.text(max_size=10), st.integers() | st.text(max_size=5), max_size=5))
def test_the_models_arguments_cannot_redirect_a_call(given_arguments: dict[str, object]) -> None:
    tool = mcp_tool("mcp_server.a", "add", "Add.", {"type": "object"})
    planted = {**given_arguments, BOUND: {"server": "mcp_server.evil", "tool": "drop"}}
    server, name, arguments = split_arguments(tool.arguments(planted)) or ("", "", {})
    assert (server, name) == ("mcp_server.a", "add")
    assert BOUND not in arguments
    assert arguments == {k: v for k, v in given_arguments.items() if k != BOUND}


def test_a_schema_that_is_no_object_becomes_an_open_one() -> None:
    assert mcp_tool("mcp_server.a", "t", "", {"type": "string"}).parameters == {"type": "object"}


@pytest.mark.parametrize(
    ("body", "pointers"),
    [
        ({"transport": "stdio"}, ["/command"]),
        ({"transport": "stdio", "source": "print(1)"}, []),
        ({"transport": "streamable_http", "url": "https://h/mcp"}, []),
        ({"transport": "streamable_http", "url": "https://h/mcp", "network": True}, ["/network"]),
        ({"transport": "streamable_http", "url": "file:///etc/passwd"}, ["/url"]),
        ({"transport": "streamable_http", "url": "https://h/mcp",
          "headers": {"Bad Name": "x", "Host": "y"}}, ["/headers/Bad Name", "/headers/Host"]),
    ],
)  # fmt: skip
def test_each_transport_takes_its_own_fields(body: dict[str, object], pointers: list[str]) -> None:
    assert [e.loc for e in body_problems(body)] == pointers


@pytest.mark.parametrize(
    ("url", "allowed", "refused"),
    [
        ("http://127.0.0.1:8000/mcp", (), True),
        ("http://[::1]/mcp", (), True),
        ("http://[::ffff:10.0.0.1]/mcp", (), True),
        ("http://169.254.169.254/", (), True),
        ("http://100.64.0.1/", (), True),  # carrier-grade NAT: not the internet either
        ("http://8.8.8.8/mcp", (), False),
        ("http://127.0.0.1:8000/mcp", ("127.0.0.1",), False),
        ("http://10.2.3.4/mcp", ("10.0.0.0/8",), False),
        ("http://10.2.3.4/mcp", ("10.9.0.0/16",), True),
        ("http://192.168.1.1/mcp", ("*",), False),
    ],
)
def test_addresses_of_this_servers_networks_need_the_operators_leave(
    url: str, allowed: tuple[str, ...], refused: bool
) -> None:
    reason = asyncio.run(refused_address(url, allowed))
    assert (reason is not None) == refused, reason
    if refused:
        assert reason is not None and "DHUB_MCP_ALLOWED_HOSTS" in reason
