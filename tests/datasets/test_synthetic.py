"""Synthetic sets (ict, heading) on the demo docs and on small folders: offsets, removals, seeds, bad sources."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kbench.cli import main as kbench_main
from kbench.datasets.spans import load_kbench_spans
from kbench.datasets.synthetic import Filters, SyntheticError, build_from_source, heading, ict, stratified_sample
from kbench.datasets.synthetic.base import Proposal
from kbench.datasets.synthetic.build import corpus_words
from kbench.datasets.synthetic.leakage import PassageIndex, near_duplicate_groups, word_overlap
from kbench.datasets.synthetic.prose import clean_inline, headings, prose_blocks, sentences
from kbench.paths import shared_datasets_dir
from kbench.records import Document
from tests.conftest import DEMO

DOCS = DEMO / "docs"
FASTAPI = shared_datasets_dir() / "fastapi_docs" / "en"


def questions(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "questions.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module", params=["ict", "heading"])
def demo_set(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic") / request.param
    report = build_from_source(str(DOCS), out, method=request.param, per_doc=4, seed=7)
    return request.param, report, out


def test_every_reference_matches_the_indexed_copy(demo_set):
    method, report, out = demo_set
    rows = questions(out)
    assert report.kept == len(rows) >= 40
    mismatches = 0
    for row in rows:
        for ref in row["references"]:
            text = (out / "docs" / ref["doc_id"]).read_text(encoding="utf-8")
            mismatches += text[ref["start_index"]:ref["end_index"]] != ref["content"]
    assert mismatches == 0
    dataset = load_kbench_spans(out)  # the loader checks every offset and content too
    assert len(dataset.queries) == len(rows)
    assert report.documents_with_questions >= 20  # spread over the 27 markdown pages, not a few files


def test_the_removed_sentence_or_heading_is_gone(demo_set):
    method, report, out = demo_set
    original = {p.relative_to(DOCS).as_posix(): p.read_text(encoding="utf-8") for p in DOCS.rglob("*") if p.is_file()}
    for row in questions(out):
        doc_id = row["references"][0]["doc_id"]
        copy = (out / "docs" / doc_id).read_text(encoding="utf-8")
        if method == "ict":
            assert " ".join(row["question"].split()) not in " ".join(copy.split())
            assert len(copy) < len(original[doc_id])
        else:
            lines = {ln.strip() for ln in copy.splitlines()}
            leaf = row["question"].split(" > ")[-1]
            assert not any(ln.startswith("#") and ln.lstrip("# ").strip() == leaf for ln in lines), row["question"]


def test_leakage_and_provenance_are_written(demo_set):
    method, report, out = demo_set
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["method"] == method and manifest["seed"] == 7 and manifest["per_doc"] == 4
    assert set(manifest["source_hashes"]) >= {r["references"][0]["doc_id"] for r in questions(out)}
    assert manifest["report"]["kept"] == report.kept
    assert sum(manifest["report"]["leakage"]["bm25_rank"].values()) == report.kept
    for row in questions(out):
        assert 1 <= row["leakage"]["bm25_rank"] <= row["leakage"]["passages"]
        assert 0 <= row["leakage"]["word_overlap"] <= 1
    assert all(v > 0 for v in report.rejected.values()) and report.rejected["over_per_doc"] > 0


def test_the_same_seed_gives_the_same_set_and_another_seed_another(tmp_path):
    a = build_from_source(str(DOCS), tmp_path / "a", method="ict", max_questions=30, seed=1)
    b = build_from_source(str(DOCS), tmp_path / "b", method="ict", max_questions=30, seed=1)
    c = build_from_source(str(DOCS), tmp_path / "c", method="ict", max_questions=30, seed=2)
    assert a.kept == b.kept == 30
    assert (tmp_path / "a" / "questions.jsonl").read_bytes() == (tmp_path / "b" / "questions.jsonl").read_bytes()
    assert [q["question"] for q in questions(tmp_path / "a")] != [q["question"] for q in questions(tmp_path / "c")]
    assert c.kept == 30


def test_filters_drop_leaky_questions(tmp_path):
    loose = build_from_source(str(DOCS), tmp_path / "loose", method="heading", seed=0)
    strict = build_from_source(str(DOCS), tmp_path / "strict", method="heading", seed=0,
                               filters=Filters(max_word_overlap=0.5, min_bm25_rank=2))
    kept = questions(tmp_path / "strict")
    assert all(q["leakage"]["word_overlap"] <= 0.5 and q["leakage"]["bm25_rank"] >= 2 for q in kept)
    dropped = strict.rejected["filtered_word_overlap"] + strict.rejected["filtered_bm25_rank"]
    # a filtered question's removal is undone, so a question whose text that removal hid can fall out too: every
    # candidate is counted once, kept or under its reason
    assert dropped > 0 and strict.kept + dropped + strict.rejected["still_in_indexed_copy"] == loose.kept


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content, encoding="utf-8")
    return root


@pytest.mark.parametrize("method,files,message", [
    ("ict", {}, "no readable document"),
    ("ict", {"a.bin": b"\x00\x01\x02binary", "b.md": b"\x00\xff"}, "skipped: 1 binary, 1 not_documentation"),
    ("heading", {"notes.md": "Just prose. No headings here at all, only two sentences of text."},
     "document_without_headings"),
    ("ict", {"list.md": "# Title\n\n- one item\n- another item\n\n| a | b |\n|---|---|\n"}, "no document gave"),
])
def test_bad_sources_fail_with_one_message_and_write_nothing(tmp_path, capsys, method, files, message):
    source = write(tmp_path / "src", files)
    source.mkdir(exist_ok=True)
    with pytest.raises(SyntheticError, match=message):
        build_from_source(str(source), tmp_path / "out", method=method)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]  # no .partial- folder left behind
    with pytest.raises(SystemExit) as exit_info:
        kbench_main(["datasets", "build", "synthetic", str(source), "--method", method, "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2 and not (tmp_path / "out").exists()
    assert message.split(":")[0] in capsys.readouterr().err


def test_an_existing_out_folder_is_refused_without_force(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(SyntheticError, match="--force"):
        build_from_source(str(DOCS), tmp_path / "out", method="heading")
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


def test_cli_builds_a_set_and_prints_the_report(tmp_path, capsys):
    source = write(tmp_path / "kb", {
        "guide.md": "# Guide\n\n## Install\n\nRun the installer from the release page. It puts the binary in "
                    "/usr/local/bin and writes a default config.\n\n## Configure\n\nEdit config.toml to set the "
                    "port. The server reads it once at start-up, so restart it after a change.\n",
        "faq.txt": "Backups run nightly at two. They keep thirty days of snapshots. Restores take minutes.\n"})
    assert kbench_main(["datasets", "build", "synthetic", str(source), "--method", "ict", "--out",
                        str(tmp_path / "set"), "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert "questions (ict)" in printed and "leakage bm25_rank" in printed
    rows = questions(tmp_path / "set")
    assert {r["references"][0]["doc_id"] for r in rows} == {"guide.md", "faq.txt"}


# ---------------------------------------------------------------- the pieces, on hand-made text
def test_sentences_skip_code_lists_and_abbreviations():
    text = ("# T\n\nFirst one, e.g. this. Second is here! Third?\n\n```bash\n# not a heading. Not a sentence.\n```\n"
            "- a list item. Another.\n")
    blocks = prose_blocks(text)
    assert len(blocks) == 1
    assert [text[s.start:s.end] for s in sentences(text, blocks[0])] == [
        "First one, e.g. this.", "Second is here!", "Third?"]
    assert [h.title for h in headings(text)] == ["T"]


def test_bm25_rank_and_word_overlap_by_hand():
    docs = {"a": "Cats purr when content and cats sleep a lot.\n\nDogs bark at strangers.",
            "b": "Birds sing at dawn. Parrots mimic speech."}
    index = PassageIndex(docs)
    assert len(index.passages) == 2  # blocks under 200 characters merge into one passage per document
    assert index.gold_rank("why do cats purr", [("a", 0, 10)]) == 1
    assert index.gold_rank("why do cats purr", [("b", 0, 10)]) == 2  # shares no term: last
    assert word_overlap("do parrots sing", "Birds sing at dawn.") == 0.5  # {parrot, sing} -> sing
    assert near_duplicate_groups(["How do cats purr?", "how do cats purr", "Why do dogs bark?"]) == [None, 0, None]


def test_stratified_sample_spreads_across_documents_and_groups():
    def p(doc, i, stratum, group):
        return Proposal(doc, f"q {doc} {i}", 0, 1, None, stratum, group)
    by_doc = {"big": [p("big", i, f"s{i % 3}", f"g{i}") for i in range(30)],
              "small": [p("small", 0, "s", "g0"), p("small", 1, "s", "g0")]}
    chosen, dropped = stratified_sample(by_doc, per_doc=5, max_questions=6, seed=0)
    assert len(chosen) == 6 and sum(c.doc_id == "small" for c in chosen) == 1
    assert dropped["same_group_as_another"] == 1 and dropped["over_per_doc"] == 25 and dropped["over_max"] == 0
    assert len({c.stratum for c in chosen if c.doc_id == "big"}) == 3


# ---------------------------------------------------------------- markup out, generic headings in context
def test_clean_inline_strips_markup_and_keeps_escaped_characters():
    assert clean_inline(r"Call \_private and \*args, not **bold** or _it_ or ~~old~~") == \
        "Call _private and *args, not bold or it or old"
    assert clean_inline("See [the docs](https://x.io), [ref][1], [^2] and <https://a.b/c>.") == \
        "See the docs, ref, and https://a.b/c."
    assert clean_inline("Tom &amp; Jerry <!-- hidden --> <b>bold</b> `code` snake_case") == \
        "Tom & Jerry bold code snake_case"
    assert clean_inline("Use cases { #use-cases }") == "Use cases" and clean_inline("Recap {: .note }") == "Recap"


def test_ict_questions_carry_no_markup_and_admonition_lines_are_no_prose():
    text = ("# Title\n\n!!! note\n    Kept apart.\n\n/// tip\nA tip line here.\n///\n\n"
            r"Call \_private helpers with **care** before you ship it. See [the guide](g.md) &amp; more "
            "notes for details. A third and last sentence follows here.\n")
    items = ict.propose(Document("d.md", text, doc_type="markdown"), ict.DEFAULTS).items
    assert {p.question for p in items} == {"Call _private helpers with care before you ship it.",
                                          "See the guide & more notes for details.",
                                          "A third and last sentence follows here."}
    assert all(not text[b.start:b.end].startswith(("!!!", "///")) for b in prose_blocks(text))


DOC = ("---\ntitle: Streaming\n---\n## Use cases { #use-cases }\n\nStream rows to the client as they are read "
       "from the database, one by one.\n\n## Backpressure for slow clients\n\nThe server slows the producer when the "
       "client reads slowly, so memory stays flat.\n")
OTHER = "# Jobs\n\n## Use cases\n\nRun work in the background with retries, schedules and priorities.\n"


def test_a_generic_heading_carries_its_title_and_path_a_specific_one_stands_alone():
    docs = [Document("stream.md", DOC, doc_type="markdown"), Document("jobs.md", OTHER, doc_type="markdown")]
    corpus = heading.corpus_context(docs)
    assert corpus["heading_documents"]["use cases"] == 2
    asked = {p.question for d in docs for p in heading.propose(d, heading.DEFAULTS, corpus).items}
    assert asked == {"Streaming > Use cases", "Backpressure for slow clients", "Jobs > Use cases"}
    always = {p.question for p in heading.propose(docs[0], {**heading.DEFAULTS, "context": "always"}, corpus).items}
    assert always == {"Streaming > Use cases", "Streaming > Backpressure for slow clients"}
    never = [p.question for p in heading.propose(docs[0], {**heading.DEFAULTS, "context": "never"}, corpus).items]
    assert never == ["Use cases", "Backpressure for slow clients"]
    # no title anywhere: the file name; a BEIR-like title that is no path: that title
    bare = Document("guides/stream-data.md", DOC.split("---\n", 2)[2], title="guides/stream-data.md",
                    doc_type="markdown")
    assert heading.document_title(bare, headings(bare.text)) == "Stream data"
    titled = Document("d1", "## Methods\n\nWe measured it.\n", title="A study of things", doc_type="markdown")
    assert heading.document_title(titled, headings(titled.text)) == "A study of things"
    with pytest.raises(SyntheticError, match="context 'sometimes'"):
        heading.propose(docs[0], {"context": "sometimes"})


@pytest.mark.parametrize("method", ["heading", "ict"])
def test_every_reference_of_a_set_from_real_docs_matches_its_offsets(tmp_path, method):
    """FastAPI's English docs (real markdown: admonitions, includes, attribute lists): 0 mismatches."""
    out = tmp_path / method
    report = build_from_source(str(FASTAPI), out, method=method, per_doc=3, seed=0)
    rows = questions(out)
    assert report.kept == len(rows) >= 150
    mismatches = sum((out / "docs" / ref["doc_id"]).read_text(encoding="utf-8")[ref["start_index"]:ref["end_index"]]
                     != ref["content"] for row in rows for ref in row["references"])
    assert mismatches == 0
    assert not [r["question"] for r in rows if re.search(r"\{\s*#|\\[_*`]|&\w+;|\]\(|!!!|///", r["question"])]
    assert len(load_kbench_spans(out).queries) == len(rows)


def documents_of(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out / "docs").as_posix(): p.read_bytes() for p in (out / "docs").rglob("*") if p.is_file()}


@pytest.mark.parametrize("method,sizes", [("heading", (20, 200)), ("ict", (20, 100))])
def test_20_200_and_all_questions_index_the_same_documents(tmp_path, method, sizes):
    """issue 50 item 3: the indexed copy is decided by every candidate question, not by the questions drawn, so
    20, 200 and every question of the demo's pages index byte-identical documents, the smaller sets are the first
    questions of the larger (the same ids), --max N still gives N questions and `over_max` counts the candidates
    never examined. The set says how its documents were altered (issue 42's --max 40 had edited only its 40
    questions' documents: a corpus that moved with the set)."""
    small, large = sizes
    sets = {n: build_from_source(str(DOCS), tmp_path / str(n), method=method, max_questions=n, seed=0)
            for n in (small, large, None)}
    whole = documents_of(tmp_path / "None")
    assert documents_of(tmp_path / str(small)) == whole and documents_of(tmp_path / str(large)) == whole
    rows = {n: questions(tmp_path / str(n)) for n in sets}
    assert len(rows[small]) == small and len(rows[large]) == large and len(rows[None]) == sets[None].kept > large
    assert rows[large][:small] == rows[small] and rows[None][:large] == rows[large]
    assert sets[None].available == sets[small].available == sets[None].kept  # no filters: every question
    # --per-doc N keeps the first N rounds over the documents: the first questions of the whole order too
    per_doc = build_from_source(str(DOCS), tmp_path / "per-doc", method=method, per_doc=1, max_questions=small, seed=0)
    assert questions(tmp_path / "per-doc") == rows[small] and per_doc.available == sets[None].available
    checks = ("reference_empty_after_removal", "still_in_indexed_copy", "near_duplicate_question",
              "same_question_as_an_earlier_one")
    examined = 20 + sum(v for k, v in sets[20].rejected.items() if k in checks)
    candidates = sets[None].kept + sum(v for k, v in sets[None].rejected.items() if k in checks)
    assert sets[20].rejected["over_max"] == candidates - examined
    corpus = json.loads((tmp_path / "20" / "manifest.json").read_text())["report"]["corpus"]
    assert corpus == sets[None].corpus and corpus["removal"] == "candidates"
    assert corpus["removed"] == candidates and corpus["removed_unit"] == {"heading": "headings' words",
                                                                          "ict": "sentences"}[method]
    source = {p.relative_to(DOCS).as_posix(): p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")}
    assert corpus["headings"] == sum(len(headings(t)) for t in source.values())
    assert corpus["headings_left"] == sum(len(headings(t.decode())) for t in whole.values())
    if method == "heading":
        assert corpus["headings"] - corpus["headings_left"] == corpus["removed"] == corpus["markers"]  # a candidate's
        assert corpus_words(corpus).startswith(f"the indexed copy lost the words of {corpus['removed']} of its "
                                               f"{corpus['headings']} markdown headings (")
        assert "every candidate question's, whatever the set's size" in corpus_words(corpus)
    else:
        assert corpus["headings_left"] == corpus["headings"]
        assert corpus_words(corpus).startswith(f"the indexed copy lost {corpus['removed']} {corpus['removed_unit']} "
                                               "(every candidate question's, whatever the set's size): ")


def test_a_folder_source_reads_documentation_files_and_says_what_it_skipped(tmp_path, capsys):
    """issue 42 item 10: LICENSE and a COMMIT file were indexed as documents and ict made a question from the
    licence. Documentation files are read by default, the rest skipped by name; --include takes them."""
    guide = ("The client retries a request after a timeout or a server error. Each retry waits twice as long as the "
             "one before it. A request that fails five times is reported to the caller with its last error.\n\n"
             "Connections are pooled per host and kept open for a minute. A pool never holds more than ten idle "
             "connections. Closing the client closes every connection in its pools.\n")
    notes = ("Logging goes to standard error by default in every command. The level is read from an environment "
             "variable at start. Messages carry the time, the level and the name of the module.\n")
    source = write(tmp_path / "src", {"guide.md": f"# Guide\n\n{guide}", "notes.rst": f"Notes\n=====\n\n{notes}",
                                      "LICENSE": "Permission is hereby granted, free of charge, to any person. " * 5,
                                      "COMMIT": "Fix the build of the docs. Nobody noticed it for a week. " * 3,
                                      "tool.py": "def f():\n    return 1\n"})
    assert kbench_main(["datasets", "build", "synthetic", str(source), "--method", "ict", "--out",
                        str(tmp_path / "set")]) == 0
    out = capsys.readouterr().out
    assert "skipped files: not_documentation 3 (COMMIT, LICENSE, tool.py)" in out and "--include" in out
    assert sorted(p.name for p in (tmp_path / "set" / "docs").rglob("*") if p.is_file()) == ["guide.md", "notes.rst"]
    assert not any("Permission" in q["question"] for q in questions(tmp_path / "set"))
    report = build_from_source(str(source), tmp_path / "all", method="ict", include=["**/*.md", "LICENSE"])
    assert report.documents == 2 and not report.skipped_files  # asked for by name: taken


def test_keep_documents_indexes_them_whole_and_measures_the_leak(tmp_path, capsys):
    """issue 50 item 3, the other way: --keep-documents removes nothing; the set says so, and the questions' leak is
    measured (a heading question finds its own heading line)."""
    assert kbench_main(["datasets", "build", "synthetic", str(DOCS), "--method", "heading", "--out",
                        str(tmp_path / "whole"), "--max", "20", "--keep-documents"]) == 0
    out = capsys.readouterr().out
    assert "documents: whole (nothing removed from the indexed copy; the leakage below is what" in out
    source = {p.relative_to(DOCS).as_posix(): p.read_bytes() for p in DOCS.rglob("*.md")}
    assert documents_of(tmp_path / "whole") == source
    manifest = json.loads((tmp_path / "whole" / "manifest.json").read_text())
    assert manifest["keep_documents"] is True and manifest["report"]["corpus"] == {"removal": "none"}
    assert corpus_words(manifest["report"]["corpus"]) == ""
    assert len(questions(tmp_path / "whole")) == 20


# ---------------------------------------------------------------- issue 53 item 5: context, every page that answers
RESPONSES = ("# Custom Responses\n\nReturn something other than JSON from a path operation of the app.\n\n"
             "## With HTML\n\nReturn an HTMLResponse with the page as a string; the docs show it as text/html.\n\n"
             "## Learn more\n\nThe reference lists every response class with its media type and its defaults.\n")
GUIDE = ("# Guide\n\nHow to run the service on your own machines, step by step.\n\n"
         "## Install the client library\n\nRun pip install lumen-client in a virtual environment of its own.\n")


def test_two_word_headings_carry_their_page_and_a_question_asked_on_two_pages_has_both(tmp_path):
    source = write(tmp_path / "src", {"responses.md": RESPONSES, "v1/guide.md": GUIDE, "v2/guide.md": GUIDE})
    report = build_from_source(str(source), tmp_path / "set", method="heading", seed=0)
    rows = {r["question"]: r for r in questions(tmp_path / "set")}
    assert {"Custom Responses > With HTML", "Custom Responses > Learn more"} <= set(rows)  # never "With HTML" alone
    both = rows["Guide > Install the client library"]  # on two pages: one question, a reference on each
    assert sorted(ref["doc_id"] for ref in both["references"]) == ["v1/guide.md", "v2/guide.md"]
    assert report.rejected["same_question_as_an_earlier_one"] >= 1 and "near_duplicate_question" not in report.rejected
    dataset = load_kbench_spans(tmp_path / "set")
    assert {len(spans) for spans in dataset.spans.values()} >= {2}
    # --max 1 indexes the very same pages (the merge reads every candidate, as the removals do)
    build_from_source(str(source), tmp_path / "one", method="heading", seed=0, max_questions=1)
    assert documents_of(tmp_path / "one") == documents_of(tmp_path / "set")


def test_marker_removal_keeps_every_section_for_a_section_aware_chunker(tmp_path):
    """With removal: line the demo's pages kept 11% of their headings; with the default marker, every heading line
    stays (its words gone), so the markdown chunker cuts the indexed copy where it cuts the pages."""
    from kbench.chunking.config import ChunkingConfig
    from kbench.chunking.stage import chunk_corpus

    marker = build_from_source(str(DOCS), tmp_path / "marker", method="heading", seed=0)
    line = build_from_source(str(DOCS), tmp_path / "line", method="heading", seed=0, params={"removal": "line"})
    assert marker.corpus["markers"] == marker.corpus["removed"] > 200 and line.corpus["markers"] == 0
    config = ChunkingConfig(strategy="markdown")

    def sections(pages: dict[str, str]) -> int:
        docs = [Document(k, v, doc_type="markdown") for k, v in pages.items() if k.endswith(".md")]
        return len(chunk_corpus(docs, config))

    source = sections({p.relative_to(DOCS).as_posix(): p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")})
    assert sections({k: v.decode() for k, v in documents_of(tmp_path / "marker").items()}) >= 0.9 * source
    assert sections({k: v.decode() for k, v in documents_of(tmp_path / "line").items()}) < 0.6 * source
    for row in questions(tmp_path / "marker"):  # the asked heading's words are gone from its page
        leaf = row["question"].split(" > ")[-1]
        page = (tmp_path / "marker" / "docs" / row["references"][0]["doc_id"]).read_text(encoding="utf-8")
        assert not any(ln.lstrip("#").strip() == leaf for ln in page.splitlines() if ln.startswith("#")), leaf
    with pytest.raises(SyntheticError, match="removal 'some'"):
        build_from_source(str(DOCS), tmp_path / "bad", method="heading", params={"removal": "some"})
