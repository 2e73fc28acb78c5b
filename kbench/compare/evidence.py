"""What a recommendation rests on beside the scores, read from the runs: the set (its name, the questions its
documents can still give, how its corpus was altered) and the warnings that bear on each config.

    evidence = comparison_evidence(comparison)       # evaluation.recommend.Evidence for recommend_comparison
    config_warnings(tags, params)                    # one run's: its embedder's language coverage, its analyzer's

Warnings come from what a run logged: ``kbench.language.warning`` (the embedder covers under half of the documents'
languages, kbench/language/census.py) and, from the run's params and its ``kbench.language.documents`` tag, a keyword
leg whose analyzer (stemmer and stop words) is of another language than most of the documents. A search that logs no
child runs (race, stage-wise, ``--until-decided``) passes each config's params and language tags the same way.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from kbench.datasets.synthetic.build import corpus_words, read_manifest
from kbench.evaluation.recommend import Evidence
from kbench.language.census import TEXT_SEARCH_LANGUAGE
from kbench.tracking import tags as tag

# a language's name (an analyzer's) -> its ISO 639-1 code; "none" (CJK bigrams) and "simple" analyze no language
ANALYZED = {name: code for code, name in TEXT_SEARCH_LANGUAGE.items() if name != "none"}
DEFAULT_STEMMER = "snowball_english"  # the bm25 leg's (retrieval/legs/bm25.py)
MAIN_SHARE = 0.5  # documents in one language above this share: an analyzer of another language is warned about
_SHARE = re.compile(r"^(?P<code>[a-z]{2,3}) (?P<pct>\d+)%")


def main_language(documents_tag: str) -> tuple[str, float] | None:
    """``"es 96% (119), en 4% (5)"`` (the ``kbench.language.documents`` tag) -> ("es", 0.96); None when unread."""
    found = _SHARE.match(documents_tag.strip())
    return (found["code"], int(found["pct"]) / 100) if found else None


def _param(params: dict[str, str], key: str) -> str | None:
    value = params.get(key)
    if value is None or value in ("null", "None", ""):
        return None
    return value.strip('"')


def analyzer_languages(params: dict[str, str]) -> dict[str, str]:
    """Each keyword leg the run searched with -> the language its analyzer stems and stops words of (a language's
    name, e.g. ``english``); a leg that analyzes no language (``language: none``, ``config: simple``, no stemmer)
    is left out."""
    try:
        legs = json.loads(params.get("retrieval.legs", "[]"))
    except ValueError:
        return {}
    out = {}
    if "bm25" in legs:
        language = _param(params, "retrieval.leg_params.bm25.language")
        stemmer = _param(params, "retrieval.leg_params.bm25.stemmer") or "none"
        # a stemmer set away from its default wins over the language (BM25Params.analyzer_stemmer)
        name = language if language and stemmer == DEFAULT_STEMMER else stemmer.split("_", 1)[-1]
        if name in ANALYZED:
            out["bm25"] = name
    if "postgres_fts" in legs:
        name = _param(params, "retrieval.leg_params.postgres_fts.config")
        if name in ANALYZED:
            out["postgres_fts"] = name
    return out


def config_warnings(tags: dict[str, str], params: dict[str, str]) -> list[str]:
    """The warnings one run carries that bear on choosing it: its embedder's coverage of the documents' languages
    (the run's own warning line) and each keyword leg that analyzes another language than most of its documents."""
    out = [tags[tag.LANGUAGE_WARNING]] if tags.get(tag.LANGUAGE_WARNING) else []
    main = main_language(tags.get(tag.LANGUAGE_DOCUMENTS, ""))
    if main is None or main[1] <= MAIN_SHARE:
        return out
    code, share = main
    for leg, name in analyzer_languages(params).items():
        if ANALYZED[name] != code:
            fix = TEXT_SEARCH_LANGUAGE.get(code)
            key = "retrieval.leg_params.bm25.language" if leg == "bm25" else "retrieval.leg_params.postgres_fts.config"
            out.append(f"the {leg} leg analyzes {name} (its stemmer and stop words) while {share:.0%} of the documents "
                       f"are {code}" + (f"; set {key}: {fix}" if fix and fix != "none" else ""))
    return out


def set_evidence(dataset_path: str | None) -> tuple[int | None, str]:
    """The questions a dataset folder's documents can give (a generated set's available questions; None for any other
    set) and how its indexed documents were altered, in words ("" when whole, or not a generated set)."""
    if not dataset_path:
        return None, ""
    manifest = read_manifest(Path(dataset_path).expanduser())
    if manifest is None:
        return None, ""
    report = manifest.get("report") or {}
    available = report.get("available")
    return (int(available) if available else None), corpus_words(report.get("corpus"))


def comparison_evidence(comparison) -> Evidence:
    """The evidence of a ``compare.Comparison``'s runs: the set of its first run (every run of a sweep reads the
    same), each config's warnings, the sweep's parent run."""
    first = comparison.runs[0]
    available, corpus = set_evidence(_param(first.params, "dataset.path"))
    name = first.tags.get(tag.DATASET) or _param(first.params, "dataset.name") or ""
    warnings = {r.label: tuple(config_warnings(r.tags, r.params)) for r in comparison.runs}
    return Evidence(name, available, corpus, {k: v for k, v in warnings.items() if v}, comparison.parent_run_id)
