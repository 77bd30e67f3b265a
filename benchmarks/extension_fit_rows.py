"""Where an extension's step-0 cost sits: which output rows the fit may move, and what is left.

    make real-model
    .venv/bin/python benchmarks/laws_extension.py --budgets 40 --variants n100 --out runs/lx   # writes tokenizer_100
    .venv/bin/python benchmarks/extension_fit_rows.py --tokenizer runs/lx/tokenizer_100 --untie

SmolLM2-135M-Instruct (untied in memory with --untie, so that output rows move without moving inputs) grows the
rows of an extended tokenizer (each new row the mean of its pieces', as yunshan cpt does) and fits, with the
recipe's output-row fit (yunshan.training.embedding_warmup.fit_new_rows: exact softmax cross-entropy on the frozen
body's hidden states, 3 epochs at 3e-3, --rounds rounds) on 16 laws + 16 general-replay sequences of 512 tokens
(with --validation K, checked as yunshan cpt checks it on K further sequences, half of each), one of these sets
of output rows: none, the new rows (what the recipe does), + the first piece of every new token, + every piece, the
whole head. Bits per character at step 0 of the first 4,000 characters of the Civil Code and of the bundled general
text (the CPT monitor's computation: 512-token windows, bf16 autocast with a float32 head where the CPU has fast
bf16), beside the base model with its own tokenizer. If refitting the whole head leaves most of the cost, the cost is
on the input side. With --distill-steps N the new INPUT rows are first fitted for N steps by the token distillation
`yunshan cpt` runs with warmup.distill_steps (yunshan.training.embedding_warmup.distill_new_rows: the frozen body's
states after every extended token pulled to its states after the same characters with the base tokenizer, through
the first --distill-layers decoder layers, 4 texts a step, Adam at --distill-lr on the new rows only), on the texts
of the same 16 laws sequences, then the output rows are fitted as above. Prints a markdown table and writes JSON
(--out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
REALDATA = Path(os.environ.get("YUNSHAN_REALDATA") or ROOT.parent / "shared" / "realdata")
GENERAL_TRAIN = ROOT / "yunshan/samples/data/corpora/general/train.jsonl"
GENERAL_HELDOUT = ROOT / "yunshan/samples/data/heldout/general.txt"
VARIANTS = ("init", "new", "parents", "pieces", "all")


def sequences_of(path: Path, tokenizer, n: int, length: int = 512) -> list[list[int]]:
    """The first `n` sequences of `length` tokens of a corpus, documents joined by EOS (the training stream's packing)."""
    from yunshan.data.records import read_texts

    out, buf = [], []
    for _, text in read_texts(str(path), "corpus"):
        buf += tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        while len(buf) >= length and len(out) < n:
            out.append(buf[:length])
            buf = buf[length:]
        if len(out) >= n:
            break
    return out


def load(model_dir: Path, untie: bool):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if untie and model.get_output_embeddings().weight is model.get_input_embeddings().weight:
        weight = model.get_input_embeddings().weight.detach().clone()
        head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
        head.weight = torch.nn.Parameter(weight)
        model.config.tie_word_embeddings = False
        model.set_output_embeddings(head)
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models/smollm2-135m"), help="HF folder (make real-model)")
    parser.add_argument("--tokenizer", required=True, help="an extended tokenizer of that model (tokenizer extend)")
    parser.add_argument("--untie", action="store_true", help="untie a tied model's head from its embeddings first")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"sets of rows to fit: {', '.join(VARIANTS)}")
    parser.add_argument("--chars", type=int, default=4000, help="held-out characters of each text")
    parser.add_argument("--distill-steps", type=int, default=0, help="token distillation steps of the new input rows")
    parser.add_argument("--distill-lr", type=float, default=3e-3, help="its Adam learning rate")
    parser.add_argument("--distill-layers", type=int, default=0,
                        help="distil through the first N decoder layers only (0: all)")
    parser.add_argument("--rounds", type=int, default=1, help="fit rounds (yunshan cpt: 3 for a tied model)")
    parser.add_argument("--validation", type=int, default=0,
                        help="check the distillation and the fit on this many unseen sequences, half laws, half "
                             "general, as yunshan cpt does with warmup.validation_sequences (0: no check)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/extension_fit_rows.json"))
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if bad := [v for v in variants if v not in VARIANTS]:
        raise SystemExit(f"--variants: {bad[0]!r} is not one of {', '.join(VARIANTS)}")
    model_dir, civil = Path(args.model), REALDATA / "laws/civil_code.txt"
    for need, hint in ((model_dir / "config.json", "run `make real-model`"), (civil, "set YUNSHAN_REALDATA")):
        if not need.is_file():
            print(f"{need}: missing; {hint}", file=sys.stderr)
            return 1
    import torch
    from transformers import AutoTokenizer

    from yunshan.training.embedding_warmup import aligned_pairs, distill_new_rows, fit_new_rows
    from yunshan.training.models import fast_bf16, grow_embeddings
    from yunshan.training.monitoring import bits_per_character, read_heldout

    torch.manual_seed(0)
    autocast, why = fast_bf16()
    base_tok, ext_tok = AutoTokenizer.from_pretrained(model_dir), AutoTokenizer.from_pretrained(args.tokenizer)
    texts = {"civil_code": read_heldout([str(civil)], args.chars), "general": read_heldout([str(GENERAL_HELDOUT)], args.chars)}
    half = args.validation // 2
    laws = sequences_of(REALDATA / "laws/laws.jsonl.zst", ext_tok, 16 + half)
    general = sequences_of(GENERAL_TRAIN, ext_tok, 16 + args.validation - half)
    sequences, validation = laws[:16] + general[:16], laws[16:] + general[16:]

    def measure(model, tokenizer) -> dict:
        return {k: bits_per_character(model, tokenizer, d, 512, autocast=autocast)["bpc"] for k, d in texts.items()}

    results = {"model": model_dir.name, "tokenizer": str(args.tokenizer), "untied": args.untie, "chars": args.chars,
               "precision": f"{'bfloat16 autocast' if autocast else 'float32'} ({why})",
               "base": measure(load(model_dir, False), base_tok), "variants": {},
               "distill": {"steps": args.distill_steps, "lr": args.distill_lr, "layers": args.distill_layers}}
    distill_texts = aligned_pairs(sequences[:16], ext_tok, base_tok) if args.distill_steps else []
    for variant in variants:
        model = load(model_dir, args.untie)
        new_ids = grow_embeddings(model, base_tok, ext_tok)
        pieces = [base_tok(ext_tok.decode([i]), add_special_tokens=False)["input_ids"] for i in new_ids]
        rows = {"init": [], "new": new_ids, "parents": sorted(set(new_ids) | {p[0] for p in pieces}),
                "pieces": sorted(set(new_ids) | {q for p in pieces for q in p}),
                "all": list(range(len(ext_tok)))}[variant]
        started = time.perf_counter()
        if args.distill_steps:
            results["distill"].update(distill_new_rows(model, new_ids, distill_texts, steps=args.distill_steps,
                                                       lr=args.distill_lr, layers=args.distill_layers,
                                                       autocast=autocast, validation=validation))
        fit = fit_new_rows(model, rows, sequences, rounds=args.rounds, epochs=3, lr=3e-3, autocast=autocast,
                           validation=validation) if rows else None
        results["variants"][variant] = {"rows": len(rows), "bpc": measure(model, ext_tok),
                                        "fit": fit and fit["rounds"], "fit_validation": fit and fit["validation"],
                                        "seconds": time.perf_counter() - started}
        print(variant, results["variants"][variant]["bpc"], flush=True)
    lines = [f"| output rows fitted | rows | Civil Code bits/char | general bits/char |", "|---|---:|---:|---:|",
             f"| base model, own tokenizer | - | {results['base']['civil_code']:.4f} | {results['base']['general']:.4f} |"]
    lines += [f"| {v} | {r['rows']:,} | {r['bpc']['civil_code']:.4f} | {r['bpc']['general']:.4f} |"
              for v, r in results["variants"].items()]
    print("\n".join(lines))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
