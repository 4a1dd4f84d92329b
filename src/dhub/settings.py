"""Server settings, read from the environment when asked (never at import)."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from dhub.providers.config import ProvidersConfig

EXECUTION_MODES = ("embedded", "distributed")
METRICS_MODES = ("off", "on", "token")
log = logging.getLogger("dhub")


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    database_url: str
    admin_token: str | None = None
    examples_dir: Path | None = None
    # How long a run stays owned by a process that stopped renewing it (crashed) before
    # another start resumes it.
    run_lease_seconds: float = 30.0
    # Executions in a row that may take a run up (a restart's recovery, a worker's job)
    # without it saving a step; the next one fails it, kind "unrecoverable"
    # (DHUB_RUN_MAX_ATTEMPTS; docs/deploy.md).
    run_max_attempts: int = 5
    # Model providers: DHUB_OPENAI_API_KEY, DHUB_ANTHROPIC_API_KEY, DHUB_PROVIDERS_FILE, ...
    providers: ProvidersConfig = field(default_factory=ProvidersConfig)
    # A react agent's max_input_tokens when it sets none (always capped at the model's window).
    default_max_input_tokens: int = 32_000
    # The demo model answers, labelled, for every model provider not configured
    # (DHUB_DEMO_MODEL: on, off; unset: on when the server loads examples). docs/providers.md
    demo_model: bool = False
    # "embedded": runs execute in the server process. "distributed": runs are queued in
    # PostgreSQL (procrastinate) for worker processes (docs/deploy.md).
    execution: str = "embedded"
    # How long an MCP tool call waits for its run before answering that it still runs
    # (docs/mcp.md).
    mcp_wait_seconds: float = 300.0
    # Where MCP servers reached over HTTP may be besides the public internet: host names,
    # addresses or networks (CIDR) on this server's own networks, or "*" for anywhere
    # (DHUB_MCP_ALLOWED_HOSTS, comma-separated; docs/mcp.md "Using MCP servers' tools").
    mcp_allowed_hosts: tuple[str, ...] = ()
    # The key that encrypts secrets' values (DHUB_SECRET_KEY; unset: secret.key in the data
    # directory). Never in a repr, so never in a log line (docs/secrets.md).
    secret_key: str | None = field(default=None, repr=False)
    # How often a process that executes runs looks for schedules' due ticks
    # (DHUB_SCHEDULE_POLL_SECONDS; 0: this process starts no ticks; docs/triggers.md).
    schedule_poll_seconds: float = 5.0
    # GET /metrics (DHUB_METRICS: off, on, token; docs/observability.md): off answers 404 and
    # records nothing; token asks for DHUB_METRICS_TOKEN or an admin's API token.
    metrics: str = "off"
    metrics_token: str | None = field(default=None, repr=False)
    # Runs executing at once in a process (DHUB_MAX_ACTIVE_RUNS; 0: the default from its
    # cores and memory, runtime/admission.py); the others wait their turn, fair between users.
    max_active_runs: int = 0
    # Each process keeps rendered agents of list pages up to this many MiB
    # (DHUB_LIST_CACHE_MB; 0: none; docs/deploy.md), for the callers who asked.
    list_cache_mb: int = 64

    def __post_init__(self) -> None:
        if self.list_cache_mb < 0:
            raise ValueError(
                f"DHUB_LIST_CACHE_MB must be a whole number of MiB, 0 for no cache, not "
                f"{self.list_cache_mb}."
            )
        if self.max_active_runs < 0:
            raise ValueError(
                f"DHUB_MAX_ACTIVE_RUNS must be a whole number, 0 for the default, not "
                f"{self.max_active_runs}."
            )
        if self.metrics not in METRICS_MODES:
            raise ValueError(
                f"DHUB_METRICS must be one of {', '.join(METRICS_MODES)}, not {self.metrics!r}."
            )
        if self.metrics_token is not None and len(self.metrics_token) < 16:
            raise ValueError(
                "DHUB_METRICS_TOKEN must be at least 16 characters (a random string, e.g. "
                "`openssl rand -hex 32`), or unset (admins' API tokens only)."
            )
        if not 0 <= self.schedule_poll_seconds <= 30:
            raise ValueError(
                "DHUB_SCHEDULE_POLL_SECONDS must be a number of seconds from 0 (this process "
                f"starts no schedules' ticks) to 30, not {self.schedule_poll_seconds!r}."
            )
        if self.run_max_attempts < 1:
            raise ValueError(
                "DHUB_RUN_MAX_ATTEMPTS must be a whole number from 1, or 0 for the default "
                "(how many executions in a row may take a run up without saving a step before "
                f"it fails), not {self.run_max_attempts!r}."
            )
        if not 0 < self.mcp_wait_seconds <= 3600:
            raise ValueError(
                "DHUB_MCP_WAIT_SECONDS must be a number of seconds above 0 and at most 3600, "
                f"not {self.mcp_wait_seconds!r}."
            )
        if self.execution not in EXECUTION_MODES:
            raise ValueError(
                f"DHUB_EXECUTION must be one of {', '.join(EXECUTION_MODES)}, not "
                f"{self.execution!r}."
            )
        if self.execution == "distributed" and not self.database_url.startswith("postgres"):
            raise ValueError(
                "DHUB_EXECUTION=distributed needs PostgreSQL: set DHUB_DATABASE_URL to a "
                "postgresql:// URL (workers and API processes share it), or leave "
                "DHUB_EXECUTION unset for the embedded mode."
            )

    @property
    def distributed(self) -> bool:
        return self.execution == "distributed"

    @classmethod
    def from_env(
        cls,
        data_dir: str | Path | None = None,
        database_url: str | None = None,
        examples_dir: str | Path | None = None,
    ) -> Settings:
        directory = Path(data_dir or os.environ.get("DHUB_DATA_DIR") or ".dhub").resolve()
        url = database_url or os.environ.get("DHUB_DATABASE_URL") or default_sqlite_url(directory)
        examples = examples_dir or os.environ.get("DHUB_EXAMPLES_DIR")
        token = os.environ.get("DHUB_METRICS_TOKEN") or None
        return cls(
            data_dir=directory,
            database_url=url,
            admin_token=os.environ.get("DHUB_ADMIN_TOKEN") or None,
            examples_dir=Path(examples) if examples else None,
            run_lease_seconds=float(os.environ.get("DHUB_RUN_LEASE_SECONDS") or 30),
            run_max_attempts=_whole("DHUB_RUN_MAX_ATTEMPTS") or 5,
            providers=ProvidersConfig.from_env(),
            default_max_input_tokens=int(os.environ.get("DHUB_DEFAULT_MAX_INPUT_TOKENS") or 32_000),
            execution=os.environ.get("DHUB_EXECUTION") or "embedded",
            demo_model=switch("DHUB_DEMO_MODEL", default=bool(examples)),
            mcp_wait_seconds=float(os.environ.get("DHUB_MCP_WAIT_SECONDS") or 300),
            mcp_allowed_hosts=tuple(
                h.strip()
                for h in os.environ.get("DHUB_MCP_ALLOWED_HOSTS", "").split(",")
                if h.strip()
            ),
            secret_key=os.environ.get("DHUB_SECRET_KEY") or None,
            schedule_poll_seconds=float(os.environ.get("DHUB_SCHEDULE_POLL_SECONDS") or 5),
            # A token given alone means token mode: metrics were asked for, and protected.
            metrics=(os.environ.get("DHUB_METRICS") or ("token" if token else "off")).lower(),
            metrics_token=token,
            max_active_runs=_whole("DHUB_MAX_ACTIVE_RUNS"),
            list_cache_mb=_whole("DHUB_LIST_CACHE_MB", default=64),
        )


def _whole(name: str, default: int = 0) -> int:
    """A whole-number environment variable; unset or empty: ``default``."""
    raw = (os.environ.get(name) or str(default)).strip()
    try:
        return int(raw)
    except ValueError:
        meaning = "0 for the default" if default == 0 else f"default {default}"
        raise ValueError(f"{name} must be a whole number ({meaning}), not {raw!r}.") from None


_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def switch(name: str, default: bool) -> bool:
    """An on/off environment variable; unset or empty: ``default``."""
    raw = (os.environ.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in _ON or raw in _OFF:
        return raw in _ON
    raise ValueError(f"{name} must be on or off (or 1/0, true/false, yes/no), not {raw!r}.")


def default_sqlite_url(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / 'dhub.db'}"


# The data directory holds the SQLite database, the admin token and the key of secrets'
# values (secret.key): only its owner may read them, whatever the umask (store/db.py creates
# the SQLite files 0600, wherever they are).
DATA_DIR_MODE = 0o700
SECRETS = ("admin.token", "secret.key")


def secure_data_dir(directory: Path) -> None:
    """Create the data directory as 0700, or take group and other access away from one that
    exists (and from admin.token and secret.key in it), logging what changed. Other files are
    left alone: a data directory pointed at a shared folder by mistake loses no executable bit.
    A directory the server may not change (another user's) stops the start with a message."""
    directory.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
    try:
        private(directory)
        for name in SECRETS:
            if (directory / name).is_file():
                private(directory / name)
    except PermissionError as exc:
        raise PermissionError(
            f"The data directory {directory} (or a file in it) is readable by other users and "
            f"this process may not change that ({exc.strerror}): run dhub as the directory's "
            f"owner, or `chmod 700 {directory}` and `chmod 600 {directory}/admin.token`."
        ) from exc


def private(path: Path) -> None:
    """Only the owner may use ``path``: group and other bits cleared, the owner's kept."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current & 0o077:
        os.chmod(path, current & ~0o077)
        log.warning("%s was mode %o; made it %o (only its owner may use it)", path, current,
                    current & ~0o077)  # fmt: skip
