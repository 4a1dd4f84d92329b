"""Shared building blocks of the published Agent schema."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, WithJsonSchema

VariableType = Literal["string", "number", "boolean", "object", "array"]
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
JsonObject = dict[str, Any]

# Numeric bounds are documented in the schema here but enforced by engine/validate.py, not by
# pydantic: the seed's own example response carries placeholder zeros (max_input_tokens: 0)
# that must still parse as a response, while a Create body gets precise, pointed errors.


def _bounded(kind: str, **bounds: float) -> WithJsonSchema:
    return WithJsonSchema({"type": kind, **bounds})


PositiveInt = Annotated[int, _bounded("integer", minimum=1)]
NonNegativeInt = Annotated[int, _bounded("integer", minimum=0)]
Ratio = Annotated[float | int, _bounded("number", exclusiveMinimum=0, exclusiveMaximum=1)]
SummaryTokens = Annotated[int, _bounded("integer", minimum=128, maximum=8192)]
# Durations accept ints and floats; ints stay ints so documents round-trip byte for byte.
PositiveSeconds = Annotated[float | int, _bounded("number", exclusiveMinimum=0)]
NonNegativeSeconds = Annotated[float | int, _bounded("number", minimum=0)]


class SpecModel(BaseModel):
    """A part of a user-written document: unknown fields are errors, not silently dropped, and
    values must have their JSON type ("5" is not a number, true is not 1), so what is stored is
    exactly what was checked."""

    model_config = ConfigDict(extra="forbid", strict=True)
