"""``ast``: code-aware chunking through tree-sitter (the GWI spec's ``ast_aware``).

Languages: python, typescript (and tsx), javascript, go, java, rust, parsed by the compiled grammars of
``tree-sitter-language-pack==0.13.0`` (offline). The language comes from ``document.metadata["language"]``
or the file extension.

Granularity (each level adds to the one before):
- ``file``: the whole file is one chunk.
- ``class``: each top-level class (Go type, Rust struct/enum/trait/impl, TS interface) is a chunk; the code
  between classes (imports, functions, statements) is packed into ``module`` chunks.
- ``function``: top-level functions (and Go methods) get their own chunks too.
- ``method``: classes are cut further: each method is a chunk, the rest of the class body (signature,
  docstring, fields) makes ``class`` chunks listing the methods.
Comments and decorators/attributes right above a definition belong to it. Any chunk whose code would
exceed ``max_chars`` is split: a class at member boundaries, a function at the statement boundaries of its
body, anything else (a module run, one huge statement) at item boundaries and finally by lines.

Options (the GWI spec's ASTChunkingOptions):
- ``include_imports``: class/function/method chunks start with the file's import statements.
- ``include_comments``: off removes comment nodes from the chunk text (docstrings are not comments).
- ``preserve_signatures``: a method chunk starts with its class's signature line; the later parts of a
  split function start with the function's signature (and its class's).
Those prefixes are context taken from elsewhere in the file: the chunk's offsets cover its own code only,
and ``context_chars`` says how many leading characters of the text are such context.

Metadata (the GWI spec's example): language, file_path, chunk_type, class_name, function_name, methods,
imports, line_start, line_end; plus symbols (definitions inside a module chunk) and part/parts for splits.
A file that does not parse (tree-sitter reports an error node) or has no grammar is chunked by the
``fallback`` text chunker, recorded as ``fallback`` and ``fallback_reason`` in each chunk's metadata.

Size limit: a chunk's own code (``text[start:end]``) is at most ``max_chars`` characters unless it is a
run with no line break or space; the text adds at most the context prefix. Defaults: the GWI spec sets
code chunks to 1000 tokens; at about four characters a token that is ``max_chars: 4000``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, model_validator

from kbench.chunking.recursive import RecursiveParams, recursive_spans
from kbench.chunking.nested import nested_params
from kbench.chunking.registry import CHUNKERS
from kbench.chunking.spans import line_number, make_chunks, strip_span
from kbench.records import Chunk, Document
from kbench.registry import StrictModel

EXTENSION_LANGUAGES = {".py": "python", ".pyi": "python", ".ts": "typescript", ".tsx": "tsx",
                       ".mts": "typescript", ".cts": "typescript", ".js": "javascript", ".jsx": "javascript",
                       ".mjs": "javascript", ".cjs": "javascript", ".go": "go", ".java": "java", ".rs": "rust"}


@dataclass(frozen=True)
class LanguageSpec:
    classes: frozenset[str]  # definitions whose body holds methods
    functions: frozenset[str]  # functions and methods
    imports: frozenset[str]
    comments: frozenset[str]
    attached: frozenset[str]  # siblings that belong to the definition after them (comments, decorators)
    wrappers: dict[str, str] = field(default_factory=dict)  # wrapper type -> field holding the definition
    brace: bool = True  # bodies in { }: a signature shown as context gets " {"
    variable_functions: frozenset[str] = frozenset()  # `const f = () => {}` declarations


_JS_FUNCTIONS = {"function_declaration", "generator_function_declaration", "method_definition"}
_JS = dict(imports=frozenset({"import_statement"}), comments=frozenset({"comment"}),
           attached=frozenset({"comment", "decorator"}), wrappers={"export_statement": "declaration"},
           variable_functions=frozenset({"lexical_declaration", "variable_declaration"}))
LANGUAGES: dict[str, LanguageSpec] = {
    "python": LanguageSpec(
        classes=frozenset({"class_definition"}), functions=frozenset({"function_definition"}),
        imports=frozenset({"import_statement", "import_from_statement", "future_import_statement"}),
        comments=frozenset({"comment"}), attached=frozenset({"comment"}),
        wrappers={"decorated_definition": "definition"}, brace=False),
    "javascript": LanguageSpec(classes=frozenset({"class_declaration"}), functions=frozenset(_JS_FUNCTIONS), **_JS),
    "typescript": LanguageSpec(
        classes=frozenset({"class_declaration", "abstract_class_declaration", "interface_declaration"}),
        functions=frozenset(_JS_FUNCTIONS | {"method_signature", "abstract_method_signature", "function_signature"}),
        **_JS),
    "go": LanguageSpec(
        classes=frozenset({"type_declaration"}), functions=frozenset({"function_declaration", "method_declaration"}),
        imports=frozenset({"import_declaration"}), comments=frozenset({"comment"}), attached=frozenset({"comment"})),
    "java": LanguageSpec(
        classes=frozenset({"class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
                           "annotation_type_declaration"}),
        functions=frozenset({"method_declaration", "constructor_declaration"}),
        imports=frozenset({"import_declaration"}), comments=frozenset({"line_comment", "block_comment"}),
        attached=frozenset({"line_comment", "block_comment"})),
    "rust": LanguageSpec(
        classes=frozenset({"struct_item", "enum_item", "trait_item", "impl_item", "union_item"}),
        functions=frozenset({"function_item", "function_signature_item"}),
        imports=frozenset({"use_declaration", "extern_crate_declaration"}),
        comments=frozenset({"line_comment", "block_comment"}),
        attached=frozenset({"line_comment", "block_comment", "attribute_item"})),
}
LANGUAGES["tsx"] = LANGUAGES["typescript"]


class AstParams(StrictModel):
    granularity: Literal["file", "class", "function", "method"] = Field(
        "function", description="the smallest unit that gets its own chunk")
    max_chars: int = Field(4000, ge=50, description="characters of code per chunk at most; larger units are split")
    include_imports: bool = Field(False, description="prefix class/function/method chunks with the file's imports")
    include_comments: bool = Field(True, description="off: comment nodes are removed from chunk texts")
    preserve_signatures: bool = Field(True, description="prefix methods and split parts with their signatures")
    fallback: str = Field("recursive", description="text chunker for files that do not parse or have no grammar")
    fallback_params: dict[str, Any] = Field(default_factory=dict, description="knobs of the fallback chunker")

    @model_validator(mode="after")
    def _check_fallback(self):
        if self.fallback in ("ast", "by_type"):
            raise ValueError(f"fallback: {self.fallback!r} is not a text chunker; use e.g. recursive or smart")
        params = nested_params(self.fallback, self.fallback_params, "fallback", "fallback_params")
        self.__dict__["fallback_params"] = params.model_dump()
        return self


def language_of(document: Document) -> str | None:
    """The file extension decides (``.tsx`` needs the tsx grammar); else ``metadata["language"]``."""
    name = (document.url or document.doc_id).lower()
    for ext, lang in EXTENSION_LANGUAGES.items():
        if name.endswith(ext):
            return lang
    language = document.metadata.get("language")
    return language if language in LANGUAGES else None


@lru_cache(maxsize=None)  # one parser per language; parsers are reusable and cost a grammar load
def _parser(language: str):
    from tree_sitter_language_pack import get_parser

    return get_parser(language)


# --------------------------------------------------------------------------- units
@dataclass
class Unit:
    """A char range of the file that becomes (part of) one chunk."""

    start: int
    end: int
    chunk_type: str  # file | module | class | function | method
    class_name: str | None = None
    function_name: str | None = None
    methods: list[str] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)  # signature lines prepended to the text
    part: int = 0
    parts: int = 1


@dataclass
class Item:
    """A top-level node or class member, with the comments/decorators that lead it."""

    start: int
    end: int
    node: Any  # the definition (wrappers unwrapped)
    kind: str  # class | function | import | other | punct


class FileChunker:
    def __init__(self, document: Document, language: str, params: AstParams):
        self.text = document.text
        self.source = self.text.encode("utf-8")
        self.spec = LANGUAGES[language]
        self.params = params
        self.tree = _parser(language).parse(self.source)
        self._char_at: list[int] | None = None
        if len(self.source) != len(self.text):  # non-ASCII: map byte offsets to character offsets
            self._char_at = [0] * (len(self.source) + 1)
            b = 0
            for i, c in enumerate(self.text):
                n = len(c.encode("utf-8"))
                for k in range(n):
                    self._char_at[b + k] = i
                b += n
            self._char_at[b] = len(self.text)

    # ---- node helpers
    def ch(self, byte_offset: int) -> int:
        return byte_offset if self._char_at is None else self._char_at[byte_offset]

    def span(self, node) -> tuple[int, int]:
        return self.ch(node.start_byte), self.ch(node.end_byte)

    def node_text(self, node) -> str:
        s, e = self.span(node)
        return self.text[s:e]

    def unwrap(self, node):
        while node is not None and node.type in self.spec.wrappers:
            inner = node.child_by_field_name(self.spec.wrappers[node.type])
            if inner is None:
                break
            node = inner
        return node

    def kind(self, node) -> str:
        if not node.is_named:
            return "punct"
        node = self.unwrap(node)
        if node.type in self.spec.classes:
            return "class"
        if node.type in self.spec.functions:
            return "function"
        if node.type in self.spec.variable_functions and self._variable_function(node) is not None:
            return "function"
        if node.type in self.spec.imports:
            return "import"
        return "other"

    def _variable_function(self, node):
        for child in node.named_children:
            if child.type == "variable_declarator":
                value = child.child_by_field_name("value")
                if value is not None and value.type in ("arrow_function", "function_expression", "function",
                                                        "generator_function"):
                    return child
        return None

    def name(self, node) -> str | None:
        node = self.unwrap(node)
        if node.type in self.spec.variable_functions:
            declarator = self._variable_function(node)
            node = declarator if declarator is not None else node
        target = node.child_by_field_name("name")
        if target is None and node.type == "impl_item":
            target = node.child_by_field_name("type")
        if target is None and node.type == "type_declaration":
            spec = next((c for c in node.named_children if c.type == "type_spec"), None)
            target = spec.child_by_field_name("name") if spec is not None else None
        return self.node_text(target) if target is not None else None

    def receiver_type(self, node) -> str | None:
        """Go: the type a method is declared on, ``(s *Server)`` -> ``Server``."""
        receiver = node.child_by_field_name("receiver") if node.type == "method_declaration" else None
        if receiver is None:
            return None
        names = re.findall(r"[A-Za-z_]\w*", self.node_text(receiver))
        return names[1] if len(names) > 1 else (names[0] if names else None)

    def body(self, node):
        node = self.unwrap(node)
        if node.type in self.spec.variable_functions:
            declarator = self._variable_function(node)
            node = declarator.child_by_field_name("value") if declarator is not None else node
        return node.child_by_field_name("body")

    def signature(self, node) -> str:
        """The definition's header: from its keyword to its body (decorators left out)."""
        node = self.unwrap(node)
        body = self.body(node)
        start = self.ch(node.start_byte)
        end = self.ch(body.start_byte) if body is not None else self.ch(node.end_byte)
        header = " ".join(self.text[start:end].split())
        return header + " {" if self.spec.brace and body is not None else header

    def items(self, children, members: bool = False) -> list[Item]:
        """Group nodes into items: leading comments/decorators join the definition that follows them.

        At the top of a file a comment block separated by a blank line (a licence header) stays apart; in a
        class body any comment run (a section banner) joins the member after it.
        """
        out: list[Item] = []
        pending: list = []
        for child in children:
            if child.is_named and child.type in self.spec.attached:
                pending.append(child)
                continue
            kind = self.kind(child)
            start = self.ch(child.start_byte)
            if pending and kind in ("class", "function") and (members or self._adjacent(pending + [child])):
                start = self.ch(pending[0].start_byte)
            else:
                out.extend(Item(*self.span(p), p, "other") for p in pending)
            pending = []
            out.append(Item(start, self.ch(child.end_byte), self.unwrap(child), kind))
        out.extend(Item(*self.span(p), p, "other") for p in pending)
        return out

    def _adjacent(self, nodes) -> bool:
        """No blank line between consecutive nodes (a comment separated by one belongs to no definition)."""
        return all(self.text.count("\n", self.ch(a.end_byte), self.ch(b.start_byte)) <= 1
                   for a, b in zip(nodes, nodes[1:]))

    # ---- emission
    def units(self) -> list[Unit]:
        root = self.tree.root_node
        items = self.items(root.children)
        if not items:
            return []
        granularity = self.params.granularity
        if granularity == "file":
            units = self.pack(items, "module")
            if len(units) == 1:
                units[0].chunk_type = "file"
            return units
        own = {"class"} if granularity == "class" else {"class", "function"}
        out: list[Unit] = []
        group: list[Item] = []
        for item in items:
            if item.kind in own:
                out.extend(self.pack(group, "module"))
                group = []
                out.extend(self.definition(item, class_sig=None, class_name=None))
            else:
                group.append(item)
        out.extend(self.pack(group, "module"))
        return out

    def pack(self, items: list[Item], chunk_type: str, context: list[str] | None = None,
             class_name: str | None = None, class_sig: str | None = None) -> list[Unit]:
        """Greedy runs of consecutive items whose range fits ``max_chars``; a lone oversize item is split."""
        limit = self.params.max_chars
        out: list[Unit] = []
        run: list[Item] = []

        def flush():
            if run and any(i.kind != "punct" for i in run) or (run and not out):
                named = [self.name(i.node) for i in run if i.kind in ("class", "function")]
                out.append(Unit(run[0].start, run[-1].end, chunk_type, class_name=class_name,
                                symbols=[n for n in named if n], context=list(context or [])))
            elif run and out:  # only punctuation left (a closing brace): extend the previous unit
                out[-1].end = max(out[-1].end, run[-1].end)
            run.clear()

        for item in items:
            if run and item.end - run[0].start > limit:
                flush()
            if item.end - item.start > limit:
                flush()
                if item.kind in ("class", "function"):
                    out.extend(self.definition(item, class_sig=class_sig, class_name=class_name, force_split=True))
                else:
                    out.extend(self.text_split(item.start, item.end, chunk_type, context, class_name))
                continue
            run.append(item)
        flush()
        return out

    def definition(self, item: Item, class_sig: str | None, class_name: str | None,
                   force_split: bool = False) -> list[Unit]:
        node = item.node
        if item.kind == "class":
            return self.class_units(item)
        name = self.name(node)
        owner = class_name or self.receiver_type(node)
        chunk_type = "method" if owner else "function"
        context = [class_sig] if class_sig and self.params.preserve_signatures else []
        if item.end - item.start <= self.params.max_chars and not force_split:
            return [Unit(item.start, item.end, chunk_type, owner, name, context=context)]
        return self.split_function(item, chunk_type, owner, name, context)

    def class_units(self, item: Item) -> list[Unit]:
        node = item.node
        name = self.name(node)
        body = self.body(node)
        members = self.items(body.children, members=True) if body is not None else []
        methods = [self.name(m.node) for m in members if m.kind == "function"]
        methods = [m for m in methods if m]
        fits = item.end - item.start <= self.params.max_chars
        if not members or (fits and self.params.granularity != "method"):
            if fits:
                return [Unit(item.start, item.end, "class", class_name=name, methods=methods)]
            return self.text_split(item.start, item.end, "class", [], name)
        signature = self.signature(node)
        context = [signature] if self.params.preserve_signatures else []
        # the header (signature up to the first member) leads the first run of members
        header = Item(item.start, members[0].start, None, "other")
        if self.params.granularity != "method":
            units = self.pack([header, *members], "class", class_name=name, class_sig=signature)
        else:
            units, rest = [], [header]
            for member in members:
                if member.kind == "function":
                    units.extend(self.pack(rest, "class", class_name=name, class_sig=signature))
                    rest = []
                    units.extend(self.definition(member, class_sig=signature, class_name=name))
                else:
                    rest.append(member)
            if rest and all(m.kind == "punct" for m in rest) and units:
                units[-1].end = max(units[-1].end, rest[-1].end)  # a closing brace joins the last method
            else:
                units.extend(self.pack(rest, "class", class_name=name, class_sig=signature))
        for n, unit in enumerate(units):
            if unit.chunk_type == "class":
                unit.methods = methods
                unit.class_name = name
                if n and not unit.context:
                    unit.context = list(context)
        return units

    def split_function(self, item: Item, chunk_type: str, owner: str | None, name: str | None,
                       context: list[str]) -> list[Unit]:
        body = self.body(item.node)
        if body is None or not body.children:
            return self.text_split(item.start, item.end, chunk_type, context, owner, name)
        signature = self.signature(item.node)
        statements = self.items(body.children)
        first = statements[0]  # the signature leads the first statement (a brace is no longer just punctuation)
        statements[0] = Item(item.start, first.end, first.node, "other" if first.kind == "punct" else first.kind)
        later_context = context + [signature] if self.params.preserve_signatures else context
        units = []
        for unit in self.pack(statements, chunk_type, class_name=owner):
            unit.chunk_type, unit.function_name = chunk_type, name
            unit.context = list(context) if unit.start == item.start else list(later_context)
            units.append(unit)
        for n, unit in enumerate(units):
            unit.part, unit.parts = n, len(units)
        return units

    def text_split(self, start: int, end: int, chunk_type: str, context: list[str] | None,
                   class_name: str | None = None, function_name: str | None = None) -> list[Unit]:
        """Last resort for one oversize node: blank lines, lines, then spaces, no overlap."""
        params = RecursiveParams(chunk_size=self.params.max_chars, chunk_overlap=0, separators=["\n\n", "\n", " "])
        spans = recursive_spans(self.text, start, end, params) or [(start, end)]
        return [Unit(s, e, chunk_type, class_name, function_name, context=list(context or []), part=n,
                     parts=len(spans)) for n, (s, e) in enumerate(spans)]

    # ---- rendering
    def imports(self) -> list[str]:
        return [" ".join(self.node_text(c).split()) for c in self.tree.root_node.children
                if self.kind(c) == "import"]

    def comment_spans(self) -> list[tuple[int, int]]:
        spans, stack = [], [self.tree.root_node]
        while stack:
            node = stack.pop()
            if node.type in self.spec.comments:
                spans.append(self.span(node))
            else:
                stack.extend(node.children)
        return sorted(spans)

    def render(self, unit: Unit, imports: list[str], comments: list[tuple[int, int]]) -> tuple[int, int, str, str]:
        start, end = strip_span(self.text, unit.start, unit.end)
        code = self.text[start:end]
        if not self.params.include_comments:
            code = remove_spans(code, [(s - start, e - start) for s, e in comments if s >= start and e <= end])
        context = list(unit.context)
        if self.params.include_imports and imports and unit.chunk_type in ("class", "function", "method"):
            context = imports + context
        prefix = "\n".join(context)
        if prefix:
            indent = self.text[self.text.rfind("\n", 0, start) + 1:start]
            prefix += "\n" + (indent if not indent.strip() else "")
        return start, end, prefix + code, prefix

    def chunks(self, document: Document, language: str) -> list[Chunk]:
        imports = self.imports()
        comments = self.comment_spans() if not self.params.include_comments else []
        pieces = []
        for unit in self.units():
            start, end, text, prefix = self.render(unit, imports, comments)
            if end <= start:
                continue
            meta = {"language": language, "file_path": document.url or document.doc_id,
                    "chunk_type": unit.chunk_type, "class_name": unit.class_name,
                    "function_name": unit.function_name, "methods": unit.methods, "symbols": unit.symbols,
                    "imports": imports, "line_start": line_number(self.text, start),
                    "line_end": line_number(self.text, end - 1), "part": unit.part, "parts": unit.parts,
                    "context_chars": len(prefix)}
            pieces.append((start, end, text, meta))
        return make_chunks(document, pieces)


def remove_spans(code: str, spans: list[tuple[int, int]]) -> str:
    """Cut comment spans out of ``code``; a line left blank by a cut is removed with its newline."""
    for s, e in sorted(spans, reverse=True):
        line_start = code.rfind("\n", 0, s) + 1
        line_end = code.find("\n", e)
        line_end = len(code) if line_end == -1 else line_end
        if not code[line_start:s].strip() and not code[e:line_end].strip():
            code = code[:line_start] + code[line_end + 1:]
        else:
            code = code[:s].rstrip(" \t") + code[e:]
    return code


def fallback_chunks(document: Document, params: AstParams, reason: str, language: str | None) -> list[Chunk]:
    entry = CHUNKERS.get(params.fallback)
    chunks = entry.impl(document, entry.params(**params.fallback_params))
    for chunk in chunks:
        chunk.metadata.update(fallback=params.fallback, fallback_reason=reason, language=language,
                              file_path=document.url or document.doc_id)
    return chunks


@CHUNKERS.register("ast", AstParams)
def ast_chunks(document: Document, params: AstParams) -> list[Chunk]:
    """Code-aware chunks by file/class/function/method via tree-sitter; text fallback when parsing fails."""
    language = language_of(document)
    if language is None:
        return fallback_chunks(document, params, "no tree-sitter grammar for this file type", None)
    chunker = FileChunker(document, language, params)
    if chunker.tree.root_node.has_error:
        return fallback_chunks(document, params, f"{language} parse error", language)
    return chunker.chunks(document, "typescript" if language == "tsx" else language)
