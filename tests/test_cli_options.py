"""The config is the command line: every field of a config is one flag with the field's own
default, bounds and help, declared once (colbench.options, colbench.cli.options)."""
from __future__ import annotations

from dataclasses import dataclass, fields

import pytest
import typer
from typer.testing import CliRunner

from colbench.cli.options import flags_from
from colbench.options import check, option
from conftest import command_line


@dataclass
class Toy:
    epochs: int = option(4, "Passes over the data.", min=1)
    rate: float | None = option(None, "A rate.", min=0.0, flags=("--rate", "-r"))
    kind: str = option("a", "One of two kinds.", choices=("a", "b"))
    fast: bool = option(False, "Go fast.")
    betas: tuple[float, float] = option((0.9, 0.95), "Two numbers.")

    def __post_init__(self):
        check(self)


def toy_app(record: list) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    @flags_from(Toy, into="second", prefix="second-", defaults=Toy(epochs=9))
    @flags_from(Toy)
    def main(first: Toy, second: Toy, name: str = typer.Option("x", "--name")):
        record.append((first, second, name))

    return app


def test_each_field_is_a_flag_with_its_default_bounds_and_help():
    record: list = []
    runner = CliRunner()
    result = runner.invoke(toy_app(record),
                           ["--epochs", "2", "-r", "0.5", "--kind", "b", "--fast", "--betas", "0.1", "0.2",
                                             "--second-kind", "b", "--name", "y"])
    assert result.exit_code == 0, result.output
    first, second, name = record[0]
    assert first == Toy(epochs=2, rate=0.5, kind="b", fast=True, betas=(0.1, 0.2)) and name == "y"
    assert second == Toy(epochs=9, kind="b")  # the second config's defaults come from its instance
    assert runner.invoke(toy_app(record), ["--epochs", "0"]).exit_code == 2  # below min: refused by the command line
    assert runner.invoke(toy_app(record), ["--kind", "c"]).exit_code != 0  # not a choice: refused by the config
    with pytest.raises(ValueError, match="epochs must be at least 1"):
        Toy(epochs=0)  # and by the library itself, with the same bound
    help_text = " ".join(runner.invoke(toy_app(record), ["--help"], env={"COLUMNS": "200"}).output.split())
    for f in fields(Toy):
        assert f"--{f.name.replace('_', '-')}" in help_text and f.metadata["help"] in help_text


@pytest.mark.parametrize("command, config_path", [
    (["critic", "fit"], "colbench.training.config:CriticConfig"),
    (["policy", "fit"], "colbench.training.config:PolicyConfig"),
    (["rollout"], "colbench.rollout_config:RolloutConfig"),
    (["experiment", "backend"], "colbench.experiment_config:ExperimentConfig"),
])
def test_commands_offer_every_field_of_their_config(command, config_path, capsys, monkeypatch):
    import importlib
    import re

    module, name = config_path.split(":")
    config = getattr(importlib.import_module(module), name)
    monkeypatch.setenv("COLUMNS", "400")  # help lines unwrapped
    _, output, _ = command_line(None, capsys, monkeypatch)(*command, "--help")
    flags = set(re.findall(r"--[a-z0-9-]+", output))
    missing = [
        f.name
        for f in fields(config)
        if f.init and f.name not in ("critic", "policy") and f"--{f.name.replace('_', '-')}" not in flags
    ]
    assert missing == []


def test_a_config_file_fills_the_same_configs_and_typed_flags_win(tmp_path):
    (tmp_path / "run.yaml").write_text(
        "epochs: 7\nrate: 1e-4\nkind: b\nbetas: [0.5, 0.6]\nsecond:\n  epochs: 3\n  fast: true\n"
    )
    record: list = []
    runner = CliRunner()
    result = runner.invoke(toy_app(record),
                           ["--config", str(tmp_path / "run.yaml"), "--kind", "a", "--second-epochs", "5"])
    assert result.exit_code == 0, result.output
    first, second, _ = record[0]
    assert first == Toy(epochs=7, rate=1e-4, kind="a", betas=(0.5, 0.6))  # 1e-4 read as a number; --kind typed: wins
    assert second == Toy(epochs=5, fast=True)  # its own section, its typed flag winning too
    for text, why in (("epochs: 0\n", "epochs must be at least 1"), ("speed: 2\n", "unknown setting speed"),
                      ("epochs: many\n", "epochs: expected int"), ("fast: 1\n", "fast: expected bool"),
                      ("[1, 2\n", "not YAML")):
        (tmp_path / "bad.yaml").write_text(text)
        failed = runner.invoke(toy_app(record), ["--config", str(tmp_path / "bad.yaml")])
        assert failed.exit_code != 0 and why in str(failed.exception or failed.output), (text, failed.output)


def test_rollout_reads_a_config_file_into_its_config(tmp_path, sqlite_url, capsys, monkeypatch):
    colbench = command_line(sqlite_url, capsys, monkeypatch)
    (tmp_path / "rollout.yaml").write_text(
        (
            "engine: scripted:expert\ntasks: backend-lite:test\nlimit: 3\nsamples-per-task: 2\nsandbox: bwrap\nname:"
            " from-file\ntags: [yaml]\n"
        )
    )
    code, stats, _ = colbench("rollout", "--config", str(tmp_path / "rollout.yaml"), "--limit", "2", "--json")
    assert code == 0 and stats["total"] == 4  # 2 tasks (typed) x 2 samples (file)
    _, run, _ = colbench("runs", "show", "from-file", "--json")
    assert run["tags"] == ["yaml"] and run["config"]["engine"] == "scripted:expert" and run["config"]["limit"] == 2
