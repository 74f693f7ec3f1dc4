"""Settings declared once: a config dataclass's fields carry their default, bounds and help.

TRL's habit: the config is the documentation and the command line. ``option`` declares a
field; ``check`` enforces its bounds when the config is made (so the CLI and the library
refuse the same values); ``colbench.cli.options`` turns the fields into flags.

    @dataclass
    class Config:
        epochs: int = option(4, "Passes over the data.", min=1)
"""
from __future__ import annotations

from dataclasses import MISSING, field, fields
from typing import Any, Sequence


def option(
    default: Any,
    text: str,
    *,
    min: float | None = None,
    max: float | None = None,
    choices: Sequence[str] | None = None,
    flags: Sequence[str] | None = None,
) -> Any:
    """A dataclass field whose help text is its documentation (``help_of``, the CLI).

    ``min``/``max`` bound a number (inclusive), ``choices`` a string; ``flags`` names the
    command-line flags when ``--field-name`` is not the whole story (e.g. a short ``-k``).
    """
    metadata = {"help": text, "min": min, "max": max, "choices": tuple(choices) if choices else None,
                "flags": tuple(flags or ())}
    if isinstance(default, (list, dict, tuple)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def flag_of(name: str, prefix: str = "") -> str:
    """The command-line flag of a config field (cli/options.py builds the CLI with it)."""
    return "--" + (prefix + name).replace("_", "-")


def help_of(cls) -> dict[str, str]:
    return {f.name: f.metadata.get("help", "") for f in fields(cls)}


def default_of(f) -> Any:
    return f.default_factory() if f.default is MISSING else f.default


def check(config) -> None:
    """Raise ValueError (one line naming the setting) for a value outside its declared bounds."""
    for f in fields(config):
        value = getattr(config, f.name)
        if value is None or isinstance(value, bool):
            continue
        low, high, choices = f.metadata.get("min"), f.metadata.get("max"), f.metadata.get("choices")
        if low is not None and value < low:
            raise ValueError(f"{f.name} must be at least {low:g}; got {value!r}")
        if high is not None and value > high:
            raise ValueError(f"{f.name} must be at most {high:g}; got {value!r}")
        for item in value if isinstance(value, list) else [value]:  # a list field: each of its items
            if choices and item not in choices:
                raise ValueError(f"{f.name} must be one of {', '.join(choices)}; got {item!r}")
