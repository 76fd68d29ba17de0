"""Reading YAML / ``--config`` strings as the types the config schema expects (``1e-4`` is a number, not a
string; ``true`` a boolean), before validation, so an override on the command line means what it says."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_INT = re.compile(r"^[+-]?\d+$")


def schema_types(schema: Mapping[str, Any]) -> set[str]:
    t = schema.get("type", ())
    return {t} if isinstance(t, str) else set(t)


def _scalar(value: str, types: set[str]) -> Any:
    """``value`` as the first schema type it spells; unchanged when it spells none (the validator names it)."""
    text = value.strip()
    if "integer" in types and _INT.match(text):
        return int(text)
    if "number" in types and _NUMBER.match(text):
        return int(text) if _INT.match(text) else float(text)
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if "null" in types and text.lower() in ("null", "~", "none"):
        return None
    return value


def coerce(value: Any, schema: Mapping[str, Any]) -> Any:
    """Walk ``value`` beside ``schema``, reading strings as the non-string types the schema expects; in
    free-form objects (``algorithms``' knobs) a string that spells a number becomes that number."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, Mapping) else None)
            if sub is not None:
                out[key] = coerce(item, sub)
            elif not props and isinstance(item, str) and _NUMBER.match(item.strip()):
                out[key] = _scalar(item, {"number"})
            elif not props and isinstance(item, (dict, list)):
                out[key] = coerce(item, {})
            else:
                out[key] = item
        return out
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
        return [coerce(v, items) for v in value]
    if isinstance(value, str):
        types = schema_types(schema)
        if types and "string" not in types:
            return _scalar(value, types)
    return value
