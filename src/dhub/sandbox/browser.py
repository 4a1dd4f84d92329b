"""Tools with ``require_browser: true``: a headless Chromium inside their sandbox, driven with
Playwright for Python (docs/sandbox.md "Browser tools").

Nothing is downloaded at run time: the browser is the system's Chromium (Debian's ``chromium``
package), and Playwright is the server's own installation (a dependency of dhub; its wheel
carries the Node.js driver, never a browser). The sandbox sees them read-only: ``/usr`` is
bound already, and ``playwright``, ``greenlet`` (its one dependency) and the tool author's
helper ``dhub_browser`` are bound under ``/sandbox/browser``, first on the tool's
``sys.path``, so a tool's own dependencies cannot replace the driver the helper talks to.

Chromium runs under the tool's own isolation: its network namespace (none, or slirp4netns'
outbound-only one with ``network: true``), so the browser reaches exactly what the tool's
Python would; its own sandbox off (``--no-sandbox``, as Playwright launches it: bubblewrap is
the sandbox, and namespace creation stays refused); the filter of seccomp.py with one more
refusal; and the limits below instead of the address-space limit.

Why other limits: V8 reserves address space it never touches (its pointer cage, and the heap
sandbox that needs more than 80 GiB here: with ``RLIMIT_AS`` below that Chromium's pages
crash), so ``RLIMIT_AS`` cannot bound a browser. ``RLIMIT_DATA`` can: it counts a process's
private writable memory (heap, stacks, V8's heaps as they are committed, ``brk``), and the
kernel refuses a mapping or an ``mprotect`` that would take it over the limit. What it does not
count is shared memory, so a browser tool gets none outside its sized tmpfs: shared anonymous
``mmap`` is refused by its seccomp filter and ``/dev/zero`` cannot be opened (Chromium asks for
neither: it keeps its shared memory in files of ``/tmp``). The address space is still capped
(``ADDRESS_SPACE``) so a process cannot fill the machine's page tables with mappings of nothing.
A browser with a page open runs about 120 threads, which ``RLIMIT_NPROC`` counts: hence its own
process limit; and more descriptors than a function needs.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

# Debian's Chromium itself: /usr/bin/chromium is a shell script around it.
CHROMIUM = "/usr/lib/chromium/chromium"
INSIDE = "/sandbox/browser"
# Chromium 156 needs between 80 and 96 GiB of address space; 256 GiB leaves room for later
# versions, and still bounds what page tables a process can make the kernel hold for mappings
# it only reads (at most 512 MiB, after some 60 million page faults of CPU time).
ADDRESS_SPACE = 256 << 30
PROCESSES = 256
# Chromium's browser process holds about 100 descriptors, and some 15 more for each page open.
OPEN_FILES = 1024
HELPER = Path(__file__).with_name("browser_lib") / "dhub_browser.py"
_PACKAGES = ("playwright", "greenlet")


@dataclass(frozen=True)
class Browser:
    """What a browser tool's sandbox is given: the Chromium executable, and the host paths of
    the Python packages the tool imports (name inside ``/sandbox/browser`` -> host path)."""

    chromium: str
    packages: dict[str, str]

    def binds(self) -> list[str]:
        """bubblewrap arguments making them visible, read-only, at their places inside."""
        args = ["--perms", "0755", "--dir", INSIDE]
        for name, host in self.packages.items():
            args += ["--ro-bind", host, f"{INSIDE}/{name}"]
        # Fonts configured, so pages render their text in screenshots and PDFs.
        if Path("/etc/fonts").is_dir():
            args += ["--ro-bind", "/etc/fonts", "/etc/fonts"]
        home = Path(self.chromium).parent
        if not home.is_relative_to("/usr"):  # a Chromium of its own place: its files with it
            for parent in reversed(home.parents[:-1]):  # traversable by the sandbox's user
                args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", str(home), str(home)]
        # Shared memory of no file would escape RLIMIT_DATA (see above): no /dev/zero to map.
        # A bind without devices (bubblewrap's --ro-bind) makes opening it fail with EACCES.
        args += ["--ro-bind", "/dev/null", "/dev/zero"]
        return args

    def search_path(self, isolated: bool) -> list[str]:
        """Where the tool's Python finds the packages: their place inside the sandbox, or,
        without isolation, their places on this machine."""
        if isolated:
            return [INSIDE]
        places = [str(Path(host).parent) for host in self.packages.values()]
        return list(dict.fromkeys(places))

    def setup(self, isolated: bool) -> dict[str, object]:
        """What the sandbox's child program needs to start the driver (child.py)."""
        return {"path": self.search_path(isolated), "executable": self.chromium}


def find_browser(chromium: str) -> Browser | str:
    """The browser for tools that require one, or why there is none (a message for the tool's
    result, naming what to install)."""
    if not os.path.isabs(chromium) or not os.access(chromium, os.X_OK):
        return (
            "this tool requires a browser (require_browser), and Chromium is not installed on "
            f"the server (no {chromium}): install Debian's chromium package (`make install` "
            "does, or `apt-get install chromium`), or set DHUB_SANDBOX_CHROMIUM to the "
            "Chromium executable"
        )
    packages = {"dhub_browser.py": str(HELPER)}
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)  # found, not imported: the server needs neither
        if spec is None or not spec.submodule_search_locations:
            return (
                f"this tool requires a browser (require_browser), and the Python package "
                f"'{name}' is missing from the server's environment: reinstall dhub (it "
                "depends on playwright)"
            )
        packages[name] = os.path.realpath(next(iter(spec.submodule_search_locations)))
    return Browser(os.path.realpath(chromium), packages)
