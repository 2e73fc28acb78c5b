"""PostgreSQL's default parser, emulated: token types on hand-checked text (outputs as PostgreSQL 18's
ts_debug('english', ...) prints them), and the segment cache against the plain state machine on SciFact."""
from __future__ import annotations

import json

import pytest

from kbench.retrieval.text.pg_parser import SPACE, TOKEN_TYPES, PgParser, parse_tokens
from tests.conftest import SCIFACT


def typed(text: str) -> list[tuple[str, str]]:
    return [(TOKEN_TYPES[t], s) for t, s in parse_tokens(text) if t != SPACE]


def test_words_numbers_and_hyphenated_compounds():
    assert typed("The self-report of IL-6 in 3.5% mice (n=12)") == [
        ("asciiword", "The"), ("asciihword", "self-report"), ("hword_asciipart", "self"),
        ("hword_asciipart", "report"), ("asciiword", "of"), ("asciiword", "IL"), ("int", "-6"),
        ("asciiword", "in"), ("float", "3.5"), ("asciiword", "mice"), ("asciiword", "n"), ("uint", "12"),
    ]
    assert typed("α-synuclein Über CD4+ 2-fold") == [
        ("hword", "α-synuclein"), ("hword_part", "α"), ("hword_asciipart", "synuclein"), ("word", "Über"),
        ("numword", "CD4"), ("uint", "2"), ("asciiword", "fold"),
    ]


def test_emails_urls_paths_versions_scientific_entities_tags():
    assert typed("foo@bar.com http://x.org/a/b 10.1002/abc 1.2.3 +3.4e-5 &amp; <b>x</b>") == [
        ("email", "foo@bar.com"), ("protocol", "http://"), ("url", "x.org/a/b"), ("host", "x.org"),
        ("url_path", "/a/b"), ("float", "10.1002"), ("file", "/abc"), ("version", "1.2.3"),
        ("sfloat", "+3.4e-5"), ("entity", "&amp;"), ("tag", "<b>"), ("asciiword", "x"), ("tag", "</b>"),
    ]


def test_blank_after_whitespace_swallows_punctuation():
    # "~1.15" opening a text is a file name; after a space the blank swallows "~" and 1.15 is a number
    assert typed("~1.15") == [("file", "~1.15")]
    assert typed("a ~1.15") == [("asciiword", "a"), ("float", "1.15")]
    assert [(TOKEN_TYPES[t], s) for t, s in PgParser().words("a ~1.15")] == typed("a ~1.15")


def scifact_texts(limit: int) -> list[str]:
    texts = []
    with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts.append(f"{row['title']} {row['text']}")
            if len(texts) == limit:
                break
    return texts


@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason="SciFact not in ../shared/datasets")
def test_segment_cache_gives_the_state_machines_tokens_on_scifact():
    parser = PgParser()
    texts = scifact_texts(150)
    for text in texts:
        assert parser.words(text) == [t for t in parse_tokens(text) if t[0] != SPACE]
