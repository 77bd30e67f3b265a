"""`yunshan eval`: run the domain benchmarks on one or more models and write side-by-side tables.

    yunshan eval --model out/base --model out/yunshan --tasks fineval financeiq lawbench jecqa bpc compression diversity --limit 20 --out runs/eval

A task is a name (its data then comes from --data-dir/NAME, by default the sample sets shipped in
yunshan.samples) or NAME=PATH. Names: fineval / ceval (C-Eval format), financeiq / cmmlu (CMMLU format),
lawbench, jecqa, bpc (--heldout LABEL=FILE ...), chat_loss (--instructions NAME=FORMAT:PATH ...: held-out instruction
sets, the loss on their assistant turns as SFT trains it), compression (--text FILE ...), diversity (--diversity-text
FILE).
Writes OUT/results.json (every prediction and score, model and file hashes, settings), OUT/results.md (one table
per task: rows = models, AVG last), OUT/report.html (the same tables as one self-contained page to open in a
browser) and OUT/diversity.png; prints the tables. OUT is checked for writing before any scoring, and
OUT/results.partial.json holds every task finished so far (rewritten after each one, in results.json's format; LawBench
after each of its 20 tasks, a task whose scoring failed with its generations), so a failure late in a long evaluation
keeps what was scored and generated.
"""

from __future__ import annotations

import argparse
import inspect
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from yunshan.data.conversations import SftSourceArgs
from yunshan.arguments.field_rules import check_fields

from .tasks import TASKS

# --prompt-style: each benchmark's own prompt, or lm-evaluation-harness's task prompt (ceval.py, cmmlu.py).
PROMPT_STYLES = ("benchmark", "lm-eval")


@dataclass
class EvalArgs:
    """Settings of one `yunshan eval` run (saved into results.json), and the `eval` section of a `yunshan run`
    recipe (where the runner fills `model` and `out`)."""

    model: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "model folder or Hub id ORG/NAME (any HF causal LM, PanGu-π included); repeat for a side-by-side "
                "table; with bpc the first is 'before' and the second 'after' in the forgetting table"})
    revision: str | None = field(default=None, metadata={
        "help": "branch, tag or commit of the Hub ids among --model (local folders have none)"})
    tasks: list[str] = field(default_factory=lambda: ["bpc", "fineval", "financeiq"], metadata={"path": "labelled",
        "help": "tasks to run, NAME or NAME=PATH; names: " + ", ".join(t for t in TASKS if not TASKS[t].labelled)
                + "; your own sets mc=PATH (multiple choice), qa=PATH (short answer), gen=PATH (free generation), "
                "each also as KIND:LABEL=PATH (a .jsonl/.json/.csv/.parquet file, or a folder with test.* and dev.*: "
                "eval/generic.py); lm-evaluation-harness tasks lmeval:NAME_OR_YAML (with --include-path)"})
    data_dir: str | None = field(default=None, metadata={"path": True,
        "help": "folder holding one subfolder per task name (default: the sample sets of yunshan.samples)"})
    limit: int | None = field(default=None, metadata={"range": ">= 1",
        "help": "first N questions per subject (MC), records per task (LawBench, JEC-QA), documents (texts) or "
                "samples per instruction set (chat_loss, where the set gives no max_samples)"})
    shots: int = field(default=5, metadata={"range": ">= 0",
        "help": "k-shot examples from the dev split for MC tasks (0 allowed)"})
    split: str | None = field(default=None, metadata={
        "help": "split scored for MC tasks (default: val for the C-Eval format, test for the CMMLU format)"})
    mode: str = field(default="loglik", metadata={
        "help": "loglik: answer-only, next-token likelihood of A-D (as the papers score); cloze: likelihood of "
                "each option's text after the question against a neutral context (knowledge, for small models); "
                "generate: greedy answer + documented extraction"})
    task_modes: list[str] = field(default_factory=list, metadata={
        "help": "NAME=MODE: score task NAME in MODE instead of --mode, e.g. financeiq=generate (FinanceIQ as its "
                "owners' code scores it, generated answers, beside answer-only FinEval and CMMLU)"})
    prompt_style: str = field(default="benchmark", metadata={
        "help": "multiple-choice prompt: benchmark (each benchmark's own: C-Eval's for C-Eval and FinEval, CMMLU's "
                "for CMMLU and FinanceIQ; docs/evaluation-formats.md) or lm-eval (lm-evaluation-harness's ceval-valid "
                "and cmmlu tasks' prompts)"})
    chat: str = field(default="auto", metadata={
        "help": "use the tokenizer's chat template when generating: auto (if it has one; FinanceIQ's own scoring "
                "follows its owners' script: the raw prompt unless the model has its own .chat()), on, off; on also "
                "puts your own mc sets' likelihood prompts in a chat turn (lm-eval's --apply_chat_template)"})
    description: str = field(default="", metadata={
        "help": "your own sets (mc, qa, gen): the text before the examples and the question; {subject} becomes the "
                "row's subject (C-Eval's: '以下是中国关于{subject}考试的单项选择题，请选出其中的正确答案。\\n\\n')"})
    question_prefix: str = field(default="", metadata={
        "help": "your own sets: the text before each question (CMMLU's: '题目：')"})
    answer_prefix: str = field(default="答案：", metadata={
        "help": "your own sets: the text after the question (and options) where the answer follows; a trailing "
                "space goes before the answer, as lm-eval's target delimiter ('Answer: ')"})
    include_path: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "folders (or files) of lm-evaluation-harness task YAMLs for lmeval:NAME tasks (lm-eval's "
                "--include_path)"})
    batch_size: int = field(default=16, metadata={"range": ">= 1", "help": "sequences per forward pass"})
    max_new_tokens: int | None = field(default=None, metadata={"range": ">= 1",
        "help": "generation budget (default: 32 for MC and JEC-QA, 256 for LawBench)"})
    add_bos: bool | None = field(default=None, metadata={
        "help": "BOS before every prompt. Unset (the default): exactly when the model's tokenizer adds BOS by itself "
                "(Gemma, Llama 2/3, Mistral yes; GPT-2, Qwen, SmolLM2 no), as lm-evaluation-harness does with "
                "add_bos_token unset; for multiple-choice, cloze and JEC-QA scoring and generation prompts, chat "
                "templates included, never a second BOS where the text starts with one. --add-bos / --no-add-bos "
                "force it. Bits per character always predict the first token from BOS (else EOS). results.json "
                "records what each model got (models.NAME.add_bos)"})
    text: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "text files for compression (.txt one continuous document, .jsonl/.json one per record; default: the "
                "sample held-out texts and JEC-QA)"})
    heldout: list[str] = field(default_factory=list, metadata={"path": "labelled",
        "help": "LABEL=FILE held-out text for bpc; label 'general' is the forgetting column (default: the "
                "sample held-out general, finance and legal texts)"})
    instructions: list[SftSourceArgs | str] = field(default_factory=list, metadata={
        "help": "held-out instruction sets for chat_loss, each an SFT source as a recipe's sft.data.sources entry "
                "(name, path, format, columns, system; max_samples caps the samples scored): NAME=FORMAT:PATH or a "
                "YAML mapping {name: ..., path: ..., format: ..., columns: {...}}"})
    max_length: int | None = field(default=None, metadata={"range": ">= 2",
        "help": "bpc window length in tokens, and the longest conversation chat_loss scores (longer ones lose their "
                "oldest turns, as SFT's truncate_prompt) (default: the model's max_position_embeddings)"})
    stride: int | None = field(default=None, metadata={"range": ">= 1",
        "help": "bpc window stride (default: max_length / 2)"})
    max_chars: int | None = field(default=None, metadata={"range": ">= 1",
        "help": "bpc: the first N characters of each held-out file (its documents in order, the last one cut); "
                "given, --limit no longer applies to bpc's texts, only to the other tasks"})
    diversity_text: str | None = field(default=None, metadata={"path": True,
        "help": "text file for diversity (default: the sample held-out general text)"})
    eps: float = field(default=0.8, metadata={"range": "(0, 1]",
        "help": "explained-variance threshold of d(eps) (Fig. 4 uses 0.8)"})
    dtype: str = field(default="float32", metadata={
        "help": "float32 (default: the reference numbers), auto (bf16 autocast where the hardware multiplies bf16 "
                "fast, AMX / AVX-512 BF16 / CUDA, float32 elsewhere), bfloat16 or float16 (weights in that dtype)"})
    recheck_float32: bool = field(default=False, metadata={
        "help": "under bf16 autocast (--dtype auto on fast-bf16 hardware), score again in float32 every "
                "multiple-choice question whose two best options are within bf16's guard band, so the letters are "
                "float32's (costly where the leads are small: benchmarks/README.md, eval_bf16.py)"})
    device: str = field(default="cpu", metadata={"help": "torch device"})
    hash_weights: bool = field(default=True, metadata={"help": "record the sha256 of every model file"})
    trust_remote_code: bool = field(default=False, metadata={
        "help": "allow a model folder's own Python code (auto_map in its config or tokenizer config) and lm-eval "
                "task YAMLs' (!function, in them or in a YAML they include) to run; without it such a folder or task "
                "is refused (PanGu-π and OTCE need no remote code)"})
    out: str = field(default="runs/eval", metadata={"path": True,
        "help": "output folder for results.json/.md and plots"})
    progress: bool = field(default=True, metadata={"help": "show progress bars"})

    def __post_init__(self):
        check_fields(self)
        from .chat_loss import check_sets, instruction_set

        self.instructions = [instruction_set(spec) for spec in self.instructions]
        check_sets(self.instructions)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_flags

    add_flags(parser, EvalArgs, required=("model",), metavars={
        "model": "DIR_OR_ID", "revision": "REV", "tasks": "TASK", "heldout": "LABEL=FILE", "text": "FILE",
        "instructions": "NAME=FORMAT:PATH"})


def _hash_files(path: Path) -> dict[str, str]:
    from yunshan.data.files import sha256_file

    if path.is_file():
        return {path.name: sha256_file(path)}
    return {str(p.relative_to(path)): sha256_file(p) for p in sorted(path.rglob("*")) if p.is_file()}


def _parse_tasks(args: EvalArgs) -> list[tuple[str, object, Path | None]]:
    """(task label, Task, data path or None for the text tasks)."""
    from .tasks import resolve_tasks

    return resolve_tasks(args.tasks, args.data_dir)


MODES = ("loglik", "cloze", "generate")


def task_modes(args: EvalArgs, tasks: list) -> dict[str, str]:
    """Task label -> mode, from --task-modes NAME=MODE (the tasks not named there run in --mode)."""
    labels = [label for label, _, _ in tasks]
    modes = {}
    for spec in args.task_modes:
        name, eq, mode = spec.partition("=")
        if not eq or name not in labels or mode not in MODES:
            raise ValueError(f"--task-modes {spec!r}: write NAME=MODE with NAME one of the tasks run "
                             f"({', '.join(labels)}) and MODE one of {', '.join(MODES)}")
        if name in modes:
            raise ValueError(f"--task-modes: {name!r} given twice")
        modes[name] = mode
    return modes


def run_eval(args: EvalArgs) -> dict:
    """Run every task on every model; returns the report (and writes it under args.out)."""
    from .tasks import module_of

    tasks = _parse_tasks(args)
    for _, _, path in tasks:
        if path is not None and not path.exists():
            raise FileNotFoundError(f"{path}: no such task data")
    if args.mode not in MODES:
        raise ValueError(f"--mode {args.mode!r} is not valid; use loglik, cloze or generate")
    task_modes(args, tasks)  # a bad NAME=MODE stops here, before any model is loaded
    if args.prompt_style not in PROMPT_STYLES:
        raise ValueError(f"--prompt-style {args.prompt_style!r} is not valid; use {' or '.join(PROMPT_STYLES)}")
    for _, task, path in tasks:
        check = getattr(module_of(task), "check_data", None)
        if check is not None and path is not None:
            check(path)  # a malformed file stops the run before any model is loaded or any token generated
    from yunshan.io.folders import check_output_folder

    # Before any scoring: a folder that cannot be written would otherwise fail only at the end.
    out = check_output_folder(args.out, "--out")
    from yunshan.io.folder_lock import folder_lock

    # A second evaluation writing the same --out stops here, before anything is scored or written.
    with folder_lock(out, "--out"):
        return _evaluate(args, tasks, out)


def _evaluate(args: EvalArgs, tasks: list, out: Path) -> dict:
    """Score every task on every model and write the report into `out` (run_eval holds its lock)."""
    from yunshan import __version__
    from yunshan.io.artifacts import EvalResults

    from .loading import load_model, load_tokenizer_only
    from .report import task_table, write_report
    from .tasks import headline_metrics, module_of

    partial = out / PARTIAL_FILE
    settings = {f.name: getattr(args, f.name) for f in fields(args)}
    settings["instructions"] = [asdict(s) for s in args.instructions]
    report: dict = {"yunshan_version": __version__, "settings": settings,
                    "models": {}, "tasks": {}}
    results: dict[str, dict[str, dict]] = {label: {} for label, _, _ in tasks}
    started = time.time()
    names = []
    modes = task_modes(args, tasks)
    for path in args.model:
        # A Hub id is recorded as the HF cache folder it resolved to (its commit is in the path).
        revision = args.revision if not Path(path).exists() else None
        name = Path(path).name or path
        name = name if name not in names else f"{name}#{len(names) + 1}"
        names.append(name)
        if all(task.format == "compression" for _, task, _ in tasks):
            # Compression needs only the tokenizer: a tokenizer-only folder works, and no weights are loaded.
            lm = load_tokenizer_only(path, hash_files=args.hash_weights, revision=revision,
                                     trust_remote_code=args.trust_remote_code)
            report["models"][name] = {"path": lm.path, "sha256": lm.sha256, "class": type(lm.tokenizer).__name__}
        else:
            lm = load_model(path, dtype=args.dtype, device=args.device, hash_weights=args.hash_weights,
                            revision=revision, trust_remote_code=args.trust_remote_code)
            lm.recheck_float32 = args.recheck_float32
            from .likelihood import resolve_add_bos, tokenizer_adds_bos

            report["models"][name] = {"path": lm.path, "sha256": lm.sha256, "class": type(lm.model).__name__,
                                      "parameters": sum(p.numel() for p in lm.model.parameters()),
                                      "precision": lm.precision,
                                      "add_bos": resolve_add_bos(lm.tokenizer, args.add_bos),
                                      "tokenizer_adds_bos": tokenizer_adds_bos(lm.tokenizer)}
        from .generation import use_chat

        chat = use_chat(lm.tokenizer, args.chat)
        for label, task, data in tasks:
            task_args = replace(args, mode=modes[label]) if label in modes else args
            run_task, extra = module_of(task, task_args.mode).run_task, {}
            if "keep" in inspect.signature(run_task).parameters:
                # A long task (LawBench: 20 generation runs) hands over each finished part at once.
                def keep(res, label=label, name=name, format=task.format):
                    report["tasks"].setdefault(label, {"format": format}).setdefault("results", {})[name] = res
                    _write_partial(report, started, partial)
                extra["keep"] = keep
            task_started = time.time()
            with lm.compute():
                res, texts = run_task(lm, data, task_args, chat, task, **extra)
            results[label][name] = res
            entry = report["tasks"].setdefault(label, {})
            if data is not None:
                entry["path"] = str(data)
                entry["files"] = _hash_files(data)
            else:
                entry["files"] = {str(f): _hash_files(f) for f in texts}
            entry["format"] = task.format
            entry.setdefault("results", {})[name] = res
            entry.setdefault("seconds", {})[name] = round(time.time() - task_started, 1)
            # The headline numbers, recorded with the results: a report or model card shows them without
            # knowing the benchmark.
            entry.setdefault("metrics", {})[name] = [asdict(m) for m in headline_metrics(task, res, data)]
            # Every finished task is on disk at once: a failure later (another task, the report) keeps it.
            _write_partial(report, started, partial)
        del lm
    sections = []
    for label, task, _ in tasks:
        sections.append(f"## {label}\n\n{task_table(label, results[label])}")
        if task.format == "bpc" and len(names) >= 2:
            from .bpc import forgetting_table

            sections.append(f"### forgetting vs gain ({names[0]} -> {names[1]})\n\n"
                            + forgetting_table(results[label][names[0]], results[label][names[1]], names[0], names[1]))
    markdown = "\n\n".join(sections)
    for label, task, _ in tasks:
        if task.format == "diversity":
            from .diversity import plot_diversity

            out.mkdir(parents=True, exist_ok=True)
            plot_diversity(results[label], out / "diversity.png")
            report["tasks"][label]["plot"] = str(out / "diversity.png")
            markdown += "\n\n![feature diversity d(eps) per layer](diversity.png)"
    report["seconds"] = round(time.time() - started, 1)
    json_path, md_path = write_report(out, EvalResults.from_json(report), markdown)
    partial.unlink(missing_ok=True)  # results.json now holds all of it
    report["markdown"] = markdown
    report["paths"] = {"json": str(json_path), "markdown": str(md_path), "html": str(md_path.parent / "report.html")}
    return report


# The tasks finished so far, rewritten after each one (results.json's format); removed once results.json is written.
PARTIAL_FILE = "results.partial.json"


def _write_partial(report: dict, started: float, path: Path) -> None:
    from yunshan.io.artifacts import EvalResults, _write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    _write_json(EvalResults.from_json({**report, "seconds": round(time.time() - started, 1)}).to_json(), path,
                EvalResults.INDENT)


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import from_flags

    report = run_eval(from_flags(EvalArgs, args))
    print(report["markdown"])
    print(f"\nwrote {report['paths']['json']}, {report['paths']['markdown']} and {report['paths']['html']} "
          f"({report['seconds']} s)")
    return 0
