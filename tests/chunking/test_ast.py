"""ast: tree-sitter chunks by granularity, options, metadata, splits and the parse-error fallback."""
from __future__ import annotations

import json.decoder

import pytest

from kbench.chunking.ast import AstParams, ast_chunks
from kbench.records import Document
from tests.chunking.corpora import demo_document, module_document, uncovered

SAMPLES = {
    "py": 'import os\nfrom a import b\n\n# leading comment\n@dec\nclass A(B):\n    """Doc."""\n    x = 1\n\n'
          '    def m(self):\n        return 1  # trailing\n\n\ndef f(x):\n    y = 2\n    return y\n',
    "js": 'import x from "y";\n// c\nexport class A extends B {\n  constructor() { super(); }\n  m(a) { return a; }\n}\n'
          'function f(a) { const b = 1; return b; }\nconst g = (a) => a + 1;\n',
    "ts": 'import {x} from "y";\ninterface I { a: number; m(): void }\nexport class A implements I {\n'
          '  private a: number = 1;\n  m(): void { return; }\n}\nexport function f(a: number): number { return a; }\n',
    "go": 'package main\n\nimport (\n\t"fmt"\n)\n\n// S doc\ntype S struct{ a int }\n\n'
          'func (s *S) M(x int) int { return x }\n\nfunc F() { fmt.Println(1) }\n',
    "java": 'package a;\nimport java.util.List;\n/** doc */\npublic class A extends B {\n  private int x;\n'
            '  public A() {}\n  @Override\n  public int m(int a) { return a; }\n}\n',
    "rs": 'use std::io;\n/// doc\n#[derive(Debug)]\nstruct S { a: i32 }\nimpl S {\n    fn m(&self) -> i32 { self.a }\n}\n'
          'fn f() -> i32 { 1 }\n',
}
LANGUAGE = {"py": "python", "js": "javascript", "ts": "typescript", "go": "go", "java": "java", "rs": "rust"}


def doc(ext: str, text: str | None = None) -> Document:
    return Document(f"src/sample.{ext}", SAMPLES[ext] if text is None else text, url=f"src/sample.{ext}",
                    doc_type="code")


def kinds(chunks):
    return [(c.metadata["chunk_type"], c.metadata["class_name"], c.metadata["function_name"]) for c in chunks]


@pytest.mark.parametrize("ext", sorted(SAMPLES))
@pytest.mark.parametrize("granularity", ["file", "class", "function", "method"])
def test_every_language_parses_and_covers_the_file(ext, granularity):
    document = doc(ext)
    chunks = ast_chunks(document, AstParams(granularity=granularity))
    assert chunks and not any(c.metadata.get("fallback") for c in chunks)
    assert {c.metadata["language"] for c in chunks} == {LANGUAGE[ext]}
    assert not uncovered(document, chunks)
    if granularity == "file":
        assert kinds(chunks) == [("file", None, None)]


def test_python_granularities():
    document = doc("py")
    assert kinds(ast_chunks(document, AstParams(granularity="class"))) == [
        ("module", None, None), ("class", "A", None), ("module", None, None)]
    assert kinds(ast_chunks(document, AstParams(granularity="function"))) == [
        ("module", None, None), ("class", "A", None), ("function", None, "f")]
    by_method = ast_chunks(document, AstParams(granularity="method"))
    assert kinds(by_method) == [("module", None, None), ("class", "A", None), ("method", "A", "m"),
                                ("function", None, "f")]
    cls, method = by_method[1], by_method[2]
    assert cls.text.startswith("# leading comment\n@dec\nclass A(B):") and cls.metadata["methods"] == ["m"]
    assert method.text == "class A(B):\n    def m(self):\n        return 1  # trailing"  # class signature kept
    assert document.text[method.start:method.end] == "def m(self):\n        return 1  # trailing"
    assert method.metadata["context_chars"] == len("class A(B):\n    ")
    assert (method.metadata["line_start"], method.metadata["line_end"]) == (10, 11)
    assert method.metadata["imports"] == ["import os", "from a import b"]
    assert method.metadata["file_path"] == "src/sample.py"


def test_options_imports_comments_signatures():
    document = doc("py")
    plain = ast_chunks(document, AstParams(granularity="method", preserve_signatures=False))
    assert plain[2].text == "def m(self):\n        return 1  # trailing"
    with_imports = ast_chunks(document, AstParams(granularity="method", include_imports=True))
    assert with_imports[2].text.startswith("import os\nfrom a import b\nclass A(B):\n")
    assert with_imports[0].text.startswith("import os")  # module chunks hold the imports themselves
    no_comments = ast_chunks(document, AstParams(granularity="method", include_comments=False))
    assert "# trailing" not in no_comments[2].text and "#" not in no_comments[1].text
    assert '"""Doc."""' in no_comments[1].text  # a docstring is not a comment


@pytest.mark.parametrize("ext,expected", [
    ("js", [("class", "A", None), ("method", "A", "constructor"), ("method", "A", "m"), ("function", None, "f"),
            ("function", None, "g")]),
    ("go", [("class", "S", None), ("method", "S", "M"), ("function", None, "F")]),
    ("java", [("class", "A", None), ("method", "A", "A"), ("method", "A", "m")]),
    ("rs", [("class", "S", None), ("class", "S", None), ("method", "S", "m"), ("function", None, "f")]),
])
def test_definitions_and_names_per_language(ext, expected):
    chunks = ast_chunks(doc(ext), AstParams(granularity="method"))
    assert [k for k in kinds(chunks) if k[0] != "module"] == expected


def test_large_functions_split_at_statement_boundaries_with_their_signature():
    body = "".join(f"    value_{i} = compute({i}, 'some argument text')\n" for i in range(60))
    text = f"def big(x):\n{body}    return x\n"
    chunks = ast_chunks(doc("py", text), AstParams(max_chars=600))
    assert len(chunks) > 1 and all(c.end - c.start <= 600 for c in chunks)
    assert [c.metadata["part"] for c in chunks] == list(range(len(chunks)))
    assert all(c.metadata["function_name"] == "big" for c in chunks)
    for c in chunks:
        code = text[c.start:c.end]
        assert code.startswith(("def big", "value_", "return"))  # whole statements only
    assert chunks[1].text.startswith("def big(x):\n    value_")
    assert not uncovered(doc("py", text), chunks)


def test_a_file_that_does_not_parse_falls_back_to_the_named_text_chunker():
    broken = doc("py", "def broken(:\n    return )\n" * 3)
    chunks = ast_chunks(broken, AstParams(fallback="smart"))
    assert chunks and all(c.metadata["fallback"] == "smart" for c in chunks)
    assert chunks[0].metadata["fallback_reason"] == "python parse error"
    prose = Document("notes.txt", "plain words", url="notes.txt")
    assert ast_chunks(prose, AstParams())[0].metadata["fallback"] == "recursive"


def test_real_modules_json_decoder_and_demo_sdk():
    document = module_document(json.decoder)
    chunks = ast_chunks(document, AstParams(granularity="method", max_chars=1500))
    assert not uncovered(document, chunks)
    assert all(c.end - c.start <= 1500 for c in chunks)
    names = [c.metadata["function_name"] for c in chunks if c.metadata["chunk_type"] == "method"]
    assert {"__init__", "decode", "raw_decode"} <= set(names)
    decoder = next(c for c in chunks if c.metadata["chunk_type"] == "class" and c.metadata["class_name"] == "JSONDecoder")
    assert decoder.metadata["methods"] == ["__init__", "decode", "raw_decode"]
    sdk = demo_document("sdk/client.py")
    sdk_chunks = ast_chunks(sdk, AstParams(granularity="function"))
    assert not uncovered(sdk, sdk_chunks) and sdk.metadata["language"] == "python"


def test_non_ascii_source_keeps_character_offsets():
    text = '# café ☕\ndef grüß(name):\n    return f"héllo {name}"\n\n\ndef other():\n    return "ü"\n'
    document = doc("py", text)
    chunks = ast_chunks(document, AstParams(granularity="function"))
    fn = next(c for c in chunks if c.metadata["function_name"] == "grüß")
    assert text[fn.start:fn.end].startswith("# café ☕\ndef grüß") and fn.text.endswith('"héllo {name}"')
