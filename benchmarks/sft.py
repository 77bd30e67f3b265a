"""SFT throughput and padding: yunshan sft with and without packing, against TRL's SFTTrainer. Not a timed test.

    .venv/bin/python benchmarks/sft.py            # about 5 minutes on 2 cores
    .venv/bin/python benchmarks/sft.py --quick

Same model (a 7M-parameter LLaMA), data (the bundled instruction sets, all five formats, as conversations),
settings (max length 512, 8 rows per step, AdamW, lr 1e-4, fp32) and loss on assistant turns only. Each run's
collator is wrapped to count real (non-padding) and total token positions of every batch; throughput is real
tokens per second over the steady-state steps (first steps excluded), median over alternating rounds. TRL runs only
when it is importable (`pip install trl`; it is not a yunshan dependency). Targets: yunshan / TRL >= 1.0 and a
non-padding share >= 95% with packing. Results: benchmarks/results/sft.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as yunshan sets it; must precede importing torch
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

# yunshan's default template with generation markers, which TRL's assistant_only_loss needs.
TRL_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}<|system|>\n{{ message['content'] }}\n"
    "{% elif message['role'] == 'user' %}<|user|>\n{{ message['content'] }}\n"
    "{% elif message['role'] == 'assistant' %}<|assistant|>\n{% generation %}{{ message['content'] }}"
    "{{ eos_token }}{% endgeneration %}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


class Counter:
    """Counts real and total token positions of every batch a collator returns, and step end times."""

    def __init__(self, collate, pad_id):
        self.collate, self.pad_id = collate, pad_id
        self.real = self.total = 0
        self.times = []

    def __call__(self, rows):
        batch = self.collate(rows)
        ids = batch["input_ids"]
        if "attention_mask" in batch:
            self.real += int(batch["attention_mask"].sum())
        else:
            self.real += int((ids != self.pad_id).sum())
        self.total += ids.numel()
        return batch


def step_timer(times):
    from transformers import TrainerCallback

    class Timer(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            times.append(time.perf_counter())

    return Timer()


def steady_tokens_per_s(times, real_per_step):
    gaps = [b - a for a, b in zip(times, times[1:])][2:]
    return real_per_step / statistics.median(gaps)


def make_model_and_data(tmp: Path, n_samples: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from fixtures import train_tokenizer
    from yunshan.data.chat import ensure_chat_template
    from yunshan.data.conversations import SftSourceArgs, read_sft_source
    from yunshan.samples import sample_data_dir

    sft = Path(sample_data_dir()) / "sft"
    sources = [SftSourceArgs(name="general", path=str(sft / "general_alpaca.jsonl"), format="alpaca"),
               SftSourceArgs(name="legal", path=str(sft / "legal_messages.jsonl"), format="messages"),
               SftSourceArgs(name="finance", path=str(sft / "finance_sharegpt.jsonl"), format="sharegpt"),
               SftSourceArgs(name="finance_exam", path=str(sft / "finance_exam"), format="ceval"),
               SftSourceArgs(name="judicial_exam", path=str(sft / "jecqa"), format="jecqa")]
    conversations = [s.messages for src in sources for s in read_sft_source(src, "fail", {})][:n_samples]
    tok_dir = tmp / "model"
    texts = [m["content"] for c in conversations for m in c]
    tokenizer = train_tokenizer(tok_dir, texts, vocab_size=8000)
    ensure_chat_template(tokenizer)
    tokenizer.save_pretrained(tok_dir)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=688,
                                 num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                                 max_position_embeddings=512)).save_pretrained(tok_dir)
    messages_file = tmp / "conversations.jsonl"
    messages_file.write_text("".join(json.dumps({"messages": c}, ensure_ascii=False) + "\n" for c in conversations))
    return tok_dir, messages_file, len(conversations)


def run_yunshan(model_dir: Path, data_file: Path, out: Path, packing: bool, steps: int):
    import yunshan.training.sft as sft_module
    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.sft import SftArgs

    recipe = load_recipe(SftArgs, data={
        "model": {"name_or_path": str(model_dir)},
        "data": {"max_length": 512, "packing": packing, "sources": [
            {"name": "all", "path": str(data_file), "format": "messages"}]},
        "training": {"output_dir": str(out), "max_steps": steps, "per_device_batch_size": 8,
                     "learning_rate": 1e-4, "save_steps": 10**6, "logging_steps": 10**6, "warmup_steps": 1},
    })
    times = []
    counters = []
    original = sft_module.make_collator

    def counting_collator(pad_id, packing_, multiple=None):
        counter = Counter(original(pad_id, packing_, multiple), pad_id)
        counters.append(counter)
        return counter

    sft_module.make_collator = counting_collator
    try:
        sft_module.run_sft(recipe, callbacks=[step_timer(times)])
    finally:
        sft_module.make_collator = original
    c = counters[0]
    return {"tokens_per_s": steady_tokens_per_s(times, c.real / steps), "non_padding_share": c.real / c.total}


def run_trl(model_dir: Path, data_file: Path, out: Path, packing: bool, steps: int):
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = TRL_TEMPLATE
    dataset = datasets.load_dataset("json", data_files=str(data_file), split="train")
    config = SFTConfig(output_dir=str(out), max_steps=steps, per_device_train_batch_size=8, learning_rate=1e-4,
                       adam_beta1=0.9, adam_beta2=0.95, weight_decay=0.0, lr_scheduler_type="cosine",
                       warmup_steps=1, save_strategy="no", logging_steps=10**6, report_to=[], use_cpu=True,
                       disable_tqdm=True, max_length=512, packing=packing, assistant_only_loss=True,
                       dataset_num_proc=1,
                       # TRL's own defaults are bf16=True and gradient_checkpointing=True; both runs use fp32
                       # without checkpointing, as yunshan does on CPU
                       bf16=False, gradient_checkpointing=False)
    times = []
    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir), args=config, train_dataset=dataset,
                         processing_class=tokenizer, callbacks=[step_timer(times)])
    counter = Counter(trainer.data_collator, tokenizer.pad_token_id)
    trainer.data_collator = counter
    trainer.train()
    return {"tokens_per_s": steady_tokens_per_s(times, counter.real / steps),
            "non_padding_share": counter.real / counter.total}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/sft.json"))
    args = parser.parse_args(argv)
    steps, rounds = (8, 1) if args.quick else (20, 3)
    try:
        import trl  # noqa: F401

        have_trl = True
    except ImportError:
        have_trl = False
    runs = {"yunshan (no packing)": (run_yunshan, False), "yunshan (packing)": (run_yunshan, True)}
    if have_trl:
        runs.update({"TRL SFTTrainer (no packing)": (run_trl, False), "TRL SFTTrainer (packing, bfd)": (run_trl, True)})
    results = {name: [] for name in runs}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model_dir, data_file, n = make_model_and_data(tmp, 600 if args.quick else 1500)
        for r in range(rounds):
            # one fresh output folder per run: yunshan resumes a finished run in an existing folder
            order = list(runs.items()) if r % 2 == 0 else list(runs.items())[::-1]
            for name, (fn, packing) in order:
                results[name].append(fn(model_dir, data_file, tmp / f"run{r}-{list(runs).index(name)}", packing, steps))
    table = {name: {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in rs),
                    "non_padding_share": statistics.median(r["non_padding_share"] for r in rs)}
             for name, rs in results.items()}
    print(f"\n## SFT on {n} bundled conversations, 7M-parameter LLaMA, 8 x 512 max tokens per step, {rounds} rounds\n")
    print("| run | real tokens/s | non-padding share |")
    print("|---|---:|---:|")
    for name, row in table.items():
        print(f"| {name} | {row['tokens_per_s']:,.0f} | {100 * row['non_padding_share']:.1f}% |")
    summary = {"table": table, "runs": results, "trl_available": have_trl}
    packed = table["yunshan (packing)"]
    print(f"\nnon-padding share with packing: {100 * packed['non_padding_share']:.1f}% (target >= 95%)")
    if have_trl:
        ratio = packed["tokens_per_s"] / table["TRL SFTTrainer (packing, bfd)"]["tokens_per_s"]
        ratio_np = table["yunshan (no packing)"]["tokens_per_s"] / table["TRL SFTTrainer (no packing)"]["tokens_per_s"]
        summary.update({"ratio_packing": ratio, "ratio_no_packing": ratio_np})
        print(f"yunshan / TRL, packing: {ratio:.3f}; without packing: {ratio_np:.3f} (target >= 1.0)")
    else:
        print("TRL is not installed: `pip install trl` to compare against SFTTrainer")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
