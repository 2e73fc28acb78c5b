"""Which backend ``embedding.backend: exact`` and ``fast`` run on this machine: chosen from the backend tuning's
measurements here (tuning.py), never from a table of CPU kinds, and said with this machine's figures.

    choice = choose(tuned, "fast", DriftGate())   # pure: the fastest backend within the gate (a hand-made table)
    config = resolved(embedding)                  # exact/fast -> the backend and precision that run (tunes first
                                                  # when this machine has no tuning of the model)
    backend_line(embedding)                       # what a run prints: the backend that ran, and why

- ``exact``: the fastest measured backend whose vectors are the reference's to f32 rounding: it computes in f32 and
  no vector of the sample is further than ``EXACT_COSINE_ERROR`` from the reference's. torch always qualifies, so
  ``exact`` is never slower than torch here.
- ``fast``: the fastest measured backend within ``embedding.drift_gate`` (mean top-10 overlap at least
  ``min_overlap``, for questions encoded in a batch and each alone, and mean cosine error at most
  ``max_cosine_error``). torch always qualifies too.

A backend is chosen only for a speed it showed on this machine. A static model or an API provider has no backend to
choose (torch), and CUDA runs torch (the tuning times CPU runtimes). With no tuning kept and ``tune=False`` (a hint
printed after a run, a benchmark's header), ``exact`` is the reference and ``fast`` the prior of cpu.py, said as a
guess, never run.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbench.embedding.config import CHOICES, EXACT, FAST, DriftGate, EmbeddingConfig
from kbench.embedding.cpu import PRIOR_FAST, PRIOR_SOURCE, CpuFeatures, cpu_features
from kbench.embedding.models import CATALOGUE
from kbench.embedding.runtimes import RuntimeMissingError, check_runtimes
from kbench.embedding.tuning import (Measured, Tuning, TuningSample, demo_sample, say_on_stderr, stored_tuning,
                                     tune, tuning_exports)

# Worst over the sample. f32 runtimes differ from torch in the order of summation only: 1e-13 here (MiniLM, demo
# set); bf16 is 1e-5 (2.5e-5 worst), int8 1e-3 to 1e-2
EXACT_COSINE_ERROR = 1e-8


def is_exact(row: Measured) -> bool:
    return row.computes_in == "f32" and row.cosine_error_worst <= EXACT_COSINE_ERROR


def gate_problem(row: Measured, gate: DriftGate) -> str | None:
    """Why ``row`` drifts beyond ``gate`` (one clause per measure), or None when it is within."""
    problems = []
    overlap = min(row.overlap_mean, row.alone_overlap_mean)
    if overlap < gate.min_overlap:
        problems.append(f"mean top-10 overlap {row.overlap_mean:.3f} in a batch, {row.alone_overlap_mean:.3f} alone "
                        f"(gate: at least {gate.min_overlap:g})")
    if row.cosine_error_mean > gate.max_cosine_error:
        problems.append(f"mean cosine error {row.cosine_error_mean:.2g} (gate: at most {gate.max_cosine_error:g})")
    return "; ".join(problems) or None


def drift_text(row: Measured) -> str:
    """``top-10 overlap 0.996 (alone 0.996), cosine error 1.5e-05 (worst 2.9e-05)``."""
    return (f"top-10 overlap {row.overlap_mean:.3f} (alone {row.alone_overlap_mean:.3f}), cosine error "
            f"{row.cosine_error_mean:.2g} (worst {row.cosine_error_worst:.2g})")


@dataclass(frozen=True)
class Choice:
    asked: str  # exact, fast, or the backend the config names
    backend: str
    precision: str  # what embedding.precision becomes: auto, or f32 for OpenVINO's exact row
    why: str  # one line with this machine's figures
    row: Measured | None = None  # the measurement it rests on (None: nothing measured here)
    tuning: Tuning | None = None

    @property
    def label(self) -> str:
        return self.backend if self.precision == "auto" else f"{self.backend} ({self.precision})"


def choose(tuned: Tuning, asked: str, gate: DriftGate, broken: dict[str, str] | None = None) -> Choice:
    """The fastest row of ``tuned`` that is exact (``asked`` exact) or within ``gate`` (fast), of the backends not
    ``broken`` here (backend -> why: a runtime that stopped importing since the tuning)."""
    usable = [r for r in tuned.rows if r.backend not in (broken or {})]
    if asked == EXACT:
        allowed = [r for r in usable if is_exact(r)]
    else:
        allowed = [r for r in usable if gate_problem(r, gate) is None]
    best = max(allowed or tuned.rows[:1], key=lambda r: r.chunks_per_s)
    what = ("the fastest backend here whose vectors are torch's to f32 rounding" if asked == EXACT else
            f"the fastest backend here within the drift gate (overlap >= {gate.min_overlap:g}, cosine error <= "
            f"{gate.max_cosine_error:g})")
    why = (f"{asked}: {what}: {best.speedup:.2f}x {tuned.reference}'s chunks/s, {drift_text(best)} "
           f"({_measured_on(tuned)})" + "".join(f"; not {b}: {line}" for b, line in (broken or {}).items()))
    return Choice(asked, best.backend, best.precision, why, best, tuned)


def _measured_on(tuned: Tuning) -> str:
    ran = f"measured in this process, {tuned.seconds:.0f} s" if tuned.ran_here else f"measured {tuned.created[:10]}"
    return f"{ran} on {tuned.sample.get('passages')} passages of {tuned.sample.get('source')}"


def backend_is_chosen(config: EmbeddingConfig) -> bool:
    """True when ``config``'s backend is a runtime kbench chooses: a local transformer (a catalogue model that is not
    static, or a folder) on CPU."""
    spec = CATALOGUE.get(config.model)
    return (config.provider == "sentence_transformers" and (spec is None or spec.provider == config.provider)
            and config.device != "cuda")


def prior_fast(config: EmbeddingConfig, cpu: CpuFeatures | None = None) -> str:
    """What ``fast`` is expected to run on this kind of CPU before it is measured here (cpu.py ``PRIOR_FAST``)."""
    spec = CATALOGUE.get(config.model)
    backends = spec.backends if spec is not None else ("torch", "openvino")
    guess = PRIOR_FAST[(cpu or cpu_features()).kind]
    return guess if guess in backends else backends[0]


_choices: dict[tuple, Choice] = {}


def choice_for(config: EmbeddingConfig, *, sample: TuningSample | Callable[[], TuningSample] | None = None,
               exports: Path | None = None, tune_here: bool = True,
               say: Callable[[str], None] | None = None) -> Choice:
    """The backend ``config`` runs on this machine and why. ``exact`` and ``fast`` tune the model first when this
    machine has no tuning of it (on ``sample``, default the demo set's; exports under ``exports``), unless
    ``tune_here`` is False (then the reference or the prior, said as unmeasured)."""
    asked = config.backend
    if not backend_is_chosen(config):
        backend = asked if asked not in CHOICES else "torch"
        why = ("on CUDA: torch (a tuning times the CPU runtimes)" if config.device == "cuda" and asked in CHOICES
               else "the only backend of a static model or an API provider" if asked in CHOICES
               else "set in the config")
        return Choice(asked, backend, config.precision, why)
    tuned = stored_tuning(config.model)
    if tuned is None and asked in CHOICES and tune_here:
        def texts() -> TuningSample:  # as a run encodes them: with the section's prefixes
            found = sample() if callable(sample) else sample or demo_sample()
            return found.prefixed(config.document_prefix, config.query_prefix)

        tuned = tune(config.model, texts, exports or tuning_exports(), say=say)
        if tuned.ran_here:  # what was measured, once: the table `kbench models tune` prints
            for line in tuning_lines(tuned, config.drift_gate):
                (say or say_on_stderr)(line)
    if asked not in CHOICES:
        return _named(config, tuned)
    if tuned is None:
        spec = CATALOGUE.get(config.model)
        reference = "torch" if spec is None or "torch" in spec.backends else spec.backends[0]
        if asked == EXACT:
            return Choice(asked, reference, "auto", f"exact: not measured on this machine, so the reference, "
                                                    f"{reference} (kbench models tune {config.model})")
        guess, kind = prior_fast(config), cpu_features().kind
        return Choice(asked, guess, "auto", f"fast: not measured on this machine: {guess} is the guess for a {kind} "
                                            f"CPU ({PRIOR_SOURCE[kind]}; kbench models tune {config.model})")
    key = (str(tuned.path or id(tuned)), tuned.created, asked, config.drift_gate.min_overlap,
           config.drift_gate.max_cosine_error)
    if key not in _choices:
        broken: dict[str, str] = {}
        picked = choose(tuned, asked, config.drift_gate)
        while picked.backend not in broken and (problem := _runtime_problem(picked.backend)):
            broken[picked.backend] = problem  # measured once, broken since: the next fastest
            picked = choose(tuned, asked, config.drift_gate, broken)
        _choices[key] = picked
    return _choices[key]


def _named(config: EmbeddingConfig, tuned: Tuning | None) -> Choice:
    """A backend the config names (or ``fast`` resolved into when it loaded), with its figures here and whether it
    is what ``fast`` or ``exact`` runs here."""
    row = tuned.row(config.backend, config.precision) if tuned is not None else None
    if row is None:
        return Choice(config.backend, config.backend, config.precision, f"set in the config; not measured on this "
                      f"machine (kbench models tune {config.model})", None, tuned)
    figures = f"{row.speedup:.2f}x {tuned.reference}'s chunks/s, {drift_text(row)}"
    for alias, what in ((FAST, "the fastest backend here within the drift gate"),
                        (EXACT, "the fastest backend here whose vectors are torch's to f32 rounding")):
        if choice_for(config.model_copy(update={"backend": alias, "precision": "auto"})).row == row:
            return Choice(config.backend, config.backend, config.precision,
                          f"what embedding.backend: {alias} runs, {what}: {figures}", row, tuned)
    return Choice(config.backend, config.backend, config.precision, f"set in the config; measured here: {figures}",
                  row, tuned)


def _runtime_problem(backend: str) -> str | None:
    try:
        check_runtimes(backend)
    except RuntimeMissingError as error:
        return str(error)
    return None


def resolved(config: EmbeddingConfig, **how) -> EmbeddingConfig:
    """``config`` with ``exact`` or ``fast`` replaced by the backend (and precision) chosen here (``choice_for``);
    any other backend as it is."""
    if config.backend not in CHOICES:
        return config
    choice = choice_for(config, **how)
    return config.model_copy(update={"backend": choice.backend, "precision": choice.precision})


# --------------------------------------------------------------------------- what a run and a sweep say
def backend_line(config: EmbeddingConfig) -> str | None:
    """``embedding backend: openvino (f32), exact: the fastest backend here whose ...`` for a local transformer
    (None for a static model or an API); says when the tuning ran in this process and how long it took."""
    if not backend_is_chosen(config):
        return None
    choice = choice_for(config, tune_here=False)
    return f"embedding backend: {choice.label}, {choice.why}"


def faster_backend_hint(config: EmbeddingConfig, embed_seconds: float) -> str | None:
    """For a run that embedded ``embed_seconds`` on torch: what ``fast`` runs instead here, with this machine's
    figures; or that nothing is measured here yet. None when nothing faster is known."""
    if not backend_is_chosen(config) or resolved(config, tune_here=False).backend != "torch":
        return None
    tuned = stored_tuning(config.model)
    if tuned is None:
        guess, kind = prior_fast(config), cpu_features().kind
        return (f"embedding took {embed_seconds:.0f}s on torch; `kbench models tune {config.model}` measures every "
                f"backend on this machine (on a {kind} CPU, {guess}: {PRIOR_SOURCE[kind]}, elsewhere)")
    fast = choose(tuned, FAST, config.drift_gate)
    if fast.backend == "torch":
        return None
    return (f"embedding took {embed_seconds:.0f}s on torch; --set embedding.backend=fast runs {fast.label} here: "
            f"{fast.row.speedup:.2f}x torch's chunks/s, {drift_text(fast.row)} (measured on this machine)")


def backend_record(config: EmbeddingConfig) -> dict[str, str]:
    """What a run's fingerprint (``model``) and MLflow params (``embedding.``) say about the backend that ran:
    ``backend_ran`` (with the precision it was asked for when chosen: ``openvino (f32)``) and ``backend_why``;
    empty for a static model or an API."""
    if not backend_is_chosen(config):
        return {}
    choice = choice_for(config, tune_here=False)
    return {"backend_ran": choice.label, "backend_why": choice.why}


def drift_note(config: EmbeddingConfig) -> str:
    """`` (embedding openvino: top-10 overlap 0.996 ...)`` for a sweep's line of a config, from this machine's
    tuning; empty for a static model or an API."""
    if not backend_is_chosen(config):
        return ""
    choice = choice_for(config, tune_here=False)
    measured = drift_text(choice.row) if choice.row is not None else "its drift not measured here"
    return f" (embedding {choice.label}: {measured})"


def tuning_lines(tuned: Tuning, gate: DriftGate) -> list[str]:
    """The tuning as a table (one row per backend, marked with what exact and fast run) and what it chose."""
    exact, fast = choose(tuned, EXACT, gate), choose(tuned, FAST, gate)
    header = ["backend", "computes in", "chunks/s", f"vs {tuned.reference}", "query ms", "cosine error",
              "worst", "top-10 overlap", "p10", "alone", "alone p10", "batch dep.", "drift gate", "runs for"]
    rows = []
    for r in tuned.rows:
        runs_for = ", ".join(name for name, c in (("exact", exact), ("fast", fast)) if c.row == r)
        rows.append([r.label, r.computes_in, f"{r.chunks_per_s:.1f}", f"{r.speedup:.2f}x", f"{r.query_ms:.1f}",
                     f"{r.cosine_error_mean:.1e}", f"{r.cosine_error_worst:.1e}", f"{r.overlap_mean:.3f}",
                     f"{r.overlap_p10:.3f}", f"{r.alone_overlap_mean:.3f}", f"{r.alone_overlap_p10:.3f}",
                     f"{r.batch_error_worst:.1e}", "exact" if is_exact(r) else
                     "within" if gate_problem(r, gate) is None else "beyond", runs_for])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(c.ljust(w) if i in (0, 1, 12, 13) else c.rjust(w) for i, (c, w) in
                       enumerate(zip(cells, widths))).rstrip() for cells in [header, ["-" * w for w in widths], *rows]]
    lines += [f"embedding.backend {name} runs {c.label} here: {c.row.speedup:.2f}x {tuned.reference}'s chunks/s, "
              f"{drift_text(c.row)}" for name, c in (("exact", exact), ("fast", fast))]
    lines += [f"{backend}: not measured: {why}" for backend, why in tuned.skipped.items()]
    where = f"kept in {tuned.path}" if tuned.path else "not kept (the folder could not be written)"
    lines.append(f"{tuned.model} on {_machine_text(tuned)}, {tuned.sample.get('passages')} passages and "
                 f"{tuned.sample.get('questions')} questions of {tuned.sample.get('source')}; measured "
                 f"{tuned.created} in {tuned.seconds:.0f} s, load average {tuned.load_average} after; {where}")
    return lines


def _machine_text(tuned: Tuning) -> str:
    found = tuned.key.get("machine", {})
    return f"{found.get('cpu', 'this CPU')} ({found.get('cores', '?')} cores, flags {cpu_features().describe()})"
