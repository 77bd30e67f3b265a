"""The model card: front matter as the Hub's client parses it, model-index equal to the run's recorded results for
exactly the exported weights, a body built from run.json and the data reports, and what it says when parts are
missing."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from huggingface_hub import ModelCard
from huggingface_hub.repocard_data import model_index_to_eval_results

from yunshan.hub.card import CardOptions, check_options, validate_card
from yunshan.hub.export import export_model
from yunshan.hub.provenance import hub_id_of


def card_of(folder):
    text = (folder / "README.md").read_text(encoding="utf-8")
    return text, ModelCard(text).data.to_dict()  # strict parse, as huggingface_hub does before an upload


def section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def copy_run(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


def test_front_matter_of_a_run_export(run_export, run_dir):
    text, meta = card_of(run_export)
    assert meta["license"] == "apache-2.0" and meta["language"] == ["zh", "en"]
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-generation"
    assert "base_model" not in meta and "datasets" not in meta  # a local stand-in base, local sample files
    assert {"yunshan", "finance", "legal", "pangu_pi", "continual-pretraining", "sft", "lora", "demo"} <= set(
        meta["tags"])
    name, results = model_index_to_eval_results(meta["model-index"])
    assert name == "yunshan-tiny-test"
    after = json.loads((run_dir / "05_eval_after" / "results.json").read_text())["tasks"]
    by_type = {r.dataset_type: r for r in results}
    assert sorted(by_type) == ["yunshan-heldout-finance", "yunshan-heldout-general", "yunshan-samples/fineval"]
    fineval = by_type["yunshan-samples/fineval"]
    assert fineval.metric_value == round(after["fineval"]["results"]["04_sft"]["overall"], 2)
    assert (fineval.metric_type, fineval.dataset_split, fineval.task_type) == ("accuracy", "val", "text-generation")
    assert "sample set" in fineval.dataset_name and "FinEval" in fineval.dataset_name
    for label in ("general", "finance"):
        r = by_type[f"yunshan-heldout-{label}"]
        assert r.metric_type == "bits_per_character"
        assert r.metric_value == round(after["bpc"]["results"]["04_sft"]["files"][label]["bpc"], 4)
    assert validate_card(text) == meta


def test_body_of_a_run_export(run_export, run_dir):
    text, _ = card_of(run_export)
    pipeline = section(text, "Pipeline")
    assert "| base | stand-in base: tokenizer and pretraining on general sample text | 61.5 s | 512,000 tokens, " \
           "250 steps, final mean loss 7.900 |" in pipeline
    assert "| eval_before | evaluation of the base model | 12.2 s |" in pipeline
    assert "| cpt | continual pretraining | 2.2 min |" in pipeline and "| sft | supervised fine-tuning | 45.0 s |" \
        in pipeline
    assert "export" not in pipeline  # the export stage is this very export
    cpt = json.loads((run_dir / "03_cpt" / "data_report.json").read_text())
    for name, share in (("finance", "25.00%"), ("legal", "25.00%"), ("general", "50.00%")):
        tokens = cpt["sources"][name]["tokens_trained"]
        assert f"| {name} | `{name}/train.jsonl` | {cpt['sources'][name]['weight']:.3f} | {tokens:,} | {share} |" \
            in text
    assert f"{cpt['tokens_trained']:,} tokens in {cpt['steps']} steps of {cpt['tokens_per_step']:,} tokens" in text
    sft = json.loads((run_dir / "04_sft" / "data_report.json").read_text())
    for name, s in sft["sources"].items():
        assert f"| {name} | `data/" in text and f"| {s['samples']:,} | {s['tokens']:,} | {s['trained_tokens']:,} |" \
            in text
    before = json.loads((run_dir / "02_eval_before" / "results.json").read_text())["tasks"]
    after = json.loads((run_dir / "05_eval_after" / "results.json").read_text())["tasks"]
    evaluation = section(text, "Evaluation")
    assert "| benchmark | metric | before | after (this model) | change |" in evaluation
    b = before["bpc"]["results"]["00_base"]["files"]["general"]["bpc"]
    a = after["bpc"]["results"]["04_sft"]["files"]["general"]["bpc"]
    assert f"| held-out general text (yunshan sample) | bits per character ↓ | {b:.4f} | {a:.4f} | " \
           f"{100 * (a - b) / b:+.1f}% |" in evaluation
    fb, fa = before["fineval"]["results"]["00_base"]["overall"], after["fineval"]["results"]["04_sft"]["overall"]
    assert f"| {fb:.2f} | {fa:.2f} | {fa - fb:+.2f} pt |" in evaluation
    assert "val split, 0-shot, answer likelihood, first 1 per subject" in evaluation
    assert "> **Demo model.**" in text and "> **Sample evaluation sets.**" in text
    usage = section(text, "Usage")
    assert 'AutoModelForCausalLM.from_pretrained("org/yunshan-tiny", dtype="auto", trust_remote_code=True)' in usage
    assert "apply_chat_template" in usage  # the SFT model has a chat template


def test_results_for_other_weights_stay_out_of_model_index(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    report = run / "04_sft" / "data_report.json"
    report.write_text(report.read_text() + "\n")  # the model folder changed after eval_after scored it
    result = export_model(run, tmp_path / "out", license="mit")
    text, meta = card_of(tmp_path / "out")
    assert "model-index" not in meta
    assert "The column 'after' was recorded for other files than the exported ones." in text
    assert "None of the columns is verified as the exported weights" in text
    assert any("left out of model-index" in note for note in result["notes"])
    assert "| before | after |" in section(text, "Evaluation")  # still shown, without "(this model)"


def test_a_plain_model_folder(run_dir, tmp_path):
    export_model(run_dir / "03_cpt", tmp_path / "cpt", license="mit")
    text, meta = card_of(tmp_path / "cpt")
    assert "model-index" not in meta and "No evaluation results were recorded with this model" in text
    assert re.search(r"\| cpt \| continual pretraining \|  \| [\d,]+ tokens, 4 steps \|", section(text, "Pipeline"))
    assert "Not recorded (no SFT data report)." in text and "| finance | `finance/train.jsonl` |" in text
    assert "apply_chat_template" not in text  # no chat template before SFT
    # A folder with nothing beside the weights, plus the results.json that scored it: verified, so in model-index.
    export_model(run_dir / "00_base", tmp_path / "base", license="mit", eval=[str(run_dir / "02_eval_before")])
    text, meta = card_of(tmp_path / "base")
    assert "No training record (run.json, recipe.yaml, data_report.json) was found" in text
    _, results = model_index_to_eval_results(meta["model-index"])
    before = json.loads((run_dir / "02_eval_before" / "results.json").read_text())["tasks"]
    assert {r.dataset_type: r.metric_value for r in results}["yunshan-samples/fineval"] == round(
        before["fineval"]["results"]["00_base"]["overall"], 2)
    # Results of another model are a comparison column, never this model's.
    export_model(run_dir / "00_base", tmp_path / "base2", license="mit", eval=[str(run_dir / "05_eval_after")])
    text, meta = card_of(tmp_path / "base2")
    assert "model-index" not in meta and "| 05_eval_after |" in section(text, "Evaluation")


def test_run_json_is_read_through_the_typed_manifest(run_dir, run_export, tmp_path):
    """run.json holds its stages once, as a list; the card reads it through yunshan.io.artifacts.RunManifest and
    refuses a file that is not one, naming the field."""
    from yunshan.io.artifacts import RunManifest

    manifest = json.loads((run_dir / "run.json").read_text())
    assert [s["name"] for s in manifest["stages"]] == ["base", "eval_before", "cpt", "sft", "eval_after", "export"]
    assert "stage_list" not in manifest
    assert RunManifest.read(run_dir).to_json() == manifest  # a round trip
    run = copy_run(run_dir, tmp_path)
    (run / "run.json").write_text(json.dumps({**manifest, "stages": {"cpt": {}}}))
    with pytest.raises(ValueError, match="run.json: field 'stages' must be a list"):
        export_model(run, tmp_path / "out")


def test_an_unfinished_run_is_refused(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    manifest = json.loads((run / "run.json").read_text())
    next(s for s in manifest["stages"] if s["name"] == "sft")["status"] = "failed"
    (run / "run.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"stage sft \(the final model, 04_sft\) has status 'failed'"):
        export_model(run, tmp_path / "out")


def test_license_and_base_model(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    (run / "00_base" / "README.md").write_text("---\nlicense: llama2\n---\n# base\n")
    manifest = json.loads((run / "run.json").read_text())
    manifest["base_model"] = str(run / "00_base")
    (run / "run.json").write_text(json.dumps(manifest))
    export_model(run, tmp_path / "a", base_model="org/tiny-base")
    text, meta = card_of(tmp_path / "a")
    assert meta["license"] == "llama2"  # inherited from the base model's card
    assert meta["base_model"] == "org/tiny-base" and meta["base_model_relation"] == "finetune"
    assert "built from [org/tiny-base](https://huggingface.co/org/tiny-base)" in text
    result = export_model(run_dir, tmp_path / "b")
    assert card_of(tmp_path / "b")[1]["license"] == "unknown"
    assert any("license: unknown" in note for note in result["notes"])


def test_hub_ids_of_base_models(tmp_path):
    cache = "/home/u/.cache/huggingface/hub/models--meta-llama--Llama-2-7b-hf/snapshots/01c7f73d/"
    assert hub_id_of(cache) == "meta-llama/Llama-2-7b-hf"
    assert hub_id_of("IDEA-CCNL/Ziya-LLaMA-13B-v1") == "IDEA-CCNL/Ziya-LLaMA-13B-v1"
    (tmp_path / "org" / "model").mkdir(parents=True)
    assert hub_id_of(str(tmp_path / "org" / "model")) is None and hub_id_of("runs/demo/00_base") is None


@pytest.mark.parametrize("old, new, message", [
    ("license: apache-2.0", "license: apache", "license 'apache' is not a Hub license id"),
    ("license: apache-2.0", "license: other", "license 'other' needs license_name"),
    ("- zh\n", "- Chinese\n", "language 'Chinese' is not an ISO 639 code"),
    ("language:", "base_model: /data/models/base\nlanguage:", "base_model '/data/models/base' is not a Hub id"),
    ("value: ", "value: n/a #", "has a non-numeric value"),
    ("---\n", "", "must start with a '---' YAML front matter block"),
])
def test_invalid_front_matter_is_rejected(run_export, old, new, message):
    text = (run_export / "README.md").read_text(encoding="utf-8")
    assert old in text
    with pytest.raises(ValueError, match=re.escape(message)):
        validate_card(text.replace(old, new, 1))


def test_options_are_checked_before_anything_is_written(run_dir, tmp_path):
    for options, message in [(CardOptions(base_model="base"), "--base-model 'base' is not a Hub id"),
                             (CardOptions(datasets=["a/b/c"]), "--dataset 'a/b/c'"),
                             (CardOptions(license="other", license_name="Bank licence", license_link="https://x"),
                              None)]:
        if message:
            with pytest.raises(ValueError, match=re.escape(message)):
                check_options(options)
        else:
            check_options(options)
    with pytest.raises(ValueError, match="is not a Hub license id"):
        export_model(run_dir, tmp_path / "out", license="Apache 2.0")
    assert list(tmp_path.iterdir()) == []


def test_tokenizer_stage(run_dir, tmp_path):
    """The tokenizer stage's report.json (yunshan.tokenizer.compression_report's layout) becomes a section."""
    run = copy_run(run_dir, tmp_path)
    (run / "01_tokenizer").mkdir()
    report = {"extension": {"new_tokens": 60}, "compression": {
        "tokenizers": [{"name": "base", "vocab_size": 400, "new_vs_first": 0},
                       {"name": "extended", "vocab_size": 460, "new_vs_first": 60}],
        "files": [{"path": "/data/heldout/finance.txt", "texts": 10, "characters": 1000, "bytes": 2900, "results": [
            {"tokenizer": "base", "tokens": 800, "tokens_per_char": 0.8, "bytes_per_token": 3.6},
            {"tokenizer": "extended", "tokens": 600, "tokens_per_char": 0.6, "bytes_per_token": 4.8}]}]}}
    (run / "01_tokenizer" / "report.json").write_text(json.dumps(report))
    manifest = json.loads((run / "run.json").read_text())
    stages = manifest["stages"]
    manifest["stages"] = [stages[0], {"name": "tokenizer", "status": "complete", "output": "01_tokenizer",
                                      "seconds": 3.0, "summary": {"base_vocab": 400, "new_vocab": 460,
                                                                  "new_tokens": 60}}, *stages[1:]]
    (run / "run.json").write_text(json.dumps(manifest))
    export_model(run, tmp_path / "out", license="mit")
    text, _ = card_of(tmp_path / "out")
    tokenizer = section(text, "Tokenizer")
    assert "Vocabulary extended from 400 to 460 tokens (+60, 15.0%)" in tokenizer
    assert "| `finance.txt` | 0.8000 | 0.6000 | -25.0% |" in tokenizer
    assert "| tokenizer | vocabulary extension | 3.0 s | vocabulary 400 → 460 (+60) |" in text
    assert "extended the vocabulary by 60 domain tokens, then continued pretraining" in text


def test_a_benchmark_the_card_never_heard_of_reaches_it(run_dir, tmp_path):
    """The card renders the headline metrics `yunshan eval` recorded, whatever the task's format: a new benchmark
    (one eval module plus one registry line) needs no edit here."""
    run = copy_run(run_dir, tmp_path)
    path = run / "05_eval_after" / "results.json"
    results = json.loads(path.read_text())
    metric = {"key": "finlegal/accuracy", "benchmark": "FinLegal-QA", "metric": "accuracy (%)", "value": 61.5,
              "detail": "test split, 3-shot", "eval_result": {
                  "task_type": "text-generation", "task_name": "Text Generation", "dataset_type": "org/finlegal-qa",
                  "dataset_name": "FinLegal-QA", "metric_type": "accuracy", "metric_name": "accuracy",
                  "metric_value": 61.5}}
    results["tasks"]["finlegal"] = {"format": "a-format-no-card-knows", "results": {"04_sft": {"whatever": 1}},
                                    "metrics": {"04_sft": [metric]}}
    path.write_text(json.dumps(results))
    export_model(run, tmp_path / "out", license="mit")
    text, meta = card_of(tmp_path / "out")
    assert "| FinLegal-QA | accuracy (%) | – | 61.50 |" in section(text, "Evaluation")
    _, index = model_index_to_eval_results(meta["model-index"])
    assert {r.dataset_type: r.metric_value for r in index}["org/finlegal-qa"] == 61.5


def test_the_card_always_states_the_decontamination_count(run_export, run_dir, tmp_path):
    """A run without a decontamination stage: the card says the data was not checked. With the demo recipe's own
    decontamination section run as the pipeline's stage runs it (drop: false), the card states the count, per
    source, and that the overlapping records were kept."""
    from pathlib import Path

    from yunshan.io.artifacts import RunManifest, StageRecord
    from yunshan.pipeline import PipelineRecipe
    from yunshan.pipeline.stages import STAGE_NAMES, RunLayout, run_decontamination
    from yunshan.arguments.recipe import load_recipe

    text, _ = card_of(run_export)
    assert "Not checked: no decontamination was run for this model" in section(text, "Training data")
    run = copy_run(run_dir, tmp_path)
    demo = Path(__file__).resolve().parents[2] / "recipes" / "demo_tiny.yaml"
    recipe = load_recipe(PipelineRecipe, demo, [f"output_dir={run}"])
    assert recipe.decontamination is not None and not recipe.decontamination.drop
    layout = RunLayout(recipe)
    summary = run_decontamination(layout, recipe.decontamination)
    manifest = RunManifest.read(run)
    manifest.set_stage(StageRecord("decontamination", "complete", layout.folder("decontamination").name, seconds=2.0,
                                   summary=summary), STAGE_NAMES)
    manifest.write(run)
    export_model(run, tmp_path / "out", license="mit")
    text, _ = card_of(tmp_path / "out")
    report = json.loads((layout.folder("decontamination") / "decontamination.json").read_text())
    assert report["records"] > 0 and set(report["eval_sets"]) >= {"fineval", "financeiq", "heldout:general", "heldout:legal"}
    data = section(text, "Training data")
    assert f"**{report['contaminated']:,} of {report['records']:,} training records** hold at least 50% of an" in data
    for name, s in report["eval_sets"].items():
        assert f"| {name} | {s['items']:,} | {s['clean']:,} | {s['partial']:,} | {s['dirty']:,} |" in data
    for name, s in report["sources"].items():
        assert f"| {name} | {s['records']:,} | {s['overlapping']:,} | {s['contaminated']:,} | 0 |" in data  # kept
    assert ("were **kept** in training" in data) == (report["contaminated"] > 0)
    assert (f"{report['contaminated']:,} of {report['records']:,} training records listed (kept)"
            in section(text, "Pipeline"))


def _standalone_chain(run_dir, tmp_path, base: str) -> tuple:
    """Copies of the fixture's standalone `yunshan cpt` (03_cpt) and `yunshan sft` (04_sft, trained from it), the
    cpt's recipe naming `base` as the model it started from."""
    import yaml

    cpt, sft = tmp_path / "cpt2", tmp_path / "sft"
    shutil.copytree(run_dir / "03_cpt", cpt)
    shutil.copytree(run_dir / "04_sft", sft)
    for folder, model in ((cpt, base), (sft, str(cpt))):
        recipe = yaml.safe_load((folder / "recipe.yaml").read_text(encoding="utf-8"))
        recipe["model"]["name_or_path"] = model
        (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe, allow_unicode=True), encoding="utf-8")
    return cpt, sft


def test_standalone_cpt_then_sft_names_the_checkpoint_the_cpt_started_from(run_dir, tmp_path, capsys):
    """`yunshan export runs/sft --eval BASE/results.json` after standalone cpt and sft: the card follows the run
    folders back (sft -> cpt -> base) and names the original checkpoint, never the CPT folder; its pipeline shows both
    stages; --eval of the base's results says they are another model's (named) and why model-index stays empty."""
    from yunshan.cli import main

    cpt, sft = _standalone_chain(run_dir, tmp_path, str(run_dir / "00_base"))
    assert main(["export", str(sft), "--out", str(tmp_path / "e"), "--license", "mit",
                 "--eval", str(run_dir / "02_eval_before" / "results.json")]) == 0
    printed = capsys.readouterr().out
    text, meta = card_of(tmp_path / "e")
    assert "cpt2" not in text and "base_model" not in meta  # a local stand-in base: named in the body only
    assert "| base model | `00_base` (stand-in, see above) |" in section(text, "Model")
    assert "built from `00_base`" in text and "**Demo model.**" in text
    pipeline = section(text, "Pipeline")
    assert re.search(r"\| cpt \| continual pretraining \|  \| [\d,]+ tokens, 4 steps \|", pipeline), pipeline
    assert re.search(r"\| sft \| .* \| [\d,]+ samples, 4 steps \|", pipeline), pipeline
    assert "| finance | `finance/train.jsonl` |" in section(text, "Training data")  # the cpt's, from its folder
    assert "base_model - (00_base: a local folder, not a Hub id)" in printed, printed
    assert "0 model-index result(s)" in printed
    assert (f"note: --eval {run_dir / '02_eval_before' / 'results.json'}: it holds the results of 00_base "
            f"({run_dir / '00_base'}), the model the training started from, not of the exported weights") in printed

    # The cpt started from a Hub id: that is the card's base_model.
    shutil.rmtree(tmp_path / "cpt2"), shutil.rmtree(tmp_path / "sft")
    cpt, sft = _standalone_chain(run_dir, tmp_path, "HuggingFaceTB/SmolLM2-135M")
    export_model(sft, tmp_path / "hub", license="mit")
    text, meta = card_of(tmp_path / "hub")
    assert meta["base_model"] == "HuggingFaceTB/SmolLM2-135M" and "cpt2" not in text
    assert "built from [HuggingFaceTB/SmolLM2-135M](https://huggingface.co/HuggingFaceTB/SmolLM2-135M)" in text

    # ... from a folder `yunshan model import-gguf` wrote: the GGUF file it came from, and the Hub repository the
    # file's metadata names.
    imported = tmp_path / "smollm2-135m"
    shutil.copytree(run_dir / "00_base", imported)
    (imported / "STAND_IN_BASE.md").unlink()
    (imported / "yunshan_import.json").write_text(json.dumps({
        "source": {"file": "SmolLM2-135M-Instruct.Q4_1.gguf", "bytes": 1, "sha256": "b179c952"},
        "gguf_metadata": {"general.name": "Smollm2 135M 8k Lc100K Mix1 Ep2", "general.organization": "HuggingFaceTB",
                          "general.repo_url": "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct"}}))
    shutil.rmtree(tmp_path / "cpt2"), shutil.rmtree(tmp_path / "sft")
    cpt, sft = _standalone_chain(run_dir, tmp_path, str(imported))
    export_model(sft, tmp_path / "gguf", license="mit")
    text, meta = card_of(tmp_path / "gguf")
    assert meta["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and "cpt2" not in text
    assert ("imported by `yunshan model import-gguf` from `SmolLM2-135M-Instruct.Q4_1.gguf` "
            "(Smollm2 135M 8k Lc100K Mix1 Ep2, HuggingFaceTB)") in text


def test_an_eval_file_that_adds_nothing_says_why(tmp_path):
    """The reasons `--eval` gives when a results file puts nothing into model-index: no model in it, another model's
    results (named, with what it is to this model), or only tasks without a benchmark score."""
    from yunshan.io.artifacts import Metric
    from yunshan.hub.provenance import EvalColumn, _adds_nothing

    path = tmp_path / "results.json"
    bpc = Metric("bpc/general", "general", "bits per character", 1.2)
    fineval = Metric("fineval", "FinEval", "accuracy", 40.0, eval_result={"task_type": "x"})
    assert _adds_nothing(path, [], {}) == f"--eval {path}: it holds no model's results, so it adds nothing to the card"
    other = EvalColumn("b", {"fineval": fineval}, model=str(tmp_path / "base"))
    assert _adds_nothing(path, [other], {(tmp_path / "base").resolve(): "the model the training started from"}) == (
        f"--eval {path}: it holds the results of base ({tmp_path / 'base'}), the model the training started from, not "
        "of the exported weights (by the sha256 yunshan eval recorded): shown as a comparison column, left out of "
        "model-index")
    mine = EvalColumn("m", {"bpc/general": bpc}, this_model=True, verified=True)
    assert _adds_nothing(path, [mine], {}) == (f"--eval {path}: its tasks (bpc) record no metric the Hub's model-index "
                                               "takes (a benchmark score): shown in the evaluation table only")
    assert _adds_nothing(path, [EvalColumn("m", {"fineval": fineval}, this_model=True)], {}) is None
    assert _adds_nothing(path, [EvalColumn("m", {}, stale=True)], {}) is None  # noted apart: recorded for other files
