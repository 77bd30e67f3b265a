"""How a rerun of `yunshan cpt` / `yunshan sft` starts: fresh, resumed, finished from its last checkpoint, or left
alone because it is finished; and which recipe changes a resumed run accepts.

    yunshan cpt --config RECIPE.yaml                            # a rerun resumes, finishes, or says it is finished
    yunshan cpt --config RECIPE.yaml training.max_steps=2000    # a longer run from the last checkpoint (recorded)

Every checkpoint holds `yunshan_run.json` (RUN_FILE): the resolved recipe it was trained with, the run's total
steps, the sequences per step and the safe changes of earlier resumes. `plan_run` compares the rerun's recipe with
it. A change to anything that decides the data stream or the model (data, model, tokenizer, LoRA, embedding
warm-up, optimiser and schedule, seeds, precision, batch layout) is refused with the changed fields listed: the run
would train its first steps one way and the rest another, while its saved recipe and data report claim the new
values throughout. Changes to what is only logged or saved, and a longer run (max_steps or epochs upward), are
allowed and recorded (the data report's `resumes`).

The Trainer always saves a checkpoint at the last step, so a complete checkpoint at the run's total steps means
the training is done. The run folder's final outputs count only under their marker (yunshan.io.artifacts.FinalOutputs,
yunshan_complete.json, naming the step), which the final save writes last and a run removes before it changes
anything in the folder (`reopen`). With the marker in place the run is left alone; without it (killed between that
checkpoint and the end of the final save) the run loads the checkpoint and saves, with no extra step, exactly what
an uninterrupted run saves, and removes the temporary files the killed save left.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yunshan.training.checkpoints import RUN_FILE, checkpoint_steps

# Settings that decide only what is logged, measured or saved (and where), or how the same numbers are computed
# (gradient checkpointing, the chunked loss): a resumed run may change them.
SAFE_KEYS = ("training.output_dir", "training.resume", "training.logging_steps", "training.save_steps",
             "training.save_total_limit", "training.report_to", "training.run_name",
             "training.gradient_checkpointing", "training.loss", "training.loss_chunk_tokens")
# The run's length: a resumed run may grow it (the schedule then stretches over the new total), never shrink it.
LENGTH_KEYS = ("training.max_steps", "training.epochs")


class ResumeError(ValueError):
    """A rerun that cannot continue its checkpoint as asked; the message is one line and says what to do."""


@dataclass
class RunPlan:
    """What a (re)run does: `fresh`, `resume` (train on from `checkpoint`), `finish` (the checkpoint is at the last
    step: save it, no training) or `done` (already finished: touch nothing)."""

    action: str
    checkpoint: Path | None = None
    step: int = 0
    total_steps: int | None = None  # the checkpoint's recorded total (None for a fresh run or an old checkpoint)
    changes: dict[str, list] = field(default_factory=dict)  # safe changes against the checkpoint: key -> [old, new]
    resumes: list[dict] = field(default_factory=list)  # every resume of this run so far, this one included


def checkpoint_step(checkpoint: Path) -> int:
    return int(Path(checkpoint).name.rsplit("-", 1)[1])


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """A resolved recipe as {dotted key: value}; a list of named items (sources) by name, plus its list of names."""
    join = (lambda k: f"{prefix}.{k}" if prefix else str(k))
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            out.update(flatten(value, join(key)))
        return out or {prefix: {}}
    if isinstance(obj, list) and obj and all(isinstance(x, dict) and "name" in x for x in obj):
        names = [x["name"] for x in obj]
        if len(set(map(str, names))) == len(names):
            out = {prefix: names}
            for item in obj:
                out.update(flatten(item, join(item["name"])))
            return out
    return {prefix: obj}


def _comparable(value: Any) -> Any:
    # the snapshot went through JSON: compare the current recipe as JSON would give it back
    return json.loads(json.dumps(value, default=str))


def compare_recipes(old: dict, new: dict, safe: tuple[str, ...]) -> tuple[dict[str, list], dict[str, list]]:
    """(refused, allowed) changes between two resolved recipes (as dicts), each {dotted key: [old, new]}.

    `safe` holds keys (or prefixes ending in ".") a resumed run may change; LENGTH_KEYS may only grow."""
    a, b = flatten(_comparable(old)), flatten(_comparable(new))
    refused, allowed = {}, {}
    for key in sorted(set(a) | set(b), key=lambda k: (k.count("."), k)):
        if a.get(key, "<absent>") == b.get(key, "<absent>"):
            continue
        if any(key.startswith(other + ".") for other in refused):
            continue  # a whole source added or removed is reported once, by the list of names
        change = [a.get(key), b.get(key)]
        if key in LENGTH_KEYS:
            longer = isinstance(change[1], (int, float)) and (change[0] is None or (
                isinstance(change[0], (int, float)) and change[1] > change[0]))
            (allowed if longer else refused)[key] = change
        elif key in safe or any(key.startswith(p) for p in safe if p.endswith(".")):
            allowed[key] = change
        else:
            refused[key] = change
    return refused, allowed


def _describe(changes: dict[str, list]) -> str:
    return ", ".join(f"{key} {json.dumps(old, ensure_ascii=False, default=str)} -> "
                     f"{json.dumps(new, ensure_ascii=False, default=str)}" for key, (old, new) in changes.items())


def in_one_vocabulary(recipe: dict) -> dict:
    """A recipe (as a dict) with its precision settings in yunshan.loading.precision's names, so both sides of a
    comparison spell them alike: a checkpoint whose run file says `training.precision: bf16` (written before the short
    names were read as torch's, or by a recipe whose field was set after it was built) compares equal to the same recipe
    saying bfloat16."""
    from yunshan.loading.precision import SHORT_NAMES

    recipe = json.loads(json.dumps(recipe, default=str))
    for section, key in (("training", "precision"), ("model", "dtype")):
        part = recipe.get(section)
        if isinstance(part, dict) and part.get(key) in SHORT_NAMES:
            part[key] = SHORT_NAMES[part[key]]
    return recipe


def read_run_file(checkpoint: Path) -> dict | None:
    path = Path(checkpoint) / RUN_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ResumeError(f"{path}:{err.lineno}: not valid JSON ({err.msg}); the checkpoint is damaged: resume "
                          "from an earlier one (training.resume=PATH) or start over (training.resume=never)") from None
    if not isinstance(data, dict) or not isinstance(data.get("recipe"), dict):
        raise ResumeError(f"{path}: field 'recipe' is missing; the checkpoint is damaged: resume from an earlier one "
                          "(training.resume=PATH) or start over (training.resume=never)")
    return data


def outputs_finished(out: Path, kind: str, step: int) -> bool:
    """Whether the final save of a run that trained `step` steps completed: its marker (FinalOutputs, written
    last) says so, and every file it lists is there as saved."""
    from yunshan.io.artifacts import FinalOutputs

    try:
        marker = FinalOutputs.read(Path(out) / FinalOutputs.FILE)
    except (ValueError, OSError):
        return False
    return marker.kind == kind and marker.step == step and not marker.problems(out)


def reopen(out: Path) -> None:
    """Before a (re)run writes anything into its folder: the final marker goes first (from here on the folder no
    longer vouches for finished outputs), then what a killed final save left behind: safetensors writes each file
    as .tmpXXXXXX beside it and renames it into place, so a kill mid-write leaves a full-size temporary file."""
    from yunshan.io.artifacts import FinalOutputs

    out = Path(out)
    FinalOutputs.remove(out)
    shutil.rmtree(out / ".checkpoints.removing", ignore_errors=True)  # training.checkpoints.remove_checkpoints
    for folder in (out, out / "adapter"):
        for leftover in folder.glob(".tmp*"):
            if leftover.is_file():
                leftover.unlink()


def plan_run(recipe, kind: str, out: Path, checkpoint: Path | None, sequences_per_step: int,
             safe: tuple[str, ...] = ()) -> RunPlan:
    """Decide what a (re)run does from `checkpoint` (training.resume resolved), refusing unsafe recipe changes.

    Args:
        recipe: the resolved recipe dataclass of this run (CptArgs or SftArgs).
        kind: "cpt" or "sft".
        out: the run's output folder.
        checkpoint: the checkpoint to continue from (None: a fresh run).
        sequences_per_step: sequences (rows) one optimizer step consumes, all processes together.
        safe: more keys (or prefixes ending in ".") this stage lets a resumed run change, beyond SAFE_KEYS.
    """
    if checkpoint is None:
        return RunPlan("fresh")
    step = checkpoint_step(checkpoint)
    saved = read_run_file(checkpoint)
    if saved is None:  # a checkpoint of a yunshan without run files: resumable, but nothing to compare with
        print(f"warning: {checkpoint} holds no {RUN_FILE} (written by an older yunshan): the recipe cannot be "
              "checked against the one it was trained with", flush=True)
        return RunPlan("resume", checkpoint, step)
    if saved.get("kind") not in (None, kind):
        raise ResumeError(f"{checkpoint}: a checkpoint of yunshan {saved.get('kind')}, not {kind}; choose another "
                          "training.output_dir")
    refused, allowed = compare_recipes(in_one_vocabulary(saved["recipe"]),
                                       in_one_vocabulary(dataclasses.asdict(recipe)), SAFE_KEYS + tuple(safe))
    if saved.get("sequences_per_step") not in (None, sequences_per_step):
        refused["sequences per step (per_device_batch_size x gradient_accumulation_steps x processes)"] = [
            saved["sequences_per_step"], sequences_per_step]
    if refused:
        raise ResumeError(
            f"{checkpoint}: the recipe changed what this run trained on up to step {step}, so resuming would train "
            f"the rest differently while its recipe and data report claim the new values throughout; changed: "
            f"{_describe(refused)}. Restore those values to resume, or start over with training.resume=never "
            "(or another training.output_dir)")
    resumes = list(saved.get("resumes") or [])
    total = saved.get("total_steps")
    longer = any(key in LENGTH_KEYS for key in allowed)
    if total is not None and step >= total and not longer:
        action = "done" if outputs_finished(out, kind, step) else "finish"
        return RunPlan(action, checkpoint, step, total, allowed, resumes)
    resumes.append({"step": step, "checkpoint": checkpoint.name, "changes": allowed})
    return RunPlan("resume", checkpoint, step, total, allowed, resumes)


def settle(plan: RunPlan, total_steps: int, out: Path, kind: str) -> RunPlan:
    """The plan once the run's real total steps are known (CPT adds the embedding warm-up's steps, SFT may count
    them from epochs): a checkpoint at the total is finished; one past it cannot be continued."""
    if plan.action != "resume":
        return plan
    if plan.step > total_steps:
        raise ResumeError(f"{plan.checkpoint}: the checkpoint is at step {plan.step}, past this recipe's last step "
                          f"{total_steps}; a run cannot be shortened after the fact: raise training.max_steps to at "
                          "least the checkpoint's step, or start over with training.resume=never")
    if plan.step == total_steps:
        if plan.resumes and plan.resumes[-1]["step"] == plan.step:
            plan.resumes.pop()  # nothing is trained from this checkpoint
        plan.action = "done" if outputs_finished(out, kind, plan.step) else "finish"
        plan.total_steps = total_steps
    return plan


def start_fresh(ckpt_dir: Path, out: Path) -> None:
    """Before a run from step 0 in a folder that may hold an earlier one: its checkpoints would share step numbers
    with the new ones, its data report would vouch for outputs the new run has not written yet, and its log would be
    read as the new run's (the loggers append: the summaries, curves and pipeline report would show the earlier
    run's last steps)."""
    from yunshan.io.artifacts import DataReport

    old = [path for _, path, _ in checkpoint_steps(ckpt_dir)]
    if old:
        print(f"starting over: removing {len(old)} checkpoint(s) of an earlier run in {ckpt_dir}", flush=True)
    for path in old:
        shutil.rmtree(path)
    (Path(out) / DataReport.FILE).unlink(missing_ok=True)
    (Path(out) / "log.jsonl").unlink(missing_ok=True)


def prepare_outputs(recipe, plan: RunPlan, out: Path, ckpt_dir: Path, model=None, lora=None) -> None:
    """Rank zero, before the first step: the run folder with the resolved recipe in it; a fresh run clears what an
    earlier run left (start_fresh) and saves a PiSSA / OLoRA adapter as initialised (when `lora` is given and
    enabled); a resumed or finishing run removes checkpoints past its step and the data report (it vouches for
    finished outputs only) and checks the initial adapter against the one saved when the run began."""
    from yunshan.io.artifacts import write_recipe
    from yunshan.training.checkpoints import remove_incomplete_after
    from yunshan.training.models import check_initial_adapter, save_initial_adapter

    out.mkdir(parents=True, exist_ok=True)
    write_recipe(recipe, out / "recipe.yaml", header="resolved recipe of this run (defaults and overrides applied)")
    adapter = lora is not None and lora.enabled
    if plan.action == "fresh":
        start_fresh(ckpt_dir, out)
        if adapter:
            save_initial_adapter(model, lora, ckpt_dir)
        return
    remove_incomplete_after(ckpt_dir, plan.step)
    (out / "data_report.json").unlink(missing_ok=True)
    note = check_initial_adapter(model, lora, ckpt_dir) if adapter else None
    if note:
        print(note, flush=True)


def resume_line(plan: RunPlan, checkpoint: Path, where: str = "") -> str:
    """The line a resumed or finishing run prints: from which checkpoint (and `where`, e.g. the data stream's
    position) and the recipe's allowed changes since then."""
    changes = "; recipe changes since then (allowed, recorded in the data report): " + ", ".join(
        f"{k} {a} -> {b}" for k, (a, b) in plan.changes.items()) if plan.changes else ""
    what = "finishing from the last step's checkpoint" if plan.action == "finish" else "resuming from"
    return f"{what} {checkpoint}{where}{changes}"


def run_record(recipe, kind: str, total_steps: int, sequences_per_step: int, resumes: list[dict]) -> dict:
    """What every checkpoint of this run records in RUN_FILE (YunshanTrainer writes it)."""
    return {"kind": kind, "total_steps": total_steps, "sequences_per_step": sequences_per_step, "resumes": resumes,
            "recipe": _comparable(dataclasses.asdict(recipe))}


def finished_summary(out: Path, plan: RunPlan) -> dict:
    """What run_cpt / run_sft return for a run that was already finished (nothing was done)."""
    from yunshan.io.artifacts import DataReport

    log = Path(out) / "log.jsonl"
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()] if (
        log.is_file()) else []
    loss = next((r["train_loss"] for r in reversed(rows) if "train_loss" in r), None)
    print(f"{out}: already finished ({plan.step} of {plan.total_steps} steps, {plan.checkpoint}); nothing to do. "
          "To train further raise training.max_steps; to start over set training.resume=never or choose another "
          "training.output_dir", flush=True)
    return {"output_dir": str(out), "steps": plan.step, "train_loss": loss, "already_finished": True,
            "data_report": DataReport.read(Path(out))}
