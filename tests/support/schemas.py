"""Validators for the JSON Schemas the output formats declare (findings, OCSF, ECS)."""

from __future__ import annotations

import gzip
import ipaddress
import json
import re
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path

import jsonschema
import referencing
from conftest import SAMPLES

from sse_forensics.report.jsonout import (
    ECS_VERSION,
)

DATA = Path(__file__).resolve().parents[1] / "data"


SCHEMAS = SAMPLES.parent / "docs" / "schemas"


NAMESPACE = "sse_forensics"


@cache
def _ecs_flat() -> dict[str, dict]:
    return json.loads(
        gzip.decompress((DATA / "ecs" / f"ecs_flat-{ECS_VERSION}.json.gz").read_bytes())
    )


def _leaves(doc: dict, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(dotted name, value) of every field; an object ECS types as one (``object``,
    ``flattened``, ``nested``) is a leaf."""
    ecs = _ecs_flat()
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and ecs.get(name, {}).get("type") not in (
            "object",
            "flattened",
            "nested",
        ):
            yield from _leaves(value, name + ".")
        else:
            yield name, value


_KEYWORD = ("keyword", "constant_keyword", "wildcard")


_TEXT = ("match_only_text", "text")


_INTEGER = ("long", "integer", "short", "byte", "unsigned_long")


_NUMBER = (*_INTEGER, "float", "double", "half_float", "scaled_float")


def _ecs_type_error(field: dict, value: object) -> str | None:
    kind = field["type"]
    if kind in _KEYWORD or kind in _TEXT:
        if not isinstance(value, str):
            return f"{kind} needs a string"
        limit = field.get("ignore_above")
        if limit and len(value) > limit:
            return f"longer than ignore_above {limit}: not indexed"
    elif kind in _INTEGER:
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{kind} needs an integer"
    elif kind in _NUMBER:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return f"{kind} needs a number"
    elif kind == "boolean":
        if not isinstance(value, bool):
            return "boolean needs true/false"
    elif kind == "ip":
        try:
            ipaddress.ip_address(value)  # type: ignore[arg-type]
        except ValueError:
            return f"{value!r} is no IP address"
    elif kind == "date":
        if not isinstance(value, str):
            return "date needs an ISO 8601 string"
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return f"{value!r} is no ISO 8601 date"
    elif kind in ("object", "flattened", "nested"):
        if not isinstance(value, dict | list):
            return f"{kind} needs an object"
    else:
        return f"type {kind} not checked by this test"
    pattern = field.get("pattern")
    if pattern and isinstance(value, str) and not re.fullmatch(pattern, value):
        return f"does not match {pattern}"
    allowed = [a["name"] for a in field.get("allowed_values", [])]
    if allowed and value not in allowed:
        return f"{value!r} is not one of the allowed values"
    return None


def ecs_errors(doc: dict) -> list[str]:
    """Every way ``doc`` breaks ECS: a field outside the project namespace that ECS does not
    define, a value of the wrong type (or not an array where ECS says one is not), a value
    outside ``allowed_values`` or the event types its category expects, a required field
    missing, a top-level key that is neither an ECS field set nor the namespace."""
    ecs = _ecs_flat()
    errors = []
    roots = {name.split(".")[0] for name in ecs}
    assert NAMESPACE not in roots, "the namespace is an ECS field set now: rename it"
    errors += [f"{key}: not an ECS field set" for key in doc if key not in roots | {NAMESPACE}]
    for name, value in _leaves({k: v for k, v in doc.items() if k != NAMESPACE}):
        field = ecs.get(name)
        if field is None:
            errors.append(f"{name}: no such ECS field")
            continue
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and "array" not in field["normalize"]:
            errors.append(f"{name}: ECS does not make it an array")
        errors += [f"{name}: {e}" for v in values if (e := _ecs_type_error(field, v))]
    errors += [
        f"{n}: required by ECS" for n, f in ecs.items() if f.get("required") and not _has(doc, n)
    ]
    categories = {a["name"]: a for a in ecs["event.category"]["allowed_values"]}
    event = doc.get("event", {})
    expected = {
        t
        for c in event.get("category", [])
        for t in categories.get(c, {}).get("expected_event_types", [])
    }
    errors += [
        f"event.type: {t!r} not expected for {event.get('category')}"
        for t in event.get("type", [])
        if t not in expected
    ]
    if doc.get("ecs", {}).get("version") != ECS_VERSION:
        errors.append(f"ecs.version: not {ECS_VERSION}")
    return errors


def _has(doc: dict, dotted: str) -> bool:
    node: object = doc
    if dotted in doc:
        return True
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@cache
def schema_validator(name: str):
    registry = referencing.Registry()
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        resource = referencing.Resource.from_contents(schema)
        registry = registry.with_resources([(path.name, resource), (schema["$id"], resource)])
    schema = json.loads((SCHEMAS / name).read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)
