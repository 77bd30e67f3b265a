"""benchmarks/paper_claims.py in its --smoke sizes: every part runs and writes its tables, plots and JSON, the
compute and token budgets it promises hold, and a rerun reuses the finished runs. No claim of the paper is asserted
here: the full run reports whatever the numbers show."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

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

    # Part 3: equal domain tokens (the mixer keeps ratios to within 2 chunks of seq_len / 4), general as the ratio;
    # smoke mode trains on the bundled samples (finance + legal : general), one run per ratio and seed.
    rp = results["replay"]
    assert not rp["real"] and rp["general_heldout"] == ["general"] and rp["domain_heldout"] == ["finance", "legal"]
    chunk = s["replay_seq_len"] // 4
    runs = rp["runs"]
    replay_seeds = [str(seed) for seed in s["replay_seeds"]]
    assert set(runs) == {"1:0", "3:1", "1:1"} and all(list(by_seed) == replay_seeds for by_seed in runs.values())
    for seed in replay_seeds:
        domain = runs["1:0"][seed]["domain_tokens"]
        assert runs["1:0"][seed]["general_tokens"] == 0
        for ratio, general_share in (("3:1", 1 / 3), ("1:1", 1.0)):
            run = runs[ratio][seed]
            assert abs(run["domain_tokens"] - domain) <= 2 * chunk
            assert abs(run["general_tokens"] - general_share * run["domain_tokens"]) <= 2 * chunk
            assert run["forgetting"] == {"general": run["after"]["general"] - rp["before"]["general"]}
            assert run["gain"] == rp["before"]["domain"] - run["after"]["domain"]
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
    assert printed.count(": reused ") == len(models) * len(seeds) + len(runs) * len(replay_seeds)
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["ablation"]["runs"] == ab["runs"] and again["replay"]["runs"] == runs
    # `--parts replay` into the same folder keeps parts 1 and 2 (carried over, with their command) beside it.
    assert claims.main(["--smoke", "--parts", "replay", "--out", str(tmp_path)]) == 0
    third = json.loads((tmp_path / "results.json").read_text())
    assert third["ablation"] == again["ablation"] and third["replay"]["runs"] == runs
    assert third["carried_over"]["ablation"]["command"] == again["command"]
    assert "## 1. Architecture ablation" in (tmp_path / "paper_claims.md").read_text()


def test_the_replay_trains_on_the_real_laws_and_general_text_where_it_is_beside_the_checkout():
    claims = _load()
    if not (claims.REALDATA / "general" / "zh_train.jsonl.zst").is_file():
        pytest.skip(f"no real general text in {claims.REALDATA} (../shared/realdata/general)")
    data = claims.replay_data(smoke=False)
    assert data.real and data.domain_heldout == ("civil_code",)
    assert data.general_heldout == ("general_zh", "general_en")
    assert not any("samples" in p for p in [*data.domain.values(), *data.general.values(), *data.heldout.values()])
    shares = {ratio: {n: w for n, (_, w) in claims.replay_sources(data, ratio).items()} for ratio in claims.REPLAY}
    assert shares == {"1:0": {"laws": 1.0}, "3:1": {"laws": 0.75, "general_zh": 0.125, "general_en": 0.125},
                      "1:1": {"laws": 0.5, "general_zh": 0.25, "general_en": 0.25}}
    # --smoke keeps the bundled samples (CI has no real data), whatever is beside the checkout.
    assert not claims.replay_data(smoke=True).real
