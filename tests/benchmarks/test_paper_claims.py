"""benchmarks/paper_claims.py in its --smoke sizes: every part runs and writes its tables, plots and JSON, the
compute and token budgets it promises hold, and a rerun reuses the finished runs. No claim of the paper is asserted
here: the full run reports whatever the numbers show."""

import importlib.util
import json
import math
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "paper_claims.py"


def _load():
    spec = importlib.util.spec_from_file_location("paper_claims", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


def test_smoke_run_writes_every_part_at_equal_flops_and_equal_domain_tokens(tmp_path, capsys):
    claims = _load()
    assert claims.main(["--smoke", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    s = results["settings"]
    seeds = [str(seed) for seed in s["seeds"]]
    ab = results["ablation"]

    # Part 1: five variants, each seed trained and scored; the budget is vanilla's FLOPs, each within half a step.
    models = ab["models"]
    assert set(models) == set(ab["runs"]) == {"vanilla", "aug_s", "siaf", "both", "widened"}
    vanilla = models["vanilla"]["overrides"]
    assert vanilla["siaf_terms"] == 1 and vanilla["aug_shortcuts"] == 0  # exactly LLaMA (docs/pangu-pi.md)
    for name, m in models.items():
        assert abs(m["flops"] - ab["budget_flops"]) <= m["flops_per_step"] / 2, name
        for seed in seeds:
            run = ab["runs"][name][seed]
            assert math.isfinite(run["bpc"]) and run["bpc"] > 0 and run["steps"] == m["steps"]
            layers = s["wide_layers"] if name == "widened" else s["num_hidden_layers"]
            assert len(run["effective_dimension"]) == layers
            assert all(1 <= d <= s["hidden_size"] for d in run["effective_dimension"])
    # The additions cost FLOPs (the shortcut's products), so PanGu-π trains no more steps than vanilla.
    assert models["both"]["flops_per_step"] > models["vanilla"]["flops_per_step"]
    assert models["both"]["steps"] <= models["vanilla"]["steps"]
    # The widened vanilla: fewer layers, PanGu-π's parameter count to within the rounding of its FFN width (8).
    assert models["widened"]["overrides"]["num_hidden_layers"] == s["wide_layers"]
    per_channel = 3 * s["hidden_size"] * s["wide_layers"]
    assert abs(models["widened"]["parameters"] - models["both"]["parameters"]) <= 4 * per_channel
    assert set(ab["decode"]) == set(models) and ab["decode"]["vanilla"]["ratio"] == 1.0

    # Part 3: equal domain tokens (the mixer keeps ratios to within 2 chunks of seq_len / 4), general as the ratio.
    rp = results["replay"]
    chunk = s["replay_seq_len"] // 4
    runs = rp["runs"]
    domain = runs["1:0"]["domain_tokens"]
    assert runs["1:0"]["general_tokens"] == 0
    for ratio, general_share in (("3:1", 1 / 3), ("1:1", 1.0)):
        assert abs(runs[ratio]["domain_tokens"] - domain) <= 2 * chunk
        assert abs(runs[ratio]["general_tokens"] - general_share * runs[ratio]["domain_tokens"]) <= 2 * chunk
        assert runs[ratio]["forgetting"] == runs[ratio]["after"]["general"] - rp["before"]["general"]
    assert rp["base"].endswith("both")  # no real model in smoke mode: part 1's seed-0 PanGu-π stands in

    markdown = (tmp_path / "paper_claims.md").read_text()
    for heading in ("## 1. Architecture ablation", "## 2. Feature diversity", "## 3. Replay", "## Closing note"):
        assert heading in markdown
    assert len(results["closing_note"]) >= 10
    for png in ("ablation.png", "diversity.png", "replay.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # A rerun with the same settings reuses every finished run and reports the same figures.
    capsys.readouterr()
    assert claims.main(["--smoke", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert printed.count(": reused ") == len(models) * len(seeds)
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["ablation"]["runs"] == ab["runs"] and again["replay"]["runs"] == runs
