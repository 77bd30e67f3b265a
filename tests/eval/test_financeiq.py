"""FinanceIQ scored as its owners' code scores it (eval/financeiq.py): the extraction on hand-written answers, the
CSV round trip against pandas, the prompt and its shot trimming against the owners' own gen_prompt, the real release
read unchanged, and a tiny model's generations scored by yunshan and by the owners' compute_accuracy.

The owners' code (Duxiaoman-DI/XuanYuan, FinanceIQ/src) is copied out of a fetched snapshot into a temporary folder
and run there (tests/fixtures.owners_code; skipped with the reason when the snapshot is absent); the real release is
read in place (skipped when absent). Neither is stored in the project.
"""

import csv
import importlib.util
import io
import json
import random
import sys

import pytest
from fixtures import owners_code, realdata

from yunshan.eval import cmmlu
from yunshan.eval.financeiq import (
    NA_VALUES, RULES, SUBJECTS, extract_choice, render_prompt, saved_response, score_subject)
from yunshan.eval.multiple_choice import read_choice_csv

# ------------------------------------------------------------------------------------------------ extract_choice
# (response as compute_accuracy reads it, letter, rule): every rule of the owners' extract_choice, each answer
# written so that the rules before it do not match.
TABLE = [
    ("B。因为资产负债表反映财务状况", "B", "first_char"),
    ("According to the standard, ...", "A", "first_char"),  # their first-character check reads English words too
    ("根据规定，答案是：C", "C", "single_1"),
    ("答案为选项 D", "D", "single_2"),
    ("所以选 A", "A", "single_3"),
    ("我认为B项正确", "B", "single_4"),
    ("正确的选项是 C", "C", "single_5"),
    ("答案应该是B", "B", "single_6"),
    ("选项 A 是正确的", "A", "single_7"),
    ("我选择答案 D", "D", "single_8"),
    ("答：B", "B", "single_9"),
    ("只有C符合题意", "C", "single_10"),
    ("答案选项：A", "A", "single_11"),
    ("答案为第三个，即C", "C", "single_12"),
    ("我看A和B都不如C，应当选", "C", "recursive_1"),  # the last of the nested matches
    ("看来A不对，B不对，C正确", "C", "recursive_2"),
    ("不是A，而是B", "B", "weak_1"),  # "[^不]是": the "是" after 不 does not count
    ("我认为 B 比较好", "B", "only_choice"),
    ("The answer is D", "D", "only_choice"),
]


@pytest.mark.parametrize("response,letter,rule", TABLE)
def test_extract_choice_every_rule(response, letter, rule):
    assert extract_choice(response, random.Random(0)) == (letter, rule)


def test_the_table_covers_every_rule():
    assert {rule for _, _, rule in TABLE} | {"random"} == set(RULES)


@pytest.mark.parametrize("response", ["这道题目无法判断", "可能A也可能B", "nan", " ", "答案是E"])
def test_no_rule_reads_a_letter_then_the_seeded_random_one(response):
    letters = [extract_choice(response, random.Random(f"0:s:{row}")) for row in range(400)]
    assert {rule for _, rule in letters} == {"random"}
    # Reproducible for a seed, and a fair draw: each letter about a quarter of the time.
    assert letters == [extract_choice(response, random.Random(f"0:s:{row}")) for row in range(400)]
    counts = {x: sum(letter == x for letter, _ in letters) for x in "ABCD"}
    assert all(70 <= c <= 130 for c in counts.values()), counts


def test_extract_choice_agrees_with_the_owners(owners, monkeypatch):
    """The owners' own extract_choice on the table and on random text built from the patterns' pieces; their
    random fallback is replaced by a draw of the same seeded generator."""
    rng = random.Random(5)
    pieces = ["答案", "是", "为", "：", " ", "选项", "选择", "故", "选", "项", "正确", "的", "应该", "当选", "符合题意",
              "不", "A", "B", "C", "D", "E", "x", "，", "答", "这", "\n"]
    texts = [t for t, _, _ in TABLE] + ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 9)))
                                        for _ in range(3000)]
    for text in texts:
        ours = extract_choice(text, random.Random(text))
        monkeypatch.setattr(owners, "random", random.Random(text))
        assert owners.extract_choice(text) == ours[0], text
    assert {rule for text in texts for _, rule in [extract_choice(text, random.Random(0))]} == set(RULES)


# --------------------------------------------------------------------------------------- the saved CSV, read back
def _old_writer_line(fields) -> str:
    # The csv writer of the owners' 2023 runs (Python before 3.11.9 / 3.12.3): quotes a field holding the delimiter,
    # the quote character or the line terminator "\n", but not "\r".
    def cell(x):
        x = str(x)
        return '"' + x.replace('"', '""') + '"' if any(c in x for c in ',"\n') else x
    return ",".join(cell(x) for x in fields) + "\n"


def _read_back(text: str):
    pd = pytest.importorskip("pandas")
    return pd.read_csv(io.StringIO(text), names=["id", "question", "A", "B", "C", "D", "answer", "response"],
                       index_col=0)


def _writer_splits_rows() -> bool:
    """Whether this Python's csv writer leaves "\r" unquoted, as the owners' 2023 runs' did (before 3.11.9 / 3.12.3)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(["a\rb"])
    return buffer.getvalue() == "a\rb\n"


def _expected(responses, cr_splits_rows):
    out = []
    for r in responses:
        cell, extra = saved_response(r, cr_splits_rows)
        out += [cell] + ["nan"] * extra
    return out


ADVERSARIAL = ["A", "", " ", "NA", "None", "null", "N/A", "nan", "#N/A", "<NA>", "1.#IND", "NA ", " NA", "答案是B\r",
               "a\rb", "a\r\rb", "a\r \t\rb", "a\r\x0bb", "\r", "a\r,b", 'a\r"b"', "x,y", 'say "B"', " B", "\tC",
               "B\n", "B\nC", "答案\r\n是C", "1.50", "True", "D\x00x", "a\rNA", "a\r0"]


def test_saved_response_is_what_pandas_reads_back_from_the_owners_csv():
    rng = random.Random(3)
    alphabet = ["A", "B", "\r", " ", "\t", ",", '"', "N", "a", "n", "x", "是", "\x0b", "\n", "None", "NA"]
    responses = ADVERSARIAL + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))) for _ in range(3000)]
    text = "".join(_old_writer_line([i, "q", "a", "b", "c", "d", "A", r.replace("\n", "")])
                   for i, r in enumerate(responses))
    back = _read_back(text)
    assert [str(x) for x in back["response"]] == _expected(responses, cr_splits_rows=True)


def test_saved_response_matches_this_pythons_own_round_trip():
    """pandas' to_csv and read_csv as the owners' run_eval and compute_accuracy call them, on this Python: its csv
    writer quotes "\\r" (3.11.9+, 3.12.3+) or leaves it as the owners' 2023 runs did; both are modelled."""
    pd = pytest.importorskip("pandas")
    splits = _writer_splits_rows()
    df = pd.DataFrame({"Question": "q", "A": "a", "B": "b", "C": "c", "D": "d", "Answer": "A"},
                      index=range(len(ADVERSARIAL)))
    df["prediction"] = [r.replace("\n", "") for r in ADVERSARIAL]
    out = io.StringIO()
    df.to_csv(out, header=None)
    assert [str(x) for x in _read_back(out.getvalue())["response"]] == _expected(ADVERSARIAL, splits)


def test_na_values_are_pandas_defaults():
    parsers = pytest.importorskip("pandas._libs.parsers")
    assert NA_VALUES == set(parsers.STR_NA_VALUES)


# ------------------------------------------------------------------------------------------- the owners' own code
def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def owners(tmp_path, monkeypatch):
    """FinanceIQ's src/utils.py (format_example, gen_prompt, extract_choice, compute_accuracy) imported from a
    temporary copy of the fetched snapshot."""
    pytest.importorskip("pandas")
    folder = owners_code("Duxiaoman-DI/XuanYuan", ("FinanceIQ/src/utils.py", "FinanceIQ/src/categories.py"),
                         tmp_path / "financeiq_src")
    monkeypatch.setitem(sys.modules, "categories", _load(folder / "categories.py", "categories"))
    return _load(folder / "utils.py", "financeiq_owners_utils")


def test_subjects_are_the_owners(owners):
    assert tuple(owners.subjects) == SUBJECTS


def _write_subject(root, name, rows, split="test"):
    (root / split).mkdir(parents=True, exist_ok=True)
    with open(root / split / f"{name}.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["", "Question", "A", "B", "C", "D", "Answer"])
        for i, row in enumerate(rows):
            w.writerow([i, *row])


def _owners_prompts(owners, root, subject, shots, tokenizer=None, max_length=2048, limit=None):
    pd = pytest.importorskip("pandas")
    dev = pd.read_csv(root / "dev" / f"{subject}.csv", header=0, index_col=0)
    test = pd.read_csv(root / "test" / f"{subject}.csv", header=0, index_col=0)
    out = []
    for i in range(min(test.shape[0], limit or test.shape[0])):
        end = owners.format_example(test, i, subject, include_answer=False)
        out.append(owners.gen_prompt(dev, subject, end, shots, tokenizer, max_length))
    return out


def test_prompt_and_shot_trimming_equal_the_owners(owners, tmp_path, tokenizer_dir, capsys):
    """gen_prompt with a tokenizer drops every shot of the longest length until the rest fit, and the header too
    when even header + question do not: at every budget from nothing to everything, the same prompt."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    # Shots of different lengths, two of them equally long (both go at once).
    dev = [("短题", "甲", "乙", "丙", "丁", "A"), ("中等长度的题目？", "甲", "乙", "丙", "丁", "B"),
           ("一道相当长的题目，讲的是资产负债表和利润表的关系？", "财务状况", "经营成果", "现金流量", "利润分配", "C"),
           ("中等长度的题目！", "甲", "乙", "丙", "丁", "D"), ("短", "甲", "乙", "丙", "丁", "A")]
    test = [("企业的资产负债表反映的是", "财务状况", "经营成果", "现金流量", "利润分配", "A"),
            ("股票的收益主要来自", "股息和资本利得", "利息", "租金", "保费", "A")]
    _write_subject(tmp_path, "税务师", dev, "dev")
    _write_subject(tmp_path, "税务师", test)
    subject = cmmlu.load_cmmlu(tmp_path, "test", shots=5)[0]
    kept_seen = set()
    for max_length in range(0, 800, 7):
        theirs = _owners_prompts(owners, tmp_path, "税务师", 5, tok, max_length)
        for q, prompt in zip(subject.questions, theirs):
            ours, kept = render_prompt(subject.name, subject.dev, q, tok.encode, max_length)
            assert ours == prompt, max_length
            kept_seen.add(kept)
            assert ours.count("答案是：") == kept + 1
    # Never 3 shots: the two equally long ones go together, as in the owners' loop.
    assert kept_seen == {0, 1, 2, 4, 5}
    assert not any(p.startswith("以下是") for p in _owners_prompts(owners, tmp_path, "税务师", 5, tok, 30))
    capsys.readouterr()  # their "Warning: ... remove 1 shot." lines


# ------------------------------------------------------------------------------------------------ the real release
RELEASE = {"注册会计师（CPA）": 1311, "银行从业资格": 1244, "证券从业资格": 1176, "基金从业资格": 872,
           "保险从业资格CICE": 696, "经济师": 520, "税务师": 488, "期货从业资格": 433, "理财规划师": 295,
           "精算师-金融数学": 88}


def test_real_release_read_unchanged_with_its_counts():
    root = realdata("financeiq")
    subjects = cmmlu.load_cmmlu(root, "test", shots=5)
    assert {s.key: len(s.questions) for s in subjects} == RELEASE
    assert sum(RELEASE.values()) == 7123 and set(RELEASE) == set(SUBJECTS)
    assert all(s.name == s.key for s in subjects)  # the prompt names the file's subject
    dev = {s.key: len(read_choice_csv(root / "dev" / f"{s.key}.csv", cmmlu.COLUMNS, "CMMLU")) for s in subjects}
    assert dev == dict.fromkeys(RELEASE, 5)


def test_real_release_prompts_equal_the_owners_byte_for_byte(owners, tokenizer_dir, capsys):
    """All 7,123 questions, 0- and 5-shot, as the owners' format_example and gen_prompt write them; the first 40 of
    each subject 5-shot also with their trimming to 2,048 tokens of a tokenizer that cuts Chinese into many tokens
    (many prompts trimmed; all of them would take a minute more)."""
    pd = pytest.importorskip("pandas")
    from transformers import AutoTokenizer

    root = realdata("financeiq")
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    compared, trimmed = 0, 0
    for s in cmmlu.load_cmmlu(root, "test", shots=5):
        test = pd.read_csv(root / "test" / f"{s.key}.csv", header=0, index_col=0)
        assert [test.iloc[i, test.shape[1] - 1] for i in range(test.shape[0])] == [q.answer for q in s.questions]
        for shots in (0, 5):
            for q, theirs in zip(s.questions, _owners_prompts(owners, root, s.key, shots), strict=True):
                assert cmmlu.render_prompt(s.name, s.dev[:shots], q) == theirs
                assert render_prompt(s.name, s.dev[:shots], q)[0] == theirs
                compared += 1
        for q, theirs in zip(s.questions[:40], _owners_prompts(owners, root, s.key, 5, tok, limit=40), strict=True):
            ours, kept = render_prompt(s.name, s.dev, q, tok.encode)
            assert ours == theirs
            trimmed += kept < 5
    capsys.readouterr()
    assert compared == 2 * 7123 and trimmed > 0


# ------------------------------------------------------------------------------------ scoring, against the owners'
def _owners_accuracy(owners, tmp_path, root, outputs_by_subject, fallback_letters, monkeypatch):
    """The owners' run_eval saving (test_df['prediction'] = preds; to_csv(header=None)) and compute_accuracy, with
    their random letter taken from `fallback_letters` in the order they draw it. Returns result.json."""
    pd = pytest.importorskip("pandas")
    results = tmp_path / "owners_results"
    results.mkdir()
    for subject, outputs in outputs_by_subject.items():
        test_df = pd.read_csv(root / "test" / f"{subject}.csv", header=0, index_col=0)
        test_df["prediction"] = [o.replace("\n", "") for o in outputs]
        test_df.to_csv(results / f"results_{subject}.csv", header=None)
    queue = ["ABCD".index(x) for x in fallback_letters]

    class Draws:
        @staticmethod
        def randint(a, b):
            assert (a, b) == (0, 3) and queue, "the owners drew more random letters than yunshan"
            return queue.pop(0)

    monkeypatch.setattr(owners, "random", Draws)
    owners.compute_accuracy(str(results))
    assert not queue, "yunshan drew random letters the owners did not"
    return json.loads((results / "result.json").read_text(encoding="utf-8"))


def test_first_row_question_1_is_dropped_as_the_owners_do(owners, tmp_path, monkeypatch, capsys):
    rows = [("1", "甲", "乙", "丙", "丁", "A"), ("资产负债表反映", "甲", "乙", "丙", "丁", "B"),
            ("利润表反映", "甲", "乙", "丙", "丁", "C")]
    _write_subject(tmp_path, "税务师", rows)
    questions = cmmlu.load_cmmlu(tmp_path, "test", shots=0)[0].questions
    outputs = ["A", "答案是B", "这道题无法判断"]
    scored = score_subject("税务师", questions, outputs)
    # The row of question "1" is gone; "答案是B" is right; the third is a random letter against C.
    assert (scored["n"], scored["dropped_first_row"]) == (2, 1)
    assert [r["rule"] for r in scored["records"]] == ["single_1", "random"]
    assert scored["correct"] == 1 + (scored["records"][1]["pred"] == "C")
    fallbacks = [r["pred"] for r in scored["records"] if r["rule"] == "random"]
    theirs = _owners_accuracy(owners, tmp_path, tmp_path, {"税务师": outputs}, fallbacks, monkeypatch)
    capsys.readouterr()
    assert theirs["税务师"] == round(scored["accuracy"], 2)


def test_hand_written_answers_scored_as_the_owners_score_them(owners, tmp_path, monkeypatch, capsys):
    """Every answer of the extraction table and of the round-trip list, saved and scored by the owners' code, gives
    the accuracy yunshan gives, and the same random letters are drawn."""
    outputs = [t for t, _, _ in TABLE] + ADVERSARIAL
    rows = [(f"第{i}题", "甲", "乙", "丙", "丁", "ABCD"[i % 4]) for i in range(len(outputs))]
    _write_subject(tmp_path, "经济师", rows)
    questions = cmmlu.load_cmmlu(tmp_path, "test", shots=0)[0].questions
    scored = score_subject("经济师", questions, outputs, cr_splits_rows=_writer_splits_rows())
    fallbacks = [r["pred"] for r in scored["records"] if r["rule"] == "random"]
    theirs = _owners_accuracy(owners, tmp_path, tmp_path, {"经济师": outputs}, fallbacks, monkeypatch)
    capsys.readouterr()
    assert theirs["经济师"] == round(scored["accuracy"], 2)
    assert scored["split_off_rows"] == (7 if _writer_splits_rows() else 0)  # the seven unquoted carriage-return pieces


def test_tiny_model_generations_scored_as_the_owners_score_them(owners, llama_dir, tmp_path, monkeypatch, capsys):
    """`yunshan eval --tasks financeiq --mode generate` on a folder of FinanceIQ's 10 subjects with a tiny LLaMA; its
    generations, saved as the owners' run_eval saves them, scored by the owners' compute_accuracy: every subject's
    accuracy and the Overall equal yunshan's, and both drew the same number of random letters."""
    from .conftest import QUESTIONS

    from yunshan.eval.commands import EvalArgs, run_eval

    root = tmp_path / "financeiq"
    for s, name in enumerate(SUBJECTS):
        _write_subject(root, name, [QUESTIONS[(i + s) % 6] for i in range(3)], "dev")
        _write_subject(root, name, [(QUESTIONS[(i + s + 3) % 6][0] + f"（{i}）", *QUESTIONS[(i + s + 3) % 6][1:])
                                    for i in range(3)])
    report = run_eval(EvalArgs(model=[str(llama_dir)], tasks=[f"financeiq={root}"], mode="generate", shots=2,
                               max_new_tokens=24, batch_size=8, out=str(tmp_path / "out"), progress=False,
                               hash_weights=False))
    res = report["tasks"]["financeiq"]["results"][llama_dir.name]
    assert res["scoring"].startswith("FinanceIQ's own") and res["generation"]["repetition_penalty"] == 1.1
    # --chat auto follows the owners' script: the raw prompt, since this model has no .chat() of its own (its
    # tokenizer has a chat template, which --chat auto uses for the other tasks).
    assert res["generation"]["chat"] is False
    assert res["missing_subjects"] == [] and len(res["subjects"]) == 10
    by_subject = {name: [] for name in SUBJECTS}
    for r in res["predictions"]:
        if not r.get("split_off"):
            by_subject[r["subject"]].append(r["output"])
    # This Python's csv writer decides whether a "\r" splits a saved row (the model may write one): score the same
    # generations with that behaviour on yunshan's side too, and check it is the run's own scoring when it matches.
    splits = _writer_splits_rows()
    subjects = {s.key: s for s in cmmlu.load_cmmlu(root, "test", shots=0)}
    ours = {name: score_subject(name, subjects[name].questions, by_subject[name], cr_splits_rows=splits)
            for name in SUBJECTS}
    if splits:
        assert {k: v["accuracy"] for k, v in ours.items()} == {k: v["accuracy"] for k, v in res["subjects"].items()}
    fallbacks = [r["pred"] for name in SUBJECTS for r in ours[name]["records"] if r["rule"] == "random"]
    theirs = _owners_accuracy(owners, tmp_path, root, by_subject, fallbacks, monkeypatch)
    capsys.readouterr()
    assert {name: round(v["accuracy"], 2) for name, v in ours.items()} == {name: theirs[name] for name in SUBJECTS}
    overall = sum(v["accuracy"] for v in ours.values()) / 10
    assert round(overall, 2) == theirs["Overall"]
    rules = {r["rule"] for v in ours.values() for r in v["records"]}
    assert len(rules) >= 2, rules  # the tiny model's answers go through more than one rule
    table = report["markdown"]
    assert "AVG, random letters wrong" in table and f"{res['random_fallbacks']} / {res['n']}" in table


# ------------------------------------------------------------------------------------------------------ generation
def test_batched_generation_with_the_repetition_penalty_equals_one_at_a_time(llama):
    """The owners generate one prompt at a time; yunshan batches, left-padded. transformers keeps the padding out
    of the repetition penalty, so each answer is the same."""
    from yunshan.eval.generation import generate

    prompts = ["题目：企业的资产负债表反映的是\n答案是：", "A", "以下是关于税务师的单项选择题，请直接给出正确答案的选项。\n\n题目：",
               "银行 证券 保险"]
    batched = generate(llama, prompts, max_new_tokens=20, batch_size=4, repetition_penalty=1.1)
    single = [generate(llama, [p], max_new_tokens=20, batch_size=1, repetition_penalty=1.1)[0] for p in prompts]
    plain = generate(llama, prompts, max_new_tokens=20, batch_size=4)
    assert batched == single
    assert batched != plain  # the penalty changes what this model writes


def test_loglik_on_financeiq_is_labelled_yunshans(llama_dir, tmp_path, writers):
    from yunshan.eval.commands import EvalArgs, run_eval

    root = writers.cmmlu(tmp_path / "financeiq", n_test=2, n_dev=1)
    report = run_eval(EvalArgs(model=[str(llama_dir)], tasks=[f"financeiq={root}"], shots=1, batch_size=4,
                               out=str(tmp_path / "out"), progress=False, hash_weights=False))
    res = report["tasks"]["financeiq"]["results"][llama_dir.name]
    assert res["mode"] == "loglik" and "not FinanceIQ's own scoring" in res["scoring"]
    assert "random_fallbacks" not in res


def test_task_modes_score_financeiq_as_its_owners_beside_answer_only_fineval(bench, llama_dir, tmp_path, capsys):
    """One run, as a recipe's eval section has it: FinEval answer-only (--mode loglik), FinanceIQ generated and
    scored as its owners' code does (--task-modes financeiq=generate)."""
    from yunshan.cli import main

    out = tmp_path / "run"
    assert main(["eval", "--model", str(llama_dir), "--tasks", f"fineval={bench['fineval']}",
                 f"financeiq={bench['financeiq']}", "--task-modes", "financeiq=generate", "--shots", "1",
                 "--max-new-tokens", "8", "--out", str(out), "--no-progress", "--no-hash-weights"]) == 0
    capsys.readouterr()
    report = json.loads((out / "results.json").read_text(encoding="utf-8"))
    fin = report["tasks"]["fineval"]["results"][llama_dir.name]
    iq = report["tasks"]["financeiq"]["results"][llama_dir.name]
    assert (fin["mode"], iq["mode"]) == ("loglik", "generate")
    assert iq["scoring"].startswith("FinanceIQ's own") and iq["generation"]["max_new_tokens"] == 8
    assert iq["scoring"].endswith("differs from theirs: max_new_tokens 8, theirs 512")
    # The bench folder holds two of FinanceIQ's ten subjects: the Overall is theirs, and says so.
    assert len(iq["missing_subjects"]) == 8 and iq["overall"] == sum(
        s["accuracy"] for s in iq["subjects"].values()) / 2
    assert report["settings"]["task_modes"] == ["financeiq=generate"]
    metric = report["tasks"]["financeiq"]["metrics"][llama_dir.name][0]
    assert "FinanceIQ's own extraction" in metric["detail"] and "random letter" in metric["detail"]


@pytest.mark.parametrize("spec", ["financeiq", "cmmlu=generate", "financeiq=sample"])
def test_task_modes_reject_what_is_not_a_task_run_and_a_mode(bench, llama_dir, tmp_path, spec):
    from yunshan.eval.commands import EvalArgs, run_eval

    with pytest.raises(ValueError, match="--task-modes .*NAME=MODE"):
        run_eval(EvalArgs(model=[str(llama_dir)], tasks=[f"financeiq={bench['financeiq']}"], task_modes=[spec],
                          out=str(tmp_path / "out"), progress=False))


def test_chat_auto_follows_the_owners_script():
    """Their hf_causal_model.py continues the raw prompt, except for the models with a remote-code .chat()."""
    from types import SimpleNamespace

    from yunshan.eval.financeiq import owners_chat

    plain, own = SimpleNamespace(model=object()), SimpleNamespace(model=SimpleNamespace(chat=lambda *a: ""))
    assert [owners_chat(plain, "auto", True), owners_chat(own, "auto", True), owners_chat(own, "auto", False)] == [
        False, True, False]  # the last: no chat template to stand in for .chat()
    assert [owners_chat(plain, "on", True), owners_chat(own, "off", False)] == [True, False]
