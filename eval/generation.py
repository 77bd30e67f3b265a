"""Greedy, batched generation for the tasks that read a model's written answer (chat models, LawBench, JEC-QA).

    from yunshan.eval.generation import generate
    texts = generate(lm, ["请回答……"], max_new_tokens=64, chat=True)

With `chat=True` each prompt becomes one user turn of the tokenizer's chat template (with the generation
prompt); otherwise the raw prompt is continued. Decoding is greedy (deterministic) until EOS or
`max_new_tokens`; prompts are left-padded so a batch ends where generation starts.
"""

from __future__ import annotations

import math

import torch


def render_chat(tokenizer, prompt: str) -> str:
    """The prompt as one user message of the tokenizer's chat template, ready for the assistant's answer."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("chat mode needs a tokenizer with a chat_template (tokenizer_config.json); "
                         "use --chat off to continue raw prompts")
    return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                         add_generation_prompt=True)


def use_chat(tokenizer, chat: str) -> bool:
    """Resolve --chat {auto,on,off}: auto uses the template when the tokenizer has one."""
    if chat not in ("auto", "on", "off"):
        raise ValueError(f"--chat {chat!r} is not valid; use auto, on or off")
    if chat == "auto":
        return bool(getattr(tokenizer, "chat_template", None))
    return chat == "on"


@torch.no_grad()
def generate(lm, prompts: list[str], max_new_tokens: int = 64, batch_size: int = 8, chat: bool = False,
             add_bos: bool = False, progress: bool = False, desc: str = "generating") -> list[str]:
    """Greedy completions of `prompts` (the new text only, special tokens removed)."""
    from tqdm.auto import tqdm

    tokenizer, model = lm.tokenizer, lm.model
    device = next(model.parameters()).device
    texts = [render_chat(tokenizer, p) if chat else p for p in prompts]
    encoded = []
    for text in texts:
        # A chat template writes its own BOS; a raw prompt gets one only when asked (as lm-eval's add_bos_token).
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if add_bos and not chat and tokenizer.bos_token_id is not None:
            ids = [tokenizer.bos_token_id] + ids
        keep = max(1, lm.max_length - max_new_tokens)
        encoded.append(ids[-keep:])
    order = sorted(range(len(texts)), key=lambda i: -len(encoded[i]))
    outputs: list[str] = [""] * len(texts)
    eos = tokenizer.eos_token_id
    bar = tqdm(total=math.ceil(len(order) / batch_size), desc=desc, disable=not progress, leave=False)
    for start in range(0, len(order), batch_size):
        idx = order[start: start + batch_size]
        width = max(len(encoded[i]) for i in idx)
        ids = torch.full((len(idx), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for row, i in enumerate(idx):
            ids[row, width - len(encoded[i]):] = torch.tensor(encoded[i])
            mask[row, width - len(encoded[i]):] = 1
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                             max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=eos, num_beams=1)
        for row, i in enumerate(idx):
            outputs[i] = tokenizer.decode(out[row, width:], skip_special_tokens=True)
        bar.update(1)
    bar.close()
    return outputs
