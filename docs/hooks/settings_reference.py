"""The configuration page's tables, generated from the settings classes when the site is built.

``mkdocs.yml`` runs this file as a hook: each ``<!-- settings: ClassName -->`` line of a page becomes
a table of that class's environment variables (name, type, default, description), so the page cannot
drift from ``speaker_transcripts/config.py``. ``python docs/hooks/settings_reference.py`` prints them.
"""

from __future__ import annotations

import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's settings, whichever package pip installed
from speaker_transcripts import config  # noqa: E402

MARKER = re.compile(r"^<!-- settings: (\w+) -->$", re.MULTILINE)
SETTINGS_CLASSES = {"ModelSettings": config.ModelSettings, "ServerSettings": config.ServerSettings}
AUTO = {"live_max_sessions", "live_lookahead_s"}  # None is spelled `auto` (ServerSettings._auto_is_unset)


def variable(name: str, field: FieldInfo) -> str:
    """The environment variable a field reads: its alias when it has one (HF_TOKEN), else its name."""
    alias = field.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return str(choices[0])
    return str(alias or name).upper()


def type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(arg) for arg in typing.get_args(annotation) if arg is not type(None))
    names = {"SecretStr": "secret", "Path": "path", "str": "text", "float": "number", "int": "integer", "bool": "`true` \\| `false`"}
    return names.get(getattr(annotation, "__name__", str(annotation)), getattr(annotation, "__name__", str(annotation)))


def default_text(name: str, field: FieldInfo) -> str:
    default = field.default
    if default is PydanticUndefined or default is None:
        return "`auto`" if name in AUTO else "–"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    return f"`{default}`"


def bounds(field: FieldInfo) -> str:
    """The range a value must lie in (pydantic's gt/ge/lt/le), as a short note."""
    words = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    notes = [f"{words[key]} {getattr(item, key)}" for item in field.metadata for key in words if getattr(item, key, None) is not None]
    return f" ({', '.join(notes)})" if notes else ""


def settings_table(settings: type) -> str:
    """A Markdown table of every field of ``settings``; a field without a description is an error."""
    rows = ["| variable | type | default | description |", "|---|---|---|---|"]
    for name, field in settings.model_fields.items():
        if not field.description:
            raise ValueError(f"{settings.__name__}.{name} has no description: give it Field(description=...)")
        description = field.description.replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{variable(name, field)}` | {type_name(field.annotation)}{bounds(field)} | {default_text(name, field)} | {description} |")
    return "\n".join(rows)


def render(markdown: str) -> str:
    return MARKER.sub(lambda match: settings_table(SETTINGS_CLASSES[match[1]]), markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: every page's Markdown before it is rendered."""
    return render(markdown)


if __name__ == "__main__":
    for class_name, settings in SETTINGS_CLASSES.items():
        print(f"## {class_name}\n\n{settings_table(settings)}\n")
