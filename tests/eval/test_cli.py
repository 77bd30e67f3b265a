"""`yunshan eval` end to end on tiny models and small folders written by the tests: every task, two models."""

import json
import re

import pytest

from yunshan.cli import main
from yunshan.eval.generation import generate


def test_every_task_two_models_side_by_side(bench, llama_dir, pangu_dir, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["eval", "--model", str(llama_dir), "--model", str(pangu_dir), "--tasks",
                 f"fineval={bench['fineval']}", f"financeiq={bench['financeiq']}", f"lawbench={bench['lawbench']}",
                 f"jecqa={bench['jecqa']}", "bpc", "compression", "diversity",
                 "--heldout", f"general={bench['general']}", "--heldout", f"legal={bench['legal']}",
                 "--text", str(bench["legal"]), "--text", str(bench["jecqa"] / "0_test.json"),
                 "--diversity-text", str(bench["general"]), "--shots", "2", "--max-new-tokens", "8",
                 "--out", str(out), "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "results.json").read_text(encoding="utf-8"))
    names = list(report["models"])
    assert names == [llama_dir.name, pangu_dir.name] and all(m["sha256"] for m in report["models"].values())
    # each task's wall seconds per model, within the run's
    for task in report["tasks"].values():
        assert set(task["seconds"]) == set(names) and all(0 <= s <= report["seconds"] for s in task["seconds"].values())

    fin = report["tasks"]["fineval"]
    assert set(fin["files"]) >= {"subject_mapping.json", "val/accounting_val.csv", "dev/accounting_dev.csv"}
    for name in names:
        r = fin["results"][name]
        assert r["shots"] == 2 and r["n"] == 12 and len(r["predictions"]) == 12
        assert r["overall"] == pytest.approx(100 * sum(p["correct"] for p in r["predictions"]) / 12)
        assert all(len(p["logliks"]) == 4 and p["pred"] in "ABCD" for p in r["predictions"])
    iq = report["tasks"]["financeiq"]["results"][names[0]]
    accs = [s["accuracy"] for s in iq["subjects"].values()]
    assert iq["overall"] == pytest.approx(sum(accs) / len(accs))
    law = report["tasks"]["lawbench"]["results"][names[1]]
    assert set(law["tasks"]) == {"1-1", "1-2", "2-9", "3-3", "3-4"} and len(law["missing_tasks"]) == 15
    assert law["overall"] == pytest.approx(sum(t["score"] for t in law["tasks"].values()) / 5)
    assert report["tasks"]["jecqa"]["results"][names[0]]["n"] == 2
    bpc = report["tasks"]["bpc"]["results"][names[0]]["files"]
    assert set(bpc) == {"general", "legal"} and all(v["bpc"] > 0 for v in bpc.values())
    comp = report["tasks"]["compression"]["results"][names[0]]
    # A held-out .txt is one continuous document: its blank lines count (trailing whitespace does not).
    assert comp["files"]["legal.txt"]["chars"] == len(bench["legal"].read_text(encoding="utf-8").rstrip())
    assert len(report["tasks"]["diversity"]["results"][names[1]]["effective_dimension"]) == 2
    assert (out / "diversity.png").stat().st_size > 1000
    # One table per task, rows = models, AVG last; the forgetting-vs-gain table for the two models.
    md = (out / "results.md").read_text(encoding="utf-8")
    assert "| Model | Accounting | Certificate | Finance | AVG |" in md
    assert "| Model | Memorization | Understanding | Applying | AVG |" in md
    assert "forgetting (general)" in md and "gain (domain)" in md
    assert md.count(f"| {names[0]} |") >= 6 and md.strip() in printed
    # report.html: the same tables on one page, the diversity plot embedded.
    page = (out / "report.html").read_text(encoding="utf-8")
    assert re.search(r"<th[^>]*>Accounting</th>", page) and "data:image/png;base64," in page
    assert page.count("<table>") == len(re.findall(r"^\|[-:| ]+\|$", md, flags=re.MULTILINE)) >= 5
    assert str(out / "report.html") in printed


def test_generate_mode_reports_unmatched_answers(bench, llama, tmp_path):
    from yunshan.eval.ceval import run_ceval

    res = run_ceval(llama, bench["fineval"], shots=0, mode="generate", chat=True, max_new_tokens=6)
    assert all(p["output"] is not None for p in res["predictions"])
    assert res["unmatched"] == sum(p["pred"] is None for p in res["predictions"])
    # An unmatched answer is wrong, never guessed.
    assert all(not p["correct"] for p in res["predictions"] if p["pred"] is None)


def test_batched_greedy_generation_equals_one_at_a_time(llama):
    prompts = ["银行", "根据《刑法》第二百六十四条，盗窃", "题目：企业的资产负债表反映的是"]
    assert generate(llama, prompts, max_new_tokens=6, batch_size=3) == generate(llama, prompts, max_new_tokens=6,
                                                                                 batch_size=1)


def test_bad_arguments_give_one_line_errors(bench, llama_dir, capsys):
    assert main(["eval", "--model", str(llama_dir), "--tasks", "mmlu"]) == 1
    assert "unknown task 'mmlu'" in capsys.readouterr().err
    assert main(["eval", "--model", str(llama_dir), "--tasks", f"fineval={bench['fineval']}", "--mode", "x",
                 "--no-progress"]) == 1
    assert main(["eval", "--model", "/no/such/model", "--tasks", f"fineval={bench['fineval']}"]) == 1
    assert "no such folder" in capsys.readouterr().err


def test_compression_needs_only_tokenizers(tokenizer_dir, bench, tmp_path):
    out = tmp_path / "c"
    assert main(["eval", "--model", str(tokenizer_dir), "--tasks", "compression", "--text", str(bench["legal"]),
                 "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "results.json").read_text(encoding="utf-8"))
    res = report["tasks"]["compression"]["results"][tokenizer_dir.name]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    docs = [bench["legal"].read_text(encoding="utf-8").rstrip()]  # a .txt is one document
    tokens = sum(len(tok(d, add_special_tokens=False)["input_ids"]) for d in docs)
    assert res["all"]["tokens"] == tokens
    assert res["all"]["tokens_per_char"] == pytest.approx(tokens / sum(len(d) for d in docs))


@pytest.mark.parametrize("fast", [False, True])
def test_dtype_auto_follows_the_hardware_and_bf16_stays_close(bench, llama_dir, tmp_path, monkeypatch, fast):
    """--dtype auto: float32 weights, bf16 autocast only where the hardware multiplies bf16 fast (the check is
    patched, so both branches run on any machine); the choice is saved, and bf16 bits/char stay within 1% of
    float32's (bf16 keeps 8 bits of mantissa: ~0.4% per product, averaged over many tokens)."""
    import yunshan.loading.precision as precision

    monkeypatch.setattr(precision, "fast_bf16", lambda: (fast, "patched check"))
    results = {}
    for dtype in ("float32", "auto"):
        out = tmp_path / dtype
        assert main(["eval", "--model", str(llama_dir), "--tasks", "bpc", "--heldout", f"general={bench['general']}",
                     "--dtype", dtype, "--out", str(out), "--no-progress"]) == 0
        report = json.loads((out / "results.json").read_text(encoding="utf-8"))
        model = report["models"][llama_dir.name]
        results[dtype] = report["tasks"]["bpc"]["results"][llama_dir.name]["files"]["general"]["bpc"]
        if dtype == "auto":
            assert model["precision"].startswith("bfloat16 autocast" if fast else "float32")
            assert "patched check" in model["precision"]
    if fast:
        assert results["auto"] != results["float32"]  # autocast really ran
        assert results["auto"] == pytest.approx(results["float32"], rel=0.01)
    else:
        assert results["auto"] == results["float32"]


@pytest.mark.parametrize("fast", [False, True])
def test_recheck_float32_gives_float32s_letters_under_auto(bench, llama_dir, tmp_path, monkeypatch, fast):
    """--dtype auto --recheck-float32: under bf16 autocast (fast hardware, patched) the close calls are scored again
    in float32 and counted, and every letter is float32's; without fast bf16 nothing is rescored."""
    import yunshan.loading.precision as precision
    from yunshan.eval import likelihood

    monkeypatch.setattr(precision, "fast_bf16", lambda: (fast, "patched check"))
    monkeypatch.setattr(likelihood, "BF16_NATS_PER_SQRT_TOKEN", 1e9)  # every question is a close call
    results = {}
    for name, flags in (("float32", ["--dtype", "float32"]), ("plain", ["--dtype", "auto"]),
                        ("recheck", ["--dtype", "auto", "--recheck-float32"])):
        out = tmp_path / name
        assert main(["eval", "--model", str(llama_dir), "--tasks", f"fineval={bench['fineval']}", "--mode", "cloze",
                     "--shots", "0", *flags, "--out", str(out), "--no-progress"]) == 0
        results[name] = json.loads((out / "results.json").read_text(encoding="utf-8"))["tasks"]["fineval"][
            "results"][llama_dir.name]
    n = len(results["float32"]["predictions"])
    assert results["float32"]["rescored_float32"] == results["plain"]["rescored_float32"] == 0
    assert results["recheck"]["rescored_float32"] == (n if fast else 0)
    assert [p["pred"] for p in results["recheck"]["predictions"]] == [p["pred"] for p in results["float32"]["predictions"]]
    assert [p["logliks"] for p in results["recheck"]["predictions"]] == [
        p["logliks"] for p in results["float32"]["predictions"]]
    if fast:  # the plain auto run kept its bf16 values
        assert [p["logliks"] for p in results["plain"]["predictions"]] != [
            p["logliks"] for p in results["float32"]["predictions"]]


def test_dtype_junk_is_a_one_line_error(bench, llama_dir, tmp_path, capsys):
    code = main(["eval", "--model", str(llama_dir), "--tasks", "bpc", "--dtype", "fp8", "--out", str(tmp_path)])
    assert code != 0
    assert "--dtype 'fp8' is not valid; use auto, float32, bfloat16, float16" in capsys.readouterr().err


def test_out_is_checked_first_and_finished_tasks_survive_a_later_failure(bench, llama_dir, tmp_path, capsys):
    plain = tmp_path / "a_file"
    plain.write_text("not a folder")
    assert main(["eval", "--model", str(llama_dir), "--tasks", "bpc", "--heldout", f"general={bench['general']}",
                 "--out", str(plain / "run"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out: {plain / 'run'} is inside {plain}, which is a file" in err
    # bpc finishes, then the second task fails on its data: what bpc scored is on disk
    broken = tmp_path / "broken_fineval"
    broken.mkdir()
    (broken / "subject_mapping.json").write_text("{not json")
    out = tmp_path / "run"
    assert main(["eval", "--model", str(llama_dir), "--tasks", "bpc", f"fineval={broken}",
                 "--heldout", f"general={bench['general']}", "--out", str(out), "--no-progress"]) == 1
    assert "Traceback" not in capsys.readouterr().err and not (out / "results.json").exists()
    partial = json.loads((out / "results.partial.json").read_text(encoding="utf-8"))
    assert list(partial["tasks"]) == ["bpc"] and partial["tasks"]["bpc"]["results"][llama_dir.name]["files"]["general"]["bpc"] > 0
    # a run that finishes leaves results.json alone
    assert main(["eval", "--model", str(llama_dir), "--tasks", "bpc", "--heldout", f"general={bench['general']}",
                 "--out", str(out), "--no-progress"]) == 0
    assert (out / "results.json").is_file() and not (out / "results.partial.json").exists()


def _copy(folder, to):
    to.mkdir()
    for f in folder.iterdir():
        (to / f.name).write_bytes(f.read_bytes())
    return to


def test_a_tokenizer_without_pad_eos_or_unk_token_is_evaluated(bench, llama_dir, tmp_path, capsys):
    """Issue 27 item 12: a tokenizer with no pad, eos or unk token died in torch.full(..., None) in fineval and
    lawbench; padding is masked, so the model's own pad id (or id 0) pads, and the scores are those of the same
    model with its pad token."""
    from transformers import AutoTokenizer

    bare = _copy(llama_dir, tmp_path / "bare")
    tok = AutoTokenizer.from_pretrained(bare)
    tok.pad_token = tok.eos_token = tok.unk_token = None
    tok.save_pretrained(bare)
    runs = {}
    for name, folder in (("bare", bare), ("full", llama_dir)):
        assert main(["eval", "--model", str(folder), "--tasks", f"fineval={bench['fineval']}",
                     f"lawbench={bench['lawbench']}", "--limit", "2", "--shots", "1", "--max-new-tokens", "4",
                     "--out", str(tmp_path / name), "--no-progress"]) == 0, capsys.readouterr().err
        runs[name] = json.loads((tmp_path / name / "results.json").read_text(encoding="utf-8"))["tasks"]
    (bare,), (full,) = runs["bare"]["fineval"]["results"].values(), runs["full"]["fineval"]["results"].values()
    assert [x for p in bare["predictions"] for x in p["logliks"]] == pytest.approx(
        [x for p in full["predictions"] for x in p["logliks"]])
    (law,) = runs["bare"]["lawbench"]["results"].values()  # without EOS an answer runs to --max-new-tokens
    assert law["tasks"] and law["overall"] >= 0


def test_a_chat_template_that_raises_is_one_line(bench, llama_dir, tmp_path, capsys):
    """Issue 27 item 11: a chat template that raises (Jinja's raise_exception, as Gemma's does for a system turn) was
    a jinja2 TemplateError traceback in `eval --tasks lawbench`."""
    from transformers import AutoTokenizer

    broken = _copy(llama_dir, tmp_path / "broken")
    tok = AutoTokenizer.from_pretrained(broken)
    tok.chat_template = "{{ raise_exception('this template renders no conversation') }}"
    tok.save_pretrained(broken)
    assert main(["eval", "--model", str(broken), "--tasks", f"lawbench={bench['lawbench']}", "--chat", "on",
                 "--limit", "1", "--max-new-tokens", "2", "--out", str(tmp_path / "e"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "the chat template fails on this conversation (TemplateError: this template renders no conversation)" \
        in err and "or use --chat off" in err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1 and "Traceback" not in err
