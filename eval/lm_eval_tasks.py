"""lm-evaluation-harness tasks as a source: a team's task YAMLs run by lm-eval itself, on the model yunshan loaded.

    yunshan eval --model out/yunshan --tasks lmeval:bank_mc --include-path tasks/      # a task (or group) by name
    yunshan eval --model out/yunshan --tasks lmeval:tasks/bank_mc.yaml                 # or the YAML file itself

Nothing is rewritten or reimplemented: lm-eval's TaskManager reads the YAMLs (only `--include-path` is indexed, which
takes a second; a name found nowhere there is looked up among lm-eval's own tasks, whose index takes about half a
minute and whose datasets come from the Hub), and `lm_eval.simple_evaluate` runs them with lm-eval's HFLM wrapped
around the model and tokenizer `yunshan eval` loaded (so `--dtype`, `--device`, `--batch-size` and the BOS rule of
`--add-bos` apply as for every task). A task runs as its YAML says: its prompt, few-shot count and sampler
(`num_fewshot`; yunshan's `--shots` is not applied), filters and metrics. `--limit N` is lm-eval's `--limit`,
`--chat on` its `--apply_chat_template` (auto and off leave it off, lm-eval's default), and `--max-new-tokens` its
`max_gen_toks` when given. Needs lm-eval (`pip install "lm-eval[hf]>=0.4.13,<0.5"`, yunshan's dev extra).

results.json keeps lm-eval's numbers as lm-eval reports them (metric names such as `acc` or
`exact_match (strict-match)` for a filter other than `none`, values in lm-eval's own units: accuracy as a fraction),
every (sub)task of a group as a row, each task's resolved config and every sample's request and response. The
model card shows each metric of each row. Decontamination reads the same documents through lm-eval's task objects
(`lm_eval_items`): each document's prompt text and its choices or target.

A task YAML's `!function utils.process` (in it or in a YAML it includes) imports and runs Python from beside the
YAML: lm-eval loads every task under `task_code`, which refuses that in one line naming the YAML and the function
unless the user opted in with `--trust-remote-code` (as for a model folder's auto_map: yunshan/loading/remote_code.py).
lm-eval's own tasks are installed code and load as they are.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

SKIPPED_KEYS = ("name", "alias", "sample_len", "samples")
OPT_IN = "--trust-remote-code (in a `yunshan run` recipe: eval.trust_remote_code: true)"


def _require_lm_eval():
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        raise ImportError("lmeval: tasks run through lm-evaluation-harness, which is not installed; "
                          "pip install 'lm-eval[hf]>=0.4.13,<0.5'") from None


@contextlib.contextmanager
def task_code(trust_remote_code: bool, opt_in: str = OPT_IN):
    """While lm-eval loads and runs tasks: the Python a task YAML outside lm-eval's own tasks names runs only with
    `trust_remote_code`; otherwise a ValueError in one line names the YAML, the function and `opt_in`.

    A YAML runs code in two ways. `!function utils.process` imports the module beside it: lm-eval 0.4.13 resolves
    it in one place, `_yaml_loader._import_func_in_yml`, while `_yaml_loader.load_yaml` parses a file with
    resolve_func=True (every task, group and included YAML it loads; its index parses without resolving). Both are
    wrapped for the duration: load_yaml to know which file is being parsed (an included YAML is named as itself),
    the import to refuse before anything is imported. And its prompt templates (`doc_to_text`, ...) are Jinja,
    which lm-eval renders in a plain Environment where `{{ cycler.__init__.__globals__.os }}` reaches the os
    module: they are rendered in Jinja's sandbox instead, which refuses such attributes (ordinary templates render
    the same). A lm-eval without those names is refused rather than run unguarded."""
    _require_lm_eval()
    if trust_remote_code:
        yield
        return
    import lm_eval
    from jinja2.sandbox import SandboxedEnvironment
    from lm_eval import utils
    from lm_eval.tasks import _factory, _yaml_loader

    from yunshan.loading.remote_code import refusal

    if not all(hasattr(module, name) for module, name in (
            (_yaml_loader, "load_yaml"), (_yaml_loader, "_import_func_in_yml"), (_factory, "load_yaml"),
            (utils, "env"))):
        raise ValueError(f"lm-eval {lm_eval.__version__}: yunshan cannot tell whether its task YAMLs run Python "
                         "code in this version; use lm-eval>=0.4.13,<0.5, or allow the tasks' code with "
                         f"{opt_in}")
    own_tasks = Path(lm_eval.__file__).resolve().parent / "tasks"
    saved = (_yaml_loader.load_yaml, _yaml_loader._import_func_in_yml, _factory.load_yaml, utils.env)
    load_yaml, import_function, _, env = saved
    parsing: list[Path] = []

    def guarded_load_yaml(path, *args, **kwargs):
        parsing.append(Path(path).expanduser().resolve())
        try:
            return load_yaml(path, *args, **kwargs)
        finally:
            parsing.pop()

    def guarded_import(qual: str, base_dir: Path):
        base_dir = Path(base_dir).expanduser().resolve()
        if own_tasks not in (base_dir, *base_dir.parents):
            module, _, _ = str(qual).rpartition(".")
            local = base_dir / f"{module.replace('.', '/')}.py"
            where = f"{local}" if local.is_file() else f"the module {module or qual!r}"
            yaml = parsing[-1] if parsing else base_dir
            raise ValueError(refusal(f"lmeval: {yaml}: !function {qual} would run Python code from {where}",
                                     "a task YAML's own code", opt_in))
        return import_function(qual, base_dir)

    class Sandbox(SandboxedEnvironment):
        def unsafe_undefined(self, obj, attribute):
            raise ValueError(refusal(f"lmeval: a task's prompt template reads {attribute!r} of a "
                                     f"{type(obj).__name__}, which only code needs (Jinja's sandbox refuses it)",
                                     "a task YAML's own code", opt_in))

    sandbox = Sandbox(loader=env.loader, undefined=env.undefined, keep_trailing_newline=env.keep_trailing_newline)
    sandbox.filters.update(env.filters)
    sandbox.tests.update(env.tests)
    _yaml_loader.load_yaml = _factory.load_yaml = guarded_load_yaml
    _yaml_loader._import_func_in_yml = guarded_import
    utils.env = sandbox
    try:
        yield
    finally:
        _yaml_loader.load_yaml, _yaml_loader._import_func_in_yml, _factory.load_yaml, utils.env = saved


def _is_yaml(spec: str) -> bool:
    return spec.lower().endswith((".yaml", ".yml")) or Path(spec).is_file()


def task_manager(spec: str, include_path: list[str]):
    """(lm-eval TaskManager that knows `spec`, the name or YAML path to load). Only --include-path is indexed unless
    `spec` is found nowhere there (then lm-eval's own tasks are indexed too)."""
    _require_lm_eval()
    from lm_eval.tasks import TaskManager

    for path in include_path:
        if not Path(path).exists():
            raise FileNotFoundError(f"--include-path {path}: no such folder or file")
    if _is_yaml(spec):
        path = Path(spec)
        if not path.is_file():
            raise FileNotFoundError(f"lmeval:{spec}: no such YAML file")
        return TaskManager(include_path=list(include_path) or None, include_defaults=False), str(path.resolve())
    if include_path:
        manager = TaskManager(include_path=list(include_path), include_defaults=False)
        if spec in manager.all_tasks:
            return manager, spec
    manager = TaskManager(include_path=list(include_path) or None, include_defaults=True)
    if spec not in manager.all_tasks:
        where = f"under --include-path {', '.join(include_path)}" if include_path else "(no --include-path given)"
        raise ValueError(f"lmeval:{spec}: no lm-eval task, group or tag of that name {where} nor among lm-eval's own "
                         "tasks; give the folder of its YAML with --include-path, or lmeval:PATH/TO/TASK.yaml")
    return manager, spec


def _metric_name(key: str) -> str:
    metric, _, filter_name = key.partition(",")
    return metric if filter_name in ("", "none") else f"{metric} ({filter_name})"


def _plain(value):
    """A sample's fields as JSON: tuples to lists, numpy numbers to floats, anything else unknown to its text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, bool, int)) or value is None:
        return value
    if isinstance(value, float) or hasattr(value, "item"):
        number = float(value)
        return number if math.isfinite(number) else None
    return str(value)


def _sample(sample: dict) -> dict:
    """What results.json keeps of one lm-eval sample: its request(s), filtered response(s), target and scores (the
    document itself is in the data files, hashed beside)."""
    keep = {k: sample[k] for k in ("doc_id", "target", "arguments", "filtered_resps") if k in sample}
    keep.update({m: sample[m] for m in sample.get("metrics", []) if m in sample})
    return _plain(keep)


def task_files(manager, spec: str) -> list[Path]:
    """The YAML files a task or group was read from, and the local data files its configs name."""
    files: set[Path] = set()
    loaded = manager.load([spec])
    entry_names = [spec] + list(loaded["tasks"]) + list(loaded.get("groups", {}))
    for name in entry_names:
        entry = manager.task_index.get(name)
        if entry is not None and entry.yaml_path:
            files.add(Path(entry.yaml_path))
    if _is_yaml(spec):
        files.add(Path(spec))
    for task in loaded["tasks"].values():
        data_files = (task.config.dataset_kwargs or {}).get("data_files") or {}
        values = data_files.values() if isinstance(data_files, dict) else [data_files]
        for value in values:
            for file in [value] if isinstance(value, str) else list(value):
                if Path(file).is_file():
                    files.add(Path(file))
    return sorted(files)


def run_lm_eval(lm, spec: str, include_path: list[str] | None = None, *, limit: int | None = None,
                batch_size: int = 16, add_bos: bool | None = None, chat: bool = False,
                max_new_tokens: int | None = None, trust_remote_code: bool = False) -> tuple[dict, list[Path]]:
    """Run one lm-eval task, group or tag (`spec`: a name or YAML path) on a loaded model; returns (the JSON-ready
    result, the files read). A YAML's `!function` runs only with `trust_remote_code` (`task_code`)."""
    manager, target = task_manager(spec, list(include_path or []))
    from lm_eval import __version__ as lm_eval_version
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    device = next(lm.model.parameters()).device
    hflm = HFLM(pretrained=lm.model, tokenizer=lm.tokenizer, batch_size=batch_size, max_length=lm.max_length,
                device=str(device), add_bos_token=add_bos)
    with task_code(trust_remote_code):
        out = simple_evaluate(model=hflm, tasks=[target], task_manager=manager, limit=limit, log_samples=True,
                              bootstrap_iters=0, apply_chat_template=chat,
                              gen_kwargs={"max_gen_toks": max_new_tokens} if max_new_tokens else None)
        files = task_files(manager, target)
    rows, stderr, columns = {}, {}, []
    for name, values in out["results"].items():
        row = {}
        for key, value in values.items():
            if key in SKIPPED_KEYS or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            metric = _metric_name(key)
            if "_stderr" in key:
                stderr.setdefault(name, {})[metric.replace("_stderr", "")] = float(value)
                continue
            row[metric] = float(value)
            if metric not in columns:
                columns.append(metric)
        rows[name] = row
    # The headline: the requested task's (or group's) first metric, else the first row's.
    head = rows.get(out["configs"].get(target, {}).get("task", target)) or rows.get(target) or next(
        (r for r in rows.values() if r), {})
    metric = next(iter(head), None)
    higher = {task: _plain(v) for task, v in (out.get("higher_is_better") or {}).items()}
    result = {"format": "lmeval", "task": spec, "lm_eval_version": lm_eval_version, "rows": rows, "stderr": stderr,
              "columns": columns, "metric": metric, "overall": head.get(metric) if metric else None,
              "higher_is_better": higher, "n_shot": _plain(out.get("n-shot", {})),
              "n_samples": _plain(out.get("n-samples", {})), "limit": limit, "chat": chat,
              "configs": _plain(out.get("configs", {})),
              "predictions": {task: [_sample(s) for s in samples] for task, samples in out.get("samples", {}).items()}}
    return result, files


def run_task(lm, data, args, chat: bool, task) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks lmeval:NAME_OR_YAML --include-path DIR`: this module's entry in yunshan.eval.tasks."""
    spec = task.name.partition(":")[2]
    return run_lm_eval(lm, spec, args.include_path, limit=args.limit, batch_size=args.batch_size,
                       add_bos=args.add_bos, chat=args.chat == "on", max_new_tokens=args.max_new_tokens,
                       trust_remote_code=args.trust_remote_code)


def headline(task, result: dict, data) -> list:
    """Every metric of every row (the task, or a group and its subtasks), as lm-eval reports it."""
    from yunshan.io.artifacts import Metric

    out = []
    for name, row in result["rows"].items():
        higher = result.get("higher_is_better", {}).get(name, {})
        shots = (result.get("n_shot") or {}).get(name)
        bits = [f"lm-evaluation-harness {result.get('lm_eval_version', '')} task {name}".rstrip()]
        if shots is not None:
            bits.append(f"{shots}-shot")
        if result.get("chat"):
            bits.append("chat template")
        n = (result.get("n_samples") or {}).get(name, {})
        if n.get("effective"):
            bits.append(f"{n['effective']:,} documents")
        for metric, value in row.items():
            lower = higher.get(metric.split(" (")[0]) is False
            out.append(Metric(f"{task.name}/{name}/{metric}", f"{name} (lm-eval)", metric, value,
                              lower_is_better=lower, detail=", ".join(bits), eval_result=dict(
                                  task_type="text-generation", task_name="Text Generation", dataset_type=name,
                                  dataset_name=f"{name} (lm-eval task)", metric_type=metric.split(" (")[0],
                                  metric_name=metric, metric_value=round(value, 4))))
    return out


def lm_eval_items(spec: str, include_path: list[str] | None = None, *, trust_remote_code: bool = False,
                  opt_in: str = OPT_IN) -> list:
    """Decontamination's items of an lm-eval task: every evaluation and few-shot document, as the texts lm-eval
    shows the model (doc_to_text) and the answers it scores (doc_to_choice, else doc_to_target). The YAMLs' code
    runs only with `trust_remote_code` (`task_code`; `opt_in` is how the refusal says to allow it)."""
    manager, target = task_manager(spec, list(include_path or []))
    # Guarded throughout: loading resolves the YAMLs' functions, each document renders their templates.
    with task_code(trust_remote_code, opt_in):
        return list(_items(manager, target, spec))


def _items(manager, target: str, spec: str):
    from yunshan.data.decontamination import Text

    for name, task in manager.load([target])["tasks"].items():
        config = task.config
        # Few-shot examples leak as surely as scored documents: their split too, when it is another one.
        eval_split = config.test_split or config.validation_split
        shot_split = config.fewshot_split or config.training_split or config.validation_split
        sources = [(eval_split, task.eval_docs)]
        if shot_split and shot_split != eval_split:
            sources.append((shot_split, task.fewshot_docs() or []))
        for split, docs in sources:
            for i, doc in enumerate(docs):
                texts = [str(task.doc_to_text(doc))]
                if config.output_type == "multiple_choice":
                    texts += [str(c) for c in task.doc_to_choice(doc)]
                else:
                    target_text = task.doc_to_target(doc)
                    texts += [str(t) for t in (target_text if isinstance(target_text, list) else [target_text])]
                yield Text(f"lmeval:{name}: {split} document {i}", texts,
                           {"task": f"lmeval:{spec}", "id": f"{name}#{split}:{i}", "group": name})
