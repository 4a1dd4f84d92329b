"""No real network in the test suite: TCP connections and name lookups stay on this machine.

``install()`` patches :class:`socket.socket` ``connect``/``connect_ex`` and
:func:`socket.getaddrinfo` in this process so that a TCP connection to anything but a loopback
address, or the lookup of a name other than ``localhost`` (or this host's own name), raises
:class:`NetworkBlocked` at once, with the address in the message. Unix sockets, UDP sockets
(connecting one sends nothing) and servers binding any address are untouched. Child processes
(uv, the bubblewrap sandbox, slirp4netns) are separate processes and are not affected.

A test that really needs the network says so with ``@pytest.mark.allow_network``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

MESSAGE = "network access is blocked in tests"

_state: dict[str, Any] = {"installed": False, "suspended": 0}
_original_connect = socket.socket.connect
_original_connect_ex = socket.socket.connect_ex
_original_getaddrinfo = socket.getaddrinfo


class NetworkBlocked(RuntimeError):
    """A test tried to reach a host other than this one.

    Deliberately not an ``OSError``: code that treats connection failures as routine (retries,
    fallbacks) must not swallow it, so the test fails loudly instead of passing by accident.
    """


def is_local_host(host: object) -> bool:
    """Whether ``host`` (a name or an address) stays on this machine."""
    if host is None:
        return True  # getaddrinfo(None, port): the local wildcard/loopback
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0].rstrip(".").lower()
    if name in ("", "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"):
        return True
    if name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return name == socket.gethostname().lower()
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def _active() -> bool:
    return bool(_state["installed"]) and not _state["suspended"]


def _check_connect(sock: socket.socket, address: Any) -> None:
    if not _active() or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    if sock.type != socket.SOCK_STREAM:
        return  # a UDP "connect" only picks a route; nothing leaves the machine
    host = address[0] if isinstance(address, tuple) and address else address
    if not is_local_host(host):
        # Closed here: socket.create_connection only closes its socket on an OSError, and a
        # leaked one would surface later as a ResourceWarning in some other test.
        sock.close()
        raise NetworkBlocked(f"{MESSAGE}: connection to {address!r} refused")


def _connect(self: socket.socket, address: Any) -> None:
    _check_connect(self, address)
    _original_connect(self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    _check_connect(self, address)
    return _original_connect_ex(self, address)


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if _active() and not is_local_host(host):
        raise NetworkBlocked(f"{MESSAGE}: looking up {host!r} refused")
    return _original_getaddrinfo(host, *args, **kwargs)


def install() -> None:
    """Block non-local connections in this process (idempotent)."""
    if _state["installed"]:
        return
    socket.socket.connect = _connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = _getaddrinfo
    _state["installed"] = True


def uninstall() -> None:
    if not _state["installed"]:
        return
    socket.socket.connect = _original_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _original_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _original_getaddrinfo
    _state["installed"] = False


@contextlib.contextmanager
def allowed() -> Iterator[None]:
    """Let connections through for the duration (what ``@pytest.mark.allow_network`` uses)."""
    _state["suspended"] += 1
    try:
        yield
    finally:
        _state["suspended"] -= 1
