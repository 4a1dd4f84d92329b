"""Secrets in pure terms: the references a document makes (``{"secret": "secret.…"}``), the
environment variables a secret may read, and the vault: values sealed to their secret,
keys from DHUB_SECRET_KEY (rotated with a list) or a key file made once, no key or value in
any message or repr."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from dhub.domain.secrets import env_name_problem, secret_ids, secret_ref
from dhub.services.secret_vault import SecretKeyError, SecretVault
from dhub.settings import Settings

A, B = "secret.01jaaaaaaaaaaaaaaaaaaaaaaa", "secret.01jbbbbbbbbbbbbbbbbbbbbbbb"


def test_secret_ids_finds_every_reference_once_in_order() -> None:
    doc = {
        "headers": {"Authorization": {"secret": A}, "X-Plain": "not a secret"},
        "env": [{"name": "TOKEN", "value": {"secret": B}}, {"secret": A}],
        "nested": {"deeper": [[{"secret": "secret.typo"}]]},
        "not_refs": [{"secret": A, "other": 1}, {"secret": 3}, "secret.01jcccc", {"Secret": A}],
    }
    assert secret_ids(doc) == [A, B, "secret.typo"]
    assert secret_ids("text") == [] and secret_ids(None) == []
    assert secret_ref({"secret": A}) == A and secret_ref({"secret": A, "x": 1}) is None


@pytest.mark.parametrize("name", ["DHUB_SECRET_GITHUB", "DHUB_SECRET_A1_B2"], ids=str)
def test_env_names_meant_for_secrets_are_allowed(name: str) -> None:
    assert env_name_problem(name) is None


@pytest.mark.parametrize(
    "name",
    ["DHUB_SECRET_KEY", "DHUB_SECRET_", "DHUB_SECRET_lower", "HOME", "DHUB_DATABASE_URL",
     "DHUB_SECRET_X\n", "DHUB_SECRET_X-Y"],
    ids=repr,
)  # fmt: skip
def test_other_env_names_are_refused(name: str) -> None:
    assert "DHUB_SECRET_" in (env_name_problem(name) or "")


def test_a_value_is_sealed_to_its_secret() -> None:
    vault = SecretVault([Fernet.generate_key()])
    sealed = vault.seal(A, "hunter2\nwith a newline")
    assert "hunter2" not in sealed
    assert vault.unseal(A, sealed) == "hunter2\nwith a newline"
    with pytest.raises(SecretKeyError) as caught:
        vault.unseal(B, sealed)  # moved under another secret
    assert "hunter2" not in str(caught.value) and sealed not in str(caught.value)
    with pytest.raises(SecretKeyError):
        SecretVault([Fernet.generate_key()]).unseal(A, sealed)  # another server's key
    with pytest.raises(SecretKeyError):
        vault.unseal(A, "not a token")


def test_keys_rotate_with_a_list() -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    sealed = SecretVault.from_key_text(old).seal(A, "v")
    rotated = SecretVault.from_key_text(f"{new}, {old}")
    assert rotated.unseal(A, sealed) == "v"
    assert SecretVault.from_key_text(new).unseal(A, rotated.seal(A, "w")) == "w"


def test_a_bad_key_is_refused_without_quoting_it() -> None:
    for text in ("not-a-key", ",", "short"):
        with pytest.raises(ValueError, match="DHUB_SECRET_KEY must be a Fernet key") as caught:
            SecretVault.from_key_text(text)
        assert text not in str(caught.value) or text == ","


def test_the_key_file_is_made_once_private_and_shared(tmp_path: Path) -> None:
    data = tmp_path / "data"
    vaults: list[SecretVault] = []
    start = threading.Barrier(16)

    def open_one() -> None:
        start.wait()  # all at once: one key wins, nobody reads a half-written one
        vaults.append(SecretVault.open(data, None))

    threads = [threading.Thread(target=open_one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    key_file = data / "secret.key"
    assert os.stat(key_file).st_mode & 0o777 == 0o600
    assert [p.name for p in data.iterdir()] == ["secret.key"]  # no drafts left
    assert len(vaults) == 16
    sealed = vaults[0].seal(A, "v")
    assert all(v.unseal(A, sealed) == "v" for v in vaults)
    assert SecretVault.open(data, None).unseal(A, sealed) == "v"  # found again on restart
    given = Fernet.generate_key().decode()
    assert SecretVault.open(data, given).unseal(A, SecretVault.from_key_text(given).seal(A, "x"))
    key_file.write_text("garbage")
    with pytest.raises(ValueError, match="does not hold a Fernet key"):
        SecretVault.open(data, None)


def test_the_key_is_in_no_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("DHUB_SECRET_KEY", key)
    settings = Settings.from_env(data_dir="/tmp/x", database_url="sqlite://")
    assert settings.secret_key == key and key not in repr(settings)


def test_a_value_is_in_no_repr_and_no_dump() -> None:
    from dhub.domain.resources import SecretSpec
    from dhub.services.secrets import Pending

    spec = SecretSpec.model_validate({"name": "s", "value": "hunter2"})
    assert spec.value == "hunter2"
    for shown in (repr(spec), str(spec), spec.model_dump_json(), repr(Pending("hunter2"))):
        assert "hunter2" not in shown
