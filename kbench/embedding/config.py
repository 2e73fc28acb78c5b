"""The embedding section: which model encodes chunks and queries, through which provider and backend.

``backend`` names a runtime (torch, onnx, onnx-int8, openvino, openvino-int8) or one of two choices measured on the
machine that runs it (kbench/embedding/choice.py, from the backend tuning of tuning.py):

- ``exact`` (the default): the fastest backend whose vectors are torch's to float32 rounding (f32; the same
  top 10s). Resolved when the encoder is built: the saved config says ``exact`` and the run key hashes it as torch,
  since every exact backend gives torch's results; the fingerprint and the MLflow params name the backend that ran,
  and why;
- ``fast``: the fastest backend whose measured drift from torch is within ``drift_gate``. Resolved when the
  experiment loads (kbench/config.py): its vectors differ from torch's, so the saved config and the run key name the
  backend that runs.
"""
from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kbench.embedding.models import CATALOGUE
from kbench.embedding.registry import EMBEDDING_PROVIDERS
from kbench.registry import StrictModel, in_unit

# "exact" and "fast" are choices measured on this machine (the module doc), the others runtimes
Backend = Literal["torch", "onnx", "onnx-int8", "openvino", "openvino-int8", "exact", "fast"]
Device = Literal["auto", "cpu", "cuda"]
Precision = Literal["auto", "f32", "bf16"]  # OpenVINO's float precision: auto (the runtime's choice for the CPU)
EXACT, FAST = "exact", "fast"
CHOICES = (EXACT, FAST)  # the backends that name a choice, not a runtime


LOCAL_PROVIDERS = ("sentence_transformers", "static")  # the providers that run a catalogue model in this process


def catalogue_choices(data: dict[str, Any]) -> dict[str, str]:
    """What a catalogue model needs that the section left unwritten: its provider (``static`` for wordllama and
    model2vec models). A model without torch weights (paraphrase-MiniLM-L3-v2) needs nothing: ``exact`` chooses among
    its own backends. A value the section writes is never changed: a wrong one is refused (``catalogue_problem``)."""
    spec = CATALOGUE.get(data.get("model", EmbeddingConfig.model_fields["model"].default))
    if spec is None or "provider" in data:
        return {}
    return {"provider": spec.provider}


def catalogue_problem(model: str, provider: str, backend: str) -> str | None:
    """Why a catalogue model cannot run with this provider and backend (one line naming the fix), or None. Known
    from the catalogue alone, so a config (and every config of a sweep) is refused before any work."""
    spec = CATALOGUE.get(model)
    if spec is None or provider not in LOCAL_PROVIDERS:  # a folder, or a model served by an API (kbench serve)
        return None
    if provider != spec.provider:
        what = "a static model" if spec.provider == "static" else f"a {spec.provider} model"
        return (f"embedding.provider: {model} is {what}, not one {provider} runs; set embedding.provider="
                f"{spec.provider} (or leave embedding.provider out: kbench picks it)")
    if backend in CHOICES:  # chosen among the model's own backends (torch for a static model)
        return None
    if spec.provider == "static" and backend != "torch":
        return (f"embedding.backend: {model} is a static model with no backend to choose; remove embedding.backend "
                "(or set it to torch)")
    if backend not in spec.backends:
        return (f"embedding.backend: {model} runs on {', '.join(spec.backends)}, not {backend}; set "
                f"embedding.backend={spec.backends[0]} (or leave embedding.backend out: kbench picks it)")
    return None


class DriftGate(StrictModel):
    """How far from torch's results ``embedding.backend: fast`` may go on this machine, measured without labels by
    the backend tuning (``kbench models tune``): each question's top 10 over the tuning sample's passages against
    torch's, and the cosine of every vector to torch's. Also what ``kbench models tune --check`` holds a config's
    backend to. On a Xeon with AMX (2 cores), MiniLM on the demo set: OpenVINO in bf16 overlap 0.996, cosine error
    0.000014; onnx-int8 0.892 and 0.0076; openvino-int8 0.916 and 0.0044 (docs/how-to/fast-embedding.md)."""

    min_overlap: float = Field(0.95, ge=0, le=1, description="the least mean top-10 overlap with torch (rank-biased "
                               "overlap, p 0.9, of each question's top 10 over the sample's passages), for the "
                               "questions encoded in one batch and each alone")
    max_cosine_error: float = Field(0.001, ge=0, le=2, description="the largest mean cosine error (1 - cosine to "
                                    "torch's vector) over the sample's passages and questions, in a batch and alone")


class EmbeddingConfig(StrictModel):
    model: str = Field("all-MiniLM-L6-v2", description="catalogue name (kbench models list) or a local folder")
    provider: str = Field("sentence_transformers",
                          description="a registered provider: sentence_transformers, static, openai")
    backend: Backend = Field(EXACT, description="sentence_transformers runtime: torch, onnx (exported fp32), "
                                                "onnx-int8 (dynamic int8), openvino (the fp32 export, computed at "
                                                "embedding.precision), openvino-int8 (static int8 calibrated on the "
                                                "run's corpus); or a choice measured on this machine (kbench models "
                                                "tune, once per model and machine): exact, the fastest backend whose "
                                                "vectors are torch's to f32 rounding (the run key of torch's "
                                                "results), or fast, the fastest within embedding.drift_gate (resolved "
                                                "on load: the run key of the backend it chose)")
    drift_gate: DriftGate = Field(default_factory=DriftGate,
                                  description="backend fast: how far from torch's results its choice may go here")
    device: Device = Field("auto", description="auto: cuda when a GPU is visible, else cpu")
    precision: Precision = Field("auto", description="backend openvino: the float precision it computes in; auto: "
                                                     "OpenVINO's choice (bf16 on a CPU with bf16 instructions, "
                                                     "else f32); f32: vectors that match torch's")
    batch_size: int = Field(64, ge=1, description="texts per encode call", json_schema_extra=in_unit("texts"))
    threads: int | None = Field(None, ge=1, description="intra-op threads for batch encoding; default: the runtime's",
                                json_schema_extra=in_unit("threads"))
    query_threads: int | None = Field(1, ge=1, description="intra-op threads for encoding one query (latency); "
                                      "1: waking more threads costs more than they save on a short text",
                                      json_schema_extra=in_unit("threads"))
    normalize: bool = Field(True, description="L2-normalize so inner product = cosine")
    dimension: int | None = Field(None, ge=1, description="keep the first N dims (Matryoshka), renormalized; "
                                                          "openai: the API's `dimensions`",
                                                          json_schema_extra=in_unit("dimensions"))
    max_seq_length: int | None = Field(None, ge=8, description="tokens; default: the model's own",
                                       json_schema_extra=in_unit("tokens"))
    query_prefix: str = Field("", description="text put before every query (e5-style models: 'query: ')")
    document_prefix: str = Field("", description="text put before every chunk (e5-style models: 'passage: ')")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, provider=openai")
    api_key_env: str = Field("OPENAI_API_KEY", description="name of the env var holding the key (never the key)")
    languages: list[str] | None = Field(None, description="the languages the model covers, ISO 639-1 codes (fr, "
                                        "en, ...): a run warns when they cover under half of the documents; "
                                        "default: the catalogue's (every catalogue model: en), none for a folder or "
                                        "an API model (nothing said). Not in the run key: it changes no vector")

    @field_validator("languages")
    @classmethod
    def _language_codes(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        bad = [code for code in v if not re.fullmatch(r"[a-z]{2,3}", str(code))]
        if bad or not v:
            raise ValueError(f"embedding.languages: give ISO 639-1 codes in lower case, e.g. [fr, en, es]"
                             f"{'; not a code: ' + ', '.join(repr(str(b)[:20]) for b in bad[:3]) if bad else ''}")
        return list(dict.fromkeys(v))

    @property
    def covered_languages(self) -> tuple[str, ...] | None:
        """The languages the model covers: the config's, else the catalogue's; None when nobody said."""
        if self.languages:
            return tuple(self.languages)
        spec = CATALOGUE.get(self.model)  # kbench serve serves the catalogue's models under their names too
        return spec.languages if spec is not None else None

    @model_validator(mode="before")
    @classmethod
    def _catalogue_provider(cls, data: Any) -> Any:
        return {**data, **catalogue_choices(data)} if isinstance(data, dict) else data

    def run_key_view(self, data: dict[str, Any]) -> dict[str, Any]:
        """The dumped section as the run key hashes it: without what changes no result (the languages a model is
        said to cover; the drift gate, whose choice the resolved ``fast`` backend carries). ``exact``, the default
        since issue 55, hashes as ``torch``, the default it replaced: every exact backend gives torch's results, so
        the runs that torch finished stand for it (and every run key from before holds). A ``torch`` the config names
        (runs torch itself, never another exact backend) hashes apart, except for a static model or an API, which
        have no other backend."""
        view = {k: v for k, v in data.items() if k not in ("languages", "drift_gate")}
        spec = CATALOGUE.get(self.model)
        chosen = self.provider == "sentence_transformers" and (spec is None or spec.provider == self.provider)
        if view.get("backend") == EXACT:
            view["backend"] = "torch"
        elif view.get("backend") == "torch" and chosen:
            view["backend"] = "torch (named)"
        return view

    @model_validator(mode="after")
    def _model_runs_here(self) -> EmbeddingConfig:
        problem = catalogue_problem(self.model, self.provider, self.backend)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _precision_is_openvino_s(self) -> EmbeddingConfig:
        if self.precision != "auto" and not self.backend.startswith("openvino"):
            also = " and the backends exact and fast choose their own" if self.backend in CHOICES else ""
            raise ValueError(f"embedding.precision: {self.precision} applies to embedding.backend=openvino or "
                             f"openvino-int8 only (torch and onnx compute in f32{also}); remove embedding.precision "
                             f"or set embedding.backend=openvino")
        return self

    @model_validator(mode="after")
    def _backend_is_ours_to_choose(self) -> EmbeddingConfig:
        """An API computes the vectors itself: a backend other than torch would be recorded in the run key for a
        runtime that never ran (a catalogue model's own provider and backends are checked by _model_runs_here)."""
        if self.provider not in LOCAL_PROVIDERS and self.backend not in ("torch", *CHOICES):
            raise ValueError(f"embedding.backend: {self.backend} does not apply to provider {self.provider} (the API "
                             "computes the vectors); remove embedding.backend")
        return self

    @model_validator(mode="after")
    def _dimension_within_the_model(self) -> EmbeddingConfig:
        spec = CATALOGUE.get(self.model)  # a catalogue model's width is known before it loads
        if spec is not None and spec.provider == self.provider and self.dimension and self.dimension > spec.dimension:
            raise ValueError(f"embedding.dimension: {self.dimension} is larger than {self.model}'s {spec.dimension} "
                             f"dimensions; use a value <= {spec.dimension} (truncation) or leave it unset")
        return self

    @field_validator("provider")
    @classmethod
    def _registered_provider(cls, name: str) -> str:
        return EMBEDDING_PROVIDERS.validate_name(name)
