"""Named choices: a name → a factory with its help text, one registry per kind (engines,
simulators, sandboxes), each filled in the module that owns that kind.

The CLI's choices, its help texts and every "unknown X" error are read from a registry, so
a name is written once, where it is registered::

    ENGINES = Registry("engine", error=EngineError)

    @ENGINES.register("ct2", "CTranslate2, the fast one on a CPU", local=True)
    def _ct2(model, **options): ...

A spec is a name, optionally followed by ``:<argument>`` for choices registered with
``argument=`` (``scripted:expert``, ``endpoint:<url>#<model>``).

Plugins: a registry made with ``entry_points="colbench.engines"`` also loads that group of Python
entry points the first time it is asked for its choices. Each entry point names a module (or any
object in it); importing it runs its ``@ENGINES.register(...)`` lines, so a separate package adds an
engine, a family or an algorithm with one module and one line in its own packaging metadata::

    [project.entry-points."colbench.engines"]
    echo = "colbench_echo"
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator


@dataclass(frozen=True)
class Choice:
    name: str
    factory: Callable[..., Any]
    help: str
    argument: str = ""  # what may follow "name:" in a spec (e.g. "<policy>"); "" when nothing may
    argument_required: bool = False
    traits: dict[str, Any] = field(default_factory=dict)  # what callers ask of a kind (e.g. local=True)
    hidden: bool = False  # accepted, but not offered (an older name kept for stored references)

    @property
    def spelling(self) -> str:
        """How a user writes it: ``hf``, ``scripted:<policy>`` (where the argument may be left out,
        the choice's help says what then takes its place)."""
        return f"{self.name}:{self.argument}" if self.argument else self.name

    def __getattr__(self, trait: str):
        try:
            return self.traits[trait]
        except KeyError:
            raise AttributeError(trait) from None


class Registry:
    """Choices of one kind, in the order registered."""

    def __init__(self, what: str, *, error: type[Exception] = ValueError, traits: dict[str, Any] | None = None,
                 entry_points: str | None = None):
        """``traits``: what every choice of this kind answers (e.g. ``{"local": False}``), with the
        default a registration may override. ``entry_points``: the group of Python entry points whose
        modules register more choices (plugins), loaded on first use."""
        self.what = what  # "engine": used in messages ("unknown engine 'x': ...")
        self.error = error
        self.traits = dict(traits or {})
        self.entry_points = entry_points
        self._plugins_loaded = entry_points is None
        self._choices: dict[str, Choice] = {}
        self._aliases: dict[str, str] = {}

    def _load_plugins(self) -> None:
        """Import every module of this registry's entry-point group, once; a plugin that fails to load
        raises ``error`` in one line naming it."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True  # first: a plugin module that asks this registry does not recurse
        from importlib.metadata import entry_points

        for point in entry_points(group=self.entry_points):
            try:
                point.load()
            except Exception as exc:  # noqa: BLE001 - any plugin failure is reported the same way
                detail = " ".join(str(exc).split()) or type(exc).__name__
                raise self.error(f"the {self.what} plugin {point.name!r} ({point.value}) failed to load: {detail}"
                                 ) from exc

    def register(self, name: str, help: str, *, argument: str = "", argument_required: bool = False,
                 aliases: tuple[str, ...] = (), hidden: bool = False, **traits):
        """Decorator: register ``factory`` under ``name`` (and ``aliases``, other names for the same)."""
        unknown = set(traits) - set(self.traits)
        if unknown:
            raise ValueError(
                f"{self.what} {name!r}: unknown traits {sorted(unknown)} (a {self.what} has {sorted(self.traits)})"
            )

        def add(factory):
            if name in self._choices or name in self._aliases:
                raise ValueError(f"{self.what} {name!r} is registered twice")
            self._choices[name] = Choice(name, factory, help, argument, argument_required, {**self.traits, **traits},
                                         hidden)
            self._aliases.update({alias: name for alias in aliases})
            return factory

        return add

    def names(self) -> tuple[str, ...]:
        """The names offered (in choices, help and errors)."""
        return tuple(choice.name for choice in self)

    def __iter__(self) -> Iterator[Choice]:
        """The choices offered, in the order registered (plugins' after the built-in ones)."""
        self._load_plugins()
        return (choice for choice in list(self._choices.values()) if not choice.hidden)

    def __contains__(self, spec: str) -> bool:
        try:
            self.parse(spec)
        except self.error:
            return False
        return True

    def spellings(self) -> str:
        """``hf, ct2, scripted[:<policy>]``: how a user writes each choice."""
        return ", ".join(choice.spelling for choice in self)

    def help(self) -> str:
        """Every choice with its help: ``hf (transformers: exact, GPUs), ct2 (...)``."""
        return ", ".join(f"{choice.spelling} ({choice.help})" for choice in self)

    def parse(self, spec: str) -> tuple[Choice, str]:
        """``"scripted:skip@0.5"`` → (the scripted choice, ``"skip@0.5"``); an unknown name, or an
        argument where none is taken (or none where one is needed), raises ``error`` in one line."""
        self._load_plugins()
        name, _, argument = str(spec or "").strip().partition(":")
        name = self._aliases.get(name.lower(), name.lower())
        choice = self._choices.get(name)
        if choice is None:
            raise self.error(f"unknown {self.what} {str(spec).strip()!r}: choose one of {self.spellings()}")
        if (argument and not choice.argument) or (choice.argument_required and not argument):
            raise self.error(f"bad {self.what} {str(spec).strip()!r}: write it {choice.spelling}")
        return choice, argument

    def get(self, spec: str) -> Choice:
        return self.parse(spec)[0]
