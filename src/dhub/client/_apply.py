"""Pure helpers behind ``Client.apply_agent``: turn "make the stored agent be this document"
into one RFC 7396 merge patch."""

from __future__ import annotations

from typing import Any

# Mirrors dhub.domain.agent.SERVER_OWNED_FIELDS; copied rather than imported so the SDK does not
# pull in the server's domain package (and pydantic) for one tuple.
SERVER_OWNED_FIELDS = frozenset(
    ("id", "created_at", "updated_at", "owners", "my_share_scope", "is_builtin", "item", "version",
     "effective_markings")
)  # fmt: skip
# Only the marking endpoints change markings; the stored agent's own markings are never nulled.
READ_ONLY_FIELDS = SERVER_OWNED_FIELDS | {"markings"}
# Where an agent is: a document without them means "where it is" (an export leaves out the
# exporter's home folder, so another user's apply lands in theirs), never "move it".
PLACEMENT_FIELDS = frozenset(("folder_id", "collection_id"))


def strip_read_only(doc: dict[str, Any], current_markings: list[str]) -> dict[str, Any]:
    """The document without the envelope fields a GET returns, so `get` output can be applied.
    ``markings`` goes too when it already matches (nothing to change); different markings are
    sent so the server explains that only the marking endpoints change them."""
    return {
        k: v
        for k, v in doc.items()
        if k not in SERVER_OWNED_FIELDS
        and not (k == "markings" and isinstance(v, list) and sorted(v) == sorted(current_markings))
    }


def replacement_patch(stored: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """A merge patch that turns ``stored`` into ``doc``: every field of ``doc`` is set, and every
    field ``stored`` has but ``doc`` lacks is set to null (which resets it to its default)."""
    kept = READ_ONLY_FIELDS | PLACEMENT_FIELDS
    patch = {k: None for k in stored if k not in doc and k not in kept}
    patch.update(_replace(stored, doc))
    return patch


def _replace(stored: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    # Merge patches merge nested objects instead of replacing them, so a key the document
    # dropped inside e.g. ``agent`` or ``options`` must be nulled explicitly, at every depth.
    out: dict[str, Any] = {}
    for key, value in doc.items():
        old = stored.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            nested = {k: None for k in old if k not in value}
            nested.update(_replace(old, value))
            out[key] = nested
        else:
            out[key] = value
    return out
