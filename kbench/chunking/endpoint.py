"""``endpoint``: one chunk per OpenAPI path + method (the GWI spec's ``endpoint`` strategy).

A chunk's text describes one operation: ``METHOD /path``, summary, description, operation id, tags,
parameters (path-level and operation-level, ``$ref``s resolved), the request body and the responses with
their schemas rendered compactly (``Pet {id: integer (required), name: string}``), nested up to
``schema_depth`` levels. Its offsets cover the path item's text in the YAML/JSON source (the key
``/pets/{id}:`` through the end of its value), as every operation of a path also renders the path's
shared parameters; ``operation_start``/``operation_end`` in the metadata narrow it to the operation.

With ``include_other_sections`` the source outside ``paths`` (info, servers, components ...) becomes
``spec_section`` chunks of raw text, at most ``section_chars`` each, so the whole file is covered.
A document that is not an OpenAPI/Swagger spec (no ``openapi``/``swagger`` key or no ``paths`` mapping,
or not YAML/JSON at all) goes to the ``fallback`` text chunker, recorded in each chunk's metadata.
Size limit: operation chunks have no limit (one per operation); spec sections at most ``section_chars``.
"""
from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import Field, model_validator

from kbench.chunking.recursive import RecursiveParams, recursive_spans
from kbench.chunking.nested import nested_params
from kbench.chunking.registry import CHUNKERS
from kbench.chunking.spans import Span, make_chunks, strip_span
from kbench.records import Chunk, Document
from kbench.registry import StrictModel, in_unit

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


class EndpointParams(StrictModel):
    schema_depth: int = Field(2, ge=0, description="levels of nested object properties rendered",
                              json_schema_extra=in_unit("levels"))
    include_responses: bool = Field(True, description="render responses and their schemas")
    include_other_sections: bool = Field(True, description="chunk the source outside paths as raw text")
    section_chars: int = Field(2000, ge=50, description="characters per spec_section chunk at most")
    fallback: str = Field("recursive", description="text chunker for documents that are not OpenAPI specs")
    fallback_params: dict[str, Any] = Field(default_factory=dict, description="knobs of the fallback chunker")

    @model_validator(mode="after")
    def _check_fallback(self):
        if self.fallback in ("endpoint", "by_type"):
            raise ValueError(f"fallback: {self.fallback!r} is not a text chunker; use e.g. recursive")
        params = nested_params(self.fallback, self.fallback_params, "fallback", "fallback_params")
        self.__dict__["fallback_params"] = params.model_dump()
        return self


# --------------------------------------------------------------------------- locating path items
def yaml_path_items(text: str) -> dict[str, Span] | None:
    """Character range of each path item (key through value) from PyYAML's node marks."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, value in root.value:
        if key.value == "paths" and isinstance(value, yaml.MappingNode):
            return {k.value: (k.start_mark.index, v.end_mark.index) for k, v in value.value}
    return {}


def _json_value_end(text: str, i: int) -> int:
    """End offset of the JSON value starting at ``i`` (brackets matched outside strings)."""
    depth, in_string, escaped = 0, False, False
    for j in range(i, len(text)):
        c = text[j]
        if in_string:
            escaped = not escaped and c == "\\"
            if c == '"' and not escaped:
                in_string = False
            continue
        if c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def json_path_items(text: str, paths: dict[str, Any]) -> dict[str, Span]:
    """For JSON that PyYAML refuses (tabs, escapes): find each path key after ``"paths"`` and match brackets."""
    out, cursor = {}, max(text.find('"paths"'), 0)
    for path in paths:
        key = json.dumps(path)
        start = text.find(key, cursor)
        if start == -1:
            continue
        value = text.find("{", start + len(key))
        end = _json_value_end(text, value) if value != -1 else start + len(key)
        out[path] = (start, end)
        cursor = end
    return out


# --------------------------------------------------------------------------- rendering
class Renderer:
    def __init__(self, spec: dict[str, Any], depth: int, include_responses: bool):
        self.spec, self.depth, self.include_responses = spec, depth, include_responses

    def resolve(self, node: Any, seen: tuple[str, ...] = ()) -> tuple[Any, str | None, tuple[str, ...]]:
        """Follow local ``$ref``s; returns the target, the referenced name and the refs seen (cycle guard)."""
        name = None
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen or not ref.startswith("#/"):
                return {}, ref.rsplit("/", 1)[-1], seen
            seen = seen + (ref,)
            name = ref.rsplit("/", 1)[-1]
            target: Any = self.spec
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, dict) else None
            node = target if target is not None else {}
        return node, name, seen

    def schema(self, node: Any, level: int = 0, seen: tuple[str, ...] = ()) -> str:
        node, name, seen = self.resolve(node, seen)
        if not isinstance(node, dict):
            return name or str(node)
        for combiner in ("allOf", "oneOf", "anyOf"):
            if isinstance(node.get(combiner), list):
                parts = " & " if combiner == "allOf" else " | "
                inner = parts.join(self.schema(s, level, seen) for s in node[combiner])
                return f"{name} ({inner})" if name else inner
        kind = node.get("type", "object" if "properties" in node else "")
        if kind == "array":
            text = f"array of {self.schema(node.get('items', {}), level, seen)}"
        elif kind == "object" or "properties" in node:
            props = node.get("properties") or {}
            required = set(node.get("required") or [])
            if props and level < self.depth:
                fields = ", ".join(
                    f"{p}: {self.schema(s, level + 1, seen)}{' (required)' if p in required else ''}"
                    for p, s in props.items())
                text = f"{{{fields}}}"
            else:
                text = "object"
        else:
            text = str(kind or "any")
            if node.get("format"):
                text += f" ({node['format']})"
            if isinstance(node.get("enum"), list):
                text += " one of " + ", ".join(str(v) for v in node["enum"])
        if name:
            return name if text == "object" else f"{name} {text}"
        return text

    def parameter(self, param: Any) -> str:
        param, _, _ = self.resolve(param)
        if not isinstance(param, dict):
            return f"- {param}"
        flags = [str(param.get("in", "")), "required" if param.get("required") else ""]
        if "schema" in param:
            flags.append(self.schema(param["schema"]))
        elif "type" in param:
            flags.append(str(param["type"]))
        head = f"- {param.get('name', '?')} ({', '.join(f for f in flags if f)})"
        return f"{head}: {param['description']}" if param.get("description") else head

    def content(self, holder: dict[str, Any]) -> str:
        parts = []
        content = holder.get("content")
        if isinstance(content, dict):
            for media, body in content.items():
                schema = body.get("schema") if isinstance(body, dict) else None
                parts.append(f"{media}: {self.schema(schema)}" if schema is not None else media)
        elif "schema" in holder:  # Swagger 2.0
            parts.append(self.schema(holder["schema"]))
        return "; ".join(parts)

    def operation(self, path: str, method: str, item: dict[str, Any], op: dict[str, Any]) -> str:
        lines = [f"{method.upper()} {path}"]
        for label, key in (("Summary", "summary"), ("Description", "description"), ("Operation ID", "operationId")):
            if op.get(key):
                lines.append(f"{label}: {' '.join(str(op[key]).split())}")
        if op.get("tags"):
            lines.append("Tags: " + ", ".join(str(t) for t in op["tags"]))
        if op.get("deprecated"):
            lines.append("Deprecated: yes")
        params = list(item.get("parameters") or []) + list(op.get("parameters") or [])
        if params:
            lines.append("Parameters:")
            lines.extend(self.parameter(p) for p in params)
        body, _, _ = self.resolve(op.get("requestBody"))
        if isinstance(body, dict) and body:
            required = " (required)" if body.get("required") else ""
            lines.append(f"Request body{required}: {self.content(body)}".rstrip(": "))
        if self.include_responses and isinstance(op.get("responses"), dict):
            lines.append("Responses:")
            for status, response in op["responses"].items():
                response, _, _ = self.resolve(response)
                if not isinstance(response, dict):
                    continue
                desc = " ".join(str(response.get("description", "")).split())
                schema = self.content(response)
                lines.append(f"- {status}: {desc}" + (f" -> {schema}" if schema else ""))
        return "\n".join(lines)


def find_operation(text: str, item: Span, method: str) -> Span:
    """The operation's own text inside a path item: its key line through the next sibling key (best effort)."""
    lo, hi = item
    for key in (f'"{method}"', f"{method}:"):
        at = text.find(key, lo, hi)
        if at == -1:
            continue
        line_start = text.rfind("\n", lo, at) + 1
        indent = at - line_start
        end = hi
        if key.endswith(":"):  # YAML: up to the next line indented no deeper than the key
            pos = text.find("\n", at)
            while 0 <= pos < hi:
                nxt = pos + 1
                line = text[nxt:text.find("\n", nxt) if text.find("\n", nxt) != -1 else len(text)]
                if line.strip() and len(line) - len(line.lstrip()) <= indent:
                    end = nxt
                    break
                pos = text.find("\n", nxt)
        else:
            value = text.find("{", at + len(key))
            end = _json_value_end(text, value) if value != -1 else hi
        return strip_span(text, at, min(end, hi))
    return item


def fallback_chunks(document: Document, params: EndpointParams, reason: str) -> list[Chunk]:
    entry = CHUNKERS.get(params.fallback)
    chunks = entry.impl(document, entry.params(**params.fallback_params))
    for chunk in chunks:
        chunk.metadata.update(fallback=params.fallback, fallback_reason=reason)
    return chunks


@CHUNKERS.register("endpoint", EndpointParams)
def endpoint_chunks(document: Document, params: EndpointParams) -> list[Chunk]:
    """One chunk per OpenAPI path + method: summary, parameters, request and response schemas."""
    text = document.text
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError:
        try:
            spec = json.loads(text)
        except ValueError:
            return fallback_chunks(document, params, "not YAML or JSON")
    if not isinstance(spec, dict) or not ({"openapi", "swagger"} & set(spec)) or not isinstance(spec.get("paths"), dict):
        return fallback_chunks(document, params, "not an OpenAPI document (no openapi/swagger key or no paths)")
    spans = yaml_path_items(text)
    if spans is None:
        spans = json_path_items(text, spec["paths"])
    renderer = Renderer(spec, params.schema_depth, params.include_responses)
    info = spec.get("info") if isinstance(spec.get("info"), dict) else {}
    pieces = []
    for path, item in spec["paths"].items():
        if not isinstance(item, dict) or path not in spans:
            continue
        start, end = strip_span(text, *spans[path])
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            op_start, op_end = find_operation(text, (start, end), method)
            meta = {"chunk_type": "operation", "method": method.upper(), "path": path,
                    "operation_id": op.get("operationId"), "summary": op.get("summary"),
                    "tags": list(op.get("tags") or []), "api_title": info.get("title"),
                    "operation_start": op_start, "operation_end": op_end}
            pieces.append((start, end, renderer.operation(path, method, item, op), meta))
    if params.include_other_sections:
        covered = sorted(strip_span(text, *s) for s in spans.values())
        splitter = RecursiveParams(chunk_size=params.section_chars, chunk_overlap=0, separators=["\n\n", "\n", " "])
        cut = 0
        for lo, hi in covered + [(len(text), len(text))]:
            for s, e in recursive_spans(text, cut, max(cut, lo), splitter):
                pieces.append((s, e, text[s:e], {"chunk_type": "spec_section", "api_title": info.get("title")}))
            cut = max(cut, hi)
    pieces.sort(key=lambda p: (p[0], p[1]))
    return make_chunks(document, pieces)
