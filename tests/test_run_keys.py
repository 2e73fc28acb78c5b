"""The run keys of the shipped configs, pinned: a refactor that changes what a config resolves to (a renamed key,
a new default) would silently orphan every finished run and cache entry keyed by it. If a change is meant to change
results, update the pin in the same commit and say so. Configs whose data lives outside the repository and
../shared (the live store's questions, a generated code-QA set) are left out: their keys depend on the machine."""
from __future__ import annotations

import pytest

from kbench.config import load_experiment
from kbench.paths import REPO_ROOT
from kbench.sweep import load_sweep

PINNED = {
    "configs/chunking/ast.yaml": "d191ea6db1cb4f59",
    "configs/chunking/by_type.yaml": "d96bf84e554caec9",
    "configs/chunking/endpoint.yaml": "7556d132d6f4db12",
    "configs/chunking/fixed.yaml": "09530ada2c07a343",
    "configs/chunking/fixed_tokens.yaml": "12b26975518d517e",
    "configs/chunking/markdown.yaml": "0b6295ccc9f7406a",
    "configs/chunking/none.yaml": "a637bc0e93797b61",
    "configs/chunking/paragraph.yaml": "e00b44456219245b",
    "configs/chunking/recursive.yaml": "f05e81b403d94b6d",
    "configs/chunking/smart.yaml": "be54bea48a36bcae",
    "configs/ci/baseline.yaml": "2c400e01200ca86d",
    "configs/ci/candidate.yaml": "415809d0f2e95273",
    "configs/llm/code_examples.yaml": "3a7a9c43fda78855",
    "configs/llm/code_examples_nosummary.yaml": "1a1e461943204419",
    "configs/llm/decomposition.yaml": "fa36d12c2b2a9a9c",
    "configs/llm/enrichment.yaml": "d41fb9c943631d39",
    "configs/llm/expansion.yaml": "8ed2257fa7f902ce",
    "configs/llm/hyde.yaml": "88f76e65440692dd",
    "configs/llm/none.yaml": "10dab595b43676c7",
    "configs/llm/ragas.yaml": "cfa1cdcfb54ac4fb",
    "configs/llm/ragas_llm.yaml": "5761001e33940b34",
    "configs/llm/rerank_llm.yaml": "132a04de29eba42d",
    "configs/quickstart.yaml": "334814414c877601",
    "configs/retrieval/archon_hybrid.yaml": "4de10b501a3f8422",
    "configs/retrieval/archon_hybrid_rerank.yaml": "82be28fd0f58225c",
    "configs/retrieval/archon_weighted.yaml": "7d6c8fd8e29f3867",
    "configs/retrieval/archon_weighted_rerank.yaml": "2fe5b1fd59232fbd",
    "configs/retrieval/bm25.yaml": "ca091771402723bf",
    "configs/retrieval/bm25_rerank.yaml": "6c8059dfc76a3a44",
    "configs/retrieval/hybrid_multiunit.yaml": "0c5510e7679497e8",
    "configs/retrieval/postgres_fts.yaml": "31c406bb5f27c9c1",
    "configs/retrieval/postgres_fts_rerank.yaml": "4464d093eac77a10",
    "configs/retrieval/rrf.yaml": "e0b318ead9a28d12",
    "configs/retrieval/rrf_rerank.yaml": "0909d48072547bea",
    "configs/retrieval/rrf_supabase.yaml": "37e118050cfec7e6",
    "configs/retrieval/rrf_supabase_rerank.yaml": "cc69aea08b22aea2",
    "configs/retrieval/vector.yaml": "c4184e45b4caface",
    "configs/retrieval/vector_rerank.yaml": "2c9bf7108fcb5281",
    "configs/retrieval/weighted.yaml": "ea44d43487e6a98a",
    "configs/retrieval/weighted_rerank.yaml": "bcb7cd3539e6c3b0",
    "configs/scifact.yaml": "9fe48bfdddb1b498",
    "configs/spans/chroma_chunkers.yaml": "ef28ddca46b00568",
    "configs/spans/chroma_chunkers.yaml[ast-default]": "7f6f1fc653247512",
    "configs/spans/chroma_chunkers.yaml[baseline]": "ef28ddca46b00568",
    "configs/spans/chroma_chunkers.yaml[by_type-default]": "d5e0ec307855fe2a",
    "configs/spans/chroma_chunkers.yaml[endpoint-default]": "b515c21da2b38fb0",
    "configs/spans/chroma_chunkers.yaml[fixed-250t]": "5edc3e7b07ce2709",
    "configs/spans/chroma_chunkers.yaml[fixed-500t]": "8528d510c3ec7891",
    "configs/spans/chroma_chunkers.yaml[fixed_tokens-250t]": "c2a8f29ed685c2fa",
    "configs/spans/chroma_chunkers.yaml[fixed_tokens-500t]": "4e04e2fdebaac678",
    "configs/spans/chroma_chunkers.yaml[fixed_tokens-default]": "eae4aa5950f2691a",
    "configs/spans/chroma_chunkers.yaml[markdown-250t]": "c6e15447b89d4024",
    "configs/spans/chroma_chunkers.yaml[markdown-500t]": "7bc6864e625bbe6c",
    "configs/spans/chroma_chunkers.yaml[markdown-default]": "deb1b3007f7d68e5",
    "configs/spans/chroma_chunkers.yaml[none]": "b7a20c1e0297cbfa",
    "configs/spans/chroma_chunkers.yaml[paragraph-500t]": "a1d0a8b9d2dd9cab",
    "configs/spans/chroma_chunkers.yaml[paragraph-default]": "d0fd62fa74605882",
    "configs/spans/chroma_chunkers.yaml[recursive-250t]": "6fbf903867ae9813",
    "configs/spans/chroma_chunkers.yaml[recursive-500t]": "07584f2b20e987f3",
    "configs/spans/chroma_chunkers.yaml[recursive-default]": "76d32e4f7d1f792d",
    "configs/spans/chroma_chunkers.yaml[smart-250t]": "8e81f3a8d55d8a85",
    "configs/spans/chroma_chunkers.yaml[smart-500t]": "6a0c163264ecf6a4",
    "configs/spans/chroma_chunkers.yaml[smart-default]": "ae8965c4b048e231",
    "configs/sweeps/demo-strategies.yaml": "676820bb74b13b07",
    "configs/sweeps/demo-strategies.yaml[chunk_size=400]": "8ae0466f1d5b8581",
    "configs/sweeps/demo-strategies.yaml[chunk_size=600]": "676820bb74b13b07",
    "configs/sweeps/demo-strategies.yaml[chunk_size=800]": "a6bbf8d9fb4cdb29",
    "configs/sweeps/demo-strategies.yaml[whole-docs]": "eeadb2acb0320469",
    "configs/sweeps/demo.yaml": "2d3af0806021a46c",
    "configs/sweeps/demo.yaml[chunk_size=1000,chunk_overlap=0,legs=[vector,bm25]]": "81e4d5dc681d0fb1",
    "configs/sweeps/demo.yaml[chunk_size=1000,chunk_overlap=0,legs=[vector]]": "6d920a81d9a090d3",
    "configs/sweeps/demo.yaml[chunk_size=1000,chunk_overlap=100,legs=[vector,bm25]]": "a7acc69b0c09a873",
    "configs/sweeps/demo.yaml[chunk_size=1000,chunk_overlap=100,legs=[vector]]": "dafa5a53648736b6",
    "configs/sweeps/demo.yaml[chunk_size=300,chunk_overlap=0,legs=[vector,bm25]]": "f875de788a365263",
    "configs/sweeps/demo.yaml[chunk_size=300,chunk_overlap=0,legs=[vector]]": "6d78c0ae92715de5",
    "configs/sweeps/demo.yaml[chunk_size=300,chunk_overlap=100,legs=[vector,bm25]]": "f5d3c247a0bf374a",
    "configs/sweeps/demo.yaml[chunk_size=300,chunk_overlap=100,legs=[vector]]": "6fba2c99602c6c04",
    "configs/sweeps/demo.yaml[chunk_size=600,chunk_overlap=0,legs=[vector,bm25]]": "35ade12373940d47",
    "configs/sweeps/demo.yaml[chunk_size=600,chunk_overlap=0,legs=[vector]]": "b108db482df1993d",
    "configs/sweeps/demo.yaml[chunk_size=600,chunk_overlap=100,legs=[vector,bm25]]": "915f0c26c252f044",
    "configs/sweeps/demo.yaml[chunk_size=600,chunk_overlap=100,legs=[vector]]": "2d3af0806021a46c",
}


@pytest.mark.parametrize("path", sorted({k.split("[")[0] for k in PINNED}))
def test_the_run_keys_of_the_shipped_configs_stay_put(path, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.delenv("KBENCH_WORKSPACE", raising=False)
    experiment = load_experiment(path)
    found = {path: experiment.run_key()}
    if experiment.sweep or experiment.variants:
        found.update({f"{path}[{c.label}]": c.run_key for c in load_sweep(path).configs})
    assert found == {k: v for k, v in PINNED.items() if k == path or k.startswith(f"{path}[")}


def test_allow_partial_changes_the_run_key_only_of_a_config_with_an_llm_stage():
    """Issue 45: --allow-partial changed the run key of a config with no LLM stage (so a finished run was run again
    for nothing). It still separates a run that may rest on fallbacks from a strict one where an LLM answers."""
    path = REPO_ROOT / "configs" / "quickstart.yaml"
    strict, partial = (load_experiment(path, extra) for extra in ([], ["llm.policy.allow_partial=true"]))
    assert strict.llm_stages() == [] and strict.run_key() == partial.run_key()
    hyde = ["query.hyde.enabled=true", "query.hyde.model=m", "query.hyde.base_url=http://127.0.0.1:9/v1"]
    strict, partial = (load_experiment(path, hyde + extra) for extra in ([], ["llm.policy.allow_partial=true"]))
    assert strict.llm_stages() == ["query.hyde"] and strict.run_key() != partial.run_key()


def test_the_default_backend_keeps_torchs_run_key_a_named_torch_has_its_own_and_fast_the_chosen_ones():
    """Issue 55: the default embedding.backend is exact, the fastest backend measured here whose vectors are torch's
    to f32 rounding. It hashes as torch, the default it replaced: every exact backend gives torch's results, so the
    pins above hold and the runs torch finished stand. A config that names torch runs torch itself: its own key.
    fast (resolved when the config loads, from this machine's tuning) keys as the backend it chose; the drift gate
    that chose it is no key of its own."""
    path = REPO_ROOT / "configs" / "quickstart.yaml"
    default = load_experiment(path)
    assert default.embedding.backend == "exact" and default.run_key() == PINNED["configs/quickstart.yaml"]
    assert load_experiment(path, ["embedding.backend=exact"]).run_key() == default.run_key()
    assert load_experiment(path, ["embedding.backend=torch"]).run_key() != default.run_key()
    fast = load_experiment(path, ["embedding.backend=fast"])
    named = load_experiment(path, [f"embedding.backend={fast.embedding.backend}",
                                   f"embedding.precision={fast.embedding.precision}"])
    assert fast.embedding.backend != "fast" and fast.run_key() == named.run_key()
    assert load_experiment(path, ["embedding.drift_gate.min_overlap=0.5"]).run_key() == default.run_key()
    static = ["embedding.model=wordllama-l2-supercat"]  # no backend to choose: exact and torch are one
    named_torch = load_experiment(path, [*static, "embedding.backend=torch"])
    assert load_experiment(path, static).run_key() == named_torch.run_key()
