"""yunshan's C-Eval task agrees with lm-evaluation-harness's ceval-valid task, item by item, on the same model.

What is compared (see eval/README.md): lm-eval's own ceval-valid_accountant task config (its _default_ceval_yaml
doc_to_text / doc_to_choice / doc_to_target / first_n few-shot sampler and the subject's description) is loaded
from the installed lm_eval package; only its dataset is pointed at local CSV files (the Hub download is impossible
here). lm-eval's HFLM then runs it end to end on a tiny model, 0- and 3-shot. yunshan runs the same folder with
prompt_style="lm-eval". The prompts (lm-eval's request contexts) must be identical strings, the four
log-likelihoods equal within 1e-4, and the predicted letter identical for every item. A second test feeds
yunshan's own C-Eval prompts (docs/evaluation-formats.md, no space before the letter) to HFLM.loglikelihood and
checks the same agreement, so the default style is scored by the same rules as lm-eval too.
"""

import csv
from pathlib import Path

import pytest
import yaml

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is not installed (pip install -e '.[dev]')")

from yunshan.eval import ceval  # noqa: E402
from yunshan.eval.likelihood import score_choices  # noqa: E402

SUBJECT = "accountant"


def _lm_eval_config(root: Path) -> dict:
    folder = Path(lm_eval.__file__).parent / "tasks" / "ceval"
    config = yaml.safe_load((folder / "_default_ceval_yaml").read_text(encoding="utf-8"))
    config.update({k: v for k, v in yaml.safe_load((folder / f"ceval-valid_{SUBJECT}.yaml").read_text(
        encoding="utf-8")).items() if k != "include"})
    # Only the data source changes: the same splits, read from local CSV files instead of ceval/ceval-exam.
    config.update({"dataset_path": "csv", "dataset_name": None,
                   "dataset_kwargs": {"data_files": {"val": str(root / "val" / f"{SUBJECT}_val.csv"),
                                                     "dev": str(root / "dev" / f"{SUBJECT}_dev.csv")}}})
    return config


def _write_subject(root: Path, description: str, writers) -> None:
    # The chinese name lm-eval's description uses, so both sides name the subject the same way.
    name = description.split("以下是中国关于")[1].split("的单项选择题")[0]
    writers.ceval(root, subjects={SUBJECT: ("Accountant", name, "Other")}, n_val=6, n_dev=3)
    # Read back as lm-eval will: ids as strings are fine; the CSV has no numeric option cells.
    with open(root / "val" / f"{SUBJECT}_val.csv", encoding="utf-8") as fh:
        assert len(list(csv.reader(fh))) == 7


@pytest.fixture(scope="module")
def hflm(llama):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=llama.model, tokenizer=llama.tokenizer, batch_size=4, max_length=llama.max_length)


@pytest.mark.parametrize("shots", [0, 3])
def test_predictions_agree_with_lm_eval_ceval_task(tmp_path, llama, hflm, writers, shots):
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.evaluator import evaluate

    root = tmp_path / "ceval"
    config = _lm_eval_config(root)
    _write_subject(root, config["description"], writers)
    task = ConfigurableTask(config=config)
    # What simple_evaluate does for a Task object, without indexing every task config lm-eval ships (35 s).
    task.set_config(key="num_fewshot", value=shots)
    task.set_fewshot_seed(seed=0)
    out = evaluate(lm=hflm, task_dict={"tasks": {config["task"]: task}, "groups": {}, "group_map": {}},
                   log_samples=True, bootstrap_iters=0)
    samples = sorted(out["samples"][config["task"]], key=lambda s: s["doc_id"])

    ours = ceval.run_ceval(llama, root, split="val", shots=shots, prompt_style="lm-eval", batch_size=4)
    assert len(samples) == len(ours["predictions"]) == 6
    for sample, pred in zip(samples, ours["predictions"]):
        lm_eval_logliks = [float(r[0]) for r in sample["filtered_resps"]]
        assert pred["logliks"] == pytest.approx(lm_eval_logliks, abs=1e-4)
        lm_eval_letter = "ABCD"[max(range(4), key=lambda i: lm_eval_logliks[i])]
        assert pred["pred"] == lm_eval_letter
        assert "ABCD"[int(sample["target"])] == pred["gold"]
        # The very same prompt string and continuations.
        context, continuation = sample["arguments"][0]
        subject = ceval.load_ceval(root, "val", shots)[0]
        q = next(q for q in subject.questions if q.id == pred["id"])
        assert ceval.render_prompt(subject.chinese, subject.dev, q, "lm-eval") == context
        assert continuation == " A"
    assert ours["overall"] == pytest.approx(100 * out["results"][config["task"]]["acc,none"])


def test_default_ceval_prompts_scored_like_hflm(tmp_path, llama, hflm, writers):
    from lm_eval.api.instance import Instance

    root = writers.ceval(tmp_path / "fineval", n_val=4, n_dev=3)
    subjects = ceval.load_ceval(root, "val", 3)
    prompts = [ceval.render_prompt(s.chinese, s.dev, q) for s in subjects for q in s.questions]
    requests = [Instance(request_type="loglikelihood", doc={}, arguments=(p, letter), idx=k)
                for p in prompts for k, letter in enumerate("ABCD")]
    theirs = [ll for ll, _ in hflm.loglikelihood(requests, disable_tqdm=True)]
    ours = score_choices(llama, [(p, list("ABCD")) for p in prompts], batch_size=5)
    for i, s in enumerate(ours):
        assert s.logliks == pytest.approx(theirs[4 * i: 4 * i + 4], abs=1e-4)
        assert s.best == max(range(4), key=lambda k: theirs[4 * i + k])


@pytest.mark.parametrize("which", [0, 1], ids=["adds-bos", "no-bos"])
def test_default_bos_scored_like_hflm_with_add_bos_token_unset(tmp_path, llama, tokenizer_folders, writers, which):
    """A tokenizer that adds BOS by default (Gemma's, Llama's) and one that does not: yunshan with add_bos unset
    gets HFLM's log-likelihoods with add_bos_token unset, on the default C-Eval prompts."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoTokenizer

    from yunshan.eval.loading import wrap_model

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folders[which])
    lm = wrap_model(llama.model, tokenizer, "tiny")
    theirs_lm = HFLM(pretrained=llama.model, tokenizer=AutoTokenizer.from_pretrained(tokenizer_folders[which]),
                     batch_size=4, max_length=llama.max_length)
    root = writers.ceval(tmp_path / "fineval", n_val=3, n_dev=2)
    subjects = ceval.load_ceval(root, "val", 2)
    prompts = [ceval.render_prompt(s.chinese, s.dev, q) for s in subjects for q in s.questions]
    requests = [Instance(request_type="loglikelihood", doc={}, arguments=(p, letter), idx=k)
                for p in prompts for k, letter in enumerate("ABCD")]
    theirs = [ll for ll, _ in theirs_lm.loglikelihood(requests, disable_tqdm=True)]
    ours = score_choices(lm, [(p, list("ABCD")) for p in prompts], batch_size=5)
    for i, s in enumerate(ours):
        assert s.logliks == pytest.approx(theirs[4 * i: 4 * i + 4], abs=1e-4)
        assert s.best == max(range(4), key=lambda k: theirs[4 * i + k])
    # Forcing the other way moves the scores: the agreement above is not a coincidence of BOS-free prompts.
    forced = score_choices(lm, [(p, list("ABCD")) for p in prompts[:1]], batch_size=5, add_bos=which == 1)
    assert forced[0].logliks != pytest.approx(theirs[:4], abs=1e-4)
