"""kbench's document metrics against pytrec_eval (trec_eval's definitions) on one real SciFact run, side by side.

The run is BM25 over the 5,183 SciFact abstracts (no embedding, so it is cheap), all 300 test claims, top 100,
built through the public API. Both evaluators get the *same* ranking: pytrec_eval ranks by score (ties broken
by document id), so it is given 100, 99, 98, ... in kbench's order rather than the BM25 scores, which can tie.
Every value of P, recall, nDCG, MAP (cut), success at 1/5/10/100 and reciprocal rank (the run cut at k, since
trec_eval's has no cutoff) is compared; the benchmark fails if any differs by more than 1e-12.

Time: kbench's ``evaluate_run`` (chunk- and document-level metrics; miss attribution off) against
pytrec_eval building its evaluator and evaluating the same measures, interleaved, best of ``--rounds``.

    .venv/bin/python benchmarks/metrics_parity.py [--rounds 5]
"""
from __future__ import annotations

import argparse

import numpy as np
import pytrec_eval

from bench_io import interleaved_best, write_json
from kbench import evaluate_run, format_table, load_experiment, prepare_corpus, search_corpus

KS = [1, 5, 10, 100]
PAIRS = [("precision", "P_{k}"), ("recall", "recall_{k}"), ("ndcg", "ndcg_cut_{k}"), ("map", "map_cut_{k}"),
         ("hit_rate", "success_{k}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workspace", default="experiments")
    args = parser.parse_args()
    experiment = load_experiment({
        "name": "metrics-parity", "workspace": args.workspace, "dataset": {"name": "scifact", "split": "test"},
        "chunking": {"strategy": "none"}, "retrieval": {"legs": ["bm25"], "top_k": 100},
        "evaluation": {"k": KS, "miss_attribution": False}, "tracking": {"enabled": False}})
    corpus = prepare_corpus(experiment, progress=False)
    run = search_corpus(corpus, experiment).run
    dataset = corpus.dataset
    qrels = {q: {d: int(g) for d, g in dataset.qrels[q].items()} for q in run.query_ids}
    ranked = {q: {d: float(100 - i) for i, d in enumerate(run.doc_ids(q))} for q in run.query_ids}
    measures = {f"{m}.{','.join(map(str, KS))}" for m in ("P", "recall", "ndcg_cut", "map_cut", "success")}
    cuts = {k: {q: dict(list(s.items())[:k]) for q, s in ranked.items()} for k in KS}

    def kbench_eval():
        return evaluate_run(dataset, corpus.chunks, run, experiment.evaluation)[0]

    def pytrec():
        main_ = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(ranked)
        rr = {k: pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cuts[k]) for k in KS}
        return main_, rr

    per_query = kbench_eval().set_index("query_id")
    reference, rr = pytrec()
    diffs = []
    for qid, ref in reference.items():
        for k in KS:
            for ours, theirs in PAIRS:
                diffs.append(abs(per_query.loc[qid, f"doc_{ours}_at_{k}"] - ref[theirs.format(k=k)]))
            diffs.append(abs(per_query.loc[qid, f"doc_mrr_at_{k}"] - rr[k][qid]["recip_rank"]))
    diffs = np.array(diffs)
    identical = int((diffs == 0).sum())
    print(f"SciFact BM25 run: {len(run.query_ids)} claims x top 100 over {len(corpus.chunks)} abstracts; "
          f"{len(diffs)} values compared ({len(KS)} cutoffs x 6 metrics per claim)")
    print(f"max |kbench - pytrec_eval| = {diffs.max():.3g}; bit-identical: {identical}/{len(diffs)}")
    assert diffs.max() <= 1e-12, f"kbench differs from pytrec_eval by {diffs.max()}"
    means = [[f"{ours}@{k}", per_query[f"doc_{ours}_at_{k}"].mean(),
              float(np.mean([r[theirs.format(k=k)] for r in reference.values()]))]
             for k in (10, 100) for ours, theirs in PAIRS]
    print("\n" + format_table(["metric", "kbench", "pytrec_eval"], means))

    best = interleaved_best(args.rounds, {"kbench evaluate_run": kbench_eval, "pytrec_eval": pytrec})
    ratio = best["kbench evaluate_run"] / best["pytrec_eval"]
    print(f"\nbest of {args.rounds}: kbench evaluate_run {best['kbench evaluate_run'] * 1000:.1f} ms (chunk and "
          f"document levels, every metric at every k), pytrec_eval {best['pytrec_eval'] * 1000:.1f} ms "
          f"(document level, the measures above): kbench / pytrec_eval = {ratio:.2f}x")
    write_json("metrics_parity", {
        "run": "scifact test, bm25, top 100", "queries": len(run.query_ids), "values_compared": len(diffs),
        "max_abs_diff": float(diffs.max()), "bit_identical": identical, "rounds": args.rounds,
        "kbench_evaluate_run_s": best["kbench evaluate_run"], "pytrec_eval_s": best["pytrec_eval"],
        "kbench_over_pytrec_eval": ratio,
        "means": {row[0]: {"kbench": row[1], "pytrec_eval": row[2]} for row in means}})


if __name__ == "__main__":
    main()
