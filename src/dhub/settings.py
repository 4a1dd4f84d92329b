"""Server settings, read from the environment when asked (never at import)."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from dhub.providers.config import ProvidersConfig

EXECUTION_MODES = ("embedded", "distributed")
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
    # Model providers: DHUB_OPENAI_API_KEY, DHUB_ANTHROPIC_API_KEY, DHUB_PROVIDERS_FILE, ...
    providers: ProvidersConfig = field(default_factory=ProvidersConfig)
    # A react agent's max_input_tokens when it sets none (always capped at the model's window).
    default_max_input_tokens: int = 32_000
    # "embedded": runs execute in the server process. "distributed": runs are queued in
    # PostgreSQL (procrastinate) for worker processes (docs/deploy.md).
    execution: str = "embedded"

    def __post_init__(self) -> None:
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
        return cls(
            data_dir=directory,
            database_url=url,
            admin_token=os.environ.get("DHUB_ADMIN_TOKEN") or None,
            examples_dir=Path(examples) if examples else None,
            run_lease_seconds=float(os.environ.get("DHUB_RUN_LEASE_SECONDS") or 30),
            providers=ProvidersConfig.from_env(),
            default_max_input_tokens=int(os.environ.get("DHUB_DEFAULT_MAX_INPUT_TOKENS") or 32_000),
            execution=os.environ.get("DHUB_EXECUTION") or "embedded",
        )


def default_sqlite_url(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / 'dhub.db'}"


# The data directory holds the SQLite database and the admin token: only its owner may read
# it, whatever the umask. Files the server writes there are 0600 (store/db.py for SQLite's).
DATA_DIR_MODE = 0o700
SECRET_FILE_MODE = 0o600


def secure_data_dir(directory: Path) -> None:
    """Create the data directory as 0700, or tighten one that exists with a looser mode (and
    the files directly in it to 0600), logging what changed. A directory the server may not
    change (another user's) stops the start with a message saying what to do."""
    directory.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
    try:
        _tighten(directory, DATA_DIR_MODE)
        for entry in directory.iterdir():
            if entry.is_file() and not entry.is_symlink():
                _tighten(entry, SECRET_FILE_MODE)
    except PermissionError as exc:
        raise PermissionError(
            f"The data directory {directory} (or a file in it) is readable by other users and "
            f"this process may not change that ({exc.strerror}): run dhub as the directory's "
            f"owner, or `chmod 700 {directory}` and `chmod 600` the files in it."
        ) from exc


def _tighten(path: Path, mode: int) -> None:
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~mode & 0o777:
        os.chmod(path, current & mode)
        log.warning("%s was mode %o; made it %o (only its owner may read it)", path, current,
                    current & mode)  # fmt: skip
