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
import typing
from dataclasses import fields

import typer

from colbench.options import default_of


def flags_from(config_cls, *, into: str | None = None, prefix: str = "", exclude: set[str] = frozenset(), defaults=None):
    hints = typing.get_type_hints(config_cls)
    chosen = [f for f in fields(config_cls) if f.init and f.name not in exclude]
    key = prefix.replace("-", "_")

    def decorate(command):
        own_hints = typing.get_type_hints(command)
        params = list(inspect.signature(command).parameters.values())
        target = into or params[0].name
        own = [p.replace(annotation=own_hints.get(p.name, p.annotation), kind=inspect.Parameter.KEYWORD_ONLY) for p in params if p.name != target]
        taken = {p.name for p in own}
        generated = []
        for f in chosen:
            if key + f.name in taken:
                raise TypeError(f"{command.__name__} declares --{key + f.name} itself and through {config_cls.__name__}")
            generated.append(_parameter(f, hints[f.name], key + f.name, prefix, defaults))

        @functools.wraps(command)
        def run(**values):
            settings = {f.name: values.pop(key + f.name) for f in chosen}
            if defaults is not None:
                settings = {f.name: getattr(defaults, f.name) for f in fields(config_cls) if f.init} | settings
            return command(**{target: config_cls(**settings)}, **values)

        every = own + generated
        run.__signature__ = inspect.Signature(every)
        run.__annotations__ = {p.name: p.annotation for p in every}  # resolved types, for Typer's get_type_hints
        del run.__wrapped__  # Typer must read the new signature, not the command's
        return run

    return decorate


def _parameter(f, annotation, name: str, prefix: str, defaults) -> inspect.Parameter:
    meta = f.metadata
    flag = "--" + (prefix + f.name).replace("_", "-")
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
