"""Function specs (domain/function_spec.py, domain/call_schemas.py): entry points, parameters
derived from signatures and docstrings, call-time checks of inputs and outputs, create-time
decorator rules."""

from __future__ import annotations

import copy
import keyword
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from dhub.domain.call_schemas import CallInputError, CallOutputError, check_inputs, check_outputs
from dhub.domain.errors import InvalidInput
from dhub.domain.function_spec import (
    DECORATOR_RULES,
    SpecError,
    decorator_arguments,
    derive_parameters,
    entry_point,
    tool_definition,
)
from dhub.domain.functions import KNOWN_DECORATORS, AgentActorConfig, AgentToolConfig
from dhub.engine.validate import validate_agent_document
from tests.conftest import FIXTURES, load_json


def src(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def schema_of(source: str, entry: str = "f") -> dict[str, Any]:
    return derive_parameters(src(source), entry).schema


def input_problems(schema: dict[str, Any], inputs: Any) -> list[str]:
    try:
        check_inputs(schema, inputs)
    except CallInputError as exc:
        return [str(p) for p in exc.problems]
    return []


def output_problems(outputs: dict[str, Any], value: Any) -> list[str]:
    try:
        check_outputs(outputs, value)
    except CallOutputError as exc:
        return [str(p) for p in exc.problems]
    return []


# --- entry points ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "name", "entry"),
    [
        ("def helper(): ...\ndef lookup(): ...\ndef main(): ...", "lookup", "lookup"),
        ("def only(x): ...", "lookup", "only"),
        ("def only(x): ...", None, "only"),
        ("def a(): ...\ndef main(): ...", "lookup", "main"),
        ("import os\nclass C: ...\nX = 1\ndef main(): ...\ndef b(): ...", None, "main"),
        ("async def helper(): ...\ndef main(): ...", "lookup", "main"),
        ("def f(): ...\ndef f(x): ...", None, "f"),  # one name, defined twice
    ],
)
def test_entry_point_resolution(source: str, name: str | None, entry: str) -> None:
    assert entry_point(source, name) == entry


@pytest.mark.parametrize(
    ("source", "code", "says"),
    [
        ("x = 1\n", "no_entry_point", "defines no top-level functions"),
        ("def a(): ...\ndef b(): ...\n", "no_entry_point", "defines 'a', 'b'"),
        ("if True:\n    def main(): ...\n", "no_entry_point", "named 'lookup'"),
        ("def main(:\n    pass\n", "syntax_error", "line 1"),
        ("x = 1\n\ny = (\n", "syntax_error", "line 3"),
        ("async def lookup(): ...\n", "async_entry_point", "make it 'def lookup(...)'"),
    ],
)
def test_entry_point_errors_say_what_to_do(source: str, code: str, says: str) -> None:
    with pytest.raises(SpecError) as caught:
        entry_point(source, "lookup")
    assert caught.value.code == code
    assert caught.value.field == "function.source"
    assert says in str(caught.value)


def test_without_fallback_only_the_name_counts() -> None:
    assert entry_point("def main(x): ...\n", "main", fallback=False) == "main"
    with pytest.raises(SpecError, match=r"Define a top-level function 'main\(...\)'"):
        entry_point("def run(x): ...\n", "main", fallback=False)


# --- schemas from type hints -------------------------------------------------------------------

HINTS: list[tuple[str, dict[str, Any]]] = [
    ("str", {"type": "string"}),
    ("int", {"type": "integer"}),
    ("float", {"type": "number"}),
    ("bool", {"type": "boolean"}),
    ("list", {"type": "array"}),
    ("list[int]", {"type": "array", "items": {"type": "integer"}}),
    ("typing.List[str]", {"type": "array", "items": {"type": "string"}}),
    ("set[str]", {"type": "array", "uniqueItems": True, "items": {"type": "string"}}),
    ("tuple[int, ...]", {"type": "array", "items": {"type": "integer"}}),
    ("tuple[int, str]", {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                         "minItems": 2, "maxItems": 2}),
    ("dict", {"type": "object"}),
    ("dict[str, float]", {"type": "object", "additionalProperties": {"type": "number"}}),
    ("dict[str, Any]", {"type": "object"}),
    ("Optional[int]", {"type": ["integer", "null"]}),
    ("int | None", {"type": ["integer", "null"]}),
    ("None | list[str]", {"type": ["array", "null"], "items": {"type": "string"}}),
    ("Union[int, str]", {"type": ["integer", "string"]}),
    ("int | str | None", {"type": ["integer", "string", "null"]}),
    ("list[int] | dict[str, int]", {"anyOf": [
        {"type": "array", "items": {"type": "integer"}},
        {"type": "object", "additionalProperties": {"type": "integer"}},
    ]}),
    ("Literal['a', 'b']", {"type": "string", "enum": ["a", "b"]}),
    ("Literal[1, 'a']", {"enum": [1, "a"]}),
    ("Optional[Literal['a']]", {"type": ["string", "null"], "enum": ["a", None]}),
    ("Annotated[int, 'how many']", {"type": "integer", "description": "how many"}),
    ("'list[int]'", {"type": "array", "items": {"type": "integer"}}),  # a forward reference
    ("Any", {}),
    ("Order", {}),  # a class JSON cannot describe: anything
    ("int | Any", {}),
]  # fmt: skip


@pytest.mark.parametrize(("hint", "expected"), HINTS)
def test_schema_from_a_type_hint(hint: str, expected: dict[str, Any]) -> None:
    schema = schema_of(f"def f(x: {hint}): ...")
    assert schema["properties"] == {"x": expected}


def test_defaults_make_parameters_optional() -> None:
    schema = schema_of(
        """
        def f(a, b: int, c: str = "x", d: list[int] = [1, 2], e: tuple = (1, "a"),
              g: str = None, h: dict = dict(), *, k: bool = False, m: float) -> dict:
            ...
        """
    )
    assert schema["required"] == ["a", "b", "m"]
    props = schema["properties"]
    assert props["a"] == {}
    assert props["c"] == {"type": "string", "default": "x"}
    assert props["d"] == {"type": "array", "items": {"type": "integer"}, "default": [1, 2]}
    assert props["e"] == {"type": "array", "default": [1, "a"]}
    assert props["g"] == {"type": ["string", "null"], "default": None}
    assert props["h"] == {"type": "object"}  # a call is no JSON default, but still optional
    assert props["k"] == {"type": "boolean", "default": False}
    assert schema["additionalProperties"] is False
    Draft202012Validator.check_schema(schema)


def test_star_args_are_left_out_and_kwargs_open_the_schema() -> None:
    schema = schema_of("def f(a: int, *args: int, **kwargs: str): ...")
    assert list(schema["properties"]) == ["a"]
    assert schema["additionalProperties"] is True
    assert input_problems(schema, {"a": 1, "anything": "goes"}) == []


def test_positional_only_parameters_cannot_be_passed_by_name() -> None:
    with pytest.raises(SpecError) as caught:
        derive_parameters("def f(a, b, /, c): ...\n", "f")
    assert caught.value.code == "bad_signature"
    assert "'a', 'b'" in caught.value.message and "remove the '/'" in caught.value.message


# --- descriptions from docstrings --------------------------------------------------------------

GOOGLE = '''
def refund(order_id: str, amount: float, *items: str, reason: str = "") -> dict:
    """Refund an order,
    fully or in part.

    Money moves: this needs a person's confirmation.

    Args:
        order_id (str): The order to refund,
            e.g. A-1001.
        amount: How much, in the order's currency.
        *items: Ignored.
        reason (str, optional): Why.

    Returns:
        dict: The refund.
    """
'''

REST = '''
def refund(order_id, amount, reason=""):
    """Refund an order, fully or in part.

    :param order_id: The order to refund,
        e.g. A-1001.
    :param float amount: How much, in the order's currency.
    :type amount: float
    :param reason: Why.
    :returns: The refund.
    """
'''

NUMPY = '''
def refund(order_id, amount, reason=""):
    """
    Refund an order, fully or in part.

    Parameters
    ----------
    order_id : str
        The order to refund,
        e.g. A-1001.
    amount : float
        How much, in the order's currency.
    reason : str, optional
        Why.

    Returns
    -------
    dict
        The refund.
    """
'''


@pytest.mark.parametrize("source", [GOOGLE, REST, NUMPY], ids=["google", "rest", "numpy"])
def test_descriptions_from_docstrings(source: str) -> None:
    parameters = derive_parameters(src(source), "refund")
    assert parameters.description == "Refund an order, fully or in part."
    props = parameters.schema["properties"]
    assert props["order_id"]["description"] == "The order to refund, e.g. A-1001."
    assert props["amount"]["description"] == "How much, in the order's currency."
    assert props["reason"]["description"] == "Why."
    assert parameters.schema["required"] == ["order_id", "amount"]


def test_a_docstring_that_starts_with_a_section_has_no_description() -> None:
    source = '''
    def f(x: int):
        """Args:
            x: The x.
        """
    '''
    parameters = derive_parameters(src(source), "f")
    assert parameters.description == ""
    assert parameters.schema["properties"]["x"] == {"type": "integer", "description": "The x."}


# --- tool definitions: explicit inputs win -------------------------------------------------------


def tool(**function: Any) -> AgentToolConfig:
    return AgentToolConfig.model_validate(
        {"name": "lookup", "function": {"source": GOOGLE.replace("refund", "lookup"), **function}}
    )


def test_tool_definition_from_the_signature() -> None:
    definition = tool_definition(tool())
    assert definition["name"] == "lookup"
    assert definition["description"] == "Refund an order, fully or in part."
    assert definition["parameters"]["required"] == ["order_id", "amount"]
    actor = AgentActorConfig.model_validate(
        {"name": "pay", "function": {"source": "def main(amount: float):\n    'Pay.'\n"}}
    )
    assert tool_definition(actor) == {
        "name": "pay",
        "description": "Pay.",
        "parameters": {
            "type": "object",
            "properties": {"amount": {"type": "number"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    }


def test_explicit_inputs_win_over_the_signature() -> None:
    inputs = {"id": {"type": "string"}, "limit": {"type": "integer", "default": 10}}
    item = tool(inputs=inputs).model_copy(update={"description": "Look an order up"})
    assert tool_definition(item) == {
        "name": "lookup",
        "description": "Look an order up",
        "parameters": {
            "type": "object",
            "properties": inputs,
            "required": ["id"],
            "additionalProperties": False,
        },
    }


# --- generated signatures: the derived schema accepts the declared types, rejects others ----------

finite = st.floats(allow_nan=False, allow_infinity=False)
words = st.text(max_size=5)
# hint -> (values of that type, values of another type)
TYPED: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    "str": (words, st.integers() | st.booleans() | st.none()),
    "int": (st.integers(), words | st.booleans() | finite.filter(lambda f: not f.is_integer())),
    "float": (finite | st.integers(), words | st.booleans() | st.lists(st.integers())),
    "bool": (st.booleans(), st.integers() | words),
    "list[int]": (st.lists(st.integers()), st.lists(words, min_size=1) | words),
    "dict[str, float]": (st.dictionaries(words, finite), st.dictionaries(words, words, min_size=1)),
    "Optional[str]": (st.none() | words, st.integers() | st.lists(words)),
    "int | None": (st.none() | st.integers(), words),
    "Literal['a', 'b']": (st.sampled_from(["a", "b"]), words.filter(lambda w: w not in "ab")),
    "tuple[int, str]": (st.tuples(st.integers(), words).map(list), st.lists(words, min_size=3)),
}
names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n)
)


@st.composite
def signatures(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, bool]]]:
    params = draw(
        st.lists(
            st.tuples(names, st.sampled_from(sorted(TYPED)), st.booleans()),
            min_size=1,
            max_size=6,
            unique_by=lambda p: p[0],
        )
    )
    params.sort(key=lambda p: p[2])  # parameters without defaults first, as Python wants
    parts = []
    for name, hint, has_default in params:
        default = f" = {draw(TYPED[hint][0])!r}" if has_default else ""
        parts.append(f"{name}: {hint}{default}")
    return f"def f({', '.join(parts)}):\n    return None\n", params


@settings(max_examples=150)
@given(signatures(), st.data())
def test_derived_schema_accepts_declared_types_and_rejects_others(
    signature: tuple[str, list[tuple[str, str, bool]]], data: st.DataObject
) -> None:
    source, params = signature
    schema = derive_parameters(source, "f").schema
    Draft202012Validator.check_schema(schema)
    assert schema["required"] == [n for n, _, has_default in params if not has_default]
    defaults = {n: s["default"] for n, s in schema["properties"].items() if "default" in s}
    assert set(defaults) == {n for n, _, has_default in params if has_default}

    good = {
        n: data.draw(TYPED[hint][0])
        for n, hint, has_default in params
        if not has_default or data.draw(st.booleans())
    }
    assert input_problems(schema, good) == []
    assert input_problems(schema, {**defaults, **good}) == []  # defaults fit their own schema

    name, hint, _ = data.draw(st.sampled_from(params))
    wrong = data.draw(TYPED[hint][1])
    problems = input_problems(schema, {**good, name: wrong})
    assert problems and all(p.startswith(f"inputs.{name}") for p in problems)

    required = [n for n, _, has_default in params if not has_default]
    if required:
        gone = data.draw(st.sampled_from(required))
        missing = {k: v for k, v in good.items() if k != gone}
        assert input_problems(schema, missing) == [f"inputs.{gone}: is required, but was not given"]


# --- call-time checks: messages name the field ---------------------------------------------------


def test_input_errors_name_every_field_at_once() -> None:
    schema = schema_of(
        """
        def f(amount: int, items: list[dict[str, int]], mode: Literal["a", "b"] = "a",
              when: float | None = None):
            ...
        """
    )
    problems = input_problems(
        schema,
        {"amount": "ten", "items": [{"n": 1}, {"n": "x"}], "mode": "c", "when": "now", "xtra": 1},
    )
    assert problems == [
        "inputs.amount: should be an integer, got 'ten'",
        "inputs.items[1].n: should be an integer, got 'x'",
        "inputs.mode: should be one of 'a', 'b', got 'c'",
        "inputs.when: should be a number or null, got 'now'",
        "inputs.xtra: is not a parameter of this function (it takes: amount, items, mode, when)",
    ]
    assert input_problems(schema, {}) == [
        "inputs.amount: is required, but was not given",
        "inputs.items: is required, but was not given",
    ]
    assert input_problems(schema, [1]) == [
        "inputs: should be an object of named arguments, got an array"
    ]


def test_input_errors_for_hand_written_schemas() -> None:
    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "pattern": "@"},
            "count": {"type": "integer", "minimum": 1, "maximum": 5},
            "choice": {"oneOf": [{"type": "integer"}, {"type": "string", "minLength": 2}]},
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
    problems = input_problems(
        schema, {"email": "nope", "count": 9, "choice": "x", "address": {"town": "Oslo"}}
    )
    assert problems == [
        "inputs.address.city: is required, but missing (given: 'town')",
        "inputs.address.town: is not allowed here (allowed: city)",
        "inputs.choice: matches none of the allowed forms; closest: inputs.choice: "
        "should have at least 2 characters, got 'x'",
        "inputs.count: should be at most 5, got 9",
        "inputs.email: should match the pattern '@', got 'nope'",
    ]


def test_output_errors_name_the_output() -> None:
    outputs = {"total": "number", "rows": {"type": "array", "items": {"type": "object"}}}
    assert output_problems(outputs, {"total": 3, "rows": [{}], "extra": "allowed"}) == []
    assert output_problems(outputs, {"total": "3", "rows": [1]}) == [
        "outputs.rows[0]: should be an object, got 1",
        "outputs.total: should be a number, got '3'",
    ]
    assert output_problems(outputs, {"sq": 1}) == [
        "outputs.rows: missing from the result (it has 'sq')",
        "outputs.total: missing from the result (it has 'sq')",
    ]
    assert output_problems(outputs, 42) == [
        "outputs: the function returned 42; it must return an object holding 'total', 'rows'"
    ]
    assert output_problems({}, "anything") == []


def test_a_schema_dict_changed_after_a_call_is_checked_anew() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert input_problems(schema, {"a": 1}) == []
    schema["properties"]["a"] = {"type": "string"}
    assert input_problems(schema, {"a": 1}) == ["inputs.a: should be a string, got 1"]


# The fast path (a compiled predicate) must never accept what jsonschema rejects.
scalars = st.sampled_from([0, 1, 1.0, 0.0, 2.5, True, False, None, "", "1", "a"])
json_values = st.recursive(
    scalars | st.integers() | words,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=8,
)
type_names = st.sampled_from(["string", "number", "integer", "boolean", "object", "array", "null"])
leaf_schemas: st.SearchStrategy[Any] = (
    st.builds(lambda t: {"type": t}, type_names)
    | st.builds(lambda ts: {"type": ts}, st.lists(type_names, min_size=1, max_size=3, unique=True))
    | st.builds(lambda e: {"enum": e}, st.lists(scalars | st.just([1]), min_size=1, max_size=3))
    | st.builds(lambda c: {"const": c}, scalars | st.just({"a": 1}))
    | st.just({})
    | st.booleans()
)


def composite(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.sampled_from(["a", "b", "c"])
    return (
        st.fixed_dictionaries(
            {"properties": st.dictionaries(keys, inner, max_size=3)},
            optional={
                "type": st.just("object"),
                "required": st.lists(keys, max_size=2, unique=True),
                "additionalProperties": st.booleans() | inner,
            },
        )
        | st.fixed_dictionaries(
            {"items": inner},
            optional={
                "type": st.just("array"),
                "prefixItems": st.lists(inner, min_size=1, max_size=2),
                "minItems": st.integers(0, 2),
                "maxItems": st.integers(0, 3),
            },
        )
        | st.builds(lambda subs: {"anyOf": subs}, st.lists(inner, min_size=1, max_size=3))
    )


@settings(max_examples=400)
@given(st.recursive(leaf_schemas, composite, max_leaves=6), json_values)
def test_call_checks_agree_with_jsonschema(schema: Any, value: Any) -> None:
    wrapped = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    valid = Draft202012Validator(wrapped).is_valid({"x": value})
    problems = input_problems(wrapped, {"x": value})
    assert (problems == []) == valid, problems
    assert all(p.startswith("inputs.x") for p in problems), (schema, value, problems)


# --- create-time rules, through the validator the API uses ---------------------------------------


def errors_of(doc: dict[str, Any], part: str = "code") -> dict[str, str]:
    """Location -> code (or message) of each error ``validate_agent_document`` raises."""
    with pytest.raises(InvalidInput) as caught:
        validate_agent_document(doc)
    return {e.loc: getattr(e, part) for e in caught.value.errors}


def messages_of(doc: dict[str, Any]) -> dict[str, str]:
    return errors_of(doc, "message")


def react() -> dict[str, Any]:
    return copy.deepcopy(load_json(FIXTURES / "valid" / "react_support.json"))


def workflow() -> dict[str, Any]:
    return copy.deepcopy(load_json(FIXTURES / "valid" / "workflow_triage.json"))


TOOL = "/agent/tools/0/function"


def test_decorator_rules_cover_the_known_decorators() -> None:
    assert set(DECORATOR_RULES) == set(KNOWN_DECORATORS)
    filled = {"attempts": 3, "delay": 0, "backoff": "fixed"}
    assert decorator_arguments("retry", {"attempts": 3}) == filled


def test_valid_decorators_pass() -> None:
    doc = react()
    doc["agent"]["tools"][0]["function"]["decorators"] = [
        {"decorator": "retry", "name": "lookup_order", "arguments": {"attempts": 2, "delay": 0.5,
                                                                     "backoff": "exponential"}},
        {"decorator": "timeout", "name": "lookup_order", "arguments": {"seconds": 2}},
        {"decorator": "cache", "name": "lookup_order", "arguments": {"ttl": 60}},
        {"decorator": "rate_limit", "name": "lookup_order", "arguments": {"calls": 5, "period": 1}},
    ]  # fmt: skip
    validate_agent_document(doc)


def test_decorator_argument_errors_point_at_the_argument() -> None:
    doc = react()
    doc["agent"]["tools"][0]["function"]["decorators"] = [
        {"decorator": "retry", "name": "lookup_order", "arguments": {"attempts": 0, "tries": 3,
                                                                     "backoff": "random"}},
        {"decorator": "timeout", "name": "lookup_order", "arguments": {"seconds": True}},
        {"decorator": "cache", "name": "lookup_order", "arguments": {"ttl": -1}},
        {"decorator": "rate_limit", "name": "lookup_order", "arguments": {"calls": 1.5}},
        {"decorator": "timeout", "name": "lookup_order", "arguments": {"seconds": 1}},
    ]  # fmt: skip
    assert errors_of(doc) == {
        f"{TOOL}/decorators/0/arguments/attempts": "bad_decorator_argument",
        f"{TOOL}/decorators/0/arguments/tries": "unknown_decorator_argument",
        f"{TOOL}/decorators/0/arguments/backoff": "bad_decorator_argument",
        f"{TOOL}/decorators/1/arguments/seconds": "bad_decorator_argument",
        f"{TOOL}/decorators/2/arguments/ttl": "bad_decorator_argument",
        f"{TOOL}/decorators/3/arguments/calls": "bad_decorator_argument",
        f"{TOOL}/decorators/3/arguments/period": "missing_decorator_argument",
        f"{TOOL}/decorators/4/decorator": "duplicate_decorator",
    }
    messages = messages_of(doc)
    assert messages[f"{TOOL}/decorators/0/arguments/attempts"] == (
        "retry's 'attempts' must be a whole number, at least 1; got 0."
    )
    assert messages[f"{TOOL}/decorators/0/arguments/tries"] == (
        "'tries' is not an argument of retry: use attempts, delay, backoff."
    )
    assert messages[f"{TOOL}/decorators/3/arguments/period"] == (
        "rate_limit needs 'period' (a number of seconds, more than 0): add it to arguments."
    )


def test_decorators_wrap_the_entry_point() -> None:
    doc = react()
    actor = doc["agent"]["actors"][0]["function"]
    actor["decorators"] = [{"decorator": "timeout", "name": "refund", "arguments": {"seconds": 5}}]
    loc = "/agent/actors/0/function/decorators/0/name"
    assert messages_of(doc) == {
        loc: "Decorators wrap the entry point 'issue_refund': set name to 'issue_refund' "
        "(got 'refund')."
    }
    assert errors_of(doc) == {loc: "decorator_name"}


def test_an_unknown_decorator_is_its_only_error() -> None:
    doc = react()
    doc["agent"]["tools"][0]["function"]["decorators"] = [
        {"decorator": "memo", "name": "f", "arguments": {"size": -1}}
    ]
    assert errors_of(doc) == {f"{TOOL}/decorators/0/decorator": "unknown_decorator"}


def test_functions_in_workflow_nodes_are_checked() -> None:
    doc = workflow()
    tool_item = {
        "name": "notify",
        "function": {
            "source": "def helper(): ...\ndef other(): ...\n",
            "inputs": {"text": {"type": "strin"}, "n": 3},
            "outputs": {"ok": "bool"},
            "decorators": [{"decorator": "retry", "name": "notify"}],
        },
    }
    doc["nodes"].append({"id": "notify", "type": "tool_call", "config": {"tool": tool_item}})
    doc["edges"].append({"source": "classify", "target": "notify"})
    i = len(doc["nodes"]) - 1
    at = f"/nodes/{i}/config/tool/function"
    assert errors_of(doc) == {
        f"{at}/source": "no_entry_point",
        f"{at}/inputs/text/type": "invalid_schema",  # pointing into the schema
        f"{at}/inputs/n": "invalid_schema",
        f"{at}/outputs/ok": "invalid_schema",
        f"{at}/decorators/0/arguments/attempts": "missing_decorator_argument",
    }
    assert "Unknown type 'bool'" in messages_of(doc)[f"{at}/outputs/ok"]


def test_derived_signatures_are_checked_at_create_time() -> None:
    doc = react()
    doc["agent"]["actors"][0]["function"]["source"] = "def issue_refund(order_id, /): ...\n"
    assert errors_of(doc) == {"/agent/actors/0/function/source": "bad_signature"}
    doc["agent"]["actors"][0]["function"]["inputs"] = {"order_id": {"type": "string"}}
    validate_agent_document(doc)  # explicit inputs: the signature is not read


def test_code_nodes_define_main() -> None:
    doc = workflow()
    i = next(i for i, n in enumerate(doc["nodes"]) if n["type"] == "code")
    doc["nodes"][i]["config"]["source"] = "def classify(text):\n    return {}\n"
    doc["nodes"][i]["config"]["outputs"] = {"category": "string", "urgent": {"type": "bool"}}
    assert errors_of(doc) == {
        f"/nodes/{i}/config/source": "no_entry_point",
        f"/nodes/{i}/config/outputs/urgent/type": "invalid_schema",
    }
    message = messages_of(doc)[f"/nodes/{i}/config/source"]
    assert message.startswith("Define a top-level function 'main(...)'")


def test_dependencies_must_be_pip_requirements() -> None:
    doc = react()
    doc["agent"]["tools"][0]["function"]["dependencies"] = ["requests>=2", "not a requirement!!"]
    triage = workflow()
    triage["nodes"][1]["config"]["dependencies"] = ["python-dateutil==2.9.0.post0", "x=="]
    assert errors_of(doc) == {f"{TOOL}/dependencies/1": "bad_requirement"}
    assert errors_of(triage) == {"/nodes/1/config/dependencies/1": "bad_requirement"}
    assert "write it like 'name==1.2'" in messages_of(triage)["/nodes/1/config/dependencies/1"]
