"""Experiment tracking (`training.report_to`, yunshan.training.tracking), read back offline: TensorBoard event files
(tensorboard's own reader) and a local MLflow file store (MlflowClient) hold the run name, the resolved recipe and
yunshan's metrics (token shares, held-out bits/char, per-source SFT losses) at the steps the JSONL log has them.
And the panels of curves.png drawn from the same logs: no empty panel, the realised token shares of CPT."""

import json
from pathlib import Path

import pytest

from fixtures import three_source_corpora, train_tokenizer
from yunshan.arguments.recipe import RecipeError, load_recipe
from yunshan.training.cpt import CptArgs, run_cpt
from yunshan.training.monitoring import curve_panels
from yunshan.training.sft import SftArgs, run_sft

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "aug_reduction": 4}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("tracking")
    files = three_source_corpora(root / "corpora")
    train_tokenizer(root / "tok")
    heldout = root / "heldout.txt"
    heldout.write_text("\n\n".join(json.loads(line)["text"] for line in open(files["mid"]).readlines()[-5:]))
    return root, files, heldout


def cpt_recipe(setup, out, **training):
    root, files, heldout = setup
    return {
        "model": {"preset": "tiny", "config_overrides": TINY},
        "tokenizer": {"path": str(root / "tok")},
        "data": {"seq_len": 32, "block_size": 64, "sources": [
            {"name": "short", "path": str(files["short"]), "weight": 0.25},
            {"name": "long", "path": str(files["long"]), "weight": 0.75}]},
        "training": {"output_dir": str(out), "max_steps": 6, "per_device_batch_size": 2, "learning_rate": 3e-3,
                     "save_steps": 100, "logging_steps": 2, "precision": "fp32", **training},
        "monitor": {"every_steps": 3, "general": [str(heldout)], "max_chars": 1000},
    }


def jsonl(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def read_tensorboard(folder: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = [p.parent for p in folder.rglob("events.out.tfevents.*")]
    acc = EventAccumulator(str(events), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_tensorboard_and_mlflow_read_back(setup, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.x keeps its file store behind this switch
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    out = tmp_path / "run"
    recipe = load_recipe(CptArgs, data=cpt_recipe(setup, out, report_to=["tensorboard", "mlflow"],
                                                  run_name="fin-cpt-1"))
    run_cpt(recipe)
    log = jsonl(out)
    train = {r["step"]: r for r in log if r.get("event") == "train"}
    bpc = {r["step"]: r["bpc_general"] for r in log if r.get("event") == "bpc"}
    assert sorted(train) == [2, 4, 6] and sorted(bpc) == [0, 3, 6]
    # The JSONL log holds the realised shares too, from the same stream positions as the data report.
    shares = {step: (r["token_share_short"], r["token_share_long"]) for step, r in train.items()}
    for step, (short, long) in shares.items():
        by_source = train[step]["tokens_by_source"]
        assert short == pytest.approx(by_source["short"] / sum(by_source.values()), abs=1e-6)
        assert short + long == pytest.approx(1.0)

    # TensorBoard, in OUTPUT_DIR/tensorboard: the Trainer's loss and yunshan's numbers at the same steps.
    acc = read_tensorboard(out / "tensorboard")
    scalars = {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}
    assert scalars["train/loss"].keys() == train.keys()
    assert scalars["train/token_share_short"] == pytest.approx({s: v[0] for s, v in shares.items()}, abs=1e-6)
    assert scalars["train/bpc_general"] == pytest.approx(bpc, rel=1e-6)
    (recipe_text,) = [e.tensor_proto.string_val[0].decode() for e in acc.Tensors("yunshan/recipe/text_summary")]
    assert "learning_rate: 0.003" in recipe_text and "run_name: fin-cpt-1" in recipe_text

    # MLflow: the run by its name, the resolved recipe as parameters and artifact, the same metric histories.
    client = MlflowClient(store.as_uri())
    (experiment,) = client.search_experiments()
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "fin-cpt-1" and run.info.status == "FINISHED"
    params = run.data.params
    assert params["recipe.training.learning_rate"] == "0.003" and params["recipe.data.sources.1.name"] == "long"
    assert params["recipe.data.sources.1.weight"] == "0.75" and params["recipe.model.name_or_path"] == "null"

    def history(key):
        return {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}

    assert history("loss").keys() == train.keys()
    assert history("token_share_long") == pytest.approx({s: v[1] for s, v in shares.items()}, abs=1e-6)
    assert history("bpc_general") == pytest.approx(bpc, rel=1e-6)
    saved = Path(client.download_artifacts(run.info.run_id, "recipe.yaml", str(tmp_path)))
    assert load_recipe(CptArgs, saved) == recipe

    # curves.png: loss, bits/char and the realised token shares, which end at the data report's shares.
    panels = curve_panels(log, weights={"short": 0.25, "long": 0.75})
    assert [p["title"] for p in panels] == ["training loss", "held-out bits per character",
                                            "realised token share per source"]
    report = json.loads((out / "data_report.json").read_text())
    shares = {label: (steps, values) for label, steps, values in panels[2]["series"]}
    assert shares["short"][0] == [2, 4, 6]
    assert shares["long"][1][-1] == pytest.approx(report["sources"]["long"]["token_share"])
    assert panels[2]["levels"] == [("short: weight", 0.25), ("long: weight", 0.75)]
    assert (out / "curves.png").stat().st_size > 10_000


def test_sft_per_source_losses_reach_tensorboard(setup, tmp_path, monkeypatch):
    root, _, _ = setup
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    data = tmp_path / "sft"
    data.mkdir()
    rows = {"finance": [{"instruction": f"什么是资产{i}？", "output": f"资产是企业拥有的资源{i}。"} for i in range(12)],
            "legal": [{"instruction": f"合同何时生效{i}？", "output": f"依法成立的合同，自成立时生效{i}。"} for i in range(12)]}
    for name, items in rows.items():
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in items))
    out = tmp_path / "run"
    run_sft(load_recipe(SftArgs, data={
        "model": {"preset": "tiny", "config_overrides": TINY}, "tokenizer": {"path": str(root / "tok")},
        "data": {"max_length": 64, "max_new_tokens": 2, "sources": [
            {"name": n, "format": "alpaca", "path": str(data / f"{n}.jsonl")} for n in rows]},
        "training": {"output_dir": str(out), "max_steps": 4, "per_device_batch_size": 4, "logging_steps": 2,
                     "save_steps": 100, "precision": "fp32", "report_to": ["tensorboard"]}}))
    train = {r["step"]: r for r in jsonl(out) if r.get("event") == "train"}
    scalars = {tag: {e.step: e.value for e in read_tensorboard(out / "tensorboard").Scalars(tag)}
               for tag in ("train/loss_finance", "train/loss_legal")}
    for name in ("finance", "legal"):
        assert scalars[f"train/loss_{name}"] == pytest.approx({s: r[f"loss_{name}"] for s, r in train.items()})
    # curves.png of SFT: one panel, the loss overall and per source (no empty bits/char panel).
    (panel,) = curve_panels(jsonl(out))
    assert panel["title"] == "training loss per source"
    assert [label for label, _, _ in panel["series"]] == ["all tokens", "finance", "legal"]
    assert all(steps == sorted(train) for _, steps, _ in panel["series"])


@pytest.mark.parametrize("report_to, expected", [
    (["comet_ml"], "'comet_ml' is not a tracker yunshan supports; valid: tensorboard, wandb, mlflow, swanlab, none"),
    (["none", "tensorboard"], "'none' cannot be combined with trackers"),
])
def test_bad_report_to(setup, tmp_path, report_to, expected):
    with pytest.raises((ValueError, RecipeError), match=expected.replace("(", r"\(").replace(")", r"\)")):
        run_cpt(load_recipe(CptArgs, data=cpt_recipe(setup, tmp_path / "run", report_to=report_to)))


def test_a_tracker_that_is_not_installed(setup, tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else find_spec(name, *a))
    with pytest.raises(ValueError, match=r"training.report_to includes wandb but wandb is not installed: pip install "
                                         r"'yunshan\[wandb\]'"):
        run_cpt(load_recipe(CptArgs, data=cpt_recipe(setup, tmp_path / "run", report_to=["wandb"])))
