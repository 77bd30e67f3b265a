"""Decontamination: how much of every evaluation item the training data holds, every overlap written with file:line
on both sides; the engine of `yunshan data decontaminate` and of `yunshan run`'s decontamination stage.

    yunshan data decontaminate --config recipes/demo_tiny.yaml --out runs/decontamination
    yunshan data decontaminate corpus.jsonl.zst --tasks lawbench=data/LawBench/data/zero_shot --out runs/decont

    from yunshan.eval.decontamination import DecontaminateArgs, run_decontamination
    report, first_hits = run_decontamination(DecontaminateArgs(inputs=["corpus.jsonl"], tasks=["fineval"], out="d"))

It lives beside the evaluation-set readers it compares against (items.py reads every benchmark layout as
yunshan eval does; tasks.py and texts.py resolve the task names and held-out texts), as lm-evaluation-harness keeps
its `decontamination/` and datatrove its `decont/`. The windows, the index, the streaming pass and the shares are
the data layer's (yunshan/data/ngrams.py, yunshan/data/decontamination.py, whose docstring has the method); the
training sources are read exactly as yunshan cpt, sft and pref read them (yunshan/data/sources.py, conversations.py,
preference.py).

It writes into `out`: decontamination.json (yunshan.io.artifacts.DecontaminationReport: every evaluation set and
subtask by category, the boilerplate left out, per training source the records overlapping and listed),
items.jsonl (every evaluation item the training data holds any of: its share, category, the record holding most of
it), hits.jsonl (every training record and evaluation item sharing a window that is not boilerplate, file:line of
both), contaminated.jsonl (the records holding at least `record_share` of an item: what `data.exclude` of cpt,
sft and pref leaves out) and, with --drop, clean/ (the inputs without them). `out` may not hold or lie inside
anything the run reads, and a stop (an error, Ctrl-C, SIGTERM) leaves no partial file. `render_decontamination` is the summary
the command and the pipeline stage print.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from yunshan.data.conversations import SftSourceArgs
from yunshan.arguments.field_rules import check_fields


TRAINING_STAGES = ("cpt", "sft", "preference")  # the pipeline stages whose sources a decontamination checks


@dataclass
class DecontaminateArgs:
    """Arguments of `yunshan data decontaminate`, and the `decontamination` section of a `yunshan run` recipe (there
    the training data is the cpt, sft and preference sources, and the evaluation sets default to the eval
    section's)."""

    inputs: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "training files, folders or globs, read as --format says (in yunshan run: the cpt, sft and "
                "preference sources)"})
    format: str = field(default="text", metadata={
        "help": "how the inputs are read: text (a corpus, as yunshan cpt reads it: the --text-field of each record, "
                "a .txt paragraph) or an SFT format (alpaca, messages, sharegpt, ceval, jecqa: every turn)"})
    text_field: str = field(default="text", metadata={"help": "format text: the record field holding the text"})
    tasks: list[str] = field(default_factory=list, metadata={"path": "labelled",
        "help": "evaluation sets, NAME or NAME=PATH as yunshan eval --tasks (fineval, ceval, financeiq, cmmlu, "
                "lawbench, jecqa; your own mc=PATH, qa=PATH, gen=PATH or KIND:LABEL=PATH; lm-eval tasks "
                "lmeval:NAME_OR_YAML; bpc: the --heldout texts); default: every benchmark folder of --data-dir, in "
                "yunshan run the eval section's tasks"})
    include_path: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "folders of lm-evaluation-harness task YAMLs for lmeval:NAME tasks (in yunshan run default the eval "
                "section's)"})
    trust_remote_code: bool = field(default=False, metadata={
        "help": "allow lm-eval task YAMLs' own Python code (!function, in them or in a YAML they include) to run; "
                "without it such a task is refused (in yunshan run also allowed by eval.trust_remote_code or "
                "model.trust_remote_code)"})
    data_dir: str | None = field(default=None, metadata={"path": True,
        "help": "folder with one subfolder per task name (default: the sample sets of yunshan.samples)"})
    heldout: list[str] = field(default_factory=list, metadata={"path": "labelled",
        "help": "LABEL=FILE held-out texts checked too (bits per character; in yunshan run default the eval "
                "section's and the cpt monitor's)"})
    instructions: list[SftSourceArgs | str] = field(default_factory=list, metadata={
        "help": "held-out instruction sets checked too, each an SFT source (NAME=FORMAT:PATH or a YAML mapping, as "
                "yunshan eval --instructions; every turn of every sample is compared); in yunshan run default the eval "
                "section's"})
    n: int = field(default=13, metadata={"range": ">= 1",
        "help": "window length in words (13, as GPT-3 and lm-evaluation-harness); a word, number or other run of "
                "letters is one word"})
    cjk_n: int = field(default=25, metadata={"range": ">= 1",
        "help": "window length in CJK characters: the characters that count as n words (25: jieba cuts real Chinese "
                "text into words of 1.85-2.09 characters, benchmarks/cjk_ngram_length.py)"})
    clean_below: float = field(default=0.2, metadata={"range": "(0, 1]",
        "help": "an evaluation item is clean when less than this share of it is found in training (Llama 2: 0.2)"})
    dirty_from: float = field(default=0.8, metadata={"range": "(0, 1]",
        "help": "an evaluation item is dirty from this share found in training (Llama 2: 0.8); between: partial"})
    record_share: float = field(default=0.5, metadata={"range": "(0, 1]",
        "help": "a training record goes on the contamination list (contaminated.jsonl, --drop) when it alone holds "
                "at least this share of an evaluation item"})
    boilerplate_train: int = field(default=10, metadata={"range": ">= 0",
        "help": "a window found in at least this many training records is boilerplate: left out of the shares and "
                "counted (0: off)"})
    boilerplate_eval: int = field(default=20, metadata={"range": ">= 0",
        "help": "a window in at least this many distinct evaluation texts (questions, answers, options) is "
                "boilerplate too (0: off)"})
    strict: bool = field(default=False, metadata={
        "help": "fail when an evaluation set or held-out text has no item to check (empty, or every item shorter "
                "than a window), instead of saying so in the report"})
    stages: list[str] = field(default_factory=lambda: list(TRAINING_STAGES), metadata={
        "help": "in yunshan run (and --config): the training stages whose sources are checked and, with drop, left "
                "out: cpt, sft, preference (sft alone: the instruction data is decontaminated, the corpora are not)"})
    drop: bool = field(default=False, metadata={
        "help": "leave the contaminated records out: in yunshan run the cpt, sft and preference stages skip them "
                "(counted in their data reports and the model card); here, also write the inputs without them to "
                "OUT/clean/"})
    on_bad_record: str = field(default="fail", metadata={
        "help": "an unreadable training record: fail (stop with file, line and field) or skip (count)"})
    show: int = field(default=10, metadata={"range": ">= 0",
        "help": "dirty items printed (every item is in OUT/items.jsonl)"})
    out: str = field(default="runs/decontamination", metadata={"path": True,
        "help": "output folder: decontamination.json, items.jsonl, hits.jsonl, contaminated.jsonl (never one that "
                "holds or lies inside the inputs)"})

    def __post_init__(self):
        check_fields(self)
        from yunshan.data.conversations import SFT_FORMATS

        if self.format != "text" and self.format not in SFT_FORMATS:
            raise ValueError(f"decontamination format {self.format!r} is not text or one of {', '.join(SFT_FORMATS)}")
        for name in ("n", "cjk_n"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"decontamination {name} must be a whole number of at least 1, got "
                                 f"{getattr(self, name)!r}")
        for name in ("boilerplate_train", "boilerplate_eval"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"decontamination {name} must be a whole number, 0 (off) or more, got "
                                 f"{getattr(self, name)!r}")
        for name in ("clean_below", "dirty_from", "record_share"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"decontamination {name} must be a share in (0, 1], got {value!r}")
        if self.clean_below > self.dirty_from:
            raise ValueError(f"decontamination clean_below ({self.clean_below}) must not exceed dirty_from "
                             f"({self.dirty_from})")
        if self.on_bad_record not in ("fail", "skip"):
            raise ValueError(f"decontamination on_bad_record must be fail or skip, got {self.on_bad_record!r}")
        unknown = [s for s in self.stages if s not in TRAINING_STAGES]
        if unknown or not self.stages:
            raise ValueError(f"decontamination stages: {unknown[0] if unknown else 'none'} is not a training stage; "
                             f"give one or more of {', '.join(TRAINING_STAGES)}")
        from yunshan.eval.chat_loss import check_sets, instruction_set

        self.instructions = [instruction_set(spec) for spec in self.instructions]
        check_sets(self.instructions)


def eval_sets(args: DecontaminateArgs) -> tuple[list[tuple[str, str, list]], list[str]]:
    """(name, path, items) of every evaluation set, and the tasks that have nothing to compare (with why)."""
    from yunshan.eval.items import FORMATS, eval_items, heldout_items, instruction_items
    from yunshan.eval.tasks import TASKS, resolve_tasks
    from yunshan.eval.texts import default_texts, labelled_files

    specs = list(args.tasks)
    if not specs and not args.instructions:  # every benchmark folder of the data folder
        root = Path(args.data_dir) if args.data_dir else None
        if root is None:
            from yunshan.samples import sample_data_dir

            root = Path(sample_data_dir()) / "eval"
        specs = [name for name, task in TASKS.items() if task.format in FORMATS and (root / name).is_dir()]
        if not specs:
            raise ValueError(f"--tasks not given and {root} holds no benchmark folder named after a task "
                             f"({', '.join(t for t, task in TASKS.items() if task.format in FORMATS)})")
    sets, not_checked = [], []
    for name, task, path in resolve_tasks(specs, args.data_dir):
        if task.format in FORMATS:
            sets.append((name, str(path), list(eval_items(name, path))))
        elif task.format == "lm_eval_tasks":
            from yunshan.eval.lm_eval_tasks import lm_eval_items

            sets.append((name, name, lm_eval_items(name.partition(":")[2], args.include_path,
                                                   trust_remote_code=args.trust_remote_code)))
        elif task.format == "bpc":
            files = labelled_files(args.heldout, "--heldout") if args.heldout else {
                p.stem: p for p in default_texts("bpc")}
            for label, file in files.items():
                sets.append((f"heldout:{label}", str(file), list(heldout_items(label, file))))
        elif task.format == "chat_loss":
            pass  # its sets are args.instructions, below
        else:
            not_checked.append(f"{name}: a text task (its texts are not an evaluation set)")
    if args.heldout and not any(n == "bpc" for n in specs):
        for label, file in labelled_files(args.heldout, "--heldout").items():
            sets.append((f"heldout:{label}", str(file), list(heldout_items(label, file))))
    for source in args.instructions:
        sets.append((f"instructions:{source.name}", ", ".join(_source_paths(source)),
                     list(instruction_items(source, args.on_bad_record))))
    names = [s[0] for s in sets]
    if len(set(names)) != len(names):
        raise ValueError(f"evaluation sets named twice: {names}; give each task or held-out label once")
    return sets, not_checked


def input_sources(args: DecontaminateArgs) -> tuple[list, list]:
    """The command's TRAIN inputs as corpus sources (format text) or instruction sources (an SFT format), one per
    input named after its file, read exactly as yunshan cpt / sft read such a source."""
    from yunshan.data.conversations import SftSourceArgs
    from yunshan.data.sources import SourceArgs

    if not args.inputs:
        raise ValueError("no training data: give TRAIN files, folders or globs, or --config RECIPE.yaml")
    names: list[str] = []
    for spec in args.inputs:
        base = Path(spec.rstrip("/")).name.split(".")[0] or "input"
        name, k = base, 2
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    if args.format == "text":
        return [SourceArgs(name=n, path=p, text_field=args.text_field, shuffle=False)
                for n, p in zip(names, args.inputs)], []
    return [], [SftSourceArgs(name=n, path=p, format=args.format) for n, p in zip(names, args.inputs)]


OUTPUTS = ("decontamination.json", "items.jsonl", "hits.jsonl", "contaminated.jsonl", "clean/x.jsonl")


def check_out(out: str | Path, reads: list[str]) -> None:
    """Refuse an output folder that holds, or lies inside, anything the run reads (files, folders, globs): writing
    there would replace a user's file, or a later run would read this one's output back (issue 27)."""
    out = Path(os.path.abspath(os.path.expanduser(str(out))))
    for spec in reads:
        spec = os.path.expanduser(str(spec))
        path = Path(os.path.abspath(spec))
        if any(ch in spec for ch in "*?[") and not os.path.exists(spec):  # an existing path is itself (resolve_paths)
            import glob

            inside = [p for p in glob.glob(spec, recursive=True) if out in Path(os.path.abspath(p)).parents]
            would = [name for name in OUTPUTS if fnmatch.fnmatch(str(out / name), str(path))]
            if inside or would:
                raise ValueError(f"--out {out}: the input {spec} would read "
                                 f"{inside[0] if inside else out / would[0]} (written by this command); choose an "
                                 "--out outside the inputs")
        elif path == out or out in path.parents:
            raise ValueError(f"--out {out} holds the input {spec}: the run would overwrite it or read its own output "
                             "back; choose an --out outside the inputs")
        elif path.is_dir() and path in out.parents:
            raise ValueError(f"--out {out} lies inside the input folder {spec}: a later run would read this one's "
                             "output as input; choose an --out outside the inputs")


@contextlib.contextmanager
def _sigterm_stops():
    """SIGTERM raises KeyboardInterrupt while the run writes, so its partial files are removed as on Ctrl-C."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _source_paths(source) -> list[str]:
    path = getattr(source, "path", None)
    return [] if path is None else [path] if isinstance(path, str) else list(path)


def run_decontamination(args: DecontaminateArgs, cpt_sources: list | None = None, sft_sources: list | None = None,
                        clean: bool = False, progress: bool = True, pref_sources: list | None = None,
                        pref_seed: int = 0):
    """Compare training records with every item of the evaluation sets and write into args.out (module docstring).
    The training data is `cpt_sources`, `sft_sources` and `pref_sources` (yunshan run; preference pairs made with
    the preference stage's data.seed `pref_seed`), else args.inputs; `clean` writes OUT/clean/KIND_SOURCE.jsonl.
    Returns (report, the first args.show dirty items)."""
    import shutil
    import time

    from tqdm.auto import tqdm

    from yunshan.io.artifacts import BoilerplateCheck, DecontaminationReport, SourceCheck
    from yunshan.data.decontamination import NgramIndex, Scan, category, record_digest
    from yunshan.data.writers import JsonlWriter

    started = time.time()
    if cpt_sources is None and sft_sources is None:
        cpt_sources, sft_sources = input_sources(args)
    sources = ([("cpt", s) for s in cpt_sources or []] + [("sft", s) for s in sft_sources or []]
               + [("preference", s) for s in pref_sources or []])
    if not sources:
        raise ValueError("no training sources to check")
    names = [f"{kind}:{s.name}" for kind, s in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"training source names must be unique within cpt, sft and preference: {names}")
    sets, not_checked = eval_sets(args)
    check_out(args.out, [p for _, s in sources for p in _source_paths(s)]
              + [path for name, path, _ in sets if not name.startswith("instructions:")]
              + [p for s in args.instructions for p in _source_paths(s)])
    nothing = []
    for name, path, set_items in sets:
        if not set_items:
            nothing.append(f"{name}: {path} holds no item")
    items = [item for _, _, set_items in sets for item in set_items]
    index = NgramIndex.build(items, args.n, args.cjk_n)
    unchecked = set(index.unchecked)
    first = 0
    for name, path, set_items in sets:
        span = range(first, first + len(set_items))
        if set_items and all(i in unchecked for i in span):
            nothing.append(f"{name}: {path}: every item is shorter than a window ({args.n} words or {args.cjk_n} "
                           "CJK characters)")
        first += len(set_items)
    if not sets:
        nothing.append("no evaluation set")
    if nothing and args.strict:
        raise ValueError(f"nothing checked in {nothing[0]} (--strict)")
    report = DecontaminationReport(
        n=args.n, cjk_n=args.cjk_n, clean_below=args.clean_below, dirty_from=args.dirty_from,
        record_share=args.record_share, drop=args.drop, not_checked=not_checked, nothing_checked=nothing,
        normalization="NFKC, case folding; a unit per CJK character, per word or number otherwise; punctuation and "
                      f"spaces dropped; windows of {args.n} words or {args.cjk_n} CJK characters "
                      "(yunshan/data/ngrams.py)",
        eval_sets={}, sources={})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = out / ".scan"
    writers: list = []
    try:
        with _sigterm_stops():
            scan = Scan(index, workdir, args.boilerplate_train, args.boilerplate_eval)
            for (kind, source), name in zip(sources, names):
                check = report.sources[name] = SourceCheck(kind=kind)
                texts = _reader(kind, pref_seed)(source, args.on_bad_record, check.bad)
                bar = tqdm(desc=f"decontaminate {name}", unit=" records", disable=not progress, mininterval=1)

                def describe(record, name=name):
                    return {"source": name, "location": record.location, "digest": record_digest(record.tag["content"])}

                for record in scan.read(texts, describe):
                    check.records += 1
                    check.characters += sum(len(f) for f in record.fields)
                    bar.update(1)
                bar.close()
            hits_file = JsonlWriter(str(out / "hits.jsonl"))
            listed = JsonlWriter(str(out / "contaminated.jsonl"))
            writers += [hits_file, listed]
            listed_digests: set[str] = set()

            def on_record(described, pairs):
                check = report.sources[described["source"]]
                check.overlapping += 1
                check.hits += len(pairs)
                for p in pairs:
                    item = index.items[p.item]
                    hits_file.write({"train": described["location"], "source": described["source"],
                                     "eval": item.location, "task": item.tag["task"], "id": item.tag["id"],
                                     "share": round(p.share, 4), "windows": p.windows, "match": p.match,
                                     "digest": described["digest"]})
                held = [p for p in pairs if p.share >= args.record_share]
                if held:
                    check.contaminated += 1
                    listed_digests.add(described["digest"])
                    listed.write({"digest": described["digest"], "source": described["source"],
                                  "location": described["location"],
                                  "eval": [index.items[p.item].location for p in held],
                                  "share": round(max(p.share for p in held), 4)})

            result = scan.resolve(on_record)
            items_file = JsonlWriter(str(out / "items.jsonl"))
            writers.append(items_file)
            shown = _item_lines(args, index, result, sets, report, items_file, category)
            for w in writers:
                w.close()
            writers.clear()
            if clean:
                _write_clean(out, sources, args, listed_digests, writers, JsonlWriter, pref_seed)
    except BaseException:
        for w in writers:
            w.close(keep=False)
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report.boilerplate = BoilerplateCheck(
        train_records=args.boilerplate_train, eval_texts=args.boilerplate_eval,
        windows_train=result.boilerplate_train, windows_eval=result.boilerplate_eval,
        records_only_boilerplate=result.records_with_boilerplate_only, examples=result.boilerplate_examples)
    report.windows_found = result.windows_found
    for check in report.sources.values():
        report.records += check.records
        report.characters += check.characters
        report.overlapping += check.overlapping
        report.contaminated += check.contaminated
        report.hits += check.hits
    report.seconds = round(time.time() - started, 2)
    report.write(out)
    return report, shown


def _item_lines(args, index, result, sets, report, items_file, category) -> list[dict]:
    """items.jsonl (every item the training data holds any of) and the per-set and per-group counts; returns the
    first args.show dirty items."""
    from yunshan.io.artifacts import EvalSetCheck, ItemCounts

    unchecked = set(index.unchecked)
    shown = []
    first = 0
    for name, path, set_items in sets:
        check = report.eval_sets[name] = EvalSetCheck(path=path, items=len(set_items))
        for k in range(first, first + len(set_items)):
            item = index.items[k]
            group = str(item.tag.get("group") or "")
            counts = [check] + ([check.groups.setdefault(group, ItemCounts())] if group else [])
            check.ngrams += int(index.windows_per_item[k])
            share, raw = float(result.shares[k]), float(result.raw_shares[k])
            kind = "unchecked" if k in unchecked else category(share, args.clean_below, args.dirty_from)
            raw_kind = category(raw, args.clean_below, args.dirty_from)
            for c in counts:
                if c is not check:
                    c.items += 1
                setattr(c, kind, getattr(c, kind) + 1)
                if kind != "unchecked" and raw_kind != "clean":
                    setattr(c, f"raw_{raw_kind}", getattr(c, f"raw_{raw_kind}") + 1)
            if raw > 0:
                line = {"eval": item.location, "task": item.tag["task"], "id": item.tag["id"], "group": group,
                        "share": round(share, 4), "raw_share": round(raw, 4), "category": kind,
                        "records": int(result.records[k]), "top_share": round(float(result.best_share[k]), 4),
                        "top_record": (result.best_record[k] or {}).get("location"),
                        "match": result.match[k]}
                items_file.write(line)
                if kind == "dirty" and len(shown) < args.show:
                    shown.append(line)
        first += len(set_items)
    return shown


def _reader(kind: str, pref_seed: int = 0):
    """How a source of a training stage is read: as `yunshan cpt`, `sft` or `pref` reads it."""
    import functools

    from yunshan.data.decontamination import conversation_texts, corpus_texts, preference_texts

    if kind == "preference":
        return functools.partial(preference_texts, seed=pref_seed)
    return corpus_texts if kind == "cpt" else conversation_texts


def _write_clean(out, sources, args, listed_digests, writers, JsonlWriter, pref_seed: int = 0) -> None:
    """OUT/clean/KIND_SOURCE.jsonl: each source read again, without the records on the contamination list (a
    preference source as its pairs or unpaired samples in TRL's layout)."""
    from yunshan.data.decontamination import record_digest

    for kind, source in sources:
        writer = JsonlWriter(str(out / "clean" / f"{kind}_{source.name}.jsonl"))
        writers.append(writer)
        for record in _reader(kind, pref_seed)(source, args.on_bad_record, {}):
            if record_digest(record.tag["content"]) not in listed_digests:
                writer.write(record.tag["record"])
    for w in writers:
        w.close()
    writers.clear()


def render_decontamination(report, shown: list[dict], out: str | Path) -> str:
    """The summary printed by the command and the pipeline stage."""
    b = report.boilerplate
    lines = [f"decontamination: share of each evaluation item found in the training data (Llama 2's measure): "
             f"clean < {report.clean_below:g} <= partial < {report.dirty_from:g} <= dirty; {report.normalization}",
             ""]
    lines.append(f"  {'evaluation set':<28} {'items':>7} {'unchecked':>9} {'clean':>7} {'partial':>7} {'dirty':>6}"
                 f"   with boilerplate: {'partial':>7} {'dirty':>6}")

    def row(label, c):
        return (f"  {label:<28} {c.items:>7,} {c.unchecked:>9,} {c.clean:>7,} {c.partial:>7,} {c.dirty:>6,}"
                f"   {'':>18}{c.raw_partial:>7,} {c.raw_dirty:>6,}")

    for name, s in report.eval_sets.items():
        lines.append(row(name, s) + f"  {s.path}")
        if len(s.groups) > 1:
            for group, c in s.groups.items():
                if c.partial or c.dirty or c.raw_partial or c.raw_dirty:
                    lines.append(row(f"  {group}", c))
    for reason in report.not_checked:
        lines.append(f"    not checked: {reason}")
    for reason in report.nothing_checked:
        lines.append(f"    NOTHING CHECKED: {reason}")
    lines += ["", f"  boilerplate left out: {b.windows_train:,} windows found in >= {b.train_records} training records, "
                  f"{b.windows_eval:,} in >= {b.eval_texts} evaluation texts; {b.records_only_boilerplate:,} records "
                  "shared only boilerplate" + ("; most frequent:" if b.examples else "")]
    for e in b.examples[:5]:
        lines.append(f"    {e['training_records']:>6,} records, {e['evaluation_texts']:>4,} eval texts: {e['window']}")
    lines += ["", "  training sources:"]
    for name, s in report.sources.items():
        bad = f"  unreadable {sum(s.bad.values()):,} ({', '.join(f'{k} {v}' for k, v in s.bad.items())})" if s.bad else ""
        lines.append(f"    {name:<22} {s.kind:<4} {s.records:>8,} records  {s.overlapping:>6,} overlapping  "
                     f"{s.contaminated:>6,} listed  {s.hits:>7,} hits{bad}")
    rate = report.characters / report.seconds if report.seconds else 0.0
    lines += ["", f"  {report.overlapping:,} of {report.records:,} training records share a window (not boilerplate) "
                  f"with an evaluation item ({report.hits:,} record-item pairs); {report.contaminated:,} hold at least "
                  f"{report.record_share:g} of an item (contaminated.jsonl); {report.characters:,} characters in "
                  f"{report.seconds} s ({rate:,.0f} characters/s, reading and parsing included)"]
    if shown:
        lines += ["", f"  first {len(shown)} dirty items (share found; the record holding most of it):"]
        for h in shown:
            lines.append(f"    {h['eval']}  [{h['task']} {h['id']}]  {h['share']:.0%}  <-  {h['top_record']} "
                         f"({h['top_share']:.0%}): {h['match']}")
    out = Path(out)
    lines += ["", f"  wrote {out / 'decontamination.json'}, {out / 'items.jsonl'}, {out / 'hits.jsonl'}, "
                  f"{out / 'contaminated.jsonl'} (for data.exclude)"
              + (f" and {out / 'clean'}/" if report.drop and (out / "clean").is_dir() else "")]
    return "\n".join(lines)
