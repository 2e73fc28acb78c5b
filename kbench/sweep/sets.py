"""``kbench sweep CONFIG --sets DIR DIR ...``: after one grid sweep per evaluation set, one pick across them.

    found = recommend_sets(plans, outcomes, folders)    # plans and outcomes of the same sweep file, one per set
    found.lines()          # compare.across's lines: each config's bound per set, the pick, where the sets disagree
    found.winner_config    # <workspace>/sweeps/across-<key>/winner.yaml: the pick's resolved config
    found.run_id           # the MLflow run beside the sweeps that keeps the pick and each set's own lines

Each set's sweep is a sweep like any other (its own parent run, summary, winner.yaml with its own pick); the pick
across the sets is ``evaluation.across.recommend_across`` over their comparisons (``compare.across``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import yaml

from kbench.compare.across import across_comparisons, log_across, write_across
from kbench.evaluation.across import AcrossSets
from kbench.paths import workspace_dir
from kbench.sweep.expand import SweepPlan
from kbench.tracking.read import tracking_client


@dataclass
class SetsOutcome:
    across: AcrossSets
    folder: Path
    winner_config: Path
    run_id: str

    def lines(self) -> list[str]:
        return self.across.lines()


def set_name(folder: str, taken: list[str]) -> str:
    """A set's name: its folder's name (its path when two folders share a name)."""
    name = Path(folder).name or folder
    return folder if name in taken else name


def recommend_sets(plans: list[SweepPlan], outcomes: list, folders: list[str]) -> SetsOutcome:
    """The pick across the sets the sweeps ran on (``outcomes``: their ``run.SweepOutcome``, each with a
    comparison), written under ``<workspace>/sweeps/across-<key>/`` and logged as one MLflow run."""
    names: list[str] = []
    for folder in folders:
        names.append(set_name(folder, names))
    comparisons = [o.comparison for o in outcomes]
    found = across_comparisons(comparisons, names, plans[0].baseline.recommend)
    key = hashlib.sha256("|".join(p.sweep_key for p in plans).encode()).hexdigest()[:16]
    folder = workspace_dir(plans[0].baseline.workspace) / "sweeps" / f"across-{key}"
    write_across(found, folder)
    config = plans[0].by_label()[found.pick]
    winner = folder / "winner.yaml"
    winner.write_text(
        f"# The recommendation across {len(names)} sets ({', '.join(names)}) of sweep {plans[0].name}: "
        + found.verdict().removeprefix("recommendation across sets: ") + "\n"
        + "".join(f"# {line.strip()}\n" for line in found.disagreement())
        + f"# Its resolved config, with the first set's dataset ({folders[0]}); run it with: kbench run {winner}\n"
        + yaml.safe_dump(config.experiment.portable(), sort_keys=False), encoding="utf-8")
    run_id = log_across(found, comparisons, tracking_uri=outcomes[0].tracking_uri, folder=folder,
                        name=f"{plans[0].name} · across {len(names)} sets · {', '.join(names)}")
    tracking_client(outcomes[0].tracking_uri).log_artifact(run_id, str(winner))
    return SetsOutcome(found, folder, winner, run_id)

