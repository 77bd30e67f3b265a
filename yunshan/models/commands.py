"""`yunshan model`: inspect PanGu-π and OTCE presets and checkpoints, upcycle a LLaMA checkpoint into PanGu-π.

    yunshan model info pangu-pi-7b          # parameter counts by part, nothing allocated
    yunshan model info otce-1b
    yunshan model info path/to/model
    yunshan model upcycle path/to/llama out/pangu-pi --siaf-terms 2 --aug-shortcuts 1
    yunshan model import-gguf SmolLM2-135M-Instruct.Q4_1.gguf models/smollm2-135m
    yunshan model merge runs/x/cpt models/smollm2-135m out/merged --method linear --weight 0.5
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from yunshan.arguments.field_rules import check_fields


@dataclass
class InfoArgs:
    """Arguments of `yunshan model info`."""

    preset_or_path: str = field(metadata={"path": True,
        "help": "a preset (pangu-pi-7b, pangu-pi-1b, tiny, otce-1b, otce-281m, otce-tiny), a folder with "
                "config.json or a Hub id ORG/NAME (its config only)"})
    revision: str | None = field(default=None, metadata={"help": "branch, tag or commit of a Hub id"})
    json: bool = field(default=False, metadata={"help": "print JSON instead of a table"})

    def __post_init__(self):
        check_fields(self)

@dataclass
class UpcycleArgs:
    """Arguments of `yunshan model upcycle` (yunshan.models.pangu_pi.convert.upcycle_checkpoint)."""

    src: str = field(metadata={"path": True, "help": "a LlamaForCausalLM: folder (save_pretrained) or Hub id ORG/NAME"})
    dst: str = field(metadata={"path": True,
        "help": "output folder (model with remote code, plus the source's tokenizer files)"})
    siaf_terms: int = field(default=2, metadata={"range": ">= 1", "help": "n, SIAF terms"})
    aug_shortcuts: int = field(default=1, metadata={"range": ">= 0", "help": "T, augmented shortcuts per layer"})
    aug_reduction: int = field(default=32, metadata={"range": ">= 1", "help": "r, shortcut bottleneck reduction"})
    siaf_neighbor_kernel: int = field(default=1, metadata={"range": ">= 1", "help": "neighbour conv kernel (1 = off)"})
    seed: int = field(default=0, metadata={"range": "[0, 4294967295]", "help": "seed for the shortcuts' W1"})
    revision: str | None = field(default=None, metadata={"help": "branch, tag or commit of a Hub id in src"})

    def __post_init__(self):
        check_fields(self)

@dataclass
class ImportGgufArgs:
    """Arguments of `yunshan model import-gguf` (yunshan.models.gguf.import_gguf)."""

    gguf_file: str = field(metadata={"path": True,
        "help": "the .gguf file (quantised files are dequantised to float32)"})
    out: str = field(metadata={"path": True, "help": "output folder (written only when the whole import succeeded)"})
    overwrite: bool = field(default=False, metadata={
        "help": "replace OUT if it is an earlier import (its yunshan_import.json lists its files; nothing else is "
                "ever removed)"})

    def __post_init__(self):
        check_fields(self)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_flags

    from yunshan.merging.merge import METHODS, MergeArgs

    sub = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    add_flags(sub.add_parser("info", help="parameter counts by part of a preset or a model folder"), InfoArgs,
              positional={"preset_or_path": "PRESET_OR_PATH"})
    add_flags(sub.add_parser("upcycle", help="LLaMA checkpoint -> PanGu-π with unchanged logits at step 0"),
              UpcycleArgs, positional={"src": "SRC", "dst": "DST"})
    add_flags(sub.add_parser("import-gguf", help="a GGUF file -> a plain HF model folder (float32 safetensors, "
                                                 "tokenizer)"), ImportGgufArgs,
              positional={"gguf_file": "GGUF_FILE", "out": "OUT"})
    merge = sub.add_parser("merge", help="merge an instruct model back into a continually pretrained one (linear, "
                                         "chat vector, TIES, DARE), across an extended vocabulary",
                           description=_merge_doc(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(merge, MergeArgs, positional={"model": "MODEL", "instruct": "INSTRUCT", "out": "OUT"},
              choices={"method": METHODS})


def _merge_doc() -> str:
    from yunshan.merging import merge

    return merge.__doc__


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import from_flags
    from yunshan.models import register_architectures

    register_architectures()
    if args.model_command == "info":
        from .info import count_parameters_by_part, format_parameter_table, load_config

        from yunshan.loading.hub_download import resolve_pretrained
        from yunshan.models import presets

        a = from_flags(InfoArgs, args)
        source = a.preset_or_path
        if source not in presets() and not os.path.exists(source):
            try:
                source = resolve_pretrained(source, a.revision, what="tokenizer", field="PRESET_OR_PATH")
            except FileNotFoundError as err:
                # A bare word is far more often a mistyped preset than a Hub id without an organisation.
                raise FileNotFoundError(f"{source}: neither a preset ({', '.join(presets())}) nor a folder with "
                                        f"config.json, nor a Hub id that resolves ({err})") from None
        config = load_config(source)
        parts = count_parameters_by_part(config)
        if a.json:
            print(json.dumps({"model": str(a.preset_or_path), "model_type": config.model_type, **parts}, indent=2))
        else:
            print(format_parameter_table(f"{a.preset_or_path} ({config.model_type})", parts))
        return 0
    if args.model_command == "merge":
        from yunshan.merging.merge import MergeArgs, merge_models

        merge_models(from_flags(MergeArgs, args))
        return 0
    if args.model_command == "import-gguf":
        from .gguf import import_gguf

        a = from_flags(ImportGgufArgs, args)
        import_gguf(a.gguf_file, a.out, overwrite=a.overwrite)
        return 0
    from .pangu_pi.convert import upcycle_checkpoint

    from yunshan.loading.hub_download import resolve_pretrained

    a = from_flags(UpcycleArgs, args)
    model = upcycle_checkpoint(
        resolve_pretrained(a.src, a.revision, field="SRC"), a.dst, siaf_terms=a.siaf_terms,
        aug_shortcuts=a.aug_shortcuts, aug_reduction=a.aug_reduction,
        siaf_neighbor_kernel=a.siaf_neighbor_kernel, seed=a.seed,
    )
    from yunshan.io.folders import apply_umask

    apply_umask(Path(a.dst).glob("*.safetensors"))  # written 0600 by safetensors; the rest has the user's umask
    total = sum(p.numel() for p in model.parameters())
    print(f"wrote {a.dst}: PanGu-π with {total:,} parameters (n={a.siaf_terms}, T={a.aug_shortcuts})")
    return 0
