"""Where a command writes is checked before it works: never over its own input, never over files it did not write.

``kbench datasets build synthetic SOURCE --out SOURCE --force`` deleted the source documents (exit 0) and an
``--out`` holding SOURCE removed the files beside it; ``kbench gate`` checked ``--margin``, ``--alpha``,
``--json`` and ``--summary`` only after running both sides; ``kbench judge --out FOLDER`` judged every pair,
then failed on the rename and left a ``.partial-*`` file behind.
"""
from __future__ import annotations

import shutil

import pytest

from tests.reliability.inputs import DEMO, error_lines, run_kbench


def docs_folder(root):
    source = root / "docs"
    shutil.copytree(DEMO / "docs", source)
    return source


def files_under(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", ["out_is_the_source", "out_holds_the_source", "out_inside_the_source"])
def test_a_synthetic_set_never_replaces_its_source_or_what_is_beside_it(tmp_path, case):
    source = docs_folder(tmp_path)
    (tmp_path / "notes.txt").write_text("someone's notes beside the documents\n")
    out = {"out_is_the_source": source, "out_holds_the_source": tmp_path,
           "out_inside_the_source": source / "set"}[case]
    before = files_under(tmp_path)
    done = run_kbench("datasets", "build", "synthetic", str(source), "--method", "heading", "--out", str(out),
                      "--force", cwd=tmp_path, timeout=120)
    assert done.code == 2, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert f"--out {out.resolve()} is" in line and "the source" in line and "Traceback" not in done.err, line
    assert files_under(tmp_path) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".partial")] == []


def test_force_replaces_a_set_built_before_and_never_a_folder_of_other_files(tmp_path):
    source = docs_folder(tmp_path)
    others = tmp_path / "others"
    others.mkdir()
    (others / "thesis.md").write_text("not a synthetic set\n")
    done = run_kbench("datasets", "build", "synthetic", str(source), "--method", "heading", "--out", str(others),
                      "--force", cwd=tmp_path, timeout=120)
    assert done.code == 2, done.err[-2000:]
    (line,) = error_lines(done.err)
    assert "holds files kbench did not write" in line and "choose a new folder" in line, line
    assert files_under(others) == {"thesis.md": b"not a synthetic set\n"}
    built = tmp_path / "set"
    for _ in range(2):  # a set built before is replaced, as --force says
        done = run_kbench("datasets", "build", "synthetic", str(source), "--method", "heading", "--out",
                          str(built), "--force", "--max", "5", cwd=tmp_path, timeout=120)
        assert done.code == 0, done.err[-2000:]
    assert (built / "manifest.json").is_file() and (built / "questions.jsonl").is_file()
