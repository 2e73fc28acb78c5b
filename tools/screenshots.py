"""Screenshots of what a person sees in MLflow: the runs list, the newest sweep's parent run and its report, one
child run, the experiment's Traces tab and its Datasets view.

    .venv/bin/python tools/screenshots.py [--workspace experiments] [--out screenshots/] [--port 5055]

Starts MLflow's UI (`kbench ui`'s command, on 127.0.0.1) for the workspace, waits for it, takes PNGs with
headless Chromium, then stops the server it started. Look at the PNGs before calling a page done.

What it needs: Debian's `chromium` (`apt-get update && apt-get install -y chromium`; `make` installs Python
packages only). It drives Chromium's own `--screenshot` flag: no playwright, no browser download. The sweep's
report is rendered from its file (`<workspace>/sweeps/<sweep key>/report/report.html`, or the parent's artifact
downloaded to a temporary folder), never through MLflow's `/get-artifact`, which serves it as an attachment that
headless Chromium downloads instead of rendering (300 s lost per page).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from kbench.cli.ui_cmd import ui_command
from kbench.paths import workspace_dir
from kbench.tracking import tags as tag
from kbench.tracking.mlflow_run import tracking_uri

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-extensions", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  "--window-size=1600,1300", "--virtual-time-budget=20000"]


def wait_healthy(base: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    raise SystemExit(f"screenshots: MLflow did not answer {base}/health within {seconds:.0f} s")


def shoot(browser: str, url: str, out: Path, timeout: float) -> Path | None:
    """One PNG; Chromium in its own process group, stopped whole when it takes longer than ``timeout``."""
    shot = subprocess.Popen([browser, *CHROMIUM_FLAGS, f"--screenshot={out}", url], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        shot.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(shot.pid, signal.SIGKILL)
        shot.wait()
        print(f"{out}: not taken, Chromium took over {timeout:.0f} s  <- {url}", flush=True)
        return None
    print(f"{out}  <- {url}", flush=True)
    return out


def report_file(client, parent, workspace: Path, scratch: Path) -> Path | None:
    """The sweep's report.html on disk: the sweep's own folder, else the parent's artifact downloaded."""
    key = parent.data.tags.get(tag.SWEEP_KEY)
    local = workspace / "sweeps" / key / "report" / "report.html" if key else None
    if local is not None and local.is_file():
        return local.resolve()
    try:
        return Path(client.download_artifacts(parent.info.run_id, "report/report.html", str(scratch))).resolve()
    except Exception:  # no report logged (--no-report, or a sweep in which configs failed before it)
        return None


def pages(uri: str, base: str, workspace: Path, scratch: Path) -> dict[str, str]:
    """name -> URL: the sweep's report (a file:// URL), the runs list, the newest sweep parent and its artifact view,
    its best child, the Traces tab and the Datasets view."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    parents = client.search_runs(experiments, f"tags.`{tag.SWEEP_ROLE}` = 'parent'",
                                 order_by=["attributes.start_time DESC"], max_results=1)
    if not parents:
        raise SystemExit(f"screenshots: no sweep in {uri}; run `kbench sweep configs/sweeps/demo.yaml` first")
    parent = parents[0]
    exp = parent.info.experiment_id
    child = parent.data.tags.get(tag.SWEEP_WINNER_RUN)
    if not child:
        children = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'", max_results=1)
        child = children[0].info.run_id if children else parent.info.run_id
    run_page = f"{base}/#/experiments/{exp}/runs"
    report = report_file(client, parent, workspace, scratch)
    return {  # the static report first: it renders fastest
        **({"sweep_report": report.as_uri()} if report is not None else {}),
        "sweep_parent": f"{run_page}/{parent.info.run_id}",
        "sweep_report_in_mlflow": f"{run_page}/{parent.info.run_id}/artifacts/report/report.html",
        "child_run": f"{run_page}/{child}",
        "child_plots": f"{run_page}/{child}/artifacts/plots/metrics_by_k.png",
        "child_results_table": f"{run_page}/{child}/artifacts/per_query_results.json",
        "experiment_runs": f"{base}/#/experiments/{exp}/runs",
        "experiment_traces": f"{base}/#/experiments/{exp}/traces",
        "experiment_datasets": f"{base}/#/experiments/{exp}/datasets",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", default="experiments")
    parser.add_argument("--out", default="screenshots")
    parser.add_argument("--port", type=int, default=5055)
    parser.add_argument("--wait", type=float, default=300, help="seconds to wait for MLflow to start")
    parser.add_argument("--timeout", type=float, default=300, help="seconds Chromium may take per page")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("screenshots: no chromium; install Debian's: apt-get update && apt-get install -y chromium",
              file=sys.stderr)
        return 2
    uri = tracking_uri(None, workspace_dir(args.workspace))
    base = f"http://127.0.0.1:{args.port}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(ui_command(uri, args.port), start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_healthy(base, args.wait)
        with tempfile.TemporaryDirectory(prefix="kbench-screenshots-") as scratch:
            for name, url in pages(uri, base, workspace_dir(args.workspace), Path(scratch)).items():
                shoot(browser, url, out / f"{name}.png", args.timeout)
    finally:  # the server and the workers it spawned: its own process group, started above
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
