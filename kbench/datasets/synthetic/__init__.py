"""Evaluation sets generated from a user's own unlabeled material, in the span layout (like datasets/demo).

One module per method: ``ict`` (a sentence is the question), ``heading`` (a section's heading path),
``commits`` (a commit's subject; documents from the git source) and ``llm`` (a model writes a question and
quotes its answer). ``build.py`` samples, removes, measures leakage and writes; ``leakage.py`` holds the
BM25-rank / word-overlap / near-duplicate measures that ``kbench datasets inspect`` reuses.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kbench.datasets.config import DatasetConfig
from kbench.datasets.registry import DATASETS, load_dataset
from kbench.datasets.synthetic import commits, heading, ict, llm
from kbench.datasets.synthetic.base import Proposal, Proposals, SyntheticError, stratified_sample
from kbench.datasets.synthetic.build import BuildReport, Filters, build_synthetic, check_out
from kbench.hashing import stable_hash
from kbench.llm import Endpoint, LLMClient, LLMPolicy, check_reachable
from kbench.paths import workspace_dir
from kbench.records import Document
from kbench.sources.folder import DEFAULT_EXCLUDE, FolderSource
from kbench.sources.loaders import DOCUMENTATION_EXTENSIONS
from kbench.sources.git import GitSourceError, load_git

# name -> the module: ``propose(document, params) -> Proposals``, ``DEFAULTS``; where a verbatim leftover is
# looked for (a sentence anywhere in the corpus; a heading line or subject in its own document)
METHODS = {ict.NAME: ict, heading.NAME: heading, commits.NAME: commits}
ALL_METHODS = [*METHODS, llm.NAME]  # llm samples excerpts first, then asks the model (build_llm_set)
VERBATIM_SCOPE = {"ict": "corpus", "heading": "document", "commits": "document", "llm": "none"}

__all__ = ["ALL_METHODS", "VERBATIM_SCOPE", "build_llm_set", "BuildReport", "Filters", "LLMOptions", "METHODS", "Proposal", "Proposals", "SyntheticError", "build_synthetic",
           "build_from_source", "load_source", "proposer", "stratified_sample"]


def proposer(method: str, documents: list[Document], options: dict[str, Any]):
    """``METHODS[method].propose`` bound to its options and, for a method that reads the whole corpus first
    (``heading``: which headings are generic), to what it found there."""
    module = METHODS[method]
    if hasattr(module, "corpus_context"):
        return partial(module.propose, params=options, corpus=module.corpus_context(documents))
    return partial(module.propose, params=options)


def load_source(source: str, method: str, *, include: list[str] | None = None, exclude: list[str] | None = None,
                since: str | None = None, max_commits: int | None = None
                ) -> tuple[list[Document], dict[str, list[str]], dict[str, Any]]:
    """Documents, skipped files by reason, and how the source was named (for the provenance)."""
    path = Path(source).expanduser()
    if method == "commits":
        try:
            documents = load_git(path, since=since, max_commits=max_commits, include=include, exclude=exclude)
        except GitSourceError as e:
            raise SyntheticError(str(e)) from None
        if not documents:
            raise SyntheticError(f"git source {path}: no commit changes a file the path globs take "
                                 f"(since {since or 'the start'}); check --since and --include/--exclude")
        return documents, {}, {"source": {"kind": "git", "path": str(path.resolve()), "since": since,
                                          "max_commits": max_commits, "include": include, "exclude": exclude}}
    if since or max_commits:
        raise SyntheticError("--since and --max-commits apply to --method commits (a git source) only")
    if path.is_dir():
        # documentation files only, unless --include globs ask for others (LICENSE, a COMMIT file, code), and no
        # theme templates or generated API stubs (kbench/sources/generated.py)
        folder = FolderSource(path, list(include or []), list(DEFAULT_EXCLUDE if exclude is None else exclude),
                              suffixes=DOCUMENTATION_EXTENSIONS, skip_generated=True)
        documents, skipped = folder.load()
        return documents, skipped, {"source": {"kind": "folder", "path": str(path.resolve()), "include": include,
                                               "exclude": exclude}}
    if source in DATASETS:
        dataset = load_dataset(DatasetConfig(name=source))
        return dataset.documents, {}, {"source": {"kind": "dataset", "name": source}}
    raise SyntheticError(f"source {source!r} is neither a folder nor a registered dataset "
                         f"({', '.join(DATASETS)}); give a folder of documents or a dataset name")


def source_folder(source: str) -> Path | None:
    """The folder a source names (a folder, a repository, a registered dataset's location), if any."""
    path = Path(source).expanduser()
    if path.exists():
        return path
    return DATASETS[source].location() if source in DATASETS else None


@dataclass(frozen=True)
class LLMOptions:
    """Where the llm method sends its prompts (the api key is read from ``api_key_env``, never stored)."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    workspace: str = "experiments"  # answers are cached under <workspace>/cache/llm
    timeout_s: float | None = None  # per request; None: the client's default (LLMPolicy)
    concurrency: int | None = None  # requests in flight; a local CPU server answers one at a time
    min_usable: float | None = None  # share of answers that must give a question (None: LLMPolicy's 0.8)
    allow_partial: bool = False  # go on below min_usable (said loudly, "partial" in the manifest)


def build_from_source(source: str, out: str | Path, *, method: str, seed: int = 0, per_doc: int | None = None,
                      max_questions: int | None = None, filters: Filters = Filters(), force: bool = False,
                      include: list[str] | None = None, exclude: list[str] | None = None, since: str | None = None,
                      max_commits: int | None = None, params: dict[str, Any] | None = None,
                      llm_options: LLMOptions | None = None, keep_documents: bool = False) -> BuildReport:
    """``kbench datasets build synthetic``: load the source, then build with one of ``ALL_METHODS``;
    ``keep_documents``: index the documents whole (``--keep-documents``)."""
    if method not in ALL_METHODS:
        raise SyntheticError(f"--method {method!r}: choose one of {', '.join(ALL_METHODS)}")
    check_out(out, source_folder(source), force)  # before reading a document or asking a model
    if method == llm.NAME:  # a dead server or a wrong key: seconds, before the documents are read
        options = llm_options or LLMOptions()
        check_reachable([llm_endpoint(options)], llm_policy(options))
    documents, skipped, provenance = load_source(source, method, include=include, exclude=exclude, since=since,
                                                 max_commits=max_commits)
    if method == llm.NAME:
        return build_llm_set(documents, out, llm_options or LLMOptions(), seed=seed, per_doc=per_doc,
                             max_questions=max_questions, filters=filters, force=force, provenance=provenance,
                             skipped_files=skipped, params=params)
    module = METHODS[method]
    options = {**module.DEFAULTS, **(params or {})}
    provenance = {**provenance, "params": options, "model": None, "prompt_sha256": None,
                  "options_hash": stable_hash({"method": method, "params": options, "seed": seed})}
    return build_synthetic(documents, out, method=method, propose=proposer(method, documents, options),
                           seed=seed, per_doc=per_doc, max_questions=max_questions, filters=filters, force=force,
                           provenance=provenance, skipped_files=skipped, verbatim_scope=VERBATIM_SCOPE[method],
                           keep_documents=keep_documents)


def llm_endpoint(options: LLMOptions) -> Endpoint:
    return Endpoint("synthetic", options.base_url, options.model, options.api_key_env,
                    base_url_option="--base-url")


def llm_policy(options: LLMOptions) -> LLMPolicy:
    """The LLM policy with the command's overrides (--timeout-s, --concurrency, --min-usable, --allow-partial)."""
    overrides = {k: v for k, v in (("timeout_s", options.timeout_s), ("concurrency", options.concurrency),
                                   ("min_usable", options.min_usable)) if v is not None}
    return LLMPolicy(**overrides, allow_partial=options.allow_partial)


def build_llm_set(documents: list[Document], out: str | Path, options: LLMOptions, *, seed: int = 0,
                  per_doc: int | None = None, max_questions: int | None = None, filters: Filters = Filters(),
                  force: bool = False, provenance: dict[str, Any] | None = None,
                  skipped_files: dict[str, list[str]] | None = None, params: dict[str, Any] | None = None,
                  client: LLMClient | None = None) -> BuildReport:
    """Sample excerpts, ask the model (answers cached), locate the quotes, then build like every method."""
    options_ = {**llm.DEFAULTS, **(params or {})}
    out = check_out(out, None, force)  # before any request is paid for
    by_id = {d.doc_id: d for d in documents if d.text.strip()}
    rejected: Counter = Counter()
    candidates = {}
    for d in by_id.values():
        found = llm.excerpts(d, options_)
        rejected.update(found.rejected)
        if found.items:
            candidates[d.doc_id] = found.items
    chosen, dropped = stratified_sample(candidates, per_doc=per_doc, max_questions=max_questions, seed=seed)
    if dropped.get("over_max"):  # excerpts never sent: --max was reached without them (not questions rejected)
        dropped["excerpt_not_asked_over_max"] = dropped.pop("over_max")
    rejected.update(dropped)
    own_client = client is None
    if own_client:
        client = LLMClient(llm_endpoint(options), stage="synthetic", policy=llm_policy(options),
                           cache_root=workspace_dir(options.workspace) / "cache",
                           cache_params={"prompt_sha256": llm.PROMPT_SHA256})
    try:
        generated = llm.generate(by_id, chosen, client, options_) if chosen else None
    finally:
        if own_client:
            client.flush()
            client.close()
    if generated is not None:
        rejected.update(generated.rejected)

    def add_counts(report: BuildReport) -> None:
        report.rejected.update(rejected)
        if generated is not None:
            report.cache = {"hits": generated.cache_hits, "requests": generated.requests,
                            **{f"located_{k}": v for k, v in generated.located.items()}}

    proposals = generated.proposals if generated is not None else {}
    if generated is not None and not proposals:  # the documents gave excerpts; the model gave no question
        reasons = ", ".join(f"{n} {r}" for r, n in generated.rejected.most_common()) or "no answer"
        raise SyntheticError(f"synthetic llm: model {client.endpoint.model} gave no usable question for any of the "
                             f"{len(chosen)} excerpts it was asked about ({reasons}); the documents are not the "
                             f"problem: {llm.FIX}")
    partial = bool(client.meter.stage_totals().get(client.stage, {}).get("partial"))
    provenance = {**(provenance or {}), "params": options_, "model": client.endpoint.model,
                  "base_url": client.endpoint.shown_url, "prompt_sha256": llm.PROMPT_SHA256, "per_doc": per_doc,
                  "max_questions": max_questions, "partial": partial}
    return build_synthetic(list(by_id.values()), out, method=llm.NAME,
                           propose=lambda d: Proposals(list(proposals.get(d.doc_id, []))), seed=seed,
                           filters=filters, force=force, provenance=provenance, skipped_files=skipped_files,
                           verbatim_scope=VERBATIM_SCOPE[llm.NAME], report_extra=add_counts)
