"""yunshan's answer-only scoring against lm-evaluation-harness on the real CMMLU and FinEval files and real
checkpoints: the same letter on every question, option log-likelihoods within 1e-4, wall time side by side.

    .venv/bin/python benchmarks/eval_agreement.py --model models/smollm2-135m --model models/gemma3-270m
    .venv/bin/python benchmarks/eval_agreement.py --model models/smollm2-135m --limit 5 --shots 0   # a look

Needs lm-eval (`pip install "lm-eval[hf]>=0.4.13,<0.5"`, in the dev extra) and the real releases
(`../shared/realdata/{cmmlu,fineval}` by default). For each model, benchmark (4 subjects each by default, the first
--limit questions of each), shot count and prompt style, both tools score the same files with the same model object
in this process, one after the other (their order alternates between configurations, since the machine is shared):

- yunshan: `run_cmmlu` / `run_ceval` exactly as `yunshan eval` calls them, with its defaults (no BOS flag: BOS as
  the tokenizer adds it), on a folder holding the chosen subjects' release files (symbolic links, unchanged).
- lm-eval: its `evaluate()` with its `HFLM` (add_bos_token unset) on a local task definition. Style "benchmark" is
  yunshan's default prompt, each benchmark's own: for CMMLU, lm-eval's own cmmlu task (its description, which
  names the subject in Chinese as CMMLU does) with doc_to_text set to CMMLU's `题目：…答案是：` and no target
  delimiter; for FinEval, lm-eval's ceval-valid task with C-Eval's own description (`…考试的单项选择题…`) and
  C-Eval's own `…答案：` with no delimiter. Style "lm-eval" is lm-eval's own cmmlu / ceval-valid prompt unchanged,
  which yunshan renders with `--prompt-style lm-eval`. Only the data source differs from lm-eval's tasks: the
  release's CSV files, read by `datasets`' csv builder as text (no number or NA parsing, so "$160 " stays "$160 ")
  and answers trimmed (FinEval writes one as "D ").

Compared question by question: the prompt string (lm-eval's request context) and continuations, the gold letter,
the four log-likelihoods (|d| <= 1e-4) and the predicted letter (first maximum, as both take it). Wall time and CPU
time (the process's, all threads: what other sessions' load inflates least) are the scoring call of each tool (lm-eval's dataset loading is done before its clock starts; yunshan's reading of the CSV
files is inside its own). Prints a table, writes benchmarks/results/eval_agreement.json, exits 1 on any
disagreement.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
REALDATA = ROOT.parent / "shared" / "realdata"
RESULTS = ROOT / "benchmarks/results"
TOLERANCE = 1e-4
CMMLU_SUBJECTS = ("economics", "elementary_commonsense", "high_school_mathematics", "professional_law")
FINEVAL_SUBJECTS = ("accounting", "corporate_finance", "investments", "tax_law")
LETTERS = "ABCD"


def subset_folder(bench: str, release: Path, subjects: tuple[str, ...], into: Path) -> Path:
    """A folder with only `subjects`' files of the release, linked unchanged (FinEval: its mapping cut down)."""
    into.mkdir(parents=True, exist_ok=True)
    splits = ("dev", "test") if bench == "cmmlu" else ("dev", "val")
    for split in splits:
        (into / split).mkdir(exist_ok=True)
        for s in subjects:
            name = f"{s}.csv" if bench == "cmmlu" else f"{s}_{split}.csv"
            (into / split / name).symlink_to(release / split / name)
    if bench == "fineval":
        mapping = json.loads((release / "subject_mapping.json").read_text(encoding="utf-8"))
        (into / "subject_mapping.json").write_text(json.dumps({s: mapping[s] for s in subjects}, ensure_ascii=False),
                                                   encoding="utf-8")
    return into


def _csv_features(path: Path):
    """Every column of a release CSV as text, named as `datasets`' csv builder (pandas) names them."""
    from datasets import Features, Value

    with open(path, encoding="utf-8-sig", newline="") as fh:
        header = next(csv.reader(fh))
    return Features({(h or f"Unnamed: {i}"): Value("string") for i, h in enumerate(header)})


def lm_eval_config(bench: str, release: Path, subject: str, style: str) -> dict:
    """lm-eval's own task config for one subject, pointed at the release's CSV files."""
    import lm_eval
    import yaml

    tasks = Path(lm_eval.__file__).parent / "tasks"
    if bench == "cmmlu":
        config = yaml.safe_load((tasks / "cmmlu" / "_default_template_yaml").read_text(encoding="utf-8"))
        own = yaml.safe_load((tasks / "cmmlu" / f"cmmlu_{subject}.yaml").read_text(encoding="utf-8"))
        config.update({k: v for k, v in own.items() if k != "include"})
        files = {"test": release / "test" / f"{subject}.csv", "dev": release / "dev" / f"{subject}.csv"}
        answer = "Answer"
        if style == "benchmark":  # CMMLU's own src/mp_utils.py format_example
            config["doc_to_text"] = "题目：{{Question}}\nA. {{A}}\nB. {{B}}\nC. {{C}}\nD. {{D}}\n答案是："
            config["target_delimiter"] = ""
    else:
        config = yaml.safe_load((tasks / "ceval" / "_default_ceval_yaml").read_text(encoding="utf-8"))
        chinese = json.loads((release / "subject_mapping.json").read_text(encoding="utf-8"))[subject][1]
        config.update({"task": f"fineval-valid_{subject}", "dataset_name": None,
                       "description": f"以下是中国关于{chinese}的单项选择题，请选出其中的正确答案。\n\n"})
        files = {"val": release / "val" / f"{subject}_val.csv", "dev": release / "dev" / f"{subject}_dev.csv"}
        answer = "answer"
        if style == "benchmark":  # C-Eval's own code/evaluator_series/evaluators/llama.py format_example
            config["description"] = f"以下是中国关于{chinese}考试的单项选择题，请选出其中的正确答案。\n\n"
            config["doc_to_text"] = "{{question}}\nA. {{A}}\nB. {{B}}\nC. {{C}}\nD. {{D}}\n答案："
            config["target_delimiter"] = ""
    config["task"] = f"{config['task']}-{style}"
    config["doc_to_target"] = "{{['A', 'B', 'C', 'D'].index(" + answer + ".strip())}}"
    first = next(iter(files.values()))
    config.update({"dataset_path": "csv", "dataset_name": None, "dataset_kwargs": {
        "data_files": {k: str(v) for k, v in files.items()}, "features": _csv_features(first),
        "keep_default_na": False, "encoding": "utf-8-sig"}})
    return config


def run_lm_eval(hflm, configs: list[dict], shots: int, limit: int | None) -> tuple[dict, float]:
    """lm-eval's evaluate() on the tasks (built before the clock starts); samples per task and seconds."""
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.evaluator import evaluate

    tasks = {}
    for config in configs:
        task = ConfigurableTask(config=config)
        task.set_config(key="num_fewshot", value=shots)
        task.set_fewshot_seed(seed=0)
        tasks[config["task"]] = task
    started, cpu = time.perf_counter(), time.process_time()
    out = evaluate(lm=hflm, task_dict={"tasks": tasks, "groups": {}, "group_map": {}}, limit=limit,
                   log_samples=True, bootstrap_iters=0, verbosity="ERROR")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {name: sorted(out["samples"][name], key=lambda s: s["doc_id"]) for name in tasks}, (seconds, cpu)


def run_yunshan(lm, bench: str, folder: Path, shots: int, limit: int | None, style: str, batch_size: int):
    from yunshan.eval import ceval, cmmlu

    started, cpu = time.perf_counter(), time.process_time()
    with lm.compute():
        if bench == "cmmlu":
            result = cmmlu.run_cmmlu(lm, folder, "test", shots, limit, prompt_style="cmmlu" if style == "benchmark"
                                     else "lm-eval", batch_size=batch_size)
        else:
            result = ceval.run_ceval(lm, folder, "val", shots, limit, prompt_style="ceval" if style == "benchmark"
                                     else "lm-eval", batch_size=batch_size)
    return result, (time.perf_counter() - started, time.process_time() - cpu)


def prompts_of(bench: str, folder: Path, shots: int, limit: int | None, style: str) -> dict[str, list[str]]:
    """yunshan's prompt strings per subject, in file order (the first `limit`)."""
    from yunshan.eval import ceval, cmmlu

    out = {}
    if bench == "cmmlu":
        for s in cmmlu.load_cmmlu(folder, "test", shots):
            out[s.key] = [cmmlu.render_prompt(s.name, s.dev, q, "cmmlu" if style == "benchmark" else "lm-eval")
                          for q in s.questions[:limit]]
    else:
        for s in ceval.load_ceval(folder, "val", shots):
            out[s.key] = [ceval.render_prompt(s.chinese, s.dev, q, "ceval" if style == "benchmark" else "lm-eval")
                          for q in s.questions[:limit]]
    return out


def compare(bench, subjects, ours: dict, theirs: dict, prompts: dict, style: str) -> dict:
    continuations = [f" {x}" for x in LETTERS] if style == "lm-eval" else list(LETTERS)
    by_subject: dict[str, list[dict]] = {}
    for p in ours["predictions"]:
        by_subject.setdefault(p["subject"], []).append(p)
    n = letters_equal = prompts_equal = gold_equal = 0
    worst, mismatches = 0.0, []
    for subject in subjects:
        name = next(k for k in theirs if subject in k)
        samples = theirs[name]
        preds = by_subject[subject]
        assert len(samples) == len(preds), (subject, len(samples), len(preds))
        for sample, pred, prompt in zip(samples, preds, prompts[subject]):
            n += 1
            logliks = [float(r[0]) for r in sample["filtered_resps"]]
            letter = LETTERS[max(range(4), key=lambda i: (logliks[i], -i))]
            context = sample["arguments"][0][0]
            same_prompt = context == prompt and [a[1] for a in sample["arguments"]] == continuations
            prompts_equal += same_prompt
            gold_equal += LETTERS[int(sample["target"])] == pred["gold"]
            letters_equal += letter == pred["pred"]
            d = max(abs(a - b) for a, b in zip(logliks, pred["logliks"]))
            worst = max(worst, d)
            if letter != pred["pred"] or d > TOLERANCE or not same_prompt:
                mismatches.append({"subject": subject, "id": pred["id"], "lm_eval": letter, "yunshan": pred["pred"],
                                   "max_abs_diff": d, "same_prompt": same_prompt})
    return {"questions": n, "letters_equal": letters_equal, "prompts_equal": prompts_equal, "gold_equal": gold_equal,
            "max_abs_loglik_diff": worst, "mismatches": mismatches[:20]}


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", required=True, help="HF model folder (repeat)")
    parser.add_argument("--cmmlu", default=str(REALDATA / "cmmlu"))
    parser.add_argument("--fineval", default=str(REALDATA / "fineval"))
    parser.add_argument("--cmmlu-subjects", nargs="+", default=list(CMMLU_SUBJECTS))
    parser.add_argument("--fineval-subjects", nargs="+", default=list(FINEVAL_SUBJECTS))
    parser.add_argument("--benchmarks", nargs="+", default=["cmmlu", "fineval"], choices=["cmmlu", "fineval"])
    parser.add_argument("--shots", nargs="+", type=int, default=[0, 5])
    parser.add_argument("--styles", nargs="+", default=["benchmark", "lm-eval"], choices=["benchmark", "lm-eval"])
    parser.add_argument("--limit", type=int, default=25, help="first N questions of each subject (0 = all)")
    parser.add_argument("--batch-size", type=int, default=16, help="yunshan's batch (its default)")
    parser.add_argument("--lm-eval-batch-size", type=int, default=4,
                        help="lm-eval's batch (it keeps logits over the whole vocabulary for every position)")
    parser.add_argument("--out", default=str(RESULTS / "eval_agreement.json"))
    args = parser.parse_args()
    limit = args.limit or None

    import torch
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoTokenizer

    from yunshan.eval.likelihood import tokenizer_adds_bos
    from yunshan.eval.loading import load_model

    report = {"settings": vars(args), "machine": {"python": platform.python_version(), "torch": torch.__version__,
                                                  "threads": torch.get_num_threads(), "cpus": os.cpu_count()},
              "runs": []}
    import lm_eval

    report["machine"]["lm_eval"] = lm_eval.__version__ if hasattr(lm_eval, "__version__") else "?"
    failed = False
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folders = {"cmmlu": subset_folder("cmmlu", Path(args.cmmlu), tuple(args.cmmlu_subjects), Path(tmp) / "cmmlu"),
                   "fineval": subset_folder("fineval", Path(args.fineval), tuple(args.fineval_subjects),
                                            Path(tmp) / "fineval")}
        turn = 0
        for model_path in args.model:
            lm = load_model(model_path, hash_weights=False)
            hflm = HFLM(pretrained=lm.model, tokenizer=AutoTokenizer.from_pretrained(lm.path),
                        batch_size=args.lm_eval_batch_size)
            name = Path(model_path).name
            adds_bos = tokenizer_adds_bos(lm.tokenizer)
            for bench in args.benchmarks:
                subjects = args.cmmlu_subjects if bench == "cmmlu" else args.fineval_subjects
                release = Path(args.cmmlu if bench == "cmmlu" else args.fineval)
                for shots in args.shots:
                    for style in args.styles:
                        configs = [lm_eval_config(bench, release, s, style) for s in subjects]
                        load_before = load_average()
                        turn += 1
                        if turn % 2:
                            ours, t_ours = run_yunshan(lm, bench, folders[bench], shots, limit, style, args.batch_size)
                            theirs, t_theirs = run_lm_eval(hflm, configs, shots, limit)
                        else:
                            theirs, t_theirs = run_lm_eval(hflm, configs, shots, limit)
                            ours, t_ours = run_yunshan(lm, bench, folders[bench], shots, limit, style, args.batch_size)
                        cmp = compare(bench, subjects, ours, theirs,
                                      prompts_of(bench, folders[bench], shots, limit, style), style)
                        ok = (cmp["letters_equal"] == cmp["questions"] == cmp["prompts_equal"] == cmp["gold_equal"]
                              and cmp["max_abs_loglik_diff"] <= TOLERANCE)
                        failed |= not ok
                        run = {"model": name, "tokenizer_adds_bos": adds_bos, "benchmark": bench, "shots": shots,
                               "style": style, "subjects": subjects, "limit": limit, **cmp,
                               "yunshan_seconds": round(t_ours[0], 2), "lm_eval_seconds": round(t_theirs[0], 2),
                               "ratio": round(t_ours[0] / t_theirs[0], 3),
                               "yunshan_cpu_seconds": round(t_ours[1], 2), "lm_eval_cpu_seconds": round(t_theirs[1], 2),
                               "cpu_ratio": round(t_ours[1] / t_theirs[1], 3),
                               "load_average": [load_before, load_average()],
                               "accuracy_yunshan": ours["overall"], "agrees": ok}
                        report["runs"].append(run)
                        rows.append(run)
                        print(f"{name} {bench} {shots}-shot {style}: letters {cmp['letters_equal']}/{cmp['questions']}"
                              f", prompts {cmp['prompts_equal']}/{cmp['questions']}, max |d loglik| "
                              f"{cmp['max_abs_loglik_diff']:.2e}, yunshan {t_ours[0]:.1f} s ({t_ours[1]:.1f} CPU s), "
                              f"lm-eval {t_theirs[0]:.1f} s ({t_theirs[1]:.1f} CPU s): "
                              f"{t_ours[0] / t_theirs[0]:.2f}x wall, {t_ours[1] / t_theirs[1]:.2f}x CPU, "
                              f"load {load_before}", flush=True)
            del lm, hflm
    print("\n| model | tokenizer adds BOS | benchmark | shots | prompt | questions | same letter | max abs d loglik "
          "| yunshan s | lm-eval s | ratio | yunshan CPU s | lm-eval CPU s | CPU ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {'yes' if r['tokenizer_adds_bos'] else 'no'} | {r['benchmark']} | {r['shots']} | "
              f"{r['style']} | {r['questions']} | {r['letters_equal']}/{r['questions']} | "
              f"{r['max_abs_loglik_diff']:.1e} | {r['yunshan_seconds']:.1f} | {r['lm_eval_seconds']:.1f} | "
              f"{r['ratio']:.2f} | {r['yunshan_cpu_seconds']:.1f} | {r['lm_eval_cpu_seconds']:.1f} | "
              f"{r['cpu_ratio']:.2f} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
