"""What else a knob's declaration says, after its type: `#: TYPE RANGE; FACT, FACT`.

    fixed     a resume refuses a change of it: it shapes what the run computes or how its
              checkpoints load (run.json; overview/manifest.py)
    machine   this machine's own (a path, a port, a program): left out of run.json, so a
              migration or a resume may change it
    bash      bash reads it: `config export` exports it to the scripts of bin/ (the other knobs
              reach them only inside the configuration it hands on)
    plugin    the rollout plugin reads it as itself: a field of PluginSettings and the key
              `shopsimrl_<name in lower case>` of the round's slime.yaml (rollout/settings.py)
    secret    never printed, exported, recorded or put on a command line (architecture §3);
              a name ending in one of SECRET_SUFFIXES must be declared one

A knob without `fixed` or `machine` is recorded in run.json, and a resume that changes it records
the change. Each place that needs one of these facts derives it from the declarations
(declarations.read_knobs), so adding a knob is its lines in env/defaults.env and `make readme-knobs`.
"""

from __future__ import annotations

FACTS = ("fixed", "machine", "bash", "plugin", "secret")
SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_WEBHOOK")
# Facts that contradict each other: a secret never reaches bash, and a knob is either the run's
# identity (fixed) or the machine's (machine).
EXCLUSIVE = (("fixed", "machine"), ("secret", "bash"))


class FactError(ValueError):
    """A fact the declarations cannot mean (a bug in env/defaults.env, not in a user's value)."""


def parse(text: str, name: str, where: str) -> frozenset[str]:
    """The facts after the `;` of a `#:` line (comma-separated words) -> a set; FactError names
    `where` when a word is unknown, two contradict each other, or a secret's name is not declared one."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    unknown = [w for w in words if w not in FACTS]
    if unknown:
        raise FactError(f"{where}: unknown fact {unknown[0]!r} (use {', '.join(FACTS)})")
    facts = frozenset(words)
    for a, b in EXCLUSIVE:
        if {a, b} <= facts:
            raise FactError(f"{where}: {name} cannot be both {a} and {b}")
    if name.endswith(SECRET_SUFFIXES) and "secret" not in facts:
        raise FactError(f"{where}: {name} is named like a secret: declare it one ('; secret')")
    return facts
