"""The stages of `yunshan run`: the recipe tree they read, one record per stage, and the function each record runs.

    yunshan run recipes/demo_tiny.yaml --dry-run       # the records decide the plan, the inputs checked and hashed

The pipeline recipe is a tree of the stage commands' own arguments: `tokenizer_extension` is `yunshan tokenizer
extend`'s ExtendArgs, `decontamination` is `yunshan data decontaminate`'s DecontaminateArgs, `eval` is `yunshan
eval`'s EvalArgs (with `after`: which trained models eval_after scores), `cpt`, `sft` and `preference` are the CptArgs, SftArgs and PrefArgs recipes of
`yunshan cpt`, `yunshan sft` and `yunshan pref`, `export` and `push` the ExportArgs and PushArgs of those commands. The runner fills
what connects the stages (model and tokenizer folders, output folders) with `dataclasses.replace`; those keys are
reserved in a pipeline recipe (RESERVED_KEYS). Adding a stage is one record in STAGES plus its function: the run
loop, the dry run, the fingerprints and the report read only the records.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yunshan.io.artifacts import TokenizerReport
from yunshan.eval.commands import EvalArgs
from yunshan.eval.decontamination import DecontaminateArgs
from yunshan.hub.export import ExportArgs
from yunshan.hub.push import PushArgs
from yunshan.prepare.args import PrepareArgs
from yunshan.tokenizer.extend import ExtendArgs
from yunshan.training.arguments import ModelArgs, TokenizerArgs, TrainArgs
from yunshan.training.cpt import CptArgs, CptDataArgs, MonitorArgs
from yunshan.training.preference import PrefArgs
from yunshan.training.sft import SftArgs
from yunshan.arguments.field_rules import check_fields


@dataclass
class StandInBaseArgs:
    """Stand-in base model for machines that cannot download one (the demo): a BPE tokenizer trained on general
    text and a small PanGu-π pretrained on it. Real recipes leave this out and name a downloaded base model."""

    tokenizer_corpus: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "text for the base tokenizer"})
    vocab_size: int = field(default=4000, metadata={"range": ">= 259",
        "help": "base tokenizer vocabulary (byte-level BPE)"})
    model: ModelArgs = field(default_factory=lambda: ModelArgs(preset="tiny"))
    data: CptDataArgs = field(default_factory=CptDataArgs)
    training: TrainArgs = field(default_factory=TrainArgs)

    def __post_init__(self):
        check_fields(self)

@dataclass
class PipelineEvalArgs(EvalArgs):
    """The `eval` section of a pipeline recipe: yunshan eval's settings (the runner fills `model` and `out`), and
    which trained models the eval_after stage scores."""

    after: str = field(default="all", metadata={
        "help": "models eval_after scores: all (every trained stage's model: cpt, sft, preference, so the table "
                "shows what each stage did) or final (the last trained model alone: half the evaluation time of a "
                "cpt + sft run)"})

    def __post_init__(self):
        super().__post_init__()
        if self.after not in ("all", "final"):
            raise ValueError(f"eval.after: {self.after!r} is not valid; use all (every trained model) or final "
                             "(the last trained model)")

    def eval_args(self, **changes) -> EvalArgs:
        """The `yunshan eval` arguments of this section (without the pipeline's own fields)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(EvalArgs)}
        return EvalArgs(**{**values, **changes})


@dataclass
class PipelineRecipe:
    """The YunShan pipeline: `yunshan run RECIPE.yaml [--from STAGE] [--dry-run] [key=value ...]`.

    A stage runs when its section is in the recipe; `enabled: false` (or null) in a section turns it off, and
    `enabled: true` alone turns a stage on with its defaults. Each section is the stage command's own arguments
    (yunshan.pipeline.stages). Paths may use ${samples} (the bundled sample data), ${data} (env YUNSHAN_DATA,
    default ./data), ${models} (env YUNSHAN_MODELS, default ./models), ${realdata} (env YUNSHAN_REALDATA, default
    ../shared/realdata: the real releases) and ${recipe_dir}."""

    name: str = field(default="yunshan", metadata={"help": "run name (used in reports and the model card)"})
    output_dir: str = field(default="runs/yunshan", metadata={"path": True,
        "help": "run folder: one subfolder per stage"})
    prepare: PrepareArgs | None = field(default=None, metadata={
        "help": "corpus preparation on datatrove before every other stage (yunshan data prepare): its corpus is "
                "${prepared} (OUTPUT_DIR/prepare/documents), which tokenizer_extension.corpus and cpt sources name"})
    model: ModelArgs | None = field(default=None, metadata={"help": "the base model (unless base is given)"})
    tokenizer: TokenizerArgs = field(default_factory=TokenizerArgs, metadata={
        "help": "the base model's tokenizer (path: default the model folder) and how new rows start"})
    base: StandInBaseArgs | None = field(default=None, metadata={"help": "stand-in base model (demo only)"})
    tokenizer_extension: ExtendArgs | None = field(default=None, metadata={
        "help": "vocabulary extension: yunshan tokenizer extend"})
    eval: PipelineEvalArgs | None = field(default=None, metadata={
        "help": "evaluation before (base model) and after (trained models): yunshan eval"})
    decontamination: DecontaminateArgs | None = field(default=None, metadata={
        "help": "n-gram overlap of the cpt, sft and preference sources with the evaluation sets (drop: true leaves the "
                "contaminated records out of training): yunshan data decontaminate"})
    cpt: CptArgs | None = field(default=None, metadata={"help": "continual pretraining: yunshan cpt"})
    sft: SftArgs | None = field(default=None, metadata={"help": "mixed SFT: yunshan sft"})
    preference: PrefArgs | None = field(default=None, metadata={
        "help": "preference tuning after SFT (DPO, IPO, KTO, ORPO, SimPO): yunshan pref"})
    export: ExportArgs | None = field(default=None, metadata={"help": "export with a model card: yunshan export"})
    push: PushArgs | None = field(default=None, metadata={"help": "push the export to the Hub: yunshan push"})

    def __post_init__(self):
        check_fields(self)
        if (self.base is not None) == (self.model is not None):
            raise ValueError("give exactly one of model (a downloaded base) or base (a stand-in base)")


# ---------------------------------------------------------------- where a run keeps what


class RunLayout:
    """The folders of one run: one per stage (`NN_stage`), and which model and tokenizer each stage starts from."""

    def __init__(self, recipe: PipelineRecipe):
        self.recipe = recipe
        self.out = Path(recipe.output_dir)
        self._resolved: dict[tuple, str] = {}  # Hub ids resolved once per run (one Hub request each)

    def _resolve(self, ref: str, revision: str | None, what: str, field: str) -> str:
        from yunshan.loading.hub_download import resolve_pretrained

        key = (ref, revision, what)
        if key not in self._resolved:
            self._resolved[key] = resolve_pretrained(ref, revision, what=what, field=field)
        return self._resolved[key]

    def section(self, stage: Stage):
        return getattr(self.recipe, stage.section)

    def enabled(self, name: str) -> bool:
        return self.section(STAGE[name]) is not None

    def folder(self, name: str) -> Path:
        if STAGE[name].folder is not None:
            return self.out / STAGE[name].folder
        return self.out / f"{STAGE_NAMES.index(name) - UNNUMBERED:02d}_{name}"

    def produced_by_earlier_stage(self, path: str) -> bool:
        """Whether `path` lies in the folder of a stage that runs before the ones reading it (the prepared corpus)."""
        if not self.enabled("prepare"):
            return False
        folder = Path(os.path.abspath(self.folder("prepare")))
        return folder == Path(os.path.abspath(path)) or folder in Path(os.path.abspath(path)).parents

    def base_model_dir(self, weights: bool = True) -> str:
        """The base model's folder: a Hub id in model.name_or_path resolves to its HF cache folder (downloaded
        unless HF_HUB_OFFLINE=1; without `weights` only config and tokenizer, as a dry run needs)."""
        if self.recipe.base is not None:
            return str(self.folder("base"))
        m = self.recipe.model
        return self._resolve(m.name_or_path, m.revision, "model" if weights else "tokenizer", "model.name_or_path")

    def base_tokenizer_dir(self) -> str:
        if self.recipe.tokenizer.path:
            t = self.recipe.tokenizer
            return self._resolve(t.path, t.revision, "tokenizer", "tokenizer.path")
        return self.base_model_dir(weights=False)

    def tokenizer_dir(self) -> str:
        return str(self.folder("tokenizer")) if self.enabled("tokenizer") else self.base_tokenizer_dir()

    def final_model_dir(self) -> str:
        for stage in ("preference", "sft", "cpt"):
            if self.enabled(stage):
                return str(self.folder(stage))
        return self.base_model_dir(weights=False)  # the same folder; the stage that reads weights fetches them

    def trained_model(self, path: str) -> ModelArgs:
        """The recipe's model settings (dtype, attention, remote code) for a model folder written by a stage."""
        base = self.recipe.model or self.recipe.base.model
        return dataclasses.replace(base, name_or_path=path, revision=None, preset=None, config_overrides=None)

    def tokenizer_args(self, path: str, base: str | None = None) -> TokenizerArgs:
        """The tokenizer `path` for a training stage; `base` is the tokenizer the stage's model was trained with
        (default: the base model's), so only ids past it are new rows."""
        return dataclasses.replace(self.recipe.tokenizer, path=path, revision=None,
                                   base_path=base or self.base_tokenizer_dir())

    def contamination_list(self, stage: str) -> str | None:
        """The contamination list training stage `stage` leaves out (a decontamination with drop: true that checks
        the stage's sources), else None."""
        if _drops_contaminated(self.recipe, stage):
            return str(self.folder("decontamination") / "contaminated.jsonl")
        return None


# ---------------------------------------------------------------- the stages


def run_prepare_stage(layout: RunLayout, p: PrepareArgs) -> dict:
    """The corpus preparation into the stage folder; decontamination without its own sets uses the eval section's."""
    from yunshan.prepare.pipeline import run_prepare
    from yunshan.prepare.report import render_summary

    d = p.decontamination
    e = layout.recipe.eval
    if d.enabled and not d.tasks and not d.heldout and e is not None:
        d = dataclasses.replace(d, tasks=list(e.tasks), heldout=list(e.heldout), data_dir=d.data_dir or e.data_dir,
                                include_path=list(d.include_path or e.include_path))
    out = layout.folder("prepare")
    summary = run_prepare(dataclasses.replace(p, out=str(out), decontamination=d))
    print(render_summary(summary, out), flush=True)
    return {k: summary[k] for k in ("documents_read", "documents_written", "chars_read", "chars_written",
                                    "chars_kept_share", "dropped", "seconds", "chars_per_second_per_core")} | {
        "near_duplicate_clusters": summary["near_duplicates"]["clusters"],
        "near_duplicates_removed": summary["near_duplicates"]["removed"], "corpus": "documents/"}


def _prepare_inputs(p: PrepareArgs) -> list[str]:
    return [path for i in p.inputs for path in ([i.path] if isinstance(i.path, str) else i.path)]


def _prepared_upstream(*names: str) -> Callable[[PipelineRecipe], tuple[str, ...]]:
    """The prepare stage is upstream of the stages that read text when it is in the recipe."""
    return lambda recipe: (("prepare",) if recipe.prepare is not None else ()) + names


def run_base(layout: RunLayout, b: StandInBaseArgs) -> dict:
    """Stand-in base: a byte-level BPE tokenizer on general text, then a small PanGu-π pretrained on it."""
    from yunshan.data.files import resolve_paths
    from yunshan.tokenizer.train import train_bpe_tokenizer
    from yunshan.training.checkpoints import remove_checkpoints
    from yunshan.training.cpt import run_cpt

    out = layout.folder("base")
    tok_dir = layout.out / "base_tokenizer"
    train_bpe_tokenizer(resolve_paths(b.tokenizer_corpus, "base.tokenizer_corpus"), b.vocab_size, tok_dir)
    summary = run_cpt(CptArgs(model=b.model, tokenizer=TokenizerArgs(path=str(tok_dir)), data=b.data,
                              training=dataclasses.replace(b.training, output_dir=str(out)),
                              monitor=MonitorArgs(every_steps=0)))
    remove_checkpoints(out)
    (out / "STAND_IN_BASE.md").write_text(
        "This model is a stand-in for a downloaded base model: a small PanGu-π and byte-level BPE tokenizer "
        "trained by `yunshan run` on the bundled general sample text only, because this machine cannot "
        "download a real base. Real recipes name a checkpoint folder or Hub id in `model.name_or_path` instead.\n")
    return {"train_loss": summary["train_loss"], "steps": summary["steps"],
            "tokens": summary["data_report"].tokens_trained}


def cpt_budget_tokens(recipe: PipelineRecipe) -> int | None:
    """The training tokens continual pretraining plans (training.max_steps, the embedding warm-up included, x the
    tokens of a step; under `accelerate launch` times the processes), which the tokenizer stage sizes the extension
    for (ExtendArgs.budget_tokens); None without a cpt stage."""
    import os

    c = recipe.cpt
    if c is None:
        return None
    t = c.training
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return t.total_steps() * t.per_device_batch_size * t.gradient_accumulation_steps * world * c.data.seq_len


def _describe_tokenizer(recipe: PipelineRecipe) -> dict:
    """The new tokens the extension will add at most, under cpt's planned budget, and the training tokens per new
    token that budget gives (with the warning `yunshan cpt` would print when they are too few)."""
    from yunshan.tokenizer.extend import budget_check, capped_new_tokens

    budget_tokens = cpt_budget_tokens(recipe)
    allowed, capped = capped_new_tokens(dataclasses.replace(recipe.tokenizer_extension, budget_tokens=budget_tokens))
    budget = budget_check(budget_tokens, allowed) if budget_tokens is not None and allowed else None
    return {"new_tokens": allowed, **({"capped": capped} if capped else {}),
            **({"budget": budget} if budget else {}),
            **({"warnings": [budget["warning"]]} if budget and budget["warning"] else {})}


def _tokenizer_reads(recipe: PipelineRecipe) -> tuple[dict, list[str]]:
    """The tokenizer stage reads cpt's planned budget: a longer or shorter cpt may change the new tokens."""
    return {"budget_tokens": cpt_budget_tokens(recipe)}, []


def run_tokenizer(layout: RunLayout, t: ExtendArgs) -> dict:
    from transformers import AutoTokenizer

    from yunshan.tokenizer.extend import extend_tokenizer

    out = layout.folder("tokenizer")
    extension = extend_tokenizer(dataclasses.replace(t, base=layout.base_tokenizer_dir(), out=str(out),
                                                     overwrite=True, budget_tokens=cpt_budget_tokens(layout.recipe)))
    compression = extension.pop("compression", None)
    TokenizerReport.from_json({"extension": extension, "compression": compression or None}, "tokenizer stage").write(out)
    from yunshan.loading.remote_code import refuse_remote_code

    trust = layout.trained_model(str(out)).trust_remote_code
    sizes = []
    for folder in (layout.base_tokenizer_dir(), str(out)):
        with refuse_remote_code(folder, "model.trust_remote_code: true in the recipe"):
            sizes.append(len(AutoTokenizer.from_pretrained(folder, trust_remote_code=trust)))
    return {"base_vocab": sizes[0], "new_vocab": sizes[1], "new_tokens": sizes[1] - sizes[0],
            "new_tokens_requested": t.new_tokens, "budget_cap": extension["new_tokens"].get("budget_cap")}


def _eval(layout: RunLayout, e: PipelineEvalArgs, stage: str, model_dirs: list[str]) -> dict:
    from yunshan.eval.commands import run_eval

    trust = e.trust_remote_code or layout.trained_model(model_dirs[0]).trust_remote_code
    report = run_eval(e.eval_args(model=model_dirs, out=str(layout.folder(stage)), trust_remote_code=trust))
    return {"results": "results.json", "models": model_dirs, "seconds": report.get("seconds")}


def run_eval_before(layout: RunLayout, e: PipelineEvalArgs) -> dict:
    return _eval(layout, e, "eval_before", [layout.base_model_dir()])


def eval_after_models(layout: RunLayout, e: PipelineEvalArgs) -> list[str]:
    """The models eval_after scores: every trained model (after continual pretraining: the replay's effect on
    forgetting; after SFT; after preference tuning), or with `eval.after: final` the last one alone."""
    models = [str(layout.folder(s)) for s in TRAINING_STAGES if layout.enabled(s)] or [layout.base_model_dir()]
    return models[-1:] if e.after == "final" else models


def run_eval_after(layout: RunLayout, e: PipelineEvalArgs) -> dict:
    return _eval(layout, e, "eval_after", eval_after_models(layout, e))


def _run_name(layout: RunLayout, training, stage: str) -> str:
    """The trackers' run name of a stage: the recipe's, else RUN_FOLDER/stage (03_cpt alone says little)."""
    return training.run_name or f"{layout.out.resolve().name}/{stage}"


def run_cpt_stage(layout: RunLayout, c: CptArgs) -> dict:
    from yunshan.training.checkpoints import remove_checkpoints
    from yunshan.training.cpt import run_cpt

    out = layout.folder("cpt")
    summary = run_cpt(dataclasses.replace(
        c, model=layout.trained_model(layout.base_model_dir()), tokenizer=layout.tokenizer_args(layout.tokenizer_dir()),
        data=dataclasses.replace(c.data, exclude=layout.contamination_list("cpt")),
        training=dataclasses.replace(c.training, output_dir=str(out), run_name=_run_name(layout, c.training, "cpt"))))
    remove_checkpoints(out)
    report = summary["data_report"]
    result = {"train_loss": summary["train_loss"], "steps": summary["steps"], "tokens": report.tokens_trained,
              "tokens_by_source": {n: s.tokens_trained for n, s in report.sources.items()},
              "bpc": summary.get("bpc"), "precision": report.precision,
              "contaminated_dropped": sum(s.dropped.get("contaminated", 0) for s in report.sources.values())}
    if report.extension_cost is not None:
        result["extension_cost"] = report.extension_cost
    if report.embedding_warmup is not None:
        result["embedding_warmup"] = {k: v for k, v in report.embedding_warmup.items() if k != "checks"}
    return result


def run_sft_stage(layout: RunLayout, s: SftArgs) -> dict:
    from yunshan.training.checkpoints import remove_checkpoints
    from yunshan.training.sft import run_sft

    out = layout.folder("sft")
    previous = str(layout.folder("cpt")) if layout.enabled("cpt") else layout.base_model_dir()
    tokenizer = previous if layout.enabled("cpt") else layout.tokenizer_dir()
    summary = run_sft(dataclasses.replace(
        # After cpt the model's rows for the new tokens are trained: the cpt folder's tokenizer is SFT's base, so
        # SFT neither resets those rows nor trains the whole embedding matrix again.
        s, model=layout.trained_model(previous), tokenizer=layout.tokenizer_args(
            tokenizer, base=previous if layout.enabled("cpt") else None),
        data=dataclasses.replace(s.data, exclude=layout.contamination_list("sft")),
        training=dataclasses.replace(s.training, output_dir=str(out), run_name=_run_name(layout, s.training, "sft"))))
    remove_checkpoints(out)
    report = summary["data_report"]
    return {"train_loss": summary["train_loss"], "steps": summary["steps"], "samples": report.samples,
            "precision": report.precision,
            "samples_by_source": {n: v.samples for n, v in report.sources.items()},
            "contaminated_dropped": sum(v.dropped.get("contaminated", 0) for v in report.sources.values())}


def run_preference_stage(layout: RunLayout, p: PrefArgs) -> dict:
    from yunshan.training.checkpoints import remove_checkpoints
    from yunshan.training.preference import run_pref

    out = layout.folder("preference")
    previous = next((s for s in ("sft", "cpt") if layout.enabled(s)), None)
    model = str(layout.folder(previous)) if previous else layout.base_model_dir()
    # As SFT after cpt: the previous stage's tokenizer is the base of this one, so rows it trained are kept as they
    # are (neither grown again from subword means nor trained in full).
    tokenizer = layout.tokenizer_args(model if previous else layout.tokenizer_dir(), base=model if previous else None)
    summary = run_pref(dataclasses.replace(
        p, model=layout.trained_model(model), tokenizer=tokenizer,
        data=dataclasses.replace(p.data, exclude=layout.contamination_list("preference")),
        training=dataclasses.replace(p.training, output_dir=str(out),
                                     run_name=_run_name(layout, p.training, "preference"))))
    remove_checkpoints(out)
    report = summary["data_report"]
    return {"train_loss": summary["train_loss"], "steps": summary["steps"], "samples": report.samples,
            "precision": report.precision, "method": report.method, "heldout_pairs": report.heldout_pairs,
            "heldout": report.heldout, "bpc": summary.get("bpc"),
            "samples_by_source": {n: v.samples for n, v in report.sources.items()},
            "contaminated_dropped": sum(v.dropped.get("contaminated", 0) for v in report.sources.values())}


def decontamination_plan(recipe: PipelineRecipe, d: DecontaminateArgs) -> tuple[DecontaminateArgs, list, list]:
    """The decontamination settings with the evaluation sets resolved (its own, else the eval section's tasks,
    held-out texts and held-out instruction sets, plus the cpt monitor's held-out files) and the training sources it
    reads (every cpt and sft
    source; the preference sources: preference_sources). `yunshan data decontaminate --config RECIPE` uses the same
    plan."""
    from yunshan.eval.texts import default_texts

    e = recipe.eval
    tasks = list(d.tasks or (e.tasks if e else []))
    heldout = list(d.heldout or (e.heldout if e else []))
    instructions = list(d.instructions or (e.instructions if e else []))
    if "bpc" in tasks and not heldout:
        heldout = [f"{p.stem}={p}" for p in default_texts("bpc")]
    if not d.heldout and recipe.cpt is not None:
        seen = {str(Path(spec.split("=", 1)[-1]).resolve()) for spec in heldout}
        labels = {spec.split("=", 1)[0] for spec in heldout}
        for path in recipe.cpt.monitor.general + recipe.cpt.monitor.domain:
            if str(Path(path).resolve()) in seen:
                continue
            label = Path(path).stem if Path(path).stem not in labels else f"monitor-{Path(path).stem}"
            heldout.append(f"{label}={path}")
            labels.add(label)
            seen.add(str(Path(path).resolve()))
    # The opt-in the eval stage runs its lm-eval tasks' code under (its own or the model's) covers the same tasks here.
    model = recipe.model or (recipe.base.model if recipe.base else None)
    trust = d.trust_remote_code or bool(e and e.trust_remote_code) or bool(model and model.trust_remote_code)
    plan = dataclasses.replace(d, tasks=tasks, heldout=heldout, instructions=instructions,
                               data_dir=d.data_dir or (e.data_dir if e else None),
                               include_path=list(d.include_path or (e.include_path if e else [])),
                               trust_remote_code=trust)
    cpt_sources = list(recipe.cpt.data.sources) if recipe.cpt is not None and "cpt" in d.stages else []
    sft_sources = list(recipe.sft.data.sources) if recipe.sft is not None and "sft" in d.stages else []
    return plan, cpt_sources, sft_sources


def preference_sources(recipe: PipelineRecipe, d: DecontaminateArgs | None = None) -> tuple[list, int]:
    """The preference stage's sources and its data.seed (a scored record's pairs depend on it), which the
    decontamination reads as `yunshan pref` does; none when the decontamination `d` leaves the stage out."""
    p = recipe.preference
    d = d or recipe.decontamination
    checked = d is None or "preference" in d.stages
    return (list(p.data.sources), p.data.seed) if p is not None and checked else ([], 0)


def run_decontamination(layout: RunLayout, d: DecontaminateArgs) -> dict:
    from yunshan.eval.decontamination import render_decontamination
    from yunshan.eval.decontamination import run_decontamination as check
    from yunshan.io.folder_lock import folder_lock

    plan, cpt_sources, sft_sources = decontamination_plan(layout.recipe, d)
    pref_sources, pref_seed = preference_sources(layout.recipe, d)
    out = layout.folder("decontamination")
    with folder_lock(out, "decontamination"):
        report, shown = check(dataclasses.replace(plan, out=str(out)), cpt_sources, sft_sources,
                              pref_sources=pref_sources, pref_seed=pref_seed)
    print(render_decontamination(report, shown, out), flush=True)
    return {"n": report.n, "cjk_n": report.cjk_n, "records": report.records, "overlapping": report.overlapping,
            "contaminated": report.contaminated, "hits": report.hits, "drop": report.drop,
            "dirty": sum(v.dirty for v in report.eval_sets.values()),
            "partial": sum(v.partial for v in report.eval_sets.values()),
            "eval_sets": {k: v.items for k, v in report.eval_sets.items()}, "report": report.FILE}


def _drops_contaminated(recipe: PipelineRecipe, stage: str) -> bool:
    d = recipe.decontamination
    return d is not None and d.drop and stage in d.stages


def _after_decontamination(stage: str, *names: str) -> Callable[[PipelineRecipe], tuple[str, ...]]:
    """Upstream stages of training stage `stage`: these, and the decontamination when its list is left out of the
    stage's training (a decontamination that only reports, or checks other stages, changes nothing it reads)."""
    return lambda recipe: names + (("decontamination",) if _drops_contaminated(recipe, stage) else ())


def _decontamination_reads(recipe: PipelineRecipe) -> tuple[dict, list[str]]:
    """What the decontamination reads outside its section: the training sources and the evaluation sets."""
    plan, cpt_sources, sft_sources = decontamination_plan(recipe, recipe.decontamination)
    pref_sources, pref_seed = preference_sources(recipe, recipe.decontamination)
    settings = {"cpt": [dataclasses.asdict(s) for s in cpt_sources], "sft": [dataclasses.asdict(s) for s in sft_sources],
                "tasks": plan.tasks, "heldout": plan.heldout, "data_dir": plan.data_dir,
                "include_path": plan.include_path}
    if plan.instructions:  # only then: a recipe without held-out instruction sets keeps its settings (and hash)
        settings["instructions"] = [dataclasses.asdict(s) for s in plan.instructions]
    if pref_sources:  # only then: a recipe without a preference stage keeps the settings (and the stage's hash)
        settings["preference"] = {"sources": [dataclasses.asdict(s) for s in pref_sources], "seed": pref_seed}
    paths = _source_paths(cpt_sources) + _source_paths(sft_sources) + _source_paths(pref_sources) + _source_paths(
        plan.instructions) + _labelled_paths(plan.tasks) + _labelled_paths(
        plan.heldout) + _lm_eval_yamls(plan.tasks) + list(plan.include_path) + ([plan.data_dir] if plan.data_dir
                                                                                 else [])
    return settings, paths


def run_export(layout: RunLayout, e: ExportArgs) -> dict:
    from yunshan.hub.export import export_model

    out = layout.folder("export")
    push = layout.recipe.push
    options = {f.name: getattr(e, f.name) for f in dataclasses.fields(e) if f.name not in ("source", "out")}
    options.update(name=e.name or layout.recipe.name, repo_id=e.repo_id or (push.repo_id if push else None),
                   overwrite=True,
                   trust_remote_code=e.trust_remote_code or layout.trained_model(str(out)).trust_remote_code)
    result = export_model(str(layout.out), str(out), **options)
    return {"files": sorted(f["path"] for f in result["files"]), "bytes": result.get("bytes"),
            "parameters": result.get("parameters"), "notes": result.get("notes")}


def run_push(layout: RunLayout, p: PushArgs) -> dict:
    from yunshan.hub.push import push_folder

    settings = {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.name not in ("folder", "repo_id")}
    result = push_folder(str(layout.folder("export")), p.repo_id, **settings)
    layout.folder("push").mkdir(parents=True, exist_ok=True)
    (layout.folder("push") / "push.json").write_text(json.dumps(result, indent=2, default=str))
    return result


# ---------------------------------------------------------------- what each stage reads, for hashing and checks


def _source_paths(sources) -> list[str]:
    return [p for s in sources if s.path is not None for p in ([s.path] if isinstance(s.path, str) else s.path)]


def _labelled_paths(specs: list[str]) -> list[str]:
    return [spec.split("=", 1)[1] for spec in specs if "=" in spec]


def _lm_eval_yamls(specs: list[str]) -> list[str]:
    """The YAML files named by lmeval:PATH tasks (a task name is found under include_path, listed apart)."""
    return [spec.partition(":")[2] for spec in specs if spec.startswith("lmeval:")
            and spec.lower().endswith((".yaml", ".yml"))]


def _eval_inputs(e: EvalArgs) -> list[str]:
    return _labelled_paths(e.heldout) + list(e.text) + _labelled_paths(e.tasks) + _lm_eval_yamls(e.tasks) + list(
        e.include_path) + (
        [e.data_dir] if e.data_dir else []) + ([e.diversity_text] if e.diversity_text else []) + _source_paths(
        e.instructions)


def _check_words(t: ExtendArgs) -> list[str]:
    from yunshan.tokenizer import resolve_word_lists

    try:
        resolve_word_lists(t.words)
    except (ValueError, FileNotFoundError) as err:
        return [f"tokenizer_extension.words: {err}"]
    return []


def _check_sources(section: str) -> Callable[[Any], list[str]]:
    def check(args) -> list[str]:
        if not args.data.sources:
            return [f"{section}.data.sources is empty"]
        opened = {"sft": _open_sft_sources, "preference": _open_preference_sources}.get(section, _open_cpt_sources)
        return opened(section, args)

    return check


# How far the dry run reads into a file to find its first usable record when bad records are skipped.
OPEN_RECORDS = 200


def _first_usable(records, policy: str) -> str | None:
    """None if the first records of a file hold a usable one (under `policy`), else why not."""
    from yunshan.data.records import BadRecord

    first_bad = None
    for n, record in enumerate(records):
        if not isinstance(record, BadRecord):
            return None
        first_bad = first_bad or record
        if policy == "fail" or record.reason == "corrupt_file" or n + 1 >= OPEN_RECORDS:
            break
    if first_bad is None:
        return "holds no record"
    skipped = "" if policy == "fail" else f" (on_bad_record skip: no usable record among the first {n + 1})"
    return first_bad.describe() + skipped


def _open_files(key: str, files_of: Callable[[], list[str]], records_of: Callable[[str], Any], policy: str
                ) -> list[str]:
    """Open every file a source names and read up to its first usable record: a problem per file that cannot be
    read as the stage will read it (format, compression, text field, encoding), found before anything trains."""
    try:
        files = files_of()
    except FileNotFoundError:
        return []  # the dry run lists what is missing
    except (ValueError, OSError) as err:
        return [f"{key}: {err}"]
    problems = []
    for path in files:
        try:
            why = _first_usable(records_of(path), policy)
        except (ValueError, OSError, EOFError) as err:
            why = str(err)
        if why is not None:
            problems.append(f"{key}: {path}: {why}" if path not in why else f"{key}: {why}")
    return problems


def _open_cpt_sources(section: str, args) -> list[str]:
    from yunshan.data.sources import read_file_records, resolve_files

    problems = []
    for source in args.data.sources:
        if source.path is None:
            continue  # a `datasets` dataset: opened by the stage (a Hub name may need the network)
        problems += _open_files(f"{section}.data.sources.{source.name}", lambda s=source: resolve_files(s),
                                lambda path, s=source: (r for r, _ in read_file_records(path, s, {})),
                                args.data.on_bad_record)
    return problems


def _open_sft_sources(section: str, args) -> list[str]:
    from yunshan.data.conversations import _files, _records

    problems = []
    for source in args.data.sources:
        problems += _open_files(f"{section}.data.sources.{source.name}", lambda s=source: _files(s),
                                lambda path, s=source: (t for _, t in _records(s, path)), args.data.on_bad_record)
    return problems


def _open_preference_sources(section: str, args) -> list[str]:
    from yunshan.data.preference import _files, preference_records

    problems = []
    for source in args.data.sources:
        problems += _open_files(f"{section}.data.sources.{source.name}", lambda s=source: _files(s),
                                lambda path, s=source: (items for _, items in preference_records(s, paths=[path])),
                                args.data.on_bad_record)
    return problems


def _check_extension(t: ExtendArgs) -> list[str]:
    """The word lists resolve, and every corpus file opens and yields a text as `yunshan tokenizer extend` reads it."""
    from yunshan.data.sources import read_file_records
    from yunshan.tokenizer.corpus import _source, corpus_files

    source = _source(t.corpus, t.format, t.text_field, t.txt_document)
    return _check_words(t) + _open_files(
        "tokenizer_extension.corpus", lambda: corpus_files(t.corpus, format=t.format, what="tokenizer_extension.corpus"),
        lambda path: (r for r, _ in read_file_records(path, source, {})), t.on_bad_record)


def _check_texts(key: str, paths: list[str]) -> list[str]:
    """Held-out texts open and hold a text (read as bits per character reads them)."""
    from yunshan.data.records import read_texts

    problems = []
    for path in paths:
        if not Path(path).is_file():
            continue  # reported as missing
        try:
            next(iter(read_texts(path, f"{key} {path}")), None)
        except (ValueError, OSError) as err:
            problems.append(str(err))
    return problems


def _check_cpt(args) -> list[str]:
    return _check_sources("cpt")(args) + _check_texts("cpt.monitor", args.monitor.general + args.monitor.domain)


def _check_preference(args) -> list[str]:
    return _check_sources("preference")(args) + _check_texts("preference.monitor",
                                                             args.monitor.general + args.monitor.domain)


def _check_eval(e: EvalArgs) -> list[str]:
    """Held-out texts open and hold a text; held-out instruction sets open as yunshan sft reads them."""
    from yunshan.data.conversations import _files, _records

    problems = _check_texts("eval.heldout", _labelled_paths(e.heldout))
    for source in e.instructions:
        problems += _open_files(f"eval.instructions.{source.name}", lambda s=source: _files(s),
                                lambda path, s=source: (t for _, t in _records(s, path)), "fail")
    if e.instructions and "chat_loss" not in e.tasks:
        problems.append("eval.instructions are given but eval.tasks has no chat_loss: they would not be scored")
    return problems


@dataclass(frozen=True)
class Stage:
    """One stage of `yunshan run`."""

    name: str
    section: str  # the recipe section it reads (a field of PipelineRecipe)
    # earlier stages whose outputs it reads (their fingerprints enter its own), or a function of the recipe
    upstream: tuple[str, ...] | Callable[[PipelineRecipe], tuple[str, ...]]
    inputs: Callable[[Any], list[str]]  # data files and folders it reads, from its section: hashed, checked to exist
    distributed: bool  # under `accelerate launch`, runs on every process (else on the main one while the rest wait)
    run: Callable[[RunLayout, Any], dict]  # (layout, section) -> the summary kept in run.json
    filled: tuple[str, ...] = ()  # keys of its section the runner fills (reserved in recipes)
    check: Callable[[Any], list[str]] = lambda args: []  # dry-run problems beyond missing inputs
    # (settings, data files) it reads outside its section: both enter its fingerprint, the files are checked
    reads: Callable[[PipelineRecipe], tuple[dict, list[str]]] | None = None
    # what the dry run's plan says about the stage beyond run/skip (e.g. the tokenizer's new tokens as capped); its
    # "warnings", if any, are also listed at the top of the dry run and printed
    describe: Callable[[PipelineRecipe], dict] | None = None
    folder: str | None = None  # a folder name of its own instead of NN_name (the stages after keep their numbers)

    def upstream_in(self, recipe: PipelineRecipe) -> tuple[str, ...]:
        return self.upstream(recipe) if callable(self.upstream) else self.upstream


STAGES: tuple[Stage, ...] = (
    # First, in a folder without a number: the stages after it kept the numbers they had before it existed.
    Stage("prepare", "prepare", (), _prepare_inputs, False, run_prepare_stage, filled=("out",), folder="prepare"),
    Stage("base", "base", (), lambda b: b.tokenizer_corpus + _source_paths(b.data.sources), False, run_base,
          filled=("training.output_dir",), check=lambda b: _open_cpt_sources("base", b)),
    Stage("tokenizer", "tokenizer_extension", _prepared_upstream("base"),
          lambda t: t.corpus + t.report_texts + [w for w in t.words if not w.startswith("builtin:")], False,
          run_tokenizer, filled=("base", "revision", "out", "overwrite", "budget_tokens"), check=_check_extension,
          reads=_tokenizer_reads, describe=_describe_tokenizer),
    Stage("eval_before", "eval", ("base",), _eval_inputs, False, run_eval_before, filled=("model", "out"),
          check=_check_eval),
    Stage("decontamination", "decontamination", _prepared_upstream(), lambda d: [], False, run_decontamination,
          filled=("inputs", "format", "text_field", "out"), reads=_decontamination_reads),
    Stage("cpt", "cpt", _after_decontamination("cpt", "prepare", "base", "tokenizer"),
          lambda c: _source_paths(c.data.sources) + c.monitor.general + c.monitor.domain, True, run_cpt_stage,
          filled=("model", "tokenizer", "training.output_dir", "data.exclude"), check=_check_cpt),
    Stage("sft", "sft", _after_decontamination("sft", "base", "tokenizer", "cpt"), lambda s: _source_paths(s.data.sources),
          True, run_sft_stage, filled=("model", "tokenizer", "training.output_dir", "data.exclude"),
          check=_check_sources("sft")),
    Stage("preference", "preference", _after_decontamination("preference", "base", "tokenizer", "cpt", "sft"),
          lambda p: _source_paths(p.data.sources) + p.monitor.general + p.monitor.domain, True, run_preference_stage,
          filled=("model", "tokenizer", "training.output_dir"), check=_check_preference),
    Stage("eval_after", "eval", ("base", "tokenizer", "cpt", "sft", "preference"), _eval_inputs, False,
          run_eval_after, filled=("model", "out")),
    Stage("export", "export", ("base", "tokenizer", "eval_before", "decontamination", "cpt", "sft", "preference",
                               "eval_after"),
          lambda e: e.eval, False, run_export, filled=("source", "out", "overwrite")),
    Stage("push", "push", ("export",), lambda p: [], False, run_push, filled=("folder",),
          check=lambda p: [] if p.repo_id else ["push.repo_id is not set"]),
)
STAGE = {s.name: s for s in STAGES}
TRAINING_STAGES = ("cpt", "sft", "preference")  # the stages that write a model, in order
STAGE_NAMES = tuple(STAGE)
UNNUMBERED = sum(1 for s in STAGES if s.folder is not None)  # stages before the numbered ones

def _recipe_variables(data: dict, variables: dict[str, str]) -> dict[str, str]:
    """${prepared}: the prepare stage's corpus, OUTPUT_DIR/prepare/documents (output_dir as the recipe gives it)."""
    from yunshan.arguments.recipe import expand_variables

    output_dir = data.get("output_dir") if isinstance(data.get("output_dir"), str) else "runs/yunshan"
    return {"prepared": f"{expand_variables(output_dir, variables)}/prepare/documents"}


PipelineRecipe.recipe_variables = staticmethod(_recipe_variables)
PipelineRecipe.RESERVED_KEYS = {
    f"{s.section}.{key}": f"set by yunshan run ({s.name} stage: the folders that connect the stages); remove it"
    for s in STAGES for key in s.filled}


def unprepared(recipe: PipelineRecipe) -> PipelineRecipe:
    """The recipe with ${prepared} (the prepare stage's corpus) replaced by the prepare stage's own inputs: what a
    benchmark that runs one stage of the recipe, without its preparation, reads (the raw corpus the preparation
    would clean). A cpt source reading ${prepared} needs a single prepare input."""
    prepared = _recipe_variables({"output_dir": recipe.output_dir}, {})["prepared"]
    inputs = _prepare_inputs(recipe.prepare) if recipe.prepare is not None else []
    if not inputs:
        return recipe

    def same(path: str) -> bool:
        return os.path.abspath(path) == os.path.abspath(prepared)

    def raw(path: str, what: str) -> str:
        if not same(path):
            return path
        if len(inputs) != 1:
            raise ValueError(f"{what} reads ${{prepared}}, built from {len(inputs)} prepare inputs; name one")
        return inputs[0]

    extension = recipe.tokenizer_extension
    if extension is not None:
        corpus = [p for c in extension.corpus for p in (inputs if same(c) else [c])]
        recipe = dataclasses.replace(recipe, tokenizer_extension=dataclasses.replace(extension, corpus=corpus))
    if recipe.cpt is not None:
        sources = [dataclasses.replace(s, path=raw(s.path, f"cpt source {s.name!r}")) for s in recipe.cpt.data.sources]
        recipe = dataclasses.replace(recipe, cpt=dataclasses.replace(
            recipe.cpt, data=dataclasses.replace(recipe.cpt.data, sources=sources)))
    return recipe
