"""The one error a knowledge operation raises for what its caller got wrong."""

from __future__ import annotations


class KnowledgeError(Exception):
    """A message for the model (a tool's error) or the user: what was wrong and what to do,
    never a stack, and never anything about resources the caller cannot read."""
