"""`yunshan demo`: build a tiny PanGu-π, train it for a few steps on bundled text, show the loss fall, generate.

    yunshan demo                      # about a minute on 2 CPU cores
    yunshan demo --steps 400 --out runs/demo

Everything is local: a byte-level BPE tokenizer is trained in-process on the bundled general and finance sample
text (yunshan.samples), a PanGu-π with SIAF (n = 2) and an augmented shortcut is built from a small config,
trained with transformers' Trainer (AdamW, betas 0.9/0.95, cosine schedule), and asked to continue a prompt.
The model and tokenizer are saved with remote code, so the folder loads with `trust_remote_code=True`.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per training sequence (default 128)")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per step (default 16)")
    parser.add_argument("--vocab-size", type=int, default=3000, help="BPE vocabulary size (default 3000)")
    parser.add_argument("--max-chars", type=int, default=1_500_000, help="characters of text to use")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")


def load_demo_text(max_chars: int) -> list[str]:
    """General and finance documents from the bundled samples, interleaved, up to `max_chars` characters."""
    from yunshan.samples import sample_data_dir

    root = Path(sample_data_dir()) / "corpora"
    streams = []
    for domain in ("general", "finance"):
        with open(root / domain / "train.jsonl", encoding="utf-8") as f:
            streams.append([json.loads(line)["text"] for line in f])
    texts, total = [], 0
    for pair in zip(*streams):
        for text in pair:
            texts.append(text)
            total += len(text)
        if total >= max_chars:
            break
    return texts


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE (GPT-2 style) trained in-process, wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")


def pack(texts, tokenizer, seq_len: int):
    """Concatenate documents with EOS between them and cut into fixed-length blocks."""
    import torch

    ids = []
    for text in texts:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(tokenizer.eos_token_id)
    n = len(ids) // seq_len
    return torch.tensor(ids[: n * seq_len]).view(n, seq_len)


def run(args: argparse.Namespace) -> int:
    import torch
    from tqdm.auto import tqdm
    from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments, set_seed

    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    set_seed(args.seed)
    out = Path(args.out)
    started = time.time()
    print("[1/4] training a byte-level BPE tokenizer on the bundled general + finance samples")
    texts = load_demo_text(args.max_chars)
    tokenizer = train_tokenizer(texts, args.vocab_size)
    blocks = pack(texts, tokenizer, args.seq_len)
    held_out, train_blocks = blocks[:32], blocks[32:]
    print(f"      {len(texts)} documents, {sum(map(len, texts)):,} characters -> {blocks.numel():,} tokens "
          f"({blocks.numel() / sum(map(len, texts)):.3f} tokens/char), vocabulary {len(tokenizer)}")

    print("[2/4] building a tiny PanGu-π (SIAF n=2, one augmented shortcut per layer)")
    config = PanguPiConfig(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=352, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, aug_reduction=16, max_position_embeddings=args.seq_len,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    model = PanguPiForCausalLM(config)
    print(f"      {sum(p.numel() for p in model.parameters()):,} parameters")

    def held_out_loss() -> float:
        model.eval()
        with torch.no_grad():
            loss = model(input_ids=held_out, labels=held_out).loss.item()
        model.train()
        return loss

    before = held_out_loss()

    class Dataset(torch.utils.data.Dataset):
        def __len__(self):
            return len(train_blocks)

        def __getitem__(self, i):
            return {"input_ids": train_blocks[i], "labels": train_blocks[i]}

    class LossBar(TrainerCallback):
        """One progress bar with the running training loss (Trainer's own bar is switched off)."""

        def on_train_begin(self, targs, state, control, **kwargs):
            self.bar = tqdm(total=state.max_steps, desc="      training", unit="step")
            self.last = None

        def on_log(self, targs, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                self.last = logs["loss"]
                self.bar.set_postfix(loss=f"{self.last:.3f}", lr=f"{logs.get('learning_rate', 0):.1e}")

        def on_step_end(self, targs, state, control, **kwargs):
            self.bar.update(1)

        def on_train_end(self, targs, state, control, **kwargs):
            self.bar.close()

    print(f"[3/4] training {args.steps} steps x {args.batch_size} x {args.seq_len} tokens")
    targs = TrainingArguments(
        output_dir=str(out / "trainer"), max_steps=args.steps, per_device_train_batch_size=args.batch_size,
        learning_rate=3e-3, adam_beta1=0.9, adam_beta2=0.95, weight_decay=0.01, lr_scheduler_type="cosine",
        warmup_steps=max(1, args.steps // 20), logging_steps=5, save_strategy="no", report_to=[],
        disable_tqdm=True, seed=args.seed, use_cpu=True, dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=targs, train_dataset=Dataset(), callbacks=[LossBar()])
    trainer.remove_callback(PrinterCallback)  # the bar shows the loss; no raw log dicts on the console
    history = trainer.train()
    after = held_out_loss()
    print(f"      held-out loss {before:.3f} -> {after:.3f} (perplexity {math.exp(before):.0f} -> {math.exp(after):.1f}); "
          f"mean training loss {history.training_loss:.3f}")

    print("[4/4] generating")
    model.eval()
    for prompt in ("今天的天气", "The company reported", "公司董事会"):
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        torch.manual_seed(args.seed)
        sample = model.generate(**ids, max_new_tokens=40, do_sample=True, top_k=20, temperature=0.8,
                                pad_token_id=tokenizer.pad_token_id)
        print(f"      {prompt!r} -> {tokenizer.decode(sample[0], skip_special_tokens=True)!r}")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    (out / "demo_report.json").write_text(json.dumps(
        {"held_out_loss_before": before, "held_out_loss_after": after, "steps": args.steps,
         "tokens_trained": args.steps * args.batch_size * args.seq_len, "seconds": time.time() - started},
        indent=2))
    print(f"saved the model and tokenizer to {out / 'model'} ({time.time() - started:.0f} s in all)")
    if not after < before:
        raise RuntimeError(f"the held-out loss did not fall ({before:.3f} -> {after:.3f})")
    return 0
