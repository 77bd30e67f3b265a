"""A corpus preparation as datatrove stages, run on the local, Ray or Slurm executor, resumable task by task.

    from yunshan.prepare.pipeline import run_prepare
    summary = run_prepare(PrepareArgs(inputs=[InputArgs(name="laws", path="laws.jsonl.zst")], out="prepared"))

The stages (each a datatrove executor with its own logging folder, OUT/logs/<stage>/: completions/, stats/, logs/):

    clean            read (yunshan's record reader; WARC: datatrove's) -> trafilatura for HTML (datatrove) ->
                     language (py3langid) -> OpenCC t2s -> boilerplate lines -> quality (zh) -> personal data ->
                     decontamination -> work/clean/RANK.jsonl.zst
    exact_signature  datatrove ExactDedupSignature over work/clean
    exact_find       datatrove ExactFindDedups (one task)
    minhash_signature  work/clean -> datatrove ExactDedupFilter -> work/exact/RANK.jsonl.zst -> datatrove
                     MinhashDedupSignature (its subclass UnitShingles: CJK characters as words, in numpy)
    minhash_buckets  datatrove MinhashDedupBuckets (one task per band)
    minhash_cluster  datatrove MinhashDedupCluster (one task)
    write            work/exact -> datatrove MinhashDedupFilter -> cluster list -> documents/RANK.jsonl.zst

Every later stage reads its own task's file of the stage before (`TaskFileReader`), so document indexes in the
dedup stages' files line up. Resuming: datatrove skips the tasks whose completion file exists and reruns the others
from their start, and every output file of a task is written whole by that task ("wb"), so a rerun replaces what a
killed task left and no document is ever written twice. A run with other settings or inputs than the folder's
(plan.json: a digest of the arguments and of every input file's size and time) starts over in a clean folder.
Outputs are zstd (no timestamp in the stream, unlike gzip): the same recipe gives byte-identical files on every
executor (tests/prepare/test_prepare.py). datatrove's console log goes to OUT/logs/console.log; the console shows
one progress bar per stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

from .args import PrepareArgs

STAGES = ("clean", "exact_signature", "exact_find", "minhash_signature", "minhash_buckets", "minhash_cluster",
          "write")
COMPRESSION = "zstd"


class PrepareError(ValueError):
    """A preparation that cannot run or did not finish; the message is one line."""


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def resolve_inputs(args: PrepareArgs) -> dict[str, list[str]]:
    """The files of every input, sorted (folders searched for readable files)."""
    from yunshan.data.files import resolve_paths
    from yunshan.data.records import is_readable

    def known(path: str) -> bool:
        return is_readable(path) or path.lower().endswith((".warc", ".warc.gz", ".arc", ".arc.gz"))

    return {i.name: resolve_paths(i.path, f"prepare.inputs.{i.name}.path", keep=known,
                                  kinds=".jsonl/.json/.csv/.parquet/.txt/.warc (or .zip) file") for i in args.inputs}


# ---------------------------------------------------------------- the blocks of each stage


def _task_reader(folder: Path, progress: Path | None = None):
    from datatrove.pipeline.readers import JsonlReader

    class TaskFileReader(JsonlReader):
        """datatrove's JsonlReader on task r's own file of the stage before (not a shard of all files: a task that
        wrote nothing has no file, and the next task's file must not shift to it)."""

        name = "📖 task file"

        def run(self, data=None, rank: int = 0, world_size: int = 1):
            from .progress import Progress

            name = f"{rank:05d}.jsonl.zst"
            counter = Progress(self.progress, rank)
            if self.data_folder.exists(name):
                for doc in self.read_files_shard([name]):
                    self.update_doc_stats(doc)
                    counter.add(len(doc.text))
                    yield doc
            counter.flush()

    reader = TaskFileReader(str(folder), compression=COMPRESSION, add_file_path=False)
    reader.progress = str(progress) if progress else None
    return reader


def _warc_reader(name: str, files: list[str]):
    from datatrove.pipeline.readers import WarcReader

    class WarcFiles(WarcReader):
        """datatrove's WarcReader on a list of files (shared out by file across the tasks) instead of one folder."""

        def run(self, data=None, rank: int = 0, world_size: int = 1):
            if data:
                yield from data
            shard = [os.path.abspath(p).lstrip("/") for p in self.files[rank::world_size]]
            for doc in self.read_files_shard(shard):
                self.update_doc_stats(doc)
                yield doc

    reader = WarcFiles("/", default_metadata={"source": name})
    reader.files = list(files)
    return reader


def _writer(folder: Path):
    from datatrove.pipeline.writers import JsonlWriter

    return JsonlWriter(str(folder), output_filename="${rank}.jsonl", compression=COMPRESSION)


def _exact_config():
    from datatrove.pipeline.dedup.exact_dedup import ExactDedupConfig

    from .dedup import exact_key

    return ExactDedupConfig(content_getter=exact_key)


def _minhash_config(args: PrepareArgs):
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig

    n = args.near_dedup
    return MinhashConfig(n_grams=n.n_grams, num_buckets=n.buckets, hashes_per_bucket=n.hashes_per_bucket,
                         seed=n.seed, hash_config=HashConfig(precision=64))


def clean_steps(args: PrepareArgs, files: dict[str, list[str]], work: Path) -> list:
    """Read, extract, label, convert, clean, mask and decontaminate, then write work/clean."""
    from .examples import ExampleWriter, Examples
    from .language import LanguageId, TraditionalToSimplified
    from .pii import PersonalDataMasker
    from .quality import BoilerplateLines, ChineseQuality
    from .readers import RecordReader

    examples = work / "examples"
    per = args.examples

    def kept(step: str) -> Examples | None:
        return Examples(str(examples), step, per) if per else None

    def dropped(step: str, reason: str):
        return ExampleWriter(str(examples), step, reason, per) if per else None

    steps: list = []
    html = [i for i in args.inputs if i.html or i.format == "warc"]
    plain = [i for i in args.inputs if i not in html]
    for group in (html, plain):
        for i in group:
            if i.format == "warc":
                steps.append(_warc_reader(i.name, files[i.name]))
            else:
                steps.append(RecordReader(i.name, files[i.name], "auto" if i.format == "auto" else i.format,
                                          i.text_field, i.txt_document, args.on_bad_record, args.max_record_mb,
                                          tuple(i.keep_fields), examples=kept(f"read_{i.name}"),
                                          progress=str(work.parent / "logs" / "clean" / "progress")))
        if group is html and html:
            from datatrove.pipeline.extractors import Trafilatura

            steps.append(Trafilatura(favour_precision=True, timeout=5.0))
    if args.language.enabled:
        steps.append(LanguageId(args.language, exclusion_writer=dropped("language", "language")))
    if args.traditional_to_simplified:
        steps.append(TraditionalToSimplified(examples=kept("traditional_to_simplified")))
    if args.quality.enabled and args.quality.boilerplate_lines:
        steps.append(BoilerplateLines(examples=kept("boilerplate_lines")))
    if args.quality.enabled:
        steps.append(ChineseQuality(args.quality, exclusion_writer=dropped("quality", "quality")))
        if args.quality.gopher_other_languages and args.language.enabled and args.language.keep != ["zh"]:
            from .quality import OtherLanguageGopherQuality, OtherLanguageGopherRepetition

            steps.append(OtherLanguageGopherRepetition(exclusion_writer=dropped("gopher_repetition", "gopher")))
            steps.append(OtherLanguageGopherQuality(exclusion_writer=dropped("gopher_quality", "gopher")))
    if args.pii.enabled:
        steps.append(PersonalDataMasker(args.pii.party_names, examples=kept("pii")))
    if args.decontamination.enabled:
        from .decontamination import EvalDecontamination

        if not args.decontamination.tasks and not args.decontamination.heldout:
            raise PrepareError("prepare.decontamination is enabled but names no evaluation set: set "
                               "prepare.decontamination.tasks (or heldout), or enabled: false")
        steps.append(EvalDecontamination(args.decontamination,
                                         exclusion_writer=dropped("decontamination", "contaminated")))
    return steps


def stage_pipelines(args: PrepareArgs, files: dict[str, list[str]], out: Path, tasks: int) -> list[tuple]:
    """(stage name, pipeline, number of tasks) of every stage this preparation runs, in order."""
    from datatrove.pipeline.dedup.exact_dedup import ExactDedupFilter, ExactDedupSignature, ExactFindDedups
    from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter

    from .dedup import ClusterLog, RemovedClusterLog, UnitShingles
    from .examples import ExampleWriter

    work = out / "work"
    documents = out / "documents"
    near = args.near_dedup.enabled

    def progress(stage: str) -> Path:
        return out / "logs" / stage / "progress"

    stages = []
    last = _writer(documents if not (args.exact_dedup or near) else work / "clean")
    stages.append(("clean", clean_steps(args, files, work) + [last], tasks))
    after_exact = work / "clean"
    if args.exact_dedup:
        config = _exact_config()
        stages.append(("exact_signature", [_task_reader(work / "clean", progress("exact_signature")),
                                           ExactDedupSignature(str(work / "exact_dedup" / "signatures"), config)],
                       tasks))
        stages.append(("exact_find", [ExactFindDedups(str(work / "exact_dedup" / "signatures"),
                                                      str(work / "exact_dedup" / "duplicates"), config)], 1))
        exact_filter = ExactDedupFilter(str(work / "exact_dedup" / "duplicates"), config,
                                        exclusion_writer=ExampleWriter(str(work / "examples"), "exact_dedup",
                                                                       "exact_duplicate", args.examples or 1))
        if not near:
            stages.append(("write", [_task_reader(work / "clean", progress("write")), exact_filter,
                                     _writer(documents)], tasks))
            return stages
        stages.append(("minhash_signature", [_task_reader(work / "clean", progress("minhash_signature")), exact_filter,
                                             _writer(work / "exact"),
                                             UnitShingles(str(work / "minhash" / "signatures"),
                                                          _minhash_config(args))], tasks))
        after_exact = work / "exact"
    elif near:
        stages.append(("minhash_signature", [_task_reader(work / "clean", progress("minhash_signature")),
                                             UnitShingles(str(work / "minhash" / "signatures"),
                                                          _minhash_config(args))], tasks))
    if near:
        config = _minhash_config(args)
        stages.append(("minhash_buckets", [MinhashDedupBuckets(str(work / "minhash" / "signatures"),
                                                               str(work / "minhash" / "buckets"), config=config)],
                       args.near_dedup.buckets))
        stages.append(("minhash_cluster", [MinhashDedupCluster(str(work / "minhash" / "buckets"),
                                                               str(work / "minhash" / "clusters"), config=config,
                                                               save_cluster_id=True, save_cluster_size=True)], 1))
        stages.append(("write", [_task_reader(after_exact, progress("write")),
                                 MinhashDedupFilter(str(work / "minhash" / "clusters"),
                                                    exclusion_writer=RemovedClusterLog(str(work / "clusters")),
                                                    load_cluster_ids=True, load_cluster_sizes=True),
                                 ClusterLog(str(work / "clusters")), _writer(documents)], tasks))
    return stages


# ---------------------------------------------------------------- executors


def _executor(args: PrepareArgs, pipeline: list, tasks: int, logs: Path, depends=None):
    workers = min(args.workers or cores(), tasks)
    if args.executor == "local":
        from datatrove.executor import LocalPipelineExecutor

        # fork: the tasks inherit the parent's imports (forkserver, datatrove's default, re-imports per task)
        return LocalPipelineExecutor(pipeline, tasks=tasks, workers=workers, logging_dir=str(logs),
                                     start_method="fork")
    if args.executor == "ray":
        from datatrove.executor.ray import RayPipelineExecutor

        return RayPipelineExecutor(pipeline, tasks=tasks, workers=workers, logging_dir=str(logs),
                                   cpus_per_task=args.ray.cpus_per_task, mem_per_cpu_gb=args.ray.mem_per_cpu_gb)
    from datatrove.executor.slurm import SlurmPipelineExecutor

    s = args.slurm
    env = s.env_command or (f"source {sys.prefix}/bin/activate" if sys.prefix != sys.base_prefix else None)
    return SlurmPipelineExecutor(pipeline, tasks=tasks, time=s.time, partition=s.partition,
                                 cpus_per_task=s.cpus_per_task, mem_per_cpu_gb=s.mem_per_cpu_gb, qos=s.qos,
                                 workers=args.workers or -1, job_name=f"yunshan_prepare_{logs.name}",
                                 env_command=env, sbatch_args=dict(s.sbatch_args), logging_dir=str(logs),
                                 depends=depends, slurm_logs_folder=str(logs / "slurm_logs"))


def _completed(logs: Path) -> int:
    folder = logs / "completions"
    return len(list(folder.iterdir())) if folder.is_dir() else 0


class _Console:
    """datatrove's own console log (loguru on stderr, in every task) goes to a file while a stage runs; progress
    bars go to the real stderr."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        sys.stderr.flush()
        self.saved = os.dup(2)
        self.file = open(self.path, "ab")
        os.dup2(self.file.fileno(), 2)
        self.terminal = os.fdopen(os.dup(self.saved), "w", buffering=1)
        return self.terminal

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.close()
        self.terminal.close()


def _run_stage(name: str, executor, tasks: int, logs: Path, console: Path, progress: bool) -> None:
    from tqdm.auto import tqdm

    from .progress import read_progress

    done = threading.Event()
    with _Console(console) as terminal:
        bar = tqdm(total=tasks, desc=f"prepare {name}", unit=" tasks", file=terminal, disable=not progress,
                   initial=_completed(logs), mininterval=1)

        def poll():
            while not done.wait(1.0):
                documents, chars = read_progress(logs / "progress")
                if documents:
                    bar.set_postfix_str(f"{documents:,} documents, {chars / 1e6:,.1f} M characters", refresh=False)
                bar.update(max(0, _completed(logs) - bar.n))
                bar.refresh()

        watcher = threading.Thread(target=poll, daemon=True)
        watcher.start()
        try:
            executor.run()
        finally:
            done.set()
            watcher.join()
            bar.update(_completed(logs) - bar.n)
            bar.close()


def _first_error(logs: Path) -> str | None:
    """The last line of the first task log that ends in an error (what a Ray task raised)."""
    for path in sorted((logs / "logs").glob("task_*.log")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for line in reversed(lines):
            if "Error:" in line and "|" not in line[:40]:
                return line.strip()
    return None


# ---------------------------------------------------------------- the run


def plan_digest(args: PrepareArgs, files: dict[str, list[str]], tasks: int) -> dict:
    """What a rerun must share with the run it resumes: every setting but the executor's, the tasks, and every input
    file's size and modification time."""
    settings = dataclasses.asdict(args)
    for key in ("out", "executor", "workers", "ray", "slurm", "keep_work"):
        settings.pop(key)
    stat = {name: [(p, os.path.getsize(p), os.stat(p).st_mtime_ns) for p in paths] for name, paths in files.items()}
    digest = hashlib.sha256(json.dumps({"settings": settings, "files": stat, "tasks": tasks}, sort_keys=True,
                                       default=str).encode()).hexdigest()
    return {"digest": digest, "tasks": tasks, "settings": settings}


OUTPUTS = ("work", "logs", "documents", "plan.json", "prepare_report.json", "prepare_report.md", "funnel.png",
           "near_duplicates.jsonl")


def _start_or_resume(out: Path, plan: dict) -> bool:
    """Prepare `out` for this plan: True when a run of the same plan is resumed; another plan's files are removed."""
    path = out / "plan.json"
    if path.is_file():
        try:
            previous = json.loads(path.read_text())
        except json.JSONDecodeError:
            previous = {}
        if previous.get("digest") == plan["digest"]:
            return True
        print(f"prepare: {out} was prepared with other settings or inputs; starting over", file=sys.stderr)
    else:
        # Only a folder a preparation made (its plan.json) is cleaned: a user's own files are never deleted.
        found = [name for name in OUTPUTS if (out / name).exists()]
        if found:
            raise PrepareError(f"prepare.out {out} holds {found[0]} but no plan.json of a preparation: choose an "
                               "empty or new folder (nothing there is deleted)")
    for name in OUTPUTS:
        target = out / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=1, default=str))
    return False


def run_prepare(args: PrepareArgs, progress: bool = True) -> dict:
    """Run (or resume) a preparation into args.out; returns the report's summary (yunshan/prepare/report.py).
    Under Slurm, submits the job arrays and returns {"submitted": ...}; run again once they finish for the report."""
    from .report import write_report

    if not args.inputs:
        raise PrepareError("prepare.inputs is empty: name at least one corpus to prepare")
    out = Path(args.out)
    _check_inputs_outside(args, out)
    files = resolve_inputs(args)
    tasks = args.tasks or cores()
    plan = plan_digest(args, files, tasks)
    resumed = _start_or_resume(out, plan)
    stages = stage_pipelines(args, files, out, tasks)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.time()
    if args.executor == "slurm":
        submitted = _submit_slurm(args, stages, logs)
        if submitted is not None:
            return submitted
        stages = []  # every task is complete: the report only
    ray_started = False
    if args.executor == "ray":
        ray_started = _start_ray(args)
    try:
        for name, pipeline, n in stages:
            stage_logs = logs / name
            executor = _executor(args, pipeline, n, stage_logs)
            if len(executor.get_incomplete_ranks()) == 0:
                continue
            try:
                _run_stage(name, executor, n, stage_logs, logs / "console.log", progress)
            except Exception as err:
                raise PrepareError(_one_line(err, name, stage_logs)) from None
            missing = executor.get_incomplete_ranks()
            if missing:
                why = _first_error(stage_logs) or f"see {stage_logs / 'logs'}"
                raise PrepareError(f"prepare: stage {name}: tasks {missing[:10]} did not complete: {why}")
    finally:
        if ray_started:
            import ray

            ray.shutdown()
    names = [(name, n) for name, _, n in stage_pipelines(args, files, out, tasks)] if not stages else \
        [(name, n) for name, _, n in stages]
    summary = write_report(args, out, names, time.time() - started, resumed, files,
                           used=min(args.workers or cores(), tasks))
    if not args.keep_work:
        for name in ("clean", "exact", "exact_dedup", "minhash"):
            shutil.rmtree(out / "work" / name, ignore_errors=True)
    return summary


def _check_inputs_outside(args: PrepareArgs, out: Path) -> None:
    """An input inside the output folder (a recipe naming ${prepared} as the preparation's own input) is refused."""
    root = Path(os.path.abspath(out))
    for i in args.inputs:
        for spec in [i.path] if isinstance(i.path, str) else i.path:
            path = Path(os.path.abspath(spec))
            if path == root or root in path.parents:
                raise PrepareError(f"prepare.inputs.{i.name}.path: {spec} lies inside prepare.out ({out}), which the "
                                   "preparation writes; name the raw corpus")


def _one_line(err: BaseException, stage: str, logs: Path) -> str:
    from yunshan.data.records import BadRecordError

    message = " ".join(str(err).split())
    if isinstance(err, BadRecordError) or message.startswith("prepare:"):
        return message
    return f"prepare: stage {stage} failed: {type(err).__name__}: {message} (task logs: {logs / 'logs'})"


def _start_ray(args: PrepareArgs) -> bool:
    """Connect to the named Ray cluster, or start a local one with `workers` CPUs; True if this call started it."""
    import ray

    if ray.is_initialized():
        return False
    kwargs = {"log_to_driver": False, "include_dashboard": False, "configure_logging": False}
    if args.ray.address:
        ray.init(address=args.ray.address, **kwargs)
    else:
        ray.init(num_cpus=args.workers or cores(), **kwargs)
    return True


def _submit_slurm(args: PrepareArgs, stages: list, logs: Path) -> dict | None:
    """One job array per stage, each depending on the one before (afterok); the last launch submits them all (the
    stages already complete are not submitted). None when every task is complete."""
    executor = None
    executors = []
    for name, pipeline, n in stages:
        executor = _executor(args, pipeline, n, logs / name, depends=executor)
        executors.append((name, executor))
    if all(not e.get_incomplete_ranks() for _, e in executors):
        return None
    executor.run()
    return {"submitted": {name: e.job_id for name, e in executors},
            "scripts": {name: str(logs / name / "launch_script.slurm") for name, _ in executors}}


def describe_prepare(args: PrepareArgs) -> dict:
    """What `--dry-run` prints: the inputs resolved (files, bytes), the stages with their tasks, where the corpus
    goes; nothing is read or written."""
    files = resolve_inputs(args)
    tasks = args.tasks or cores()
    return {"inputs": {name: {"files": len(paths), "bytes": sum(os.path.getsize(p) for p in paths),
                              "first": paths[0]} for name, paths in files.items()},
            "executor": args.executor, "tasks": tasks, "workers": min(args.workers or cores(), tasks),
            "stages": [{"stage": name, "tasks": n, "steps": [type(s).__name__ for s in pipeline]}
                       for name, pipeline, n in stage_pipelines(args, files, Path(args.out), tasks)],
            "near_dedup_threshold": round(args.near_dedup.threshold(), 3) if args.near_dedup.enabled else None,
            "corpus": str(Path(args.out) / "documents")}
