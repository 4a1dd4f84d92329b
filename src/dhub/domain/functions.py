"""Functions (tools, actors) and the anyOf item forms the seed allows for tools, actors, roles."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, GetJsonSchemaHandler, Tag
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from dhub.domain.base import JsonObject, SpecModel

# Known decorators are checked by engine/validate.py so the seed example (decorator "string")
# still parses as a response.
KNOWN_DECORATORS = ("retry", "timeout", "cache", "rate_limit")


class FunctionDecorator(SpecModel):
    decorator: str = Field(description="Platform behaviour wrapping the function.")
    name: str = Field(description="The function the decorator wraps.")
    arguments: JsonObject = Field(default={})


class FunctionSpec(SpecModel):
    source: str = Field(description="Python source defining the entry point.")
    inputs: JsonObject = Field(default={}, description="Parameter name -> JSON schema.")
    outputs: JsonObject = Field(default={}, description="Output name -> JSON schema.")
    dependencies: list[str] = Field(default=[], description="pip requirement strings.")
    decorators: list[FunctionDecorator] = Field(default=[])


class AgentResourceRef(SpecModel):
    """A reference to a stored resource by id, with its name for display."""

    id: str
    name: str


class AgentToolConfig(SpecModel):
    name: str
    description: str = ""
    type: Literal["python"] = "python"
    function: FunctionSpec
    require_browser: bool = False
    options: JsonObject = Field(default={})


class AgentActorConfig(SpecModel):
    name: str
    description: str = ""
    function: FunctionSpec
    confirmation_policy: Literal["confirm", "auto"] = "confirm"
    options: JsonObject = Field(default={})


# Tags name the union members; they also appear in pydantic error locations, where the
# JSON-pointer mapping (domain/validation.py) recognises and drops them.
STRING_TAG = "string-form"
REF_TAG = "reference-form"
INLINE_TAG = "inline-form"
OBJECT_TAG = "object-form"
ITEM_TAGS = frozenset({STRING_TAG, REF_TAG, INLINE_TAG, OBJECT_TAG})


class _AnyOf:
    """Publish the union as ``anyOf``, as the seed does: a dict that is an inline config is also
    an ``object``, so a JSON Schema ``oneOf`` would reject every inline tool."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        if "oneOf" in schema:
            schema["anyOf"] = schema.pop("oneOf")
        schema.pop("discriminator", None)
        return schema


def _item_form(value: Any) -> str:
    """Pick the most specific form deterministically, so a typo in an inline config is
    reported instead of the item silently degrading to a plain object."""
    if isinstance(value, str):
        return STRING_TAG
    if isinstance(value, dict):
        if "function" in value:
            return INLINE_TAG
        if "id" in value and set(value) <= {"id", "name"}:
            return REF_TAG
        return OBJECT_TAG
    if isinstance(value, AgentToolConfig | AgentActorConfig):
        return INLINE_TAG
    if isinstance(value, AgentResourceRef):
        return REF_TAG
    return OBJECT_TAG


ToolItem = Annotated[
    Annotated[str, Tag(STRING_TAG)]
    | Annotated[AgentResourceRef, Tag(REF_TAG)]
    | Annotated[AgentToolConfig, Tag(INLINE_TAG)]
    | Annotated[JsonObject, Tag(OBJECT_TAG)],
    Discriminator(_item_form),
    _AnyOf(),
]
ActorItem = Annotated[
    Annotated[str, Tag(STRING_TAG)]
    | Annotated[AgentResourceRef, Tag(REF_TAG)]
    | Annotated[AgentActorConfig, Tag(INLINE_TAG)]
    | Annotated[JsonObject, Tag(OBJECT_TAG)],
    Discriminator(_item_form),
    _AnyOf(),
]
RoleItem = Annotated[
    Annotated[str, Tag(STRING_TAG)]
    | Annotated[AgentResourceRef, Tag(REF_TAG)]
    | Annotated[JsonObject, Tag(OBJECT_TAG)],
    Discriminator(lambda v: STRING_TAG if isinstance(v, str) else _ref_or_object(v)),
    _AnyOf(),
]


def _ref_or_object(value: Any) -> str:
    form = _item_form(value)
    return REF_TAG if form == REF_TAG else OBJECT_TAG
