"""Greedy, batched generation for the tasks that read a model's written answer (chat models, LawBench, JEC-QA).

    from yunshan.eval.generation import generate
    texts = generate(lm, ["请回答……"], max_new_tokens=64, chat=True)

With `chat=True` each prompt becomes one user turn of the tokenizer's chat template (with the generation
prompt); otherwise the raw prompt is continued. Decoding is greedy (deterministic) until EOS or
`max_new_tokens`; prompts are left-padded so a batch ends where generation starts.
"""

from __future__ import annotations

import torch


def render_chat(tokenizer, prompt: str) -> str:
    """The prompt as one user message of the tokenizer's chat template, ready for the assistant's answer."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("chat mode needs a tokenizer with a chat_template (tokenizer_config.json); "
                         "use --chat off to continue raw prompts")
    from yunshan.data.chat import TemplateError, render

    try:
        return render(tokenizer, [{"role": "user", "content": prompt}], add_generation_prompt=True)
    except TemplateError as err:  # one line naming the tokenizer, not a Jinja traceback
        raise ValueError(f"{err}, or use --chat off to continue raw prompts") from None


def use_chat(tokenizer, chat: str) -> bool:
    """Resolve --chat {auto,on,off}: auto uses the template when the tokenizer has one."""
    if chat not in ("auto", "on", "off"):
        raise ValueError(f"--chat {chat!r} is not valid; use auto, on or off")
    if chat == "auto":
        return bool(getattr(tokenizer, "chat_template", None))
    return chat == "on"


def encode_prompt(tokenizer, text: str, add_bos: bool | None = None) -> list[int]:
    """The ids a generation prompt (raw, or rendered by a chat template) is run from: the text's own tokens, with
    BOS in front when `add_bos` resolves true (None: when the tokenizer adds it by default, as lm-eval encodes
    with `add_bos_token` unset), and never a second BOS when the text already starts with one (Gemma's and
    Llama 3's chat templates write `<bos>` / `<|begin_of_text|>` themselves; lm-eval's has_bos_prefix rule)."""
    from .likelihood import resolve_add_bos, with_bos

    return with_bos(tokenizer, tokenizer(text, add_special_tokens=False)["input_ids"],
                    resolve_add_bos(tokenizer, add_bos))


@torch.no_grad()
def generate(lm, prompts: list[str], max_new_tokens: int = 64, batch_size: int = 8, chat: bool = False,
             add_bos: bool | None = None, progress: bool = False, desc: str = "generating",
             repetition_penalty: float | None = None) -> list[str]:
    """Greedy completions of `prompts` (the new text only, special tokens removed); BOS as `encode_prompt`.
    `repetition_penalty` is transformers' (CTRL's): FinanceIQ's own code generates with 1.1. transformers leaves a
    row's left padding out of the penalty, so a batch gives what one prompt at a time gives (tested)."""
    from transformers import StoppingCriteriaList

    from yunshan.io.progress import TokenCount, progress_bar

    from .likelihood import resolve_add_bos

    tokenizer, model = lm.tokenizer, lm.model
    device = next(model.parameters()).device
    texts = [render_chat(tokenizer, p) if chat else p for p in prompts]
    add_bos = resolve_add_bos(tokenizer, add_bos)
    encoded = []
    for text in texts:
        ids = encode_prompt(tokenizer, text, add_bos)
        keep = max(1, lm.max_length - max_new_tokens)
        encoded.append(ids[-keep:])
    order = sorted(range(len(texts)), key=lambda i: -len(encoded[i]))
    outputs: list[str] = [""] * len(texts)
    eos = tokenizer.eos_token_id
    with progress_bar(len(order), desc, unit="prompt", enabled=progress) as bar:  # prompts, not batches
        for start in range(0, len(order), batch_size):
            idx = order[start: start + batch_size]
            width = max(len(encoded[i]) for i in idx)
            ids = torch.full((len(idx), width), tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                ids[row, width - len(encoded[i]):] = torch.tensor(encoded[i])
                mask[row, width - len(encoded[i]):] = 1
            penalty = {"repetition_penalty": repetition_penalty} if repetition_penalty is not None else {}
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                                 max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                 eos_token_id=eos, num_beams=1,
                                 stopping_criteria=StoppingCriteriaList(
                                     [] if bar.disable else [TokenCount(bar, max_new_tokens)]), **penalty)
            for row, i in enumerate(idx):
                outputs[i] = tokenizer.decode(out[row, width:], skip_special_tokens=True)
            bar.set_postfix_str("", refresh=False)
            bar.update(len(idx))
    return outputs

