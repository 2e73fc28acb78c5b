"""The sweep's console knob table wraps to the terminal (issue 42 item 14: a 227-character table and a
500-character legend line ran past any terminal)."""
from __future__ import annotations

import re

from kbench.sweep.summary import knob_table, knob_table_lines

BM25 = {"k1": "1.2", "b": "0.75", "idf": "lucene", "epsilon": "0.25", "lowercase": "true",
        "stemmer": "snowball_english", "stopwords": "english", "keep_whole": "false"}
NAMED = [("strategy=markdown,legs=[vector]", {"chunking.strategy": "markdown", "chunking.params.max_depth": "3",
                                             "retrieval.legs": '["vector"]'}),
         ("strategy=recursive,legs=[vector,bm25]", {"chunking.strategy": "recursive", "retrieval.legs": '["vector", "bm25"]',
                                                   **{f"retrieval.leg_params.bm25.{k}": v for k, v in BM25.items()}})]
KEYS = [("run key", ["daf62aa823c5e15b", "f74db2a49271f843"])]


def blocks(lines: list[str]) -> list[list[str]]:
    """The table's blocks (separated by a blank line), without the legend."""
    table = [line for line in lines if not line.lstrip().startswith(("columns:", "retrieval.", "chunking."))
             and not line.startswith("    ")]
    out, block = [], []
    for line in table:
        if not line.strip():
            out.append(block)
            block = []
        else:
            block.append(line)
    return out + [block]


def test_a_wide_table_wraps_into_blocks_that_each_start_with_the_config_and_keep_every_value():
    table = knob_table(NAMED)
    lines = knob_table_lines(table, KEYS, indent="  ", width=100)
    assert max(len(line) for line in lines) <= 100
    parts = blocks(lines)
    assert len(parts) >= 2
    headers = []
    for part in parts:
        assert part[0].split()[:3] == ["config", "run", "key"]  # the label and the run key start every block
        assert [row.split()[0] for row in part[2:]] == [label for label, _ in NAMED]
        headers += part[0].split()[3:]
    assert headers == table.headers  # every knob once, in order
    cells = {}
    for part in parts:
        for row in part[2:]:
            label, key, *values = re.split(r"\s{2,}", row.strip())
            assert key == dict(zip([n for n, _ in NAMED], KEYS[0][1]))[label]
            cells.setdefault(label, []).extend(values)
    assert cells == {label: row for label, row in zip(table.labels, table.values)}  # every value, in order


def test_the_legend_wraps_between_pairs_and_a_narrow_table_stays_one_block():
    table = knob_table(NAMED)
    lines = knob_table_lines(table, KEYS, indent="  ", width=80)
    legend = " ".join(line.strip() for line in lines if line.startswith("    ") or "columns:" in line)
    assert legend == "columns: " + "; ".join(f"{h} = {p}" for h, p in table.legend.items())
    assert all(len(line) <= 80 for line in lines if line.startswith("    ") or "columns:" in line)
    wide = knob_table_lines(table, KEYS, indent="  ", width=1000)
    assert len(blocks(wide)) == 1 and len(wide) == 4 + 1  # header, rule, two rows, the legend on one line


# ------------------------------------------------------------- issue 53 item 2: chunk sizes on a top-k headline
def test_a_sweep_of_chunk_sizes_on_a_top_k_headline_says_so_beside_its_pick(workspace, tmp_path, capsys):
    """Two chunk sizes ranked on chunk nDCG@10: the pick carries the warning, the budget metric's own ranking and the
    command that ranks on it; with no budget measured, the command that measures one."""
    import yaml

    from kbench.cli import main
    from tests.sweep.test_sweep import sweep_data

    data = sweep_data(workspace, sweep={"chunking.chunk_size": [300, 1200]}, evaluation={"k": [1, 5, 10],
                                                                                         "budgets": [250, 500]})
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(data))
    assert main(["sweep", str(config)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    pick = next(i for i, line in enumerate(lines) if line.startswith("recommendation:"))
    warning = next(i for i, line in enumerate(lines) if "these configs chunk differently" in line)
    assert pick < warning  # beside the pick, before the closing lines
    assert ("these configs chunk differently (chunk_size 300; chunk_size 1200) and chunk_ndcg_at_10 counts chunks, "
            "not tokens") in lines[warning]
    assert lines[warning + 2].startswith("  its knobs: ")  # then the pick's knobs and its resolved config
    budget = lines[warning + 1]
    parent = re.search(r"MLflow parent run (\w+)", out).group(1)
    assert budget.startswith("  at a token budget (span_recall_at_budget_500): the pick chunk_size=")
    assert budget.endswith(f"rank on it: kbench compare --sweep {parent} --metric span_recall_at_budget_500")
    assert re.search(r"the pick \S+ is (the best there too \(0\.\d{4}\)|2nd of 2 \(0\.\d{4} against \S+'s "
                     r"0\.\d{4}\))", budget), budget


def test_the_chunk_size_lines_without_a_budget_and_on_a_budget_headline():
    from kbench.evaluation.budgets import chunk_size_lines

    sizes = {"a": "chunk_size 1000", "b": "chunk_size 2000", "c": "chunk_size 500"}
    command = "kbench sweep s.yaml --set 'evaluation.budgets=[500]'"
    lines = chunk_size_lines(sizes, "chunk_ndcg_at_10", "b", {}, command)
    assert len(lines) == 2 and lines[1] == f"  compare them at a token budget: {command}"
    assert "(chunk_size 1000; chunk_size 2000; chunk_size 500)" in lines[0]
    grouped = chunk_size_lines({"m1": "strategy markdown, chunk_size 2000", "m2": "strategy markdown, chunk_size 2000",
                                "r1": "strategy recursive, chunk_size 1000"}, "chunk_ndcg_at_10", "r1", {}, command)
    assert ("(strategy markdown, chunk_size 2000: 2 configs; strategy recursive, chunk_size 1000: 1 config)"
            in grouped[0])
    means = {"span_recall_at_budget_500": {"a": 0.39, "b": 0.24, "c": 0.30}}
    assert chunk_size_lines(sizes, "chunk_ndcg_at_10", "b", means, "C")[1] == (
        "  at a token budget (span_recall_at_budget_500): the pick b is 3rd of 3 (0.2400 against a's 0.3900); rank "
        "on it: C")
    assert chunk_size_lines(sizes, "span_recall_at_budget_500", "a", means, "C") == []  # fair already
    tie = {"span_recall_at_budget_500": {"a": 0.3604, "b": 0.3604, "c": 0.30}}  # the 148-page run's case
    assert chunk_size_lines(sizes, "chunk_ndcg_at_10", "b", tie, "C")[1] == (
        "  at a token budget (span_recall_at_budget_500): the pick b is the best there too (0.3604, tied with a); "
        "rank on it: C")
    assert chunk_size_lines({"a": "chunk_size 600", "b": "chunk_size 600"}, "chunk_ndcg_at_10", "a", {}, "C") == []
