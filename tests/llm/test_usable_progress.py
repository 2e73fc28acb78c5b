"""The pieces every LLM stage shares: the floor of usable answers (kbench/llm/usable.py), the progress line
(kbench/llm/progress.py) and the response cache writing each answer as it arrives (kbench/llm/cache.py)."""
from __future__ import annotations

import io
import json
import re

import pytest

from kbench.llm import LLMPolicy, ResponseCache, UsageMeter
from kbench.llm.progress import AnswerProgress
from kbench.llm.usable import UnusableAnswersError, UsableCount, check_usable, most_bad_allowed


def test_the_floor_counts_usable_answers_of_all_asked():
    policy = LLMPolicy()  # 80%
    assert most_bad_allowed(10, 0.8) == 2 and most_bad_allowed(56, 0.8) == 11 and most_bad_allowed(4, 0.8) == 0
    assert check_usable(UsableCount("judge", "m", 10, 8), policy, fix="x") is False  # at the floor: fine
    with pytest.raises(UnusableAnswersError) as raised:
        check_usable(UsableCount("judge", "smollm2", 56, 2, failed=1), policy, fix="use a stronger model")
    assert str(raised.value) == ("judge: 2 of 56 answers usable (53 unusable, 1 failed) from model smollm2, below the "
                                 "floor of 80% (llm.policy.min_usable); use a stronger model; or keep going on what "
                                 "is usable with --allow-partial (llm.policy.allow_partial: true)")
    assert check_usable(UsableCount("judge", "m", 0, 0), policy, fix="x") is False  # nothing asked
    warned, meter = [], UsageMeter()
    assert check_usable(UsableCount("query.hyde", "m", 10, 5, stage="query_hyde"), LLMPolicy(allow_partial=True),
                        fix="x", meter=meter, warn=warned.append) is True
    assert warned[0].startswith("kbench: WARNING: query.hyde: 5 of 10 answers usable") and "allow_partial" in warned[0]
    assert warned[0].endswith("what query.hyde gives rests on 5 usable answers and is marked partial")
    assert meter.metrics()["llm_query_hyde_partial"] == 1
    assert check_usable(UsableCount("j", "m", 10, 0), LLMPolicy(min_usable=0.0), fix="x") is False


def test_progress_writes_a_whole_line_per_update_off_a_terminal():
    clock = iter(range(0, 1000, 4)).__next__  # each reading 4 s later
    stream = io.StringIO()
    shown = AnswerProgress("judge (m)", 5, stream=stream, line_every_s=10, clock=clock)
    shown.start(" (0 from the cache)")
    for usable in (True, False, True, True):
        shown.add(usable=usable)
    shown.add(failed=True)
    shown.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines[0] == "judge (m): 5 to answer (0 from the cache)"
    assert lines[1].startswith("judge (m): 3/5 answers (2 usable, 1 unusable, 0 failed), ") and "left" in lines[1]
    assert lines[-1].startswith("judge (m): 5/5 answers (3 usable, 1 unusable, 1 failed), ") and "left" not in lines[-1]
    assert len(lines) == 3  # one line per 10 s, and the last: no line per answer


def test_progress_redraws_one_line_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    shown = AnswerProgress("rerank (m)", 2, stream=stream, clock=iter(range(100)).__next__)
    shown.add(usable=True)  # before start(): counted, not shown (the cache's answers)
    assert stream.getvalue() == ""
    shown.start()
    shown.add(usable=True)
    shown.close()
    text = stream.getvalue()
    assert text.count("\n") == 2 and text.count("\r") == 2  # the start line, then the last redraw ends the line
    assert re.search(r"rerank \(m\): 2/2 answers \(2 usable, 0 unusable, 0 failed\), [\d.]+/s; \d+s\n$", text)


def test_each_answer_is_on_disk_as_it_arrives_and_a_cut_line_is_a_miss(tmp_path):
    cache = ResponseCache(tmp_path, {"kind": "chat", "model": "m"})
    cache.put("first prompt", "first answer")
    assert ResponseCache(tmp_path, {"kind": "chat", "model": "m"}).get("first prompt") == "first answer"  # no flush
    cache.put("second prompt", "second answer")
    (log,) = cache.dir.glob("*.jsonl")
    with log.open("a") as f:  # a writer killed mid-line
        f.write('["abc", "half an ans')
    (cache.dir / "0123.json").write_text(json.dumps({ResponseCache.key("old prompt"): "old answer"}))  # old shard
    again = ResponseCache(tmp_path, {"kind": "chat", "model": "m"})
    assert again.get("second prompt") == "second answer" and again.get("old prompt") == "old answer"
    assert len(again) == 3
    assert json.loads((cache.dir / "key.json").read_text()) == {"kind": "chat", "model": "m"}


def test_a_run_allowed_to_go_on_below_the_floor_never_stands_in_for_a_strict_one():
    from kbench.config import load_experiment
    from kbench.paths import REPO_ROOT

    # a config with an LLM stage (without one, allow_partial changes nothing: tests/test_run_keys.py, issue 45)
    hyde = ["query.hyde.enabled=true", "query.hyde.model=m", "query.hyde.base_url=http://127.0.0.1:9/v1"]
    strict = load_experiment(REPO_ROOT / "configs" / "quickstart.yaml", hyde)
    partial = load_experiment(REPO_ROOT / "configs" / "quickstart.yaml", hyde + ["llm.policy.allow_partial=true"])
    tighter = load_experiment(REPO_ROOT / "configs" / "quickstart.yaml", hyde + ["llm.policy.min_usable=0.9"])
    assert partial.run_key() != strict.run_key() == tighter.run_key()  # the floor itself changes no result
