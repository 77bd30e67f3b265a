"""The benchmarks `yunshan eval` runs: one registry line each, read by the command, the reports and the model card.

    yunshan eval --model out/base --tasks fineval financeiq bpc       # names are the keys of TASKS
    yunshan eval --model out/base --tasks mc:loans=ours/loans.jsonl lmeval:my_task --include-path tasks/

A task names the module that runs and scores it (`format`: ceval.py runs both C-Eval and FinEval, cmmlu.py both
CMMLU and FinanceIQ, generic.py your own mc / qa / gen sets, lm_eval_tasks.py lm-evaluation-harness tasks; `generate`:
financeiq.py runs FinanceIQ's `--mode generate` as FinanceIQ's own code scores it). Each such
module has `run_task(lm, data, args, chat, task) -> (result, text files read)` (`task` as resolved: its name is the
label given on the command line), and may have `headline(task, result, data) -> [Metric]` for the numbers a model
card shows; a result with an `overall` score gets the default headline (`overall_metric`). `yunshan eval` writes every model's headline metrics into
results.json, so the card shows a benchmark it has never heard of. Adding a benchmark in an existing format is one
line below; a new format is its module plus one line.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from yunshan.io.artifacts import Metric


@dataclass(frozen=True)
class Task:
    name: str  # the name on the command line
    format: str  # the module of yunshan.eval that runs and scores it, and the layout of its results
    title: str  # display name in tables and the model card
    dataset_type: str  # model-index dataset type: a Hub dataset id where the benchmark's own release is on the Hub
    metric: str = "accuracy"  # what `overall` measures (accuracy in percent, or a benchmark's own score)
    needs_data: bool = True  # reads a benchmark folder (NAME=PATH or --data-dir/NAME); else text files
    labelled: bool = False  # may be given several times as NAME:LABEL (your own sets; lmeval:TASK names the task)
    default_data: bool = True  # without =PATH, reads --data-dir/NAME (the sample sets); else a path is required
    # The module that runs `--mode generate` instead of `format`'s: the benchmark scored as its owners' code scores
    # generated answers (financeiq.py: FinanceIQ's generation settings, extraction and random fallback).
    generate: str | None = None


TASKS = {t.name: t for t in (
    Task("fineval", "ceval", "FinEval", "fineval"),
    Task("ceval", "ceval", "C-Eval", "ceval/ceval-exam"),
    Task("financeiq", "cmmlu", "FinanceIQ", "financeiq", generate="financeiq"),
    Task("cmmlu", "cmmlu", "CMMLU", "haonan-li/cmmlu"),
    Task("lawbench", "lawbench", "LawBench", "lawbench", metric="score"),
    Task("jecqa", "jecqa", "JEC-QA", "jec-qa"),
    Task("bpc", "bpc", "bits per character", "yunshan-heldout", metric="bits_per_character", needs_data=False),
    Task("chat_loss", "chat_loss", "held-out instruction loss", "yunshan-instructions", metric="nats_per_token",
         needs_data=False),
    Task("compression", "compression", "tokens per character", "yunshan-text", metric="tokens_per_char",
         needs_data=False),
    Task("diversity", "diversity", "feature diversity d(eps)", "yunshan-text", metric="effective_dimension",
         needs_data=False),
    # Your own sets (eval/generic.py): KIND=PATH or KIND:LABEL=PATH.
    Task("mc", "generic", "multiple choice (your own set)", "own", labelled=True, default_data=False),
    Task("qa", "generic", "short answer (your own set)", "own", metric="exact_match", labelled=True,
         default_data=False),
    Task("gen", "generic", "free generation (your own set)", "own", metric="rouge_l", labelled=True,
         default_data=False),
    # lm-evaluation-harness tasks run by lm-eval itself (eval/lm_eval_tasks.py): lmeval:NAME_OR_YAML.
    Task("lmeval", "lm_eval_tasks", "lm-evaluation-harness task", "lm-eval", metric="score", needs_data=False,
         labelled=True),
)}


def module_of(task: Task, mode: str | None = None):
    """The module that runs the task (in `mode`: `--mode generate` may have the benchmark's own, Task.generate)."""
    if mode == "generate" and task.generate:
        return importlib.import_module(f"yunshan.eval.{task.generate}")
    return importlib.import_module(f"yunshan.eval.{task.format}")


def resolve_tasks(specs: list[str], data_dir: str | None) -> list[tuple[str, Task, Path | None]]:
    """(name, Task, data path) of each NAME or NAME=PATH (`yunshan eval --tasks`); a task without a path reads
    `data_dir`/NAME, by default the sample sets of yunshan.samples; text tasks (bpc, ...) have no data path. Your own
    sets are KIND=PATH or KIND:LABEL=PATH and lm-eval tasks lmeval:NAME: their Task's name is that label."""
    from dataclasses import replace

    from yunshan.samples import sample_data_dir

    samples = Path(sample_data_dir())
    root = Path(data_dir) if data_dir else (samples / "eval" if samples.is_dir() else None)
    out, seen = [], set()
    for spec in specs:
        if spec.startswith("lmeval:"):  # lmeval:NAME_OR_PATH: a task name or YAML file, never NAME=PATH
            name, path = spec, ""
        else:
            name, _, path = spec.partition("=")
        kind, colon, label = name.partition(":")
        if kind not in TASKS or (colon and not TASKS[kind].labelled):
            raise ValueError(f"--tasks: unknown task {name!r}; valid names: {', '.join(TASKS)} (your own sets: "
                             "mc=PATH, qa=PATH, gen=PATH or KIND:LABEL=PATH; lm-eval tasks: lmeval:NAME_OR_YAML)")
        if colon and not label.strip():
            raise ValueError(f"--tasks {spec!r}: empty label after {kind}:; write {kind}:LABEL=PATH")
        if name in seen:
            raise ValueError(f"--tasks: {name!r} given twice; label your own sets apart: {kind}:LABEL=PATH")
        seen.add(name)
        task = replace(TASKS[kind], name=name) if colon else TASKS[kind]
        if kind == "lmeval" and not colon:
            raise ValueError("--tasks lmeval: name the lm-eval task: lmeval:NAME (found under --include-path) or "
                             "lmeval:PATH/TO/TASK.yaml")
        if not task.default_data and not path:
            raise ValueError(f"--tasks {name}: no data path; give {name}=PATH (a .jsonl/.json/.csv/.parquet file, "
                             "or a folder with test.* and dev.*)")
        if not task.needs_data:
            out.append((name, task, None))
        elif path:
            out.append((name, task, Path(path)))
        elif root is not None:
            out.append((name, task, root / name))
        else:
            raise ValueError(f"--tasks {name}: no data path; give {name}=PATH or --data-dir "
                             "(the sample sets need the yunshan.samples package)")
    return out


def is_sample(path: str | Path | None) -> bool:
    """Whether a data path lies in the sample data shipped with yunshan (yunshan.samples)."""
    if not path:
        return False
    try:
        from yunshan.samples import sample_data_dir

        return Path(path).resolve().is_relative_to(Path(sample_data_dir()).resolve())
    except (ImportError, OSError, ValueError):
        return False


# How each `--mode` turns a question into an answer, as a model card says it (eval/multiple_choice.py).
MODE_LABELS = {
    "loglik": "answer likelihood",  # the letter (or letter set) after the listed options: the papers' protocol
    "cloze": "cloze (option text likelihood vs a neutral context)",  # the options' texts, mutual information
    "generate": "generated answer",  # greedy generation, then the documented extraction
}


def mode_label(mode: str) -> str:
    """The card's words for an evaluation mode; a mode without words is an error, never a wrong label."""
    if mode not in MODE_LABELS:
        raise ValueError(f"results.json: mode {mode!r} has no description; known modes: {', '.join(MODE_LABELS)}")
    return MODE_LABELS[mode]


def headline_metrics(task: Task, result: dict, data: str | Path | None) -> list[Metric]:
    """The numbers a model card shows for one task's result: the module's own `headline`, else `overall`."""
    module = module_of(task)
    if hasattr(module, "headline"):
        return module.headline(task, result, data)
    if result.get("overall") is not None:
        return [overall_metric(task, result, data)]
    return []


def overall_metric(task: Task, result: dict, data: str | Path | None) -> Metric:
    """The overall score of a benchmark, with how it was measured and its model-index entry."""
    sample = is_sample(data)
    bits = []
    if result.get("split"):
        bits.append(f"{result['split']} split")
    if result.get("shots") is not None:
        bits.append(f"{result['shots']}-shot")
    if result.get("mode"):
        bits.append(mode_label(result["mode"]))
    if result.get("random_fallbacks") is not None:  # FinanceIQ's own extraction (financeiq.py)
        bits.append(f"{task.title}'s own extraction, {result['random_fallbacks']} of {result['n']} answers a "
                    f"random letter ({result['overall_fallbacks_wrong']:.2f} with those counted wrong)")
    if result.get("limit"):
        bits.append(f"first {result['limit']} per {'subject' if task.format in ('ceval', 'cmmlu') else 'task'}")
    if result.get("n"):
        bits.append(f"{result['n']:,} questions")
    name = f"{task.title} format, yunshan sample set" if sample else task.title
    metric_name = f"{task.metric} ({result['shots']}-shot)" if result.get("shots") is not None else task.metric
    unit = " (%)" if task.metric == "accuracy" else ""
    return Metric(f"{task.name}/{task.metric}", name, f"{task.metric}{unit}", float(result["overall"]),
                  detail=", ".join(bits), sample=sample, eval_result=dict(
                      task_type="text-generation", task_name="Text Generation",
                      dataset_type=f"yunshan-samples/{task.name}" if sample else task.dataset_type,
                      dataset_name=name, dataset_split=result.get("split"), metric_type=task.metric,
                      metric_name=metric_name, metric_value=round(float(result["overall"]), 2)))
