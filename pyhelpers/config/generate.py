"""Writes pyhelpers/config/knobs.py from env/defaults.env: one typed, documented attribute per
knob, its type from the knob's `#:` line (types.py), the fields of the knobs the rollout plugin
reads (facts.py: `plugin`), and the declarations themselves. defaults.env stays the one source of
names, types, defaults, docs and facts; `make readme-knobs` regenerates this module with README's
table, and tests/test_config_typed.py fails when the committed module is stale."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from pyhelpers.config.declarations import Knob

# `#:` kind -> (the attribute's annotation, the Config method that converts the raw string).
# A path `or empty` is None when empty (the knob is off), every other string kind stays str
# (an empty string where `or empty` allows it).
_TYPED = {"int": ("int", "_int"), "float": ("float", "_float"), "flag": ("bool", "_flag"), "path": ("Path", "_path")}

HEADER = '''"""Every knob of env/defaults.env as a typed, read-only attribute of the resolved Config.

GENERATED from env/defaults.env by `make readme-knobs` (pyhelpers/config/generate.py): do not
edit; change the knob's lines in env/defaults.env and regenerate. Each value is converted once,
on first read, by the Config's converters (pyhelpers/config/load.py), which name the knob and
its fix when a value does not convert; `make check` has validated every value before a run
starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


class Knobs:
    """The knobs, by section. Config (load.py) supplies the raw values and the converters."""

    def _raw(self, name: str) -> str:
        raise NotImplementedError

    def _int(self, name: str) -> int:
        raise NotImplementedError

    def _float(self, name: str) -> float:
        raise NotImplementedError

    def _flag(self, name: str) -> bool:
        raise NotImplementedError

    def _path(self, name: str) -> Path:
        raise NotImplementedError

    def _path_or_none(self, name: str) -> Path | None:
        raise NotImplementedError
'''


def _attribute(knob: Knob) -> str:
    kind = knob.type.kind if knob.type else "text"
    empty_ok = bool(knob.type and knob.type.text.endswith("or empty"))
    annotation, convert = _TYPED.get(kind, ("str", "_raw"))
    if kind == "path" and empty_ok:
        annotation, convert = "Path | None", "_path_or_none"
    declared = f"{knob.type.text}; " if knob.type else ""
    doc = f"{knob.doc} ({declared}default: {knob.default or '(empty)'})".replace("\\", "\\\\").replace('"""', "'''")
    lines = textwrap.wrap(doc, width=100 - 8, break_on_hyphens=False, break_long_words=False)
    body = lines[0] if len(lines) == 1 else "\n".join([lines[0], *(" " * 8 + line for line in lines[1:])]) + "\n" + " " * 8
    return (f"    @cached_property\n    def {knob.name}(self) -> {annotation}:\n"
            f'        """{body}"""\n        return self.{convert}("{knob.name}")\n')


# `#:` kind -> the type of a plugin field: slime's YAML holds no Path, and a flag is a bool.
_PLUGIN_TYPES = {"int": "int", "float": "float", "flag": "bool"}

PLUGIN_HEADER = '''

@dataclass(frozen=True)
class PluginKnobs:
    """The knobs the rollout plugin reads as themselves (`plugin` on their `#:` line): the fields
    PluginSettings (rollout/settings.py) inherits, each the YAML key shopsimrl_<field>. No default:
    the driver writes every one from the resolved Config."""
'''


def _plugin_fields(knobs: Mapping[str, Knob]) -> str:
    fields = [f"    {k.name.lower()}: {_PLUGIN_TYPES.get(k.type.kind if k.type else 'text', 'str')}  # {k.name}\n"
              for k in knobs.values() if k.has("plugin")]
    return PLUGIN_HEADER + ("\n" + "".join(fields) if fields else "")


DECLARED_HEADER = """

# The declarations themselves, as this generator parsed them, and the digest of the file it read:
# read_knobs (declarations.py) takes them from here while env/defaults.env still has that digest, so the
# processes of a run do not parse the file again (an edited file is parsed: digests differ).
"""


def source(knobs: Mapping[str, Knob], digest: str) -> str:
    """The text of pyhelpers/config/knobs.py for these knobs (file order, a comment per section),
    parsed from the file whose sha256 is `digest`."""
    parts, section = [HEADER], None
    for knob in knobs.values():
        if knob.section != section:
            section = knob.section
            parts.append(f"\n    # --- {section} ---\n")
        parts.append("\n" + _attribute(knob))
    parts.append(_plugin_fields(knobs))
    parts.append(DECLARED_HEADER)
    parts.append(f"SOURCE_SHA256 = {digest!r}\n")
    parts.append("# (name, default, doc, section, the type of the `#:` line or None, its facts, the menu's brief)\n")
    parts.append("DECLARED: tuple[tuple[str, str, str, str, str | None, tuple[str, ...], str], ...] = (\n")
    for k in knobs.values():
        parts.append(f"    ({k.name!r}, {k.default!r}, {k.doc!r}, {k.section!r}, "
                     f"{(k.type.text if k.type else None)!r}, {tuple(sorted(k.facts))!r}, {k.brief!r}),\n")
    parts.append(")\n")
    return "".join(parts)
