"""`yunshan run`: all stages on a tiny recipe, skip on re-run, --from, fingerprints, failures leave earlier
stages intact, manifest and report."""

import base64
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from yunshan.io.artifacts import RunManifest
from yunshan.pipeline import PipelineRecipe, PipelineRunner
from yunshan.arguments.recipe import RecipeError, load_recipe

ROOT = Path(__file__).resolve().parents[1]


def planted(tmp: Path) -> tuple[str, str, str, str]:
    """The sample finance corpus, general SFT set and legal preference pairs, each with one record that copies an
    evaluation text: a held-out finance document inside a corpus document, a FinEval-format question with its options
    inside an instruction, another inside a preference prompt (the bundled samples share no text with their
    evaluation sets, so the decontamination has these three to find); and a held-out instruction set of two
    conversations in its own column names, the first of them copied into the general SFT set too."""
    import csv

    from yunshan.samples import sample_data_dir

    data = Path(sample_data_dir())
    tmp.mkdir(parents=True, exist_ok=True)
    heldout = (data / "heldout" / "finance.txt").read_text(encoding="utf-8").split("\n\n")[0]
    corpus = tmp / "finance_planted.jsonl"
    corpus.write_text(json.dumps({"text": "转载：" + heldout}, ensure_ascii=False) + "\n"
                      + (data / "corpora" / "finance" / "train.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    with open(sorted((data / "eval" / "fineval" / "val").glob("*.csv"))[0], encoding="utf-8") as f:
        reader = csv.DictReader(f)
        row, second = next(reader), next(reader)
    question = "；".join([row["question"], row["A"], row["B"], row["C"], row["D"]])
    advice = [("请解释为什么商业银行在加息周期中会调整存款利率结构，并说明这对储户选择定期存款的期限有何影响。",
               "加息周期中银行的负债成本上升，会提高长期定期存款利率以锁定资金；储户可以优先选择期限较长的定期存款。"),
              ("某人打算用一笔闲置资金购买国债，请比较储蓄国债与记账式国债在流动性和收益上的主要差别。",
               "储蓄国债不能上市交易，提前兑取要扣利息；记账式国债可在二级市场买卖，价格随市场利率波动。")]
    instructions = tmp / "instructions_heldout.jsonl"
    instructions.write_text("".join(json.dumps({"question": q, "reply": a}, ensure_ascii=False) + "\n"
                                    for q, a in advice), encoding="utf-8")
    sft = tmp / "general_planted.jsonl"
    lines = (data / "sft" / "general_alpaca.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(5, json.dumps({"instruction": "请回答：" + question, "input": "", "output": row["answer"]},
                               ensure_ascii=False) + "\n")
    lines.insert(9, json.dumps({"instruction": advice[0][0], "input": "", "output": advice[0][1]},
                               ensure_ascii=False) + "\n")
    sft.write_text("".join(lines), encoding="utf-8")
    pairs = tmp / "legal_pairs_planted.jsonl"
    lines = (data / "preference" / "legal_pairs.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    copied = "；".join([second["question"], second["A"], second["B"], second["C"], second["D"]])
    lines.insert(3, json.dumps({"prompt": "请选择：" + copied, "chosen": f"答案是{second['answer']}。",
                                "rejected": "答案是E。"}, ensure_ascii=False) + "\n")
    pairs.write_text("".join(lines), encoding="utf-8")
    return str(corpus), str(sft), str(pairs), str(instructions)


def own_sets(tmp: Path) -> tuple[str, str]:
    """A multiple-choice and a short-answer set of a user's own (eval/generic.py): a folder with test and dev rows,
    and a single CSV file."""
    folder = tmp / "bank_mc"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"question": "资产负债表反映企业的", "choices": ["财务状况", "经营成果", "现金流量"], "answer": "A"},
            {"question": "银行的主要负债是", "choices": ["贷款", "存款", "现金"], "answer": "B"}]
    for name in ("test", "dev"):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                              encoding="utf-8")
    qa = tmp / "bank_qa.csv"
    qa.write_text("question,answer\n银行的主要负债是什么？,存款\n", encoding="utf-8")
    return str(folder), str(qa)


def tiny_recipe(tmp: Path, export: bool = False) -> dict:
    s = "${samples}"
    finance, general_sft, legal_pairs, instructions = planted(tmp / "planted")
    mc, qa = own_sets(tmp / "own")
    return {
        "name": "tiny-test",
        "output_dir": str(tmp / "run"),
        "base": {
            "enabled": True, "tokenizer_corpus": [f"{s}/corpora/general/train.jsonl"], "vocab_size": 600,
            "model": {"preset": "tiny", "config_overrides": {"hidden_size": 32, "intermediate_size": 64,
                                                             "num_hidden_layers": 2, "aug_reduction": 4}},
            "data": {"seq_len": 64, "sources": [{"name": "general", "path": f"{s}/corpora/general/train.jsonl"}]},
            "training": {"max_steps": 6, "per_device_batch_size": 4, "learning_rate": 3e-3, "save_steps": 1000,
                         "logging_steps": 2},
        },
        "tokenizer_extension": {"corpus": [f"{s}/corpora/finance/train.jsonl", f"{s}/corpora/legal/train.jsonl"],
                                "words": [str(ROOT / "recipes/wordlists/demo_terms_zh.txt")], "new_tokens": 320,
                                # the stages' mechanics on a stand-in base: no budget cap (tokenizer/README.md)
                                "tokens_per_new_token": 1,
                                "report_texts": [f"{s}/heldout/finance.txt", f"{s}/heldout/general.txt"]},
        "eval": {"tasks": ["bpc", "fineval", f"mc:bank={mc}", f"qa={qa}", "chat_loss"], "limit": 2, "shots": 0,
                 "mode": "cloze", "max_length": 256, "max_new_tokens": 8,  # 256: the instruction set fits
                 # the first 3,000 characters of each held-out text (a .txt is one document, so `limit` leaves
                 # it whole: 55-60k characters scored by every model of every run, most of these tests' time)
                 "max_chars": 3000,
                 "heldout": [f"general={s}/heldout/general.txt", f"finance={s}/heldout/finance.txt"],
                 # a held-out instruction set, scored before and after as SFT trains (its loss on the answers)
                 "instructions": [{"name": "advice", "path": instructions, "format": "alpaca",
                                   "columns": {"prompt": "question", "response": "reply"}}]},
        # The training sources against the eval section's sets; the overlapping records are left out of training.
        "decontamination": {"drop": True, "show": 2},
        "cpt": {"data": {"seq_len": 64, "sources": [
                    {"name": "finance", "path": finance, "weight": 0.5},
                    {"name": "general", "path": f"{s}/corpora/general/train.jsonl", "weight": 0.5}]},
                "training": {"max_steps": 6, "per_device_batch_size": 4, "learning_rate": 3e-3, "save_steps": 3,
                             "logging_steps": 2},
                "warmup": {"steps": 2, "fit_sequences": 4},
                "monitor": {"every_steps": 0, "general": [f"{s}/heldout/general.txt"],
                            "domain": [f"{s}/heldout/finance.txt"], "max_chars": 1500}},
        "sft": {"data": {"max_length": 128, "sources": [
                    {"name": "general", "path": general_sft, "format": "alpaca", "max_samples": 40,
                     "heldout": 1}]},
                "training": {"max_steps": 4, "per_device_batch_size": 4, "learning_rate": 1e-3, "save_steps": 1000,
                             "logging_steps": 2}},
        # DPO on LoRA after SFT, on the bundled legal pairs (the reference: the adapter-disabled SFT model)
        "preference": {"data": {"max_length": 512, "sources": [
                           {"name": "legal_pairs", "path": legal_pairs, "format": "pairs",
                            "max_samples": 16, "heldout": 6}]},
                       "training": {"max_steps": 3, "per_device_batch_size": 4, "learning_rate": 1e-3,
                                    "save_steps": 1000, "logging_steps": 1},
                       "lora": {"enabled": True, "r": 8, "alpha": 16, "dropout": 0.0},
                       "monitor": {"general": [f"{s}/heldout/general.txt"], "max_chars": 1000}},
        "export": {"enabled": export},
    }


class Page(HTMLParser):
    """A report.html as a reader sees it: title, headings, table rows (cell texts) and embedded images."""

    def __init__(self):
        super().__init__()
        self.title, self.headings, self.rows, self.images, self._text, self._in = "", [], [], [], "", None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("title", "h1", "h2", "h3", "td", "th"):
            self._in, self._text = tag, ""
        elif tag == "tr":
            self.rows.append([])
        elif tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,"), attrs["src"][:80]
            self.images.append((attrs["alt"], base64.b64decode(attrs["src"].split(",", 1)[1])))

    def handle_data(self, data):
        if self._in:
            self._text += data

    def handle_endtag(self, tag):
        if tag != self._in:
            return
        text, self._in = self._text.strip(), None
        if tag == "title":
            self.title = text
        elif tag in ("td", "th"):
            self.rows[-1].append(text)
        else:
            self.headings.append(text)

    @property
    def cells(self) -> list[str]:
        return [c for r in self.rows for c in r]


def read_page(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def run(data: dict, tmp: Path, *overrides, from_stage=None):
    path = tmp / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    recipe = load_recipe(PipelineRecipe, path, list(overrides))
    return PipelineRunner(recipe, path).run(from_stage)


def test_the_whole_pipeline_then_skips_then_redoes_from_a_stage(tmp_path, monkeypatch):
    import yunshan.training.heap as heap

    released = []  # the memory of every stage that ran is released before the next one (the real call, counted)
    real = heap.release_memory
    monkeypatch.setattr(heap, "release_memory", lambda: released.append(True) and real())
    data = tiny_recipe(tmp_path)
    out = tmp_path / "run"
    manifest = run(data, tmp_path)
    stages = ["base", "tokenizer", "eval_before", "decontamination", "cpt", "sft", "preference", "eval_after"]
    assert [s.name for s in manifest.stages] == stages
    assert len(released) == len(stages)
    assert all(s.status == "complete" and s.outputs for s in manifest.stages)
    run_json = RunManifest.read(out / "run.json")
    assert run_json.final_model == "06_preference" and run_json.stage("cpt").summary["tokens"] == 6 * 4 * 64  # the warm-up inside
    # Inputs are hashed (the corpora a stage read), and every stage folder holds its completion marker.
    assert any(p.endswith("finance_planted.jsonl") for p in run_json.stage("cpt").inputs)
    assert all((out / ".stages" / f"{s.name}.json").is_file() for s in manifest.stages)
    report = (out / "report.md").read_text()
    assert "| metric | before | after cpt | after sft | after preference | change |" in report
    assert "bits/char, finance: domain (gain)" in report and "tokens/char, finance.txt" in report
    assert (out / "00_base/STAND_IN_BASE.md").is_file()
    # The resolved recipe saved in the run folder loads again as it is (what the runner fills is left out).
    assert load_recipe(PipelineRecipe, out / "recipe.yaml") == load_recipe(PipelineRecipe, tmp_path / "recipe.yaml")
    # The extension's step-0 cost and its recovery, and the precision each training stage ran in.
    cost = run_json.stage("cpt").summary["extension_cost"]
    assert set(cost["base"]) == {"general", "domain"} and cost["new_tokens"] == 320
    assert "## Vocabulary extension: cost at step 0 and recovery" in report
    assert f"| general | {cost['base']['general']:.4f} | {cost['init']['general']:.4f} (" in report
    assert run_json.stage("cpt").summary["precision"]["reason"] in report
    # Decontamination: every contaminated record listed, left out of training and counted where it was read.
    decont = run_json.stage("decontamination").summary
    assert decont["drop"] and 0 < decont["contaminated"] < decont["records"]
    assert set(decont["eval_sets"]) == {"fineval", "mc:bank", "qa", "heldout:general", "heldout:finance",
                                        "instructions:advice"}
    # Your own sets: a row of the before/after table each, in their own metric.
    assert re.search(r"\| mc:bank accuracy % \(cloze; chance 33.3\) \| [\d.]+ \| [\d.]+ \| [\d.]+ \|", report)
    assert re.search(r"\| qa exact match % \| [\d.]+ \|", report)
    listed = [json.loads(line) for line in (out / "03_decontamination/contaminated.jsonl").read_text().splitlines()]
    assert len(listed) == decont["contaminated"]
    # The SFT record copying a held-out instruction is listed against it (and left out of SFT, counted below).
    assert any(e["source"] == "sft:general" and any("instructions_heldout.jsonl:1" in where for where in e["eval"])
               for e in listed)
    # The held-out instruction set scored before and after: the loss on its answers, per character and per token.
    assert re.search(r"\| bits/response char, held-out instructions advice \| [\d.]+ \| [\d.]+ \| [\d.]+ \|", report)
    assert "| nats/response token, held-out instructions advice |" in report
    by_source = {name: sum(e["source"] == name for e in listed)
                 for name in ("cpt:finance", "sft:general", "preference:legal_pairs")}
    cpt_report = json.loads((out / "04_cpt/data_report.json").read_text())
    sft_report = json.loads((out / "05_sft/data_report.json").read_text())
    # The finance file is smaller than one block: read once, every listed record of it skipped exactly once.
    assert cpt_report["sources"]["finance"]["dropped"]["contaminated"] == by_source["cpt:finance"] > 0
    assert sft_report["sources"]["general"]["dropped"]["contaminated"] == by_source["sft:general"] > 0
    pref_report = json.loads((out / "06_preference/data_report.json").read_text())
    assert pref_report["sources"]["legal_pairs"]["dropped"]["contaminated"] == by_source["preference:legal_pairs"] > 0
    assert run_json.stage("preference").summary["contaminated_dropped"] == by_source["preference:legal_pairs"]
    assert cpt_report["exclude"]["records"] == len({e["digest"] for e in listed})
    assert "## Decontamination (13 words or 25 CJK characters a window" in report and "| cpt:finance |" in report
    # report.html: the same report as one page, every section, table cell and figure of report.md on it.
    page = read_page(out / "report.html")
    assert page.title == "yunshan run: tiny-test"
    for heading in ("Before and after", "Stages", "Decontamination (13 words", "Continual-pretraining mixture",
                    "Preference tuning (dpo, loss sigmoid", "Plots", "Evaluation before (base model)", "Evaluation after (trained models)"):
        assert any(h.startswith(heading) for h in page.headings), (heading, page.headings)
    cells = [c.strip().strip("`") for line in report.splitlines() if line.startswith("| ") and "---" not in line
             for c in line.strip().strip("|").split(" | ")]
    assert set(cells) <= set(page.cells) and len(cells) > 60
    for s in manifest.stages:  # the stages and their times
        assert [s.name, "complete", str(s.seconds), s.output] in page.rows, s
    mixture = run_json.stage("cpt").summary["tokens_by_source"]  # the cpt mixture
    for name, tokens in mixture.items():
        assert [name, f"{tokens:,}", f"{100 * tokens / sum(mixture.values()):.2f}%"] in page.rows
    from PIL import Image

    figures = {alt.split(":")[0]: Image.open(io.BytesIO(png)) for alt, png in page.images}
    assert set(figures) == {"forgetting curve", "continual pretraining", "SFT", "preference tuning",
                            "stand-in base pretraining"}
    assert all(f.format == "PNG" and f.width > 300 for f in figures.values())
    # The extended tokenizer reached the trained model, with subword-mean rows.
    tok_size = run_json.stage("tokenizer").summary["new_vocab"]
    cpt_config = json.loads((out / "04_cpt/config.json").read_text())
    assert cpt_config["vocab_size"] >= tok_size > run_json.stage("tokenizer").summary["base_vocab"]
    # Preference tuning started from the SFT model with its tokenizer (no new rows grown again), the held-out pairs
    # measured before its first step and after its last, in the report with the monitor's bits/char.
    pref = run_json.stage("preference").summary
    assert pref["method"]["name"] == "dpo" and pref["method"]["reference"] == "adapter" and pref["steps"] == 3
    assert [pref["heldout"][k]["step"] for k in ("before", "after")] == [0, 3] and pref["heldout_pairs"] > 0
    pref_report = json.loads((out / "06_preference/data_report.json").read_text())
    assert pref_report["kind"] == "preference" and "new_tokens" not in pref_report
    assert json.loads((out / "06_preference/config.json").read_text())["vocab_size"] == cpt_config["vocab_size"]
    assert "| bits/char, general held-out text |" in report and "| reward margin, chosen - rejected |" in report

    before = {s.name: s.finished for s in manifest.stages}
    again = run(data, tmp_path)
    assert {s.name: s.finished for s in again.stages} == before  # everything skipped

    assert len(released) == len(stages)  # skipped stages load nothing
    redo = run(data, tmp_path, from_stage="sft")
    finished = {s.name: s.finished for s in redo.stages}
    assert [n for n in stages if finished[n] != before[n]] == ["sft", "preference", "eval_after"]

    # A changed cpt setting invalidates cpt and what follows; the base and tokenizer stay.
    changed = run(data, tmp_path, "cpt.training.learning_rate=1e-3")
    finished2 = {s.name: s.finished for s in changed.stages}
    assert [n for n in stages if finished2[n] != finished[n]] == ["cpt", "sft", "preference", "eval_after"]


def test_a_failing_stage_leaves_earlier_outputs_intact(tmp_path):
    data = tiny_recipe(tmp_path)
    # Without the decontamination stage, which reads the sft sources too and would fail before cpt.
    del data["decontamination"]
    data["sft"]["data"]["sources"][0]["path"] = str(tmp_path / "missing.jsonl")
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        run(data, tmp_path)
    manifest = RunManifest.read(tmp_path / "run/run.json")
    assert manifest.stage("sft").status == "failed" and "missing.jsonl" in manifest.stage("sft").error
    assert manifest.stage("cpt").status == "complete"
    cpt_outputs = manifest.stage("cpt").outputs
    # Fix the recipe: the earlier stages are reused as they are, only sft and after run.
    fixed = tiny_recipe(tmp_path)
    del fixed["decontamination"]
    manifest2 = run(fixed, tmp_path)
    assert manifest2.stage("cpt").outputs == cpt_outputs
    assert manifest2.stage("sft").status == "complete"


def test_dry_run_plans_without_training(tmp_path):
    data = tiny_recipe(tmp_path)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    plan = PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()
    assert plan["problems"] == [] and [p["action"] for p in plan["plan"] if p["stage"] != "prepare"][:6] == ["run"] * 6
    assert not (tmp_path / "run").exists()
    data["cpt"]["data"]["sources"][0]["path"] = str(tmp_path / "nope.jsonl")
    path.write_text(yaml.safe_dump(data))
    plan = PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()
    assert any("nope.jsonl" in p for p in plan["problems"])


def test_dry_run_checks_the_held_out_instruction_sets(tmp_path):
    """The eval section's held-out instruction sets are inputs of both evaluation stages (hashed, checked to exist),
    opened as SFT reads them, and refused without a chat_loss task to score them."""
    data = tiny_recipe(tmp_path)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    plan = PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()
    assert plan["problems"] == []
    held = data["eval"]["instructions"][0]["path"]
    Path(held).write_text('{"question": "问题", "answer": "列名不对"}\n', encoding="utf-8")
    plan = PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()
    assert any(p.startswith(f"eval.instructions.advice: {held}:1: field 'reply': missing_field") for p in plan["problems"])
    data["eval"]["tasks"].remove("chat_loss")
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    plan = PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()
    assert any("eval.tasks has no chat_loss" in p for p in plan["problems"])
    Path(held).unlink()
    plan = PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()
    assert any(held in p for p in plan["problems"])


def test_decontamination_of_the_sft_stage_alone(tmp_path):
    """decontamination.stages: [sft] checks the SFT sources alone against the evaluation sets and the held-out
    instruction sets, and only SFT leaves the list out (and depends on it): the corpora and preference pairs are
    neither read nor filtered."""
    from yunshan.pipeline.stages import STAGE, RunLayout, decontamination_plan, preference_sources

    data = tiny_recipe(tmp_path)
    data["decontamination"] = {"drop": True, "stages": ["sft"]}
    recipe = load_recipe(PipelineRecipe, data=data)
    plan, cpt_sources, sft_sources = decontamination_plan(recipe, recipe.decontamination)
    assert cpt_sources == [] and [s.name for s in sft_sources] == ["general"]
    assert preference_sources(recipe) == ([], 0)
    assert [s.name for s in plan.instructions] == ["advice"] and "fineval" in plan.tasks
    layout = RunLayout(recipe)
    assert layout.contamination_list("cpt") is None and layout.contamination_list("preference") is None
    assert layout.contamination_list("sft").endswith("03_decontamination/contaminated.jsonl")
    assert "decontamination" not in STAGE["cpt"].upstream_in(recipe)
    assert "decontamination" in STAGE["sft"].upstream_in(recipe)
    with pytest.raises(RecipeError, match="decontamination stages: eval is not a training stage"):
        load_recipe(PipelineRecipe, data={**data, "decontamination": {"stages": ["eval"]}})


def test_eval_after_scores_every_trained_model_or_the_final_one(tmp_path):
    """eval.after: all scores the cpt, sft (and preference) models; final the last trained model alone (the laws
    recipe's 20 minutes); anything else is a one-line error naming the valid values; what reaches yunshan eval is
    its own EvalArgs."""
    from yunshan.eval.commands import EvalArgs
    from yunshan.pipeline.stages import RunLayout, eval_after_models

    data = tiny_recipe(tmp_path)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    recipe = load_recipe(PipelineRecipe, path)
    layout = RunLayout(recipe)
    assert recipe.eval.after == "all"
    every = eval_after_models(layout, recipe.eval)
    assert [Path(m).name for m in every] == ["04_cpt", "05_sft", "06_preference"]
    final = load_recipe(PipelineRecipe, path, ["eval.after=final"])
    assert eval_after_models(RunLayout(final), final.eval) == every[-1:]
    no_pref = load_recipe(PipelineRecipe, path, ["eval.after=final", "preference.enabled=false"])
    assert [Path(m).name for m in eval_after_models(RunLayout(no_pref), no_pref.eval)] == ["05_sft"]
    passed = final.eval.eval_args(model=every[-1:], out=str(tmp_path / "e"))
    assert type(passed) is EvalArgs and passed.tasks == final.eval.tasks and passed.limit == final.eval.limit
    with pytest.raises(RecipeError, match="eval.after.*'last'.*all.*final"):
        load_recipe(PipelineRecipe, path, ["eval.after=last"])


def test_the_recipe_is_a_tree_of_the_stage_commands_own_arguments():
    """One schema per stage: each section of a pipeline recipe is the dataclass its stage command reads, so a
    setting has one name, one default and one help text (the push section is private by default exactly as
    `yunshan push` is)."""
    import dataclasses
    import typing

    from yunshan.eval.commands import EvalArgs
    from yunshan.hub.export import ExportArgs
    from yunshan.pipeline import STAGES
    from yunshan.hub.push import PushArgs
    from yunshan.tokenizer.extend import ExtendArgs
    from yunshan.training.cpt import CptArgs
    from yunshan.training.preference import PrefArgs
    from yunshan.training.sft import SftArgs

    from yunshan.pipeline.stages import PipelineEvalArgs

    hints = typing.get_type_hints(PipelineRecipe)
    sections = {s.section: hints[s.section] for s in STAGES}
    expected = {"tokenizer_extension": ExtendArgs, "eval": PipelineEvalArgs, "cpt": CptArgs, "sft": SftArgs,
                "preference": PrefArgs, "export": ExportArgs, "push": PushArgs}
    for name, cls in expected.items():
        assert set(typing.get_args(sections[name])) == {cls, type(None)}, name
    # The eval section is yunshan eval's own arguments plus the one pipeline setting, `after`.
    assert issubclass(PipelineEvalArgs, EvalArgs)
    assert {f.name for f in dataclasses.fields(PipelineEvalArgs)} - {f.name for f in dataclasses.fields(EvalArgs)} \
        == {"after"}
    # Every reserved key names a real field of its section.
    for dotted in PipelineRecipe.RESERVED_KEYS:
        section, *keys = dotted.split(".")
        cls = next(a for a in typing.get_args(hints[section]) if dataclasses.is_dataclass(a))
        for key in keys:
            cls = typing.get_type_hints(cls)[key]
    assert PushArgs().private is True


def test_sections_switch_with_enabled_and_runner_paths_are_reserved(tmp_path):
    data = tiny_recipe(tmp_path, export=False)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    recipe = load_recipe(PipelineRecipe, path, ["sft.enabled=false", "push.enabled=true"])
    assert recipe.sft is None and recipe.export is None and recipe.push is not None
    plan = PipelineRunner(recipe, path).dry_run()
    assert {p["stage"]: p["action"] for p in plan["plan"]}["sft"] == "disabled"
    assert "push.repo_id is not set" in plan["problems"]
    # What the runner fills (stage folders, the model a stage starts from) cannot be set in a pipeline recipe.
    data["cpt"]["training"]["output_dir"] = "elsewhere"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(RecipeError, match=r"recipe.yaml:\d+: cpt.training.output_dir: set by yunshan run"):
        load_recipe(PipelineRecipe, path)
    with pytest.raises(RecipeError, match="command-line override: tokenizer_extension.out: set by yunshan run"):
        load_recipe(PipelineRecipe, data=tiny_recipe(tmp_path), overrides=["tokenizer_extension.out=x"])
