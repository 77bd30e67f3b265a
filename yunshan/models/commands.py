"""`yunshan model`: inspect PanGu-π and OTCE presets and checkpoints, upcycle a LLaMA checkpoint into PanGu-π.

    yunshan model info pangu-pi-7b          # parameter counts by part, nothing allocated
    yunshan model info otce-1b
    yunshan model info path/to/model
    yunshan model upcycle path/to/llama out/pangu-pi --siaf-terms 2 --aug-shortcuts 1
    yunshan model import-gguf SmolLM2-135M-Instruct.Q4_1.gguf models/smollm2-135m
"""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    info = sub.add_parser("info", help="parameter counts by part of a preset or a model folder")
    info.add_argument(
        "preset_or_path",
        help="a preset (pangu-pi-7b, pangu-pi-1b, tiny, otce-1b, otce-281m, otce-tiny) or a folder with config.json",
    )
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    up = sub.add_parser("upcycle", help="LLaMA checkpoint -> PanGu-π with unchanged logits at step 0")
    up.add_argument("src", help="folder of a LlamaForCausalLM (save_pretrained)")
    up.add_argument("dst", help="output folder (model with remote code, plus the source's tokenizer files)")
    up.add_argument("--siaf-terms", type=int, default=2, help="n, SIAF terms (default 2)")
    up.add_argument("--aug-shortcuts", type=int, default=1, help="T, augmented shortcuts per layer (default 1)")
    up.add_argument("--aug-reduction", type=int, default=32, help="r, shortcut bottleneck reduction (default 32)")
    up.add_argument("--siaf-neighbor-kernel", type=int, default=1, help="neighbour conv kernel (1 = off)")
    up.add_argument("--seed", type=int, default=0, help="seed for the shortcuts' W1")
    imp = sub.add_parser("import-gguf", help="a GGUF file -> a plain HF model folder (float32 safetensors, tokenizer)")
    imp.add_argument("gguf_file", help="the .gguf file (quantised files are dequantised to float32)")
    imp.add_argument("out", help="output folder (written only when the whole import succeeded)")
    imp.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")


def run(args: argparse.Namespace) -> int:
    import yunshan  # noqa: F401  (registers the architectures)

    if args.model_command == "info":
        from .info import count_parameters_by_part, format_parameter_table, load_config

        config = load_config(args.preset_or_path)
        parts = count_parameters_by_part(config)
        if args.json:
            print(json.dumps({"model": str(args.preset_or_path), "model_type": config.model_type, **parts}, indent=2))
        else:
            print(format_parameter_table(f"{args.preset_or_path} ({config.model_type})", parts))
        return 0
    if args.model_command == "import-gguf":
        from .gguf import import_gguf

        import_gguf(args.gguf_file, args.out, overwrite=args.overwrite)
        return 0
    from .pangu_pi.convert import upcycle_checkpoint

    model = upcycle_checkpoint(
        args.src, args.dst, siaf_terms=args.siaf_terms, aug_shortcuts=args.aug_shortcuts,
        aug_reduction=args.aug_reduction, siaf_neighbor_kernel=args.siaf_neighbor_kernel, seed=args.seed,
    )
    total = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.dst}: PanGu-π with {total:,} parameters (n={args.siaf_terms}, T={args.aug_shortcuts})")
    return 0
