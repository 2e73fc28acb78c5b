"""kbench chunk: statistics, skipped files and sample chunks for a dataset, a folder or a config."""
from __future__ import annotations

from pathlib import Path

import pytest

from kbench.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_chunk_the_demo_set_with_a_named_chunker(capsys):
    assert main(["chunk", "demo", "--chunker", "markdown", "--set", "chunk_size=800", "--show", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("demo: chunker markdown") and '"chunk_size": 800' in out
    assert "mean_chars" in out and "p90_chars" in out
    assert "documents by type: code 5, markdown 27" in out
    assert "skipped files: none" in out
    assert out.count("\n--- ") == 2 and '"heading_path"' in out


def test_chunk_a_folder_reports_skipped_files_by_reason(tmp_path, capsys):
    (tmp_path / "a.md").write_text("# A\n\nSome text about queues.\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blob.txt").write_bytes(b"\x00\x01binary")
    (tmp_path / "big.md").write_text("x " * 600)
    assert main(["chunk", str(tmp_path), "--chunker", "smart", "--max-file-bytes", "1000", "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert "skipped files: binary 1, empty 1, oversized 1" in out
    assert "  oversized: big.md" in out


def test_chunk_uses_a_configs_chunking_section(capsys):
    assert main(["chunk", str(REPO / "configs" / "chunking" / "smart.yaml"), "--show", "0"]) == 0
    assert "chunker smart" in capsys.readouterr().out


def test_unknown_knob_names_the_allowed_ones(capsys):
    with pytest.raises(SystemExit):
        main(["chunk", "demo", "--chunker", "smart", "--set", "chunk_sise=3"])
    err = capsys.readouterr().err
    assert "chunk_sise" in err and "chunk_size" in err


def test_chunk_statistics_print_at_sensible_precision(capsys):
    """The statistics row agrees with chunk_statistics, with no padded zeros (488 rather than 488.0000)."""
    from types import SimpleNamespace

    from kbench.chunking import chunk_corpus
    from kbench.cli.chunk_cmd import chunk_statistics, chunking_config, read_documents

    assert main(["chunk", "demo", "--chunker", "fixed", "--set", "chunk_size=500", "--show", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[1].split()
    printed = dict(zip(header, lines[3].split()))
    args = SimpleNamespace(source="demo", include=None, exclude=None, max_file_bytes=None)
    _, documents, _, section = read_documents(args)
    stats = chunk_statistics(chunk_corpus(documents, chunking_config(section, "fixed", ["chunk_size=500"])),
                             documents)
    assert list(printed) == list(stats)
    for name, value in stats.items():
        text = printed[name]
        assert not text.endswith(".0000"), (name, text)
        if float(value) == int(value):
            assert text == str(int(value)), (name, text)  # whole numbers without decimals
        else:
            decimals = len(text.split(".")[1])
            assert decimals <= 4 and abs(float(text) - value) <= 0.5 * 10 ** -decimals, (name, text, value)
