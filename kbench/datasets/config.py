"""The dataset section of a config: which corpus, queries and judgements a run reads."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from kbench.registry import StrictModel, in_unit


class DatasetConfig(StrictModel):
    name: str | None = Field(None, description="a registered dataset name (kbench datasets list)")
    path: str | None = Field(None, description="a dataset folder (BEIR or span layout); instead of name")
    split: str = Field("test", description="qrels split for BEIR datasets")
    subset: list[str] | None = Field(None, description="span datasets with several corpora: keep these")
    max_queries: int | None = Field(None, ge=1, description="evaluate a seeded sample of this many queries",
                                    json_schema_extra=in_unit("questions"))
    max_documents: int | None = Field(
        None, ge=1, description="keep every judged document plus a seeded sample up to this many",
        json_schema_extra=in_unit("documents"))
    seed: int = Field(0, description="seed of the max_queries and max_documents samples")
    include: list[str] | None = Field(None, description="folder sources: globs of files to take, e.g. ['**/*.md']")
    exclude: list[str] | None = Field(None, description="folder sources: globs to leave out; default: .git, "
                                      "node_modules, dist, build, __pycache__, *.min.js")
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1, description="folder sources: larger files are skipped")
    judged_qrels: str | None = Field(None, description="TREC qrels written by `kbench judge` (qid 0 docid grade)")
    judged_qrels_use: Literal["beside", "instead"] = Field(
        "beside", description="beside: the judge fills what the dataset leaves unlabeled (the dataset's labels "
        "win); instead: the judged qrels replace the dataset's document qrels")
    questions_from: str | None = Field(
        None, description="an MLflow evaluation dataset (name or d-... id; `kbench datasets publish` writes one): the "
        "questions and labels come from it, the documents from name/path")
    questions_tracking_uri: str | None = Field(None, description="the MLflow store holding questions_from (default: "
                                               "MLFLOW_TRACKING_URI or experiments/mlflow.db)")
    max_document_chars: int = Field(
        5_000_000, ge=1, description="a longer document is refused, naming it: one document must not cost minutes and "
        "gigabytes (a 50 MB line with chunking none did); embedding models read its first few hundred tokens anyway")
    strict: bool = Field(False, description="refuse the dataset when a loader would drop data (judgements naming "
                         "unknown documents or queries, scores <= 0, empty questions, links out of the folder); "
                         "by default these are left out and counted in the run")

    @field_validator("split")
    @classmethod
    def _split_is_a_file_name(cls, split: str) -> str:
        # the split names qrels/<split>.tsv; a path here would read judgements from outside the dataset
        if not re.fullmatch(r"[\w][\w.-]*", split):
            raise ValueError(f"not a split name (got {split[:80]!r}); give the name of a file in qrels/ without "
                             ".tsv, e.g. test")
        return split

    @model_validator(mode="after")
    def _name_or_path(self):
        if not self.name and not self.path:
            raise ValueError("dataset: give either 'name' (see `kbench datasets list`) or 'path'")
        return self

