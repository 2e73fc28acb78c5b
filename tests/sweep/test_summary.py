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
