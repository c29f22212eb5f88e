"""A throwaway PostgreSQL cluster for the tests: initdb and pg_ctl from the machine's PostgreSQL,
in a temporary folder, on a free loopback port, torn down after.

Why not pytest-postgresql's `postgresql_proc`: it runs initdb and pg_ctl as the current user,
and CI runs as root, which PostgreSQL refuses. Here, as root, both run as the `postgres` account
(`runuser`), in a folder handed over to it; as anyone else they run as that user. Each test that
asks for `pg_url` gets a database of its own (`CREATE DATABASE`, a few tens of milliseconds).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from runner.store.base import Lease
from runner.store.postgres import PostgresStore


def pg_bin() -> Path:
    """The folder of the machine's PostgreSQL programs (the newest, when several are installed)."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[4]))
    if not versions:
        raise RuntimeError("no PostgreSQL found: apt-get install postgresql (.ci/run does)")
    return Path(versions[-1])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Cluster:
    folder: Path
    port: int
    user: str
    _names: Iterator[int]

    @property
    def admin_url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database's URL."""
        name = f"t{next(self._names)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]  # our own name
        return self.url(name)


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def start_cluster(*, durable: bool = False) -> Cluster:
    """initdb + pg_ctl start in a new temporary folder. `durable=False` turns fsync off (the
    tests' data is thrown away); the benchmark keeps PostgreSQL's defaults."""
    folder = Path(tempfile.mkdtemp(prefix="runner-pg-"))
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(folder, account.pw_uid, account.pw_gid)
    data, log = folder / "data", folder / "server.log"
    binaries = pg_bin()
    user = "runner"
    subprocess.run(
        _as_postgres(
            [str(binaries / "initdb"), "-D", str(data), "-U", user, "--auth=trust", "-E", "UTF8"]
            + ([] if durable else ["--no-sync"])
        ),
        check=True,
        capture_output=True,
    )
    port = _free_port()
    settings = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
    if not durable:
        settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    subprocess.run(
        _as_postgres(
            [
                str(binaries / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(log),
                "-o",
                settings,
                "-w",
                "start",
            ]
        ),
        check=True,
        capture_output=True,
    )
    return Cluster(folder=folder, port=port, user=user, _names=itertools.count(1))


def stop_cluster(cluster: Cluster) -> None:
    subprocess.run(
        _as_postgres(
            [
                str(pg_bin() / "pg_ctl"),
                "-D",
                str(cluster.folder / "data"),
                "-m",
                "immediate",
                "-w",
                "stop",
            ]
        ),
        check=False,
        capture_output=True,
    )
    shutil.rmtree(cluster.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """A fresh database on the session's throwaway cluster."""
    return pg_cluster.new_database()


async def take_lease(url: str, run_id: str, owner: str) -> Lease:
    """`owner`'s lease of `run_id` for five minutes, as a worker elsewhere would hold it."""
    store = await PostgresStore.open(url)
    lease = await store.acquire_lease(run_id, owner, datetime.now(UTC), timedelta(minutes=5))
    await store.close()
    assert lease is not None
    return lease


async def release_lease(url: str, lease: Lease) -> None:
    store = await PostgresStore.open(url)
    await store.release_lease(lease)
    await store.close()
