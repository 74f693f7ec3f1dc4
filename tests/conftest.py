"""Shared fixtures: a store on SQLite or PostgreSQL, and official-format files written by the tests."""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

# The test plugin packages (tests/plugin_package: secret-word and brevity, arith-chat), installed as pip would install
# them: on the path of this process and of every process it starts, their dist-info folders naming their entry points.
# colbench's own tests pass with plugins installed; tests/test_plugins.py runs their families end to end.
PLUGIN_PACKAGES = Path(__file__).resolve().parent / "plugin_package"
if str(PLUGIN_PACKAGES) not in sys.path:
    sys.path.insert(0, str(PLUGIN_PACKAGES))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(PLUGIN_PACKAGES), os.environ.get("PYTHONPATH")) if p)

# A suite started in the background of a non-interactive shell (`cmd &`) inherits SIGINT
# ignored, and so would every process it starts: the Ctrl-C tests would see nothing. A handler
# here is reset to the default in each child at exec, so Python installs KeyboardInterrupt there.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# An xdist worker is given COLUMNS=80 and LINES=24, which the CLI reads as a terminal's width (cli/common.py) and
# folds its tables into: the suite's commands print as any redirected output does, 200 columns wide.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

pytest_plugins = ["plugins.postgres", "plugins.openai_server", "plugins.models", "plugins.docker_engine",
                  "plugins.sandboxes", "plugins.vllm_server"]

# The suite runs on two xdist workers (`make test`: -n 2 --dist loadgroup). A session service that one machine holds
# once keeps its tests on one worker: a second private dockerd would fight the first for the docker0 bridge, and a
# second vLLM server would double the biggest process of the suite.
ONE_WORKER = {"docker_engine": "docker", "vllm_install": "vllm", "vllm_server": "vllm"}


def pytest_collection_modifyitems(items):
    for item in items:
        group = next((ONE_WORKER[name] for name in item.fixturenames if name in ONE_WORKER), None)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path):
    """A database URL: a fresh SQLite file, or a fresh database on the loopback PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'colbench.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'colbench.db'}"


@pytest.fixture
def db(db_url):
    from colbench.store.db import Database

    database = Database(db_url)
    yield database
    database.close()


def command_line(url: str | None, capsys, monkeypatch):
    """`colbench --db <url> ARGS` in this process (without --db when ``url`` is None: the args name it, or
    the default store does): returns (exit code, stdout, stderr), stdout parsed when --json was asked and
    the command succeeded. The one in-process runner of the tests (test_cli.py starts real processes)."""
    from colbench.cli import app, common

    monkeypatch.delenv("COLBENCH_DB", raising=False)

    def run(*args):
        common.state._db = None
        with pytest.raises(SystemExit) as exit_info:
            app.main([*(["--db", url] if url else []), *args])
        out, err = capsys.readouterr()
        return exit_info.value.code, json.loads(out) if "--json" in args and exit_info.value.code == 0 else out, err

    return run


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def graded_store(folder: Path):
    """(Database, url) of a SQLite store in ``folder`` holding 4 tasks, each solved in 2 turns, 30% in 1 and
    failed in 3: 8 critic pairs and 24 agent turns for the multi-process trainers' tests."""
    from colbench.official import import_trajectories
    from colbench.store.db import Database
    from officialdata import backend_task, trajectory

    url = f"sqlite:///{folder / 'c.db'}"
    db = Database(url)
    records = [
        trajectory(backend_task(i), turns, reward) for i in range(4) for turns, reward in ((2, 1.0), (1, 0.3), (3, 0.0))
    ]
    import_trajectories(db, write_jsonl(folder / "data.jsonl", records))
    return db, url
