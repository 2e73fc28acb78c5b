"""No traceback for bad input (issue 45): each command's file and name arguments pointed at the wrong kind of thing
end in one `kbench: error:` line and exit 2, through the CLI's one error handler (kbench/cli/errors.py)."""
from __future__ import annotations

import pytest

from tests.reliability.inputs import error_lines, run_kbench

CONFIG = "configs/quickstart.yaml"


def cases(tmp_path):
    not_json = tmp_path / "judged.qrels.json"
    not_json.write_text("q1 0 d1 2\n")  # the qrels, not the provenance JSON beside them
    a_file = tmp_path / "notes.txt"
    a_file.write_text("hello\n")
    from kbench.paths import REPO_ROOT

    config = str(REPO_ROOT / CONFIG)
    return {
        # issue 45: JSONDecodeError traceback
        "export-mlflow judgements not JSON": ["runs", "export-mlflow", str(tmp_path), "--judgements", str(not_json)],
        "export-mlflow judgements a folder": ["runs", "export-mlflow", str(tmp_path), "--judgements", str(tmp_path)],
        "export-mlflow folder a file": ["runs", "export-mlflow", str(a_file)],
        # issue 45: ValueError "... is a static model" traceback, for fast and onnx-int8
        # (with embedding.provider unwritten, kbench picks static and fast resolves to torch: that one runs)
        "static model, backend fast": ["run", config, "--set", "embedding.model=tokenlearn-static-64", "--set",
                                       "embedding.provider=sentence_transformers", "--set", "embedding.backend=fast"],
        "static model, backend onnx-int8": ["run", config, "--set", "embedding.model=tokenlearn-static-64", "--set",
                                            "embedding.provider=static", "--set", "embedding.backend=onnx-int8"],
        "API provider, backend openvino-int8": ["run", config, "--set", "embedding.provider=openai", "--set",
                                                "embedding.base_url=http://127.0.0.1:9/v1", "--set",
                                                "embedding.backend=openvino-int8"],
        # issue 45: MlflowException "Invalid clause(s) in filter string" traceback
        "publish a name with both quotes": ["datasets", "publish", "demo", "--name", "o'brien \"jr\""],
        "publish a file as the dataset": ["datasets", "publish", str(a_file), "--name", "x"],
        "mlflow-judge a run id that is a path": ["runs", "mlflow-judge", str(a_file), "--model", "m", "--base-url",
                                                 "http://127.0.0.1:9/v1"],
        "show a run id with quotes": ["runs", "show", "x' or '1'='1"],
        "compare judged qrels a folder": ["compare", "abc123", "def456", "--judged-qrels", str(tmp_path)],
        "run a config that is JSON lines": ["run", str(not_json)],
    }


NAMES = ["export-mlflow judgements not JSON", "export-mlflow judgements a folder", "export-mlflow folder a file",
         "static model, backend fast", "static model, backend onnx-int8", "API provider, backend openvino-int8",
         "publish a name with both quotes", "publish a file as the dataset", "mlflow-judge a run id that is a path",
         "show a run id with quotes", "compare judged qrels a folder", "run a config that is JSON lines"]


@pytest.mark.parametrize("name", NAMES)
def test_a_wrong_kind_of_argument_is_one_line_and_exit_2(tmp_path, name):
    argv = cases(tmp_path)[name]
    workspace = tmp_path / "ws"
    done = run_kbench(*argv, cwd=tmp_path, timeout=240,
                      env={"MLFLOW_TRACKING_URI": f"sqlite:///{workspace / 'mlflow.db'}"})
    assert "Traceback" not in done.err, done.err[-3000:]
    assert done.code == 2, (done.code, done.err[-3000:])
    (line,) = error_lines(done.err)
    print(name, "->", line)
    assert not (tmp_path / "experiments" / "runs").exists()
