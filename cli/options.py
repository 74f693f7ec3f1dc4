"""Flags from a config dataclass (colbench.options): each field becomes one option with its
default, bounds and help, so nothing is declared twice.

    @app.command("fit")
    @flags_from(CriticConfig)
    def fit(config: CriticConfig, as_json: bool = typer.Option(False, "--json")):
        ...

The command's own parameters come first, the config's fields follow. ``into`` names the
parameter the config fills (default: the first), ``prefix`` prefixes its flags, and
``defaults`` (an instance) overrides the fields' defaults, so one command can take two
configs (``--critic-epochs``, ``--policy-epochs``) by stacking the decorator.
"""
from __future__ import annotations

import functools
import inspect
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import typer

from colbench.options import default_of, flag_of


def flags_from(config_cls, *, into: str | None = None, prefix: str = "", exclude: set[str] = frozenset(),
               defaults=None):
    hints = typing.get_type_hints(config_cls)
    chosen = [f for f in fields(config_cls) if f.init and f.name not in exclude]
    key = prefix.replace("-", "_")

    def decorate(command):
        own_hints = typing.get_type_hints(command)
        params = list(inspect.signature(command).parameters.values())
        target = into or params[0].name
        own = [
            p.replace(annotation=own_hints.get(p.name, p.annotation), kind=inspect.Parameter.KEYWORD_ONLY)
            for p in params
            if p.name != target
        ]
        taken = {p.name for p in own}
        generated = []
        for f in chosen:
            if key + f.name in taken:
                raise TypeError(
                    f"{command.__name__} declares --{key + f.name} itself and through {config_cls.__name__}"
                )
            generated.append(_parameter(f, hints[f.name], key + f.name, prefix, defaults))
        # The first (innermost) layer declares --config; stacked layers read the same file, each its own section.
        declares_file = CONFIG_FILE not in taken
        # Every layer's section, so the top level tells a section from a misspelt one (filled as layers stack).
        sections = set() if declares_file else command.config_sections
        if declares_file:
            generated += [
                inspect.Parameter(
                    CONFIG_FILE,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=Path,
                    default=typer.Option(
                        None,
                        "--config",
                        help=(
                            "A YAML file of settings: the flags' names (with _ or -), prefixed ones (--critic-*,"
                            " --policy-*) in a section of that name (critic:, policy:). Flags typed on the command line"
                            " win."
                        )
                    )
                ),
                inspect.Parameter(CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
            ]
        section = prefix.rstrip("-") or None
        if section:
            sections.add(section)

        @functools.wraps(command)
        def run(**values):
            settings = {f.name: values.pop(key + f.name) for f in chosen}
            path, context = (
                (values.pop(CONFIG_FILE), values.pop(CONTEXT))
                if declares_file
                else (values[CONFIG_FILE], values[CONTEXT])
            )
            if path is not None:
                given = {f.name: _given(context, key + f.name) for f in chosen}
                from_file = read_settings(path, section, {f.name: hints[f.name] for f in chosen}, sections)
                settings |= {name: value for name, value in from_file.items() if not given[name]}
            if defaults is not None:
                settings = {f.name: getattr(defaults, f.name) for f in fields(config_cls) if f.init} | settings
            return command(**{target: config_cls(**settings)}, **values)

        every = own + generated
        run.__signature__ = inspect.Signature(every)
        run.__annotations__ = {p.name: p.annotation for p in every}  # resolved types, for Typer's get_type_hints
        del run.__wrapped__  # Typer must read the new signature, not the command's
        run.config_sections = sections
        return run

    return decorate


CONFIG_FILE, CONTEXT = "config_file", "config_context"


def _given(context, name: str) -> bool:
    """Was the flag typed on the command line (or set through its environment variable)?"""
    source = context.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def read_settings(path: Path, section: str | None, types: dict[str, Any],
                  sections: set[str] = frozenset()) -> dict[str, Any]:
    """A config file's settings for one config (its top level, or one section), typed like the fields;
    ``sections``: the other configs' sections, which the top level skips."""
    import yaml

    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ValueError(f"--config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ValueError(f"--config {path}{where}: not YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(document, dict):
        raise ValueError(f"--config {path}: expected a mapping of settings, got {type(document).__name__}")
    values = document.get(section, {}) if section else document
    if not isinstance(values, dict):
        raise ValueError(f"--config {path}: {section}: expected a mapping of settings")
    settings = {}
    for name, value in values.items():
        field_name = str(name).replace("-", "_")
        if field_name not in types:
            if section is None and isinstance(value, dict) and field_name in sections:
                continue  # a section of a stacked config (critic:, policy:), read by its own layer
            where = f"{section}." if section else ""
            raise ValueError(f"--config {path}: unknown setting {where}{name} (see --help for the flags)")
        settings[field_name] = _typed(value, types[field_name], f"--config {path}: {name}")
    return settings


def _typed(value, annotation, where: str):
    """YAML's value as the field's type: 1e-4 is a float, not text; a list for a tuple or list field."""
    if value is None:
        return None
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # X | None: X
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    kind = typing.get_origin(annotation) or annotation
    try:
        if kind is bool:
            if not isinstance(value, bool):
                raise ValueError
            return value
        if kind in (int, float):
            return kind(value)
        if kind in (list, tuple):
            return kind(value if isinstance(value, (list, tuple)) else [value])
        return str(value) if kind is str else value
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected {getattr(kind, '__name__', kind)}, got {value!r}") from None


def _parameter(f, annotation, name: str, prefix: str, defaults) -> inspect.Parameter:
    meta = f.metadata
    flag = flag_of(f.name, prefix)
    declared = [flag] + [d for d in meta.get("flags") or () if d != flag and not prefix]
    if annotation is bool:
        declared = [f"{flag}/--no-{flag[2:]}"]
    bounds = {k: meta[k] for k in ("min", "max") if meta.get(k) is not None}
    text = meta.get("help", "")
    if meta.get("choices"):
        text += f" [{'|'.join(meta['choices'])}]"
    default = getattr(defaults, f.name) if defaults is not None else default_of(f)
    option = typer.Option(default, *declared, help=text, **bounds)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
