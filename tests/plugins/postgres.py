"""A real PostgreSQL server for the store tests, started on loopback for the session.

Uses $COLBENCH_TEST_PG (a server URL) when set; otherwise starts a throwaway cluster
from Debian's postgresql package in a temporary folder. Where neither is possible the
PostgreSQL tests skip with the reason, except under CI (CI=true), where they fail:
CI installs the server, so a missing one there is a broken set-up, not a skip.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required under CI: {reason}")
    pytest.skip(f"PostgreSQL not available: {reason}")


@pytest.fixture(scope="session")
def postgres_server():
    if os.environ.get("COLBENCH_TEST_PG"):
        yield os.environ["COLBENCH_TEST_PG"].rstrip("/")
        return
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not binaries:
        _unavailable("no initdb under /usr/lib/postgresql (apt-get install postgresql)")
    bindir = os.path.dirname(binaries[-1])
    folder = tempfile.mkdtemp(prefix="colbench-pg-")
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root and there is no 'postgres' user")
        shutil.chown(folder, "postgres", "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(folder, "data"), _free_port()
    subprocess.run(run_as + [f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"], check=True,
                   capture_output=True)
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off -c max_connections=100"
    started = subprocess.run(run_as + [f"{bindir}/pg_ctl", "-D", data, "-o", options, "-w", "-t", "60", "-l",
                                       os.path.join(folder, "log"), "start"], capture_output=True, text=True)
    if started.returncode != 0:
        _unavailable(f"pg_ctl start failed: {started.stderr.strip() or started.stdout.strip()}")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(run_as + [f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server):
    """A fresh, empty database on the session's server; dropped afterwards."""
    from sqlalchemy import create_engine, text

    name = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(f"{postgres_server}/postgres", isolation_level="AUTOCOMMIT")
    for attempt in range(50):
        try:
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
            break
        except Exception:
            if attempt == 49:
                raise
            time.sleep(0.2)
    yield f"{postgres_server}/{name}"
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
