"""endpoint: one chunk per OpenAPI operation, on the real specs shipped by jupyter_server / jupyterlab_server."""
from __future__ import annotations

import json
from pathlib import Path

import jupyter_server
import jupyterlab_server
import yaml

from kbench.chunking.endpoint import EndpointParams, endpoint_chunks
from kbench.records import Document
from tests.chunking.corpora import demo_document, uncovered

JUPYTER_SERVER_SPEC = Path(jupyter_server.__file__).parent / "services" / "api" / "api.yaml"  # Swagger 2.0
JUPYTERLAB_SPEC = Path(jupyterlab_server.__file__).parent / "rest-api.yml"  # OpenAPI 3


def spec_document(path: Path, text: str | None = None) -> Document:
    return Document(path.name, path.read_text(encoding="utf-8") if text is None else text, url=path.name,
                    doc_type="openapi")


def operations(spec: dict) -> list[tuple[str, str]]:
    methods = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
    return [(m.upper(), p) for p, item in spec["paths"].items() for m in methods if m in item]


def test_one_chunk_per_path_and_method_on_a_swagger_2_spec():
    document = spec_document(JUPYTER_SERVER_SPEC)
    spec = yaml.safe_load(document.text)
    chunks = endpoint_chunks(document, EndpointParams())
    ops = [c for c in chunks if c.metadata["chunk_type"] == "operation"]
    assert [(c.metadata["method"], c.metadata["path"]) for c in ops] == operations(spec)
    assert not uncovered(document, chunks)  # spec sections cover info, parameters, definitions
    get_contents = next(c for c in ops if (c.metadata["method"], c.metadata["path"]) == ("GET", "/api/contents/{path}"))
    assert get_contents.text.startswith("GET /api/contents/{path}\nSummary: Get contents of file or directory")
    assert "- path (path, required, string): file path" in get_contents.text  # path-level $ref parameter resolved
    assert "Contents {" in get_contents.text  # response schema from #/definitions/Contents
    source = document.text[get_contents.start:get_contents.end]
    assert source.startswith("/api/contents/{path}:") and "get:" in source
    op_source = document.text[get_contents.metadata["operation_start"]:get_contents.metadata["operation_end"]]
    assert op_source.startswith("get:") and "post:" not in op_source


def test_openapi_3_spec_and_its_json_form():
    document = spec_document(JUPYTERLAB_SPEC)
    spec = yaml.safe_load(document.text)
    chunks = endpoint_chunks(document, EndpointParams(include_other_sections=False))
    assert [(c.metadata["method"], c.metadata["path"]) for c in chunks] == operations(spec)
    as_json = json.dumps(spec, indent="\t")  # tabs: PyYAML refuses it, so offsets come from the JSON scanner
    json_chunks = endpoint_chunks(spec_document(JUPYTERLAB_SPEC, as_json), EndpointParams(include_other_sections=False))
    assert [c.text for c in json_chunks] == [c.text for c in chunks]
    for c in json_chunks:
        assert as_json[c.start:c.end].startswith(json.dumps(c.metadata["path"]))


def test_documents_that_are_not_openapi_fall_back():
    page = demo_document("api/jobs.md")
    chunks = endpoint_chunks(page, EndpointParams(fallback="smart"))
    assert chunks and {c.metadata["fallback"] for c in chunks} == {"smart"}
    plain_yaml = endpoint_chunks(Document("c.yaml", "a: 1\nb: [2, 3]\n"), EndpointParams())
    assert plain_yaml[0].metadata["fallback_reason"].startswith("not an OpenAPI document")
