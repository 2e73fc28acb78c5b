"""Build a code-QA span dataset from a source tree: docstrings become questions, functions the answers.

For every documented function or method, the question is the first sentence of its docstring (or doc
comment) and the reference span is the whole function (decorators / attributes / ``export`` included)
in the *indexed copy* of its file. The indexed copy has those docstrings removed, with every offset
computed in the copy, so a retriever cannot find the question verbatim and must match it to code.

- Python: the standard ``ast`` module; a docstring on its own lines is deleted with its lines, any other
  (or the only statement of a body) is replaced by ``pass`` so the copy still parses.
- Through tree-sitter (tree-sitter-language-pack 0.13.0, grammars shipped in the wheel): JavaScript and
  TypeScript (a ``/** JSDoc */`` right above a function, method, or ``const f = () =>``), Java (Javadoc
  above a method or constructor), Go (``//`` lines right above a func) and Rust (``///`` lines above a
  fn, attributes allowed between). The doc comment is deleted with its lines.

Questions are dropped, with the reason counted in ``manifest.json``, when the sentence is shorter than
three words, when two functions share it (the question would be ambiguous) or when it still appears in
the indexed corpus (say, copied into a class docstring). Output: the kbench span layout read by
``kbench.datasets.spans.load_kbench_spans``: ``DIR/docs/<path>`` (every source file of a supported
language, with or without questions, as distractors), ``DIR/questions.jsonl`` and ``DIR/manifest.json``.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kbench.datasets.beir import DatasetError

LANGUAGES = {".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
             ".jsx": "javascript", ".ts": "typescript", ".tsx": "tsx", ".go": "go", ".rs": "rust",
             ".java": "java"}
SKIP_DIRS = {"__pycache__", "node_modules", "venv", ".venv", "build", "dist", "target"}
MAX_FILE_CHARS = 1_000_000
MIN_WORDS = 3


class CodeQAError(DatasetError):
    pass


@dataclass(frozen=True)
class Edit:
    """Replace characters ``[start, end)`` of the original text with ``text``."""

    start: int
    end: int
    text: str = ""


@dataclass(frozen=True)
class DocumentedFunction:
    symbol: str  # qualified name, e.g. Loader.construct_mapping
    start: int  # function range in the original text (decorators included)
    end: int
    doc: str  # the docstring / doc comment, markers stripped
    removal: Edit  # how to take the doc out of the file


@dataclass
class BuildReport:
    source: str
    out: str
    files: int = 0
    files_by_language: Counter = field(default_factory=Counter)
    questions: int = 0
    questions_by_language: Counter = field(default_factory=Counter)
    documented_functions: int = 0
    skipped_files: dict[str, list[str]] = field(default_factory=dict)  # reason -> paths
    dropped_questions: Counter = field(default_factory=Counter)  # reason -> count

    def as_dict(self) -> dict:
        return {"source": self.source, "out": self.out, "files": self.files,
                "files_by_language": dict(self.files_by_language), "questions": self.questions,
                "questions_by_language": dict(self.questions_by_language),
                "documented_functions": self.documented_functions,
                "skipped_files": {k: len(v) for k, v in self.skipped_files.items()},
                "dropped_questions": dict(self.dropped_questions)}


# --------------------------------------------------------------------------- text helpers
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|resp|Mr|Dr|No)|\.\.)\.$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def first_sentence(doc: str) -> str:
    """The first sentence of the first paragraph, whitespace collapsed ("" if there is none)."""
    paragraph = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    text = " ".join(paragraph.split())
    for m in _SENTENCE_END.finditer(text):
        if not _ABBREVIATION.search(text[: m.end()]):
            return text[: m.end()]
    return text


def apply_edits(text: str, edits: list[Edit]):
    """The edited text and a function mapping an original offset (outside any edit) to the new text.

    An offset at an edit's end maps past the replacement, so a function ending with its (replaced)
    docstring keeps the replacement inside its range.
    """
    edits = sorted(edits, key=lambda e: e.start)
    for a, b in zip(edits, edits[1:]):
        if b.start < a.end:
            raise ValueError(f"overlapping edits {a} and {b}")
    pieces, pos = [], 0
    ends, shifts, shift = [], [], 0
    for e in edits:
        pieces.append(text[pos:e.start])
        pieces.append(e.text)
        pos = e.end
        shift += len(e.text) - (e.end - e.start)
        ends.append(e.end)
        shifts.append(shift)
    pieces.append(text[pos:])

    def new_offset(offset: int) -> int:
        i = bisect_right(ends, offset)  # edits that end at or before the offset
        return offset + (shifts[i - 1] if i else 0)

    return "".join(pieces), new_offset


class LineIndex:
    """Line/column (UTF-8 bytes, as ast and tree-sitter report them) to character offsets."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0]
        for m in re.finditer("\n", text):
            self.starts.append(m.end())
        self._ascii = text.isascii()

    def line_of(self, offset: int) -> int:  # 0-based
        return bisect_right(self.starts, offset) - 1

    def line_start(self, line: int) -> int:
        return self.starts[line] if line < len(self.starts) else len(self.text)

    def offset(self, line: int, byte_col: int) -> int:
        """``line`` 0-based, ``byte_col`` a UTF-8 byte column."""
        start = self.starts[line]
        if self._ascii:
            return start + byte_col
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        return start + len(self.text[start:end].encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def whole_lines(self, start: int, end: int) -> tuple[int, int] | None:
        """``[start, end)`` widened to whole lines when only whitespace shares those lines, else None."""
        first = self.line_of(start)
        before = self.text[self.line_start(first):start]
        if end > start and self.text[end - 1] == "\n":  # the range already ends its line (Rust comments)
            return (None if before.strip() else (self.line_start(first), end))
        line_end = self.text.find("\n", end)
        after = self.text[end: len(self.text) if line_end < 0 else line_end]
        if before.strip() or after.strip():
            return None
        return self.line_start(first), (len(self.text) if line_end < 0 else line_end + 1)


# --------------------------------------------------------------------------- Python (ast)
def python_documented_functions(text: str) -> list[DocumentedFunction]:
    tree = ast.parse(text)
    lines = LineIndex(text)
    found: list[DocumentedFunction] = []

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qualname = ".".join(scope + [child.name])
                doc = ast.get_docstring(child, clean=True)
                if doc:
                    found.append(_python_function(child, qualname, doc, lines))
                visit(child, scope + [child.name, "<locals>"])
            elif isinstance(child, ast.ClassDef):
                visit(child, scope + [child.name])
            else:
                visit(child, scope)

    visit(tree, [])
    return found


def _python_function(node, qualname: str, doc: str, lines: LineIndex) -> DocumentedFunction:
    first_line = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    if node.decorator_list:  # a decorator's node starts after its '@': take the line's first character
        line_start = lines.line_start(first_line)
        line = lines.text[line_start: lines.line_start(first_line + 1)]
        start = line_start + len(line) - len(line.lstrip())
    else:
        start = lines.offset(node.lineno - 1, node.col_offset)
    end = lines.offset(node.end_lineno - 1, node.end_col_offset)
    ds = node.body[0]
    ds_start = lines.offset(ds.lineno - 1, ds.col_offset)
    ds_end = lines.offset(ds.end_lineno - 1, ds.end_col_offset)
    widened = lines.whole_lines(ds_start, ds_end) if len(node.body) > 1 else None
    removal = Edit(*widened) if widened else Edit(ds_start, ds_end, "pass")
    return DocumentedFunction(qualname, start, end, doc, removal)


# --------------------------------------------------------------------------- tree-sitter languages
@dataclass(frozen=True)
class DocCommentStyle:
    functions: frozenset[str]  # node types that are functions
    comments: frozenset[str]  # node types of comments
    marker: str  # a doc comment starts with this ("/**", "//", "///")
    block: bool  # one block comment (JSDoc, Javadoc) vs a run of line comments (Go, Rust)
    wrappers: frozenset[str] = frozenset()  # the doc sits above this parent (export_statement)
    between: frozenset[str] = frozenset()  # nodes allowed between doc and function (Rust attributes)
    not_marker: str | None = None  # "////" is a plain comment in Rust


_JS = DocCommentStyle(
    functions=frozenset({"function_declaration", "generator_function_declaration", "method_definition",
                         "lexical_declaration", "variable_declaration"}),
    comments=frozenset({"comment"}), marker="/**", block=True, wrappers=frozenset({"export_statement"}))
STYLES = {
    "javascript": _JS,
    "typescript": _JS,
    "tsx": _JS,
    "java": DocCommentStyle(frozenset({"method_declaration", "constructor_declaration"}),
                            frozenset({"block_comment"}), "/**", True),
    "go": DocCommentStyle(frozenset({"function_declaration", "method_declaration"}), frozenset({"comment"}),
                          "//", False),
    "rust": DocCommentStyle(frozenset({"function_item"}), frozenset({"line_comment"}), "///", False,
                            between=frozenset({"attribute_item"}), not_marker="////"),
}


CONTAINERS = {"class_declaration", "class", "abstract_class_declaration", "interface_declaration",
              "enum_declaration", "impl_item", "trait_item", "mod_item"}


def _node_text(node, source: bytes) -> str:
    return source[node.start_byte:node.end_byte].decode("utf-8", errors="replace")


def _is_function(node, style: DocCommentStyle, source: bytes) -> bool:
    if node.type not in style.functions:
        return False
    if node.type in ("lexical_declaration", "variable_declaration"):  # const f = () => ... / function () {}
        declarators = [c for c in node.named_children if c.type == "variable_declarator"]
        return len(declarators) == 1 and any(
            (v := declarators[0].child_by_field_name("value")) is not None and v.type == t
            for t in ("arrow_function", "function_expression", "function", "generator_function"))
    return True


def _function_name(node, source: bytes) -> str:
    name = node.child_by_field_name("name")
    if name is None:
        for c in node.named_children:
            if c.type == "variable_declarator" and c.child_by_field_name("name") is not None:
                name = c.child_by_field_name("name")
                break
    return _node_text(name, source) if name is not None else "<anonymous>"


def _is_doc(node, style: DocCommentStyle, source: bytes) -> bool:
    if node.type not in style.comments:
        return False
    text = _node_text(node, source)
    if style.not_marker and text.startswith(style.not_marker):
        return False
    return text.startswith(style.marker) and (not style.block or text != "/**/")


def clean_doc_comment(texts: list[str], style: DocCommentStyle) -> str:
    """Comment text without markers; a block comment stops at its first ``@tag`` line."""
    if style.block:
        body = texts[-1][len(style.marker):]
        body = body[:-2] if body.endswith("*/") else body
        lines = [re.sub(r"^\s*\*? ?", "", ln) for ln in body.split("\n")]
        kept = []
        for ln in lines:
            if ln.lstrip().startswith("@"):
                break
            kept.append(ln)
        text = "\n".join(kept)
        # {@link Target} -> Target; {@link Target shown text} -> shown text
        text = re.sub(r"\{@\w+\s+([^}\s|]+)(?:[\s|]+([^}]*))?\}", lambda m: m.group(2) or m.group(1), text)
        return re.sub(r"</?[a-zA-Z][^>]*>", "", text)
    return "\n".join(re.sub(rf"^{re.escape(style.marker)} ?", "", t.strip()) for t in texts)


def treesitter_documented_functions(text: str, language: str) -> list[DocumentedFunction]:
    from tree_sitter_language_pack import get_parser

    style = STYLES[language]
    source = text.encode("utf-8")
    tree = get_parser(language).parse(source)
    lines = LineIndex(text)
    found: list[DocumentedFunction] = []

    def char(point) -> int:
        return lines.offset(point[0], point[1])

    def scope_of(node) -> list[str]:
        """Names of the enclosing classes / impls (and a Go method's receiver type)."""
        names = []
        if node.type == "method_declaration" and language == "go":
            receiver = node.child_by_field_name("receiver")
            if receiver is not None:
                names.append(_node_text(receiver, source).strip("()").split()[-1].lstrip("*"))
        parent = node.parent
        while parent is not None:
            if parent.type in CONTAINERS:
                name = parent.child_by_field_name("name") or parent.child_by_field_name("type")
                if name is not None:
                    names.insert(0, _node_text(name, source))
            parent = parent.parent
        return names

    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.named_children))
        if not _is_function(node, style, source):
            continue
        anchor = node.parent if node.parent is not None and node.parent.type in style.wrappers else node
        first = anchor
        prev = anchor.prev_named_sibling
        while prev is not None and prev.type in style.between:
            first, prev = prev, prev.prev_named_sibling
        docs = []
        expected_row = first.start_point[0]
        while prev is not None and _is_doc(prev, style, source) and prev.end_point[0] >= expected_row - 1:
            docs.append(prev)
            expected_row = prev.start_point[0]
            if style.block:
                break
            prev = prev.prev_named_sibling
        if not docs:
            continue
        docs.reverse()
        doc = clean_doc_comment([_node_text(d, source) for d in docs], style)
        doc_start, doc_end = char(docs[0].start_point), char(docs[-1].end_point)
        widened = lines.whole_lines(doc_start, doc_end)
        if widened:
            removal = Edit(*widened)
        else:  # code shares the line (`/** x */ run() {}`): drop the comment and the spaces after it
            after = len(text[doc_end:]) - len(text[doc_end:].lstrip(" \t"))
            removal = Edit(doc_start, doc_end + after)
        symbol = ".".join(scope_of(node) + [_function_name(node, source)])
        found.append(DocumentedFunction(symbol, char(first.start_point), char(anchor.end_point), doc, removal))
    found.sort(key=lambda f: f.start)
    return found


# --------------------------------------------------------------------------- the builder
def documented_functions(text: str, language: str) -> list[DocumentedFunction]:
    if language == "python":
        return python_documented_functions(text)
    return treesitter_documented_functions(text, language)


def iter_source_files(root: Path, languages: set[str]):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS)
        for name in sorted(filenames):
            language = LANGUAGES.get(Path(name).suffix.lower())
            if language and language in languages:
                yield Path(dirpath) / name, language


def build_code_qa(source: str | Path, out: str | Path, *, languages: list[str] | None = None,
                  force: bool = False) -> BuildReport:
    """Walk ``source``, write the indexed copies and questions under ``out``; returns the counts."""
    source, out = Path(source).expanduser().resolve(), Path(out).expanduser().resolve()
    if not source.is_dir():
        raise CodeQAError(f"code-qa: source {source} is not a folder (give a package or repository folder)")
    wanted = set(languages or set(LANGUAGES.values()))
    unknown = wanted - set(LANGUAGES.values())
    if unknown:
        raise CodeQAError(f"code-qa: unknown languages {sorted(unknown)}; known: {sorted(set(LANGUAGES.values()))}")
    if out == source or source in out.parents:
        raise CodeQAError(f"code-qa: --out {out} is inside the source tree {source}; choose another folder")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise CodeQAError(f"code-qa: {out} exists and is not empty; choose a new folder or pass --force "
                              "to replace its docs/ and questions.jsonl")
        shutil.rmtree(out / "docs", ignore_errors=True)

    report = BuildReport(str(source), str(out))
    indexed: dict[str, str] = {}
    candidates: list[dict] = []
    for path, language in iter_source_files(source, wanted):
        doc_id = path.relative_to(source).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            report.skipped_files.setdefault("not_utf8", []).append(doc_id)
            continue
        if len(text) > MAX_FILE_CHARS:
            report.skipped_files.setdefault("too_large", []).append(doc_id)
            continue
        try:
            functions = documented_functions(text, language)
        except SyntaxError:
            report.skipped_files.setdefault("syntax_error", []).append(doc_id)
            continue
        copy, new_offset = apply_edits(text, [f.removal for f in functions])
        if language == "python":
            ast.parse(copy)  # the copy must still be Python; a failure here is a builder bug
        indexed[doc_id] = copy
        report.files += 1
        report.files_by_language[language] += 1
        report.documented_functions += len(functions)
        for f in functions:
            start, end = new_offset(f.start), new_offset(f.end)
            candidates.append({"question": first_sentence(f.doc), "doc_id": doc_id, "start": start, "end": end,
                               "symbol": f.symbol, "language": language})

    flat_corpus = " ".join(" ".join(t.split()) for t in indexed.values())
    counts = Counter(c["question"] for c in candidates)
    questions, used_ids = [], Counter()
    for c in candidates:
        q = c["question"]
        if len(q.split()) < MIN_WORDS:
            report.dropped_questions["too_short"] += 1
        elif counts[q] > 1:
            report.dropped_questions["shared_by_several_functions"] += 1
        elif q in flat_corpus:
            report.dropped_questions["still_in_indexed_copy"] += 1
        else:
            base_id = f"{c['doc_id']}::{c['symbol']}"
            used_ids[base_id] += 1
            qid = base_id if used_ids[base_id] == 1 else f"{base_id}~{used_ids[base_id]}"
            content = indexed[c["doc_id"]][c["start"]:c["end"]]
            questions.append({"query_id": qid, "question": q, "references": [
                {"doc_id": c["doc_id"], "start_index": c["start"], "end_index": c["end"], "content": content}],
                "symbol": c["symbol"], "language": c["language"]})
            report.questions_by_language[c["language"]] += 1
    report.questions = len(questions)
    if not indexed:
        raise CodeQAError(f"code-qa: no source files of {sorted(wanted)} under {source}")

    for doc_id, text in indexed.items():
        target = out / "docs" / doc_id
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="\n")
    with (out / "questions.jsonl").open("w", encoding="utf-8") as f:
        for q in questions:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    (out / "manifest.json").write_text(json.dumps(report.as_dict(), indent=2), encoding="utf-8")
    return report
