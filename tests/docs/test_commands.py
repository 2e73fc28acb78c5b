"""Docs are tests: every shell block of README.md and docs/ runs, page by page, as a reader would run it.

Each page runs in a scratch checkout of its own (the repository's folders linked, `../shared` beside it, fresh
workspaces (`experiments/` and the others the pages name) whose `cache/` is the test run's shared cache, so a text
embedded by any test is embedded once), in one bash session from its first block to its last, so a variable one block
sets is there in the next and a server a block starts in the background is stopped when the page ends. A block whose
page says `<!-- skip: reason -->` right before it is not run; tests/docs/blocks.py finds the blocks.

The pages are the suite's slowest tests because each `kbench` line is a process of its own that imports its stack
and loads its model, as a reader's does: that is what they check. They run side by side on the xdist workers, and
each worker's pages reach a fork server (tests/docs/forkserver.py) through a `kbench` first on PATH: the stack is
imported once per worker and each line is a forked child with the line's own stdin, stdout, stderr, argv, cwd and
environment, so exit codes, pipes and output are the real process's; `KBENCH_TEST_FORKSERVER=0` runs every line as
a process of its own.

Each page prints its wall time, its CPU seconds (its shell's and its `kbench` lines', through the fork server) with
the load average, and its slowest commands (`pytest -rP` shows them for passing pages). Embedding is most of a
page's CPU (a profile of a demo sweep: 146 of 183 s in MiniLM's forward pass), and the cache is the run's, so a
chunking two pages embed costs the first of them only: pages keep to the same samples where they can (SciFact with
`max_queries=20 max_documents=300` in store.md, retrieval.md and sweeps.md; the demo set's chunkings of
configs/sweeps/demo-strategies.yaml in recommendation.md, sweeps.md, search.md and comparing-chunkers.md). What
stays slow, and why: README.md and tutorials/your-own-docs.md sweep two chunkings of a set they build (the
tutorial's point: 30 FastAPI pages, as configs/sweeps/your-docs.yaml says); fast-embedding.md exports the model for
another runtime, twice in its benchmark checks (each builds its exports fresh, as the benchmark measures them);
store.md starts PostgreSQL for its pgvector run.
"""
from __future__ import annotations

import os
import signal
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from kbench.paths import REPO_ROOT
from tests.conftest import PGSERVER_DEFAULT
from tests.docs.blocks import SKIP, every_block, pages, shell_blocks
from tests.docs.forkserver import ForkServer

LINKED = [".venv", "benchmarks", "configs", "datasets", "docs", "kbench", "notebooks", "tools", "Makefile",
          "mkdocs.yml", "pyproject.toml", "requirements.lock"]
# the default one, the CI gate configs' own, and the one docs/how-to/configs.md moves a run to with KBENCH_WORKSPACE
WORKSPACES = ["experiments", "ci-workspace", "scratch"]
PAGE_TIMEOUT_S = 900
RUNNABLE = [page for page in pages() if any(block.skip is None for block in shell_blocks(page))]


def page_param(page: Path):
    """A page as a test; one that runs a pgvector store without a DSN shares the machine's default PostgreSQL data
    directory with other tests, so it joins their xdist group."""
    code = "\n".join(block.code for block in shell_blocks(page) if block.skip is None)
    marks = [pytest.mark.xdist_group(PGSERVER_DEFAULT)] if "store.backend=pgvector" in code and "dsn" not in code else []
    return pytest.param(page, marks=marks, id=str(page.relative_to(REPO_ROOT)))


def scratch_checkout(root: Path, cache: Path) -> Path:
    """A checkout as a reader has it, writing nowhere but ``root`` (and the models folder, as kbench does)."""
    checkout = root / "kbench-checkout"
    checkout.mkdir()
    for name in LINKED:
        (checkout / name).symlink_to(REPO_ROOT / name)
    (root / "shared").symlink_to((REPO_ROOT.parent / "shared").resolve(), target_is_directory=True)
    for name in WORKSPACES:
        (checkout / name).mkdir()
        (checkout / name / "cache").symlink_to(cache, target_is_directory=True)
    return checkout


def reader_environment() -> dict[str, str]:
    """The environment a reader's shell has after `source .venv/bin/activate`: this checkout's kbench first on PATH,
    no workspace or tracking server chosen for them (the machine's data and models folders are kept)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KBENCH_WORKSPACE", "KBENCH_TRACE", "KBENCH_TEST_", "MLFLOW_", "PYTEST", "COV_"))}
    env.update(PATH=f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO_ROOT),
               NO_MKDOCS_2_WARNING="1", PYTHONUNBUFFERED="1")
    return env


def page_script(page: Path, timings: Path | None = None) -> str:
    """One bash script: the page's runnable blocks in order, each announced on stderr so a failure names it. With
    ``timings``, bash traces every command with its start time into that file (not the page's log)."""
    parts = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    if timings is not None:
        parts += [f"exec 9>{shlex.quote(str(timings))}", "BASH_XTRACEFD=9", "PS4='+ $EPOCHREALTIME '", "set -x"]
    for block in shell_blocks(page):
        if block.skip is None:
            parts += [f"echo {shlex.quote('### ' + block.where)} >&2", block.code]
    return "\n".join(parts) + "\n"


def cpu_seconds(forks: ForkServer | None) -> float:
    """CPU seconds (user + system) of this process's reaped children and of the fork server's reaped children (the
    page's `kbench` lines), so far: the difference across a page is the page's CPU, as each worker runs one page at a
    time with a fork server of its own."""
    used = os.times()
    total = used.children_user + used.children_system
    if forks is not None and forks.process.poll() is None:
        try:  # fields 16 and 17 of /proc/PID/stat: cutime and cstime, in clock ticks (after the ")" of the name)
            fields = Path(f"/proc/{forks.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
    return total


def slowest_commands(timings: Path, count: int = 8) -> list[tuple[float, str]]:
    """(seconds, command) of the page's slowest top-level commands, from the bash trace: a command runs until the
    next top-level one starts (the last one until the trace ends)."""
    steps = []
    for line in timings.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "+":
            try:
                steps.append((float(parts[1]), parts[2]))
            except ValueError:
                continue
    took = [(round(after[0] - at, 1), command) for (at, command), after in zip(steps, steps[1:])]
    return sorted(took, reverse=True)[:count]


@pytest.fixture(scope="session")
def kbench_forks():
    """This worker's fork server, or None when ``KBENCH_TEST_FORKSERVER=0`` (every line a process of its own)."""
    if os.environ.get("KBENCH_TEST_FORKSERVER", "1") == "0":
        yield None
        return
    server = ForkServer(reader_environment(), REPO_ROOT / ".venv" / "bin" / "kbench")
    yield server
    server.stop()


def page_environment(forks: ForkServer | None) -> dict[str, str]:
    env = reader_environment()
    if forks is not None:
        env["PATH"] = f"{forks.bin}{os.pathsep}{env['PATH']}"
    return env


@pytest.mark.slow
@pytest.mark.parametrize("page", [page_param(page) for page in RUNNABLE])
def test_every_command_on_the_page_runs(page, tmp_path, shared_cache_workspace, kbench_forks):
    cache = shared_cache_workspace / "cache"
    cache.mkdir(exist_ok=True)
    checkout = scratch_checkout(tmp_path, cache)
    log, timings = tmp_path / "page.log", tmp_path / "page.timings"
    started, cpu_started = time.perf_counter(), cpu_seconds(kbench_forks)
    with open(log, "w", encoding="utf-8") as out:
        # its own session: a page that times out is killed with every process it started, not just its shell
        # (an orphaned benchmark once kept both cores busy for the rest of the suite)
        shell = subprocess.Popen(["bash", "-c", page_script(page, timings)], cwd=checkout,
                                 env=page_environment(kbench_forks),
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = shell.wait(timeout=PAGE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
            code = "timeout"
    text = log.read_text(encoding="utf-8", errors="replace")
    ran = [b for b in shell_blocks(page) if b.skip is None]
    failed_at = ([line[4:] for line in text.splitlines() if line.startswith("### ")] or ["before the first block"])[-1]
    print(f"{page.relative_to(REPO_ROOT)}: {len(ran)} blocks in {time.perf_counter() - started:.0f} s "
          f"({cpu_seconds(kbench_forks) - cpu_started:.0f} s CPU, load {os.getloadavg()[0]:.1f}); slowest: "
          + "; ".join(f"{seconds} s {command[:100]}" for seconds, command in slowest_commands(timings)))
    assert code == 0, f"{failed_at}: exit {code}\n{text[-4000:]}"
    assert "Traceback (most recent call last)" not in text, text[-4000:]


def test_every_skipped_block_says_why_and_most_blocks_run():
    blocks = every_block()
    skipped = [b for b in blocks if b.skip is not None]
    assert all(len(b.skip) > 15 for b in skipped), [b.where for b in skipped if len(b.skip) <= 15]
    assert len(blocks) - len(skipped) >= 2 * len(skipped), f"{len(skipped)} of {len(blocks)} blocks are skipped"
    for page in pages():  # a skip comment not right before a block is a typo: that block would run anyway
        lines = page.read_text(encoding="utf-8").splitlines()
        assert sum(1 for line in lines if SKIP.match(line)) == sum(1 for b in shell_blocks(page) if b.skip), page


def test_the_blocks_are_found_as_a_reader_sees_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```bash\nkbench list\n```\n\n<!-- skip: needs a live PostgreSQL server -->\n"
                    "```sh\nkbench run configs/live.yaml\n```\n\n- item\n\n  ```console\n  $ kbench runs\n"
                    "  run  started\n  ```\n\n```yaml\nname: x\n```\n", encoding="utf-8")
    found = shell_blocks(page)
    assert [(b.line, b.lang, b.code, b.skip) for b in found] == [
        (3, "bash", "kbench list", None), (8, "sh", "kbench run configs/live.yaml", "needs a live PostgreSQL server"),
        (14, "console", "kbench runs", None)]
