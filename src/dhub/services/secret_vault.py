"""The key that encrypts secrets' values at rest (docs/secrets.md#the-key).

``DHUB_SECRET_KEY`` gives it: a Fernet key (32 url-safe base64-encoded bytes), or several
separated by commas to rotate (the first encrypts; any decrypts). Unset, the server makes one
the first time it starts and keeps it in ``secret.key`` in the data directory (mode 0600, as
admin.token): enough for one machine, but processes that share a PostgreSQL database on
several machines need the same ``DHUB_SECRET_KEY`` each.

A database copied without the key gives nobody the values. Each ciphertext is bound to its
secret's id, so someone who can write to the database but has no key cannot move one
secret's value under another secret they may use.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from dhub.domain.errors import DhubError
from dhub.domain.secrets import KEY_VARIABLE

KEY_FILE = "secret.key"
_GENERATE = (
    'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
)


class SecretProblem(DhubError):
    """What keeps a secret the principal may use from giving its value (services/secrets.py):
    never carries a value, a ciphertext or a key."""


class SecretKeyError(SecretProblem):
    """A stored value this server's key cannot decrypt (another key made it, or it was made
    for another secret)."""

    status_code = 500


class SecretVault:
    """Encrypts and decrypts secrets' values with the server's key."""

    def __init__(self, keys: list[bytes]) -> None:
        self._fernet = MultiFernet([Fernet(k) for k in keys])

    @classmethod
    def from_key_text(cls, text: str) -> SecretVault:
        """Keys from DHUB_SECRET_KEY's text; a ValueError (that quotes no key) otherwise."""
        keys = [k.strip().encode() for k in text.split(",") if k.strip()]
        try:
            if not keys:
                raise ValueError
            return cls(keys)
        except (ValueError, TypeError):
            raise ValueError(
                f"{KEY_VARIABLE} must be a Fernet key (32 url-safe base64-encoded bytes), or "
                f"several separated by commas (the first encrypts): make one with {_GENERATE}"
            ) from None

    @classmethod
    def open(cls, data_dir: Path, key_text: str | None) -> SecretVault:
        """The server's vault: ``key_text`` (DHUB_SECRET_KEY) when given, else the key file
        in ``data_dir``, made on first use."""
        if key_text:
            return cls.from_key_text(key_text)
        return cls([_key_file(data_dir / KEY_FILE)])

    def seal(self, secret_id: str, value: str) -> str:
        """The value encrypted, bound to ``secret_id``."""
        return self._fernet.encrypt(f"{secret_id}\n{value}".encode()).decode("ascii")

    def unseal(self, secret_id: str, ciphertext: str) -> str:
        """The value ``seal`` encrypted for ``secret_id``; SecretKeyError if this server's key
        did not make it, or it was made for another secret."""
        try:
            plain = self._fernet.decrypt(ciphertext.encode("ascii")).decode()
        except (InvalidToken, UnicodeError):
            plain = ""
        owner, newline, value = plain.partition("\n")
        if not newline or owner != secret_id:
            raise SecretKeyError(
                f"The value of '{secret_id}' cannot be decrypted with this server's key "
                f"({KEY_VARIABLE}, or secret.key in the data directory): every process sharing "
                f"the database needs the same {KEY_VARIABLE}; or set the value again."
            )
        return value


def _key_file(path: Path) -> bytes:
    """The key in ``path``, made (mode 0600) when there is none. Made whole in a file of its
    own, then linked into place: two processes starting at once agree on one key, and none
    reads a half-written one."""
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # A draft of its own (mkstemp: a new file, 0600), written whole before it is linked:
        # once linked, the key file's inode is never written again.
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        draft = Path(name)
        with os.fdopen(fd, "wb") as f:
            f.write(Fernet.generate_key() + b"\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another process made it first: use its key
        finally:
            draft.unlink()
    key = path.read_bytes().strip()
    try:
        Fernet(key)
    except (ValueError, TypeError):
        raise ValueError(
            f"{path} does not hold a Fernet key: restore it from a backup (the stored "
            f"secrets' values need it), or set {KEY_VARIABLE}."
        ) from None
    return key
