"""Typed run artifacts: every record written by a run reads back equal, and a wrong file is a one-line error."""

import json

import pytest

from yunshan.io.artifacts import (
    CptSourceReport, DataReport, EvalResults, Metric, RunManifest, SftSourceReport, StageRecord, TokenizerReport)


def test_data_reports_round_trip_and_say_their_kind(tmp_path):
    cpt = DataReport(kind="cpt", seed=3, steps=8, tokens_trained=1024, tokens_per_step=128, seq_len=64,
                     sources={"finance": CptSourceReport(weight=0.5, tokens_trained=512, token_share=0.5,
                                                         documents_read=9, epochs_completed=0,
                                                         dropped={"bad:empty_text": 1}, path="f.jsonl")},
                     precision={"value": "fp32", "reason": "set in the recipe"})
    cpt.write(tmp_path)
    on_disk = json.loads((tmp_path / "data_report.json").read_text())
    assert on_disk["kind"] == "cpt" and "samples" not in on_disk  # fields a cpt run never sets are not written
    assert DataReport.read(tmp_path) == cpt
    sft = DataReport(kind="sft", seed=0, samples=4, rows=4, packing=False, steps=2,
                     sources={"general": SftSourceReport(read=5, samples=4, tokens=99, trained_tokens=40,
                                                         share_of_samples=1.0, dropped={"too_long": 1})})
    assert DataReport.from_json(sft.to_json()) == sft
    with pytest.raises(ValueError, match="kind' must be one of cpt, sft, preference"):
        DataReport.from_json({"seed": 0, "sources": {}, "tokens_trained": 5})  # no guessing from the keys


def test_eval_results_and_manifest_round_trip(tmp_path):
    metric = Metric("bpc/general", "held-out general text", "bits per character ↓", 1.25, lower_is_better=True,
                    eval_result={"metric_type": "bits_per_character", "metric_value": 1.25})
    results = EvalResults.from_json({
        "yunshan_version": "0.1.0", "settings": {"mode": "cloze"}, "seconds": 2.5,
        "models": {"base": {"path": "runs/base", "sha256": "ab", "class": "PanguPiForCausalLM"}},
        "tasks": {"bpc": {"format": "bpc", "results": {"base": {"files": {}}},
                          "metrics": {"base": [metric.__dict__]}, "files": {"g.txt": {"g.txt": "cd"}}}}})
    assert results.models["base"].class_name == "PanguPiForCausalLM" and results.tasks["bpc"].metrics["base"] == [metric]
    results.write(tmp_path)
    assert EvalResults.read(tmp_path) == results
    manifest = RunManifest(name="r", final_model="04_sft", stages=[StageRecord("base", "complete", "00_base")])
    manifest.set_stage(StageRecord("sft", "running", "04_sft"), ["base", "cpt", "sft"])
    manifest.set_stage(StageRecord("cpt", "complete", "03_cpt", summary={"tokens": 5}), ["base", "cpt", "sft"])
    assert [s.name for s in manifest.stages] == ["base", "cpt", "sft"]
    manifest.write(tmp_path)
    assert RunManifest.read(tmp_path) == manifest and RunManifest.read(tmp_path).stage("cpt").summary == {"tokens": 5}


def test_wrong_files_are_one_line_errors(tmp_path):
    (tmp_path / "run.json").write_text('{"name": "r", "stages": [{"name": "base"}]}')
    with pytest.raises(ValueError, match=r"run.json: stages.0: field 'status' is missing"):
        RunManifest.read(tmp_path)
    (tmp_path / "results.json").write_text("{\n  oops")
    with pytest.raises(ValueError, match=r"results.json:2: not valid JSON"):
        EvalResults.read(tmp_path)
    (tmp_path / "results.json").write_text('{"models": {}}')
    with pytest.raises(ValueError, match="field 'tasks' is missing"):
        EvalResults.read(tmp_path)


def test_tokenizer_report_round_trips_and_reads_the_compression(tmp_path):
    """The tokenizer stage's report.json: the extension's own report kept as it is, and the compression report
    (yunshan.tokenizer.compression_report's layout, written back key for key) read as typed records."""
    data = {"extension": {"new_tokens": {"total": 60}, "files": ["tokenizer.json"]}, "compression": {
        "definition": "compression rate = sum of tokens / sum of Unicode characters",
        "tokenizers": [{"name": "base", "vocab_size": 400, "new_vs_first": 0},
                       {"name": "extended", "vocab_size": 460, "new_vs_first": 60}],
        "files": [{"path": "/data/heldout/finance.txt", "texts": 10, "characters": 1000, "bytes": 2900, "results": [
            {"tokenizer": "base", "tokens": 800, "tokens_per_char": 0.8, "bytes_per_token": 3.625,
             "change_vs_first": 0.0},
            {"tokenizer": "extended", "tokens": 600, "tokens_per_char": 0.6, "bytes_per_token": None,
             "change_vs_first": -0.25}]}],
        "new_tokens_most_used": [{"tokenizer": "extended", "top": [{"id": 401, "token": "利率", "count": 7}]}]}}
    report = TokenizerReport.from_json(data)
    assert report.compression.vocabulary_change() == (400, 460)
    assert report.compression.tokens_per_char() == [("/data/heldout/finance.txt", 0.8, 0.6)]
    report.write(tmp_path)
    assert json.loads((tmp_path / "report.json").read_text()) == data and TokenizerReport.read(tmp_path) == report
    alone = TokenizerReport(extension={"new_tokens": {"total": 3}})
    assert alone.to_json() == {"extension": {"new_tokens": {"total": 3}}} and alone.compression is None
    (tmp_path / "report.json").write_text('{"compression": {}}')
    with pytest.raises(ValueError, match="field 'extension' is missing"):
        TokenizerReport.read(tmp_path)
