"""Fixtures of the accounting tests: a SQLite ledger path and, where a server is given, a PostgreSQL URL.

``METRICDP_TEST_POSTGRES_URL`` (printed by ``.ci/postgres``) names a PostgreSQL database;
each test gets a fresh schema in it (dropped afterwards), so tests never see each other's
ledgers. Without the variable, or without SQLAlchemy and psycopg, the PostgreSQL tests skip
and say why.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import import_or_skip

POSTGRES_ENV = "METRICDP_TEST_POSTGRES_URL"


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set: start a server with .ci/postgres and export the line it prints")
    sa = import_or_skip("sqlalchemy", "ledger-sql")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    except sa.exc.OperationalError as exc:
        engine.dispose()
        pytest.skip(f"{POSTGRES_ENV} is set but the server does not answer: {exc.orig}")
    sep = "&" if "?" in url else "?"
    yield f"{url}{sep}options=-csearch_path%3D{schema}"
    with engine.begin() as conn:
        conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    """A ledger target and its key file: a SQLite file, or a PostgreSQL URL."""
    if request.param == "sqlite":
        path = tmp_path / "ledger.db"
        return str(path), Path(f"{path}.key")
    return request.getfixturevalue("pg_url"), tmp_path / "pg.key"
