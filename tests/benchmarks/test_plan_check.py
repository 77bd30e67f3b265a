"""benchmarks/plan_check.py at its smallest case: the child trains, the parent reads its peak and puts the plan's
prediction beside it, the table and the JSON are written. The figures themselves are the benchmark's to report."""

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "plan_check.py"


def test_smallest_case_runs_and_reports(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("plan_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = tmp_path / "plan_check.json"
    assert module.main(["--cases", "1M-full", "--malloc", "fixed", "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["case"] == "1M-full" and row["malloc"] == "fixed"
    assert 0 < row["baseline_bytes"] < row["measured_peak_bytes"]
    assert row["predicted_training_bytes"] == row["estimate"]["peak"] > 0
    assert row["predicted_peak_bytes"] == row["baseline_bytes"] + row["predicted_training_bytes"]
    assert all(t > 0 for t in row["step_seconds"]) and row["loss"] > 0
    assert "| 1M (" in capsys.readouterr().out
