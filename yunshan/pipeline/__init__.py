"""`yunshan run`: the whole YunShan pipeline from one recipe, stage by stage, into one run folder.

    yunshan run recipes/demo_tiny.yaml                     # the bundled demo: a few minutes on 2 CPU cores
    yunshan run recipes/pangu-pi-7b_pipeline_full.yaml --dry-run
    yunshan run RECIPE.yaml --from cpt                     # redo cpt and everything after it

Stages, in order (each writes its own subfolder of `output_dir`; stages.py has one record per stage):

    prepare      corpus preparation on datatrove (yunshan data prepare): cleaning, personal data, decontamination,
                 near duplicates; its corpus is ${prepared}, which the tokenizer and cpt sources name
    base         stand-in base model (demo only): BPE tokenizer + small PanGu-π pretrained on general text
    tokenizer    vocabulary extension: continued BPE on domain text + word lists (yunshan tokenizer extend)
    eval_before  yunshan eval on the base model
    cpt          continual pretraining, domain corpora mixed 1:1 in tokens with general replay (yunshan cpt)
    sft          one stage of mixed general + domain instruction tuning (yunshan sft)
    preference   preference tuning after SFT: DPO, IPO, KTO, ORPO or SimPO on preference pairs (yunshan pref)
    eval_after   yunshan eval on the trained models
    export       safetensors + remote code + tokenizer + model card (yunshan export)
    push         to the Hugging Face Hub (only when the recipe has a push section)

A stage whose output is complete is skipped on a re-run; `--from STAGE` redoes that stage and the later ones
(runner.py). The run folder holds the resolved recipe, the manifest (run.json: stages, timings, input and output
hashes, token counts) and report.md with the before/after table and the plots (report.py), printed at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .runner import PipelineRunner
from .stages import STAGES, PipelineRecipe, RunLayout, StandInBaseArgs

__all__ = ["STAGES", "PipelineRecipe", "PipelineRunner", "RunLayout", "StandInBaseArgs"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_recipe_flags

    add_recipe_flags(parser, "cpt.training.max_steps=50", "validate paths, fields and the stage plan; train nothing",
                     positional=True)
    parser.add_argument("--from", dest="from_stage", choices=[s.name for s in STAGES],
                        help="redo this stage and all later ones")


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import recipe_from_flags

    recipe = recipe_from_flags(PipelineRecipe, args)
    runner = PipelineRunner(recipe, Path(args.config))
    if args.dry_run:
        plan = runner.dry_run(args.from_stage)
        for warning in plan.get("warnings", []):
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        print(json.dumps(plan, indent=2, ensure_ascii=False))
        return 0 if not plan["problems"] else 1
    runner.run(args.from_stage)
    return 0
