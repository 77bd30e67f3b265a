"""`yunshan chat`: talk to a model in the terminal, or answer prompts for a script (one JSON line each).

    yunshan chat runs/demo_tiny/05_sft                                  # interactive; /reset, /exit (or Ctrl-D)
    yunshan chat runs/demo_tiny                                         # a run folder: its final model
    yunshan chat exports/yunshan-demo --trust-remote-code               # an export, run by its own modeling code
    yunshan chat runs/lora/adapter --base runs/demo_tiny/04_cpt         # a LoRA adapter folder with its base
    yunshan chat MODEL --system "你是一名金融助手。" --temperature 0.7 --top-p 0.9 --max-new-tokens 256
    yunshan chat MODEL --prompt "什么是应收账款？" --temperature 0       # one-shot: a JSON line on stdout
    yunshan chat MODEL --prompts questions.txt --out answers.jsonl      # a prompt per line (or JSONL), for scripts

The model is any causal-LM folder or Hub id (with --revision; yunshan.loading.hub_download). PanGu-π and OTCE load with
the classes yunshan registers; with `--trust-remote-code` a folder's own modeling code (its config's `auto_map`, as
an export ships it) is run instead, exactly as for a user without yunshan; a model type neither transformers nor
yunshan knows needs that flag (the error says so), and without it no code of the folder runs. A folder holding
adapter_config.json is a PEFT adapter: its base is `--base` or the base the adapter names (a folder or Hub id), then
merged for speed.

The conversation is rendered with the tokenizer's chat template; a tokenizer without one gets yunshan's default
(yunshan.data.chat, the template SFT trains with), so a model answers in the format it was trained on. Generation
stops at EOS and at the template's end-of-turn token (found by rendering an assistant turn, as SFT finds the tokens
it trains), streams its tokens as they are produced (transformers' TextIteratorStreamer: the printed text is the
decoded answer, held back only while a multi-byte character is incomplete), and Ctrl-C stops an answer without
leaving the chat. When a conversation outgrows the model's context the oldest turns are left out, and the chat says
so. `--temperature 0` is greedy decoding; otherwise tokens are sampled (top-p, top-k) with `--seed` fixing them.

One-shot mode (`--prompt`, `--prompts`) answers each prompt on its own (no shared history) and writes one JSON line
per prompt: {"prompt", "response", "new_tokens", "finish": "stop" | "length"}. A `--prompts` file is .txt (one prompt
per non-empty line) or .jsonl ({"prompt": TEXT} or {"messages": [...]} per line, the conversation up to the turn to
answer), read before the model loads: text that is not UTF-8 stops there in one line naming FILE:LINE (or
`--prompt #N`). A prompt that cannot be answered (longer than the context, or a conversation the chat template
refuses) is written as {"prompt", "error"} and named on stderr, the rest are answered, and the exit code is 1.

Written on transformers' generate() and TextIteratorStreamer and peft's PeftModel; only the loop, the commands and
the context trimming are our own.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from yunshan.arguments.field_rules import check_fields

OPT_IN = "--trust-remote-code"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
COMMANDS_HELP = "/reset clears the conversation (the system prompt stays), /exit or Ctrl-D quits, Ctrl-C stops an answer"


@dataclass
class ChatArgs:
    """Arguments of `yunshan chat`."""

    model: str = field(metadata={"path": True,
        "help": "model folder or Hub id ORG/NAME (or a PEFT adapter folder: see --base)"})
    revision: str | None = field(default=None, metadata={"help": "branch, tag or commit of a Hub id in MODEL"})
    base: str | None = field(default=None, metadata={"path": True,
        "help": "base model (folder or Hub id) of a LoRA adapter (default: the base_model_name_or_path its "
                "adapter_config.json names)"})
    trust_remote_code: bool = field(default=False, metadata={
        "help": "run the model folder's own modeling code (auto_map), as an exported PanGu-π or OTCE ships it"})
    system: str | None = field(default=None, metadata={"help": "system prompt put first in every conversation"})
    temperature: float = field(default=0.7, metadata={"range": ">= 0",
        "help": "sampling temperature; 0 decodes greedily"})
    top_p: float = field(default=0.9, metadata={"range": "(0, 1]",
        "help": "nucleus sampling: keep the most likely tokens up to this mass"})
    top_k: int = field(default=0, metadata={"range": ">= 0",
        "help": "sample among the k most likely tokens (0: no limit)"})
    repetition_penalty: float = field(default=1.0, metadata={"range": "> 0",
        "help": "penalty on tokens already present (1: none)"})
    max_new_tokens: int = field(default=512, metadata={"range": ">= 1", "help": "longest answer in tokens"})
    seed: int | None = field(default=None, metadata={"range": "[0, 4294967295]",
        "help": "seed of sampling (same seed, same answers)"})
    dtype: str = field(default="auto", metadata={
        "help": "auto (bf16 autocast where the CPU/GPU multiplies bf16 fast, else float32), float32, bfloat16, "
                "float16"})
    device: str = field(default="cpu", metadata={"help": "torch device"})
    prompt: list[str] = field(default_factory=list, metadata={
        "help": "one-shot mode: answer this prompt (repeatable) and print a JSON line per prompt"})
    prompts: str | None = field(default=None, metadata={"path": True,
        "help": "one-shot mode: a .txt file (a prompt per line) or .jsonl file ({\"prompt\"} or {\"messages\"})"})
    out: str | None = field(default=None, metadata={"path": True,
        "help": "one-shot mode: write the JSON lines here, not stdout"})

    def __post_init__(self):
        check_fields(self)


# ---------------------------------------------------------------- loading


@dataclass
class ChatModel:
    model: object
    tokenizer: object
    stop_ids: list[int]  # EOS and the template's end-of-turn token(s)
    template: str  # "the tokenizer's own" or "yunshan default"
    autocast: bool
    max_length: int
    description: str


def load_chat_model(args: ChatArgs) -> ChatModel:
    """The model (eval mode), its tokenizer with a chat template, and the ids generation stops at."""
    import torch

    from yunshan.data.chat import ensure_chat_template
    from yunshan.io.folders import readable_by_transformers
    from yunshan.loading.precision import eval_autocast
    from yunshan.loading.pretrained import (
        activation_checkpointing_alias, context_length, load_causal_lm, load_tokenizer, resolve_model_folder)

    # A Hub id becomes its HF cache folder (downloaded unless HF_HUB_OFFLINE=1; offline and not cached: one line).
    path = run_final_model(Path(resolve_model_folder(args.model, args.revision, field="MODEL")))
    dtype, autocast, _ = eval_autocast(args.dtype)
    adapter_config = path / "adapter_config.json"
    base = None
    if adapter_config.is_file():
        if not any((path / name).is_file() for name in ADAPTER_WEIGHTS):
            raise FileNotFoundError(f"{path}: an adapter folder (adapter_config.json) without its weights "
                                    f"({' or '.join(ADAPTER_WEIGHTS)}); a LoRA run saves both in its adapter/ folder")
        field_ = "--base" if args.base else f"{adapter_config} base_model_name_or_path"
        base = resolve_model_folder(args.base or _adapter_base(adapter_config), None, field=field_)
        tokenizer_from = path if (path / "tokenizer_config.json").is_file() else Path(base)
    else:
        if args.base:
            raise ValueError(f"--base is for a LoRA adapter folder; {path} has no adapter_config.json")
        tokenizer_from = path
    weights = Path(base or path)
    try:
        # A damaged config.json or tokenizer.json is one line naming the file (yunshan.io.folders); a folder's own
        # code is refused without --trust-remote-code (yunshan.loading.remote_code).
        tokenizer = load_tokenizer(tokenizer_from, opt_in=OPT_IN, trust_remote_code=args.trust_remote_code,
                                   name=weights)
        model = None
        if args.trust_remote_code:
            with readable_by_transformers(weights, "model"):
                model = _own_code_model(weights, getattr(torch, dtype))
        if model is None:
            model = load_causal_lm(weights, opt_in=OPT_IN, dtype=getattr(torch, dtype),
                                   trust_remote_code=args.trust_remote_code, name=weights)
    except OSError as err:
        raise FileNotFoundError(f"{weights}: cannot load a model and tokenizer offline ({str(err).splitlines()[0]})") \
            from None
    if base is not None:
        from peft import PeftModel

        if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
            model.resize_token_embeddings(len(tokenizer))  # an adapter trained after a vocabulary extension
        with activation_checkpointing_alias():
            model = PeftModel.from_pretrained(model, str(path)).merge_and_unload()
    model.to(args.device).eval()
    template = "yunshan default" if ensure_chat_template(tokenizer) else "the tokenizer's own"
    code = type(model).__module__
    origin = "the folder's own code" if code.startswith("transformers_modules") else "installed code"
    description = (f"{path}{f' on base {base}' if base else ''}: {type(model).__name__} ({origin}), "
                   f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
                   f"{'bfloat16 autocast' if autocast else dtype}, chat template: {template}")
    return ChatModel(model, tokenizer, stop_ids(model, tokenizer), template, autocast,
                     context_length(model, tokenizer), description)


def run_final_model(folder: Path) -> Path:
    """The model folder a reference means: a `yunshan run` folder (run.json) stands for its final model (the last
    stage's output, merged weights for a LoRA run), any other folder for itself."""
    from yunshan.io.artifacts import RunManifest
    from yunshan.hub.provenance import resolve_in_run

    manifest_path = folder / RunManifest.FILE
    if not manifest_path.is_file():
        return folder
    manifest = RunManifest.read(manifest_path)
    final = resolve_in_run(folder, manifest.final_model)
    if final is None:
        raise FileNotFoundError(f"{manifest_path}: field final_model={manifest.final_model!r} is not a folder; "
                                "finish the run (yunshan run RECIPE) first")
    return final


def _own_code_model(folder: Path, dtype):
    """The model built by the folder's own modeling code (config.json's auto_map), or None when it ships none.

    transformers prefers a class registered in the process (yunshan registers PanGu-π and OTCE) over a folder's
    code even with trust_remote_code=True; --trust-remote-code promises the folder's code, so it is loaded here
    explicitly, as transformers does for a model type it does not know."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    config_file = folder / "config.json"
    auto_map = json.loads(config_file.read_text(encoding="utf-8")).get("auto_map", {}) if config_file.is_file() else {}
    if "AutoModelForCausalLM" not in auto_map or "AutoConfig" not in auto_map:
        return None
    config = get_class_from_dynamic_module(auto_map["AutoConfig"], folder, local_files_only=True).from_pretrained(folder)
    model_class = get_class_from_dynamic_module(auto_map["AutoModelForCausalLM"], folder, local_files_only=True)
    return model_class.from_pretrained(folder, config=config, dtype=dtype, local_files_only=True)


def _adapter_base(adapter_config: Path) -> str:
    try:
        config = json.loads(adapter_config.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{adapter_config}:{err.lineno}: not valid JSON ({err.msg})") from None
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not base:
        raise ValueError(f"{adapter_config}: field 'base_model_name_or_path' is empty; give the base with --base FOLDER")
    return base


def stop_ids(model, tokenizer) -> list[int]:
    """EOS ids (tokenizer and generation config) and the token(s) the chat template closes an assistant turn with."""
    from yunshan.data.chat import TemplateError, encode_conversation

    ids = set()
    for eos in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    try:
        ids.update(encode_conversation(tokenizer, [{"role": "user", "content": "1"},
                                                   {"role": "assistant", "content": "2"}]).end_markers)
    except TemplateError:
        pass  # a template that is not prefix-stable: EOS alone ends an answer
    return sorted(ids)


# ---------------------------------------------------------------- generation


def prompt_ids(chat: ChatModel, messages: list[dict]) -> list[int]:
    """Token ids of the conversation up to the assistant's turn, as SFT tokenised it (no special tokens added
    beyond what the template writes)."""
    from yunshan.data.chat import render

    text = render(chat.tokenizer, messages, add_generation_prompt=True)  # a failing template: TemplateError, one line
    return chat.tokenizer(text, add_special_tokens=False)["input_ids"]


def generation_kwargs(args: ChatArgs, chat: ChatModel) -> dict:
    sample = args.temperature > 0
    kwargs = {"max_new_tokens": args.max_new_tokens, "do_sample": sample, "eos_token_id": chat.stop_ids,
              "pad_token_id": chat.tokenizer.pad_token_id if chat.tokenizer.pad_token_id is not None
              else chat.stop_ids[0] if chat.stop_ids else 0,
              "repetition_penalty": args.repetition_penalty}
    if sample:
        kwargs.update(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k or None)
    else:  # greedy: unset the sampling defaults a generation_config may carry, so transformers does not warn
        kwargs.update(temperature=None, top_p=None, top_k=None)
    return kwargs


def fit_context(chat: ChatModel, messages: list[dict], max_new_tokens: int) -> tuple[list[dict], int]:
    """The conversation without its oldest turns until it and the answer fit the context: (messages, turns left
    out). The system prompt and the last user turn always stay; if they alone do not fit, ValueError."""
    limit = chat.max_length - max_new_tokens
    system = [m for m in messages[:1] if m["role"] == "system"]
    rest = messages[len(system):]
    dropped = 0
    while len(prompt_ids(chat, system + rest)) > limit:
        if len(rest) <= 1:
            raise ValueError(f"the prompt needs more than {limit} tokens (the model's context of {chat.max_length} "
                             f"minus --max-new-tokens {max_new_tokens}); shorten it or lower --max-new-tokens")
        rest = rest[2:] if len(rest) > 2 else rest[1:]  # a user turn and its answer
        dropped += 2
    return system + rest, dropped


def respond(chat: ChatModel, messages: list[dict], args: ChatArgs, write=None) -> tuple[str, int, str]:
    """Generate the assistant's answer to `messages`: (text, new tokens, "stop" | "length"). With `write`, each
    piece of text is passed to it as soon as it is decoded; Ctrl-C stops the answer (what was said is kept)."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

    ids = torch.tensor([prompt_ids(chat, messages)], device=chat.model.device)
    stop = threading.Event()

    class Interrupted(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), stop.is_set(), dtype=torch.bool, device=input_ids.device)

    kwargs = generation_kwargs(args, chat)
    kwargs["stopping_criteria"] = StoppingCriteriaList([Interrupted()])
    result: dict = {}

    def run(streamer=None):
        try:
            with torch.no_grad(), torch.autocast(chat.model.device.type, dtype=torch.bfloat16, enabled=chat.autocast):
                result["out"] = chat.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                                    streamer=streamer, **kwargs)
        except BaseException as err:  # re-raised in the caller's thread
            result["error"] = err
            if streamer is not None:
                streamer.end()

    if write is None:
        run()
    else:
        streamer = TextIteratorStreamer(chat.tokenizer, skip_prompt=True, skip_special_tokens=True)
        worker = threading.Thread(target=run, args=(streamer,), daemon=True)
        worker.start()
        try:
            for piece in streamer:
                write(piece)
        except KeyboardInterrupt:
            stop.set()
            for _ in streamer:  # let generate() finish its step and end the stream
                pass
        worker.join()
    if "error" in result:
        raise result["error"]
    new = result["out"][0, ids.shape[1]:].tolist()
    finish = "stop" if new and new[-1] in chat.stop_ids else "length" if len(new) >= args.max_new_tokens else "stop"
    return chat.tokenizer.decode(new, skip_special_tokens=True), len(new), finish


# ---------------------------------------------------------------- the two modes


def interactive(chat: ChatModel, args: ChatArgs, read=input, out=sys.stdout) -> None:
    """The terminal chat: a line per user turn, the answer streamed, /reset and /exit."""
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:
        pass
    system = [{"role": "system", "content": args.system}] if args.system else []
    messages = list(system)
    print(f"yunshan chat: {chat.description}\n{COMMANDS_HELP}", file=out, flush=True)
    while True:
        try:
            line = read("\nuser> ")
        except EOFError:
            print(file=out)
            return
        except KeyboardInterrupt:
            print(file=out)
            continue
        text = line.strip()
        if not text:
            continue
        problem = not_utf8(line)
        if problem:  # what the terminal sent was not UTF-8: say so and read the next line
            print(f"(not valid UTF-8: {problem}; type it again)", file=out, flush=True)
            continue
        if text in ("/exit", "/quit"):
            return
        if text == "/reset":
            messages = list(system)
            print("(conversation cleared)", file=out, flush=True)
            continue
        if text.startswith("/") and " " not in text:
            print(f"(unknown command {text}; {COMMANDS_HELP})", file=out, flush=True)
            continue
        try:
            messages, dropped = fit_context(chat, messages + [{"role": "user", "content": line}], args.max_new_tokens)
        except ValueError as err:
            print(f"({err})", file=out, flush=True)
            continue
        if dropped:
            print(f"(the oldest {dropped} turns are left out to fit the {chat.max_length}-token context)", file=out)
        print("assistant> ", end="", file=out, flush=True)
        answer, _, finish = respond(chat, messages, args, write=lambda piece: print(piece, end="", file=out, flush=True))
        print(" [cut at --max-new-tokens]" if finish == "length" else "", file=out, flush=True)
        messages.append({"role": "assistant", "content": answer})


def not_utf8(text: str) -> str | None:
    """What makes `text` not valid UTF-8 (None when it is): Python keeps the undecodable bytes of a command line or a
    terminal as lone surrogates, and a JSON escape such as \\ud800 makes one too; the tokenizer refuses both."""
    for i, ch in enumerate(text):
        if "\ud800" <= ch <= "\udfff":
            code = ord(ch)
            return (f"byte 0x{code - 0xDC00:02x} at character {i + 1}" if 0xDC80 <= code <= 0xDCFF
                    else f"a lone surrogate U+{code:04X} at character {i + 1}")
    return None


def read_prompts(path: str) -> list[tuple[str, list[dict]]]:
    """The conversations of a --prompts file, each ending with the user turn to answer, with where it is (FILE:LINE).
    Read before the model loads: a line that is not UTF-8, not JSON or has no prompt stops here in one line."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"--prompts {path}: no such file")
    conversations = []
    for number, raw in enumerate(file.read_bytes().splitlines(), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}:{number}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at byte {err.start + 1} "
                             "of the line); save the file as UTF-8") from None
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if file.suffix != ".jsonl":
            conversations.append((where, [{"role": "user", "content": line}]))
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}: not valid JSON ({err.msg})") from None
        if isinstance(record, dict) and isinstance(record.get("prompt"), str):
            messages = [{"role": "user", "content": record["prompt"]}]
        elif isinstance(record, dict) and isinstance(record.get("messages"), list) and record["messages"] and all(
                isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
                and isinstance(m.get("content"), str) for m in record["messages"]) \
                and record["messages"][-1]["role"] == "user":
            messages = record["messages"]
        else:
            raise ValueError(f"{where}: field 'prompt' (a string) or 'messages' (role/content turns ending "
                             "with a user turn) is required")
        problem = next((p for p in map(not_utf8, (m["content"] for m in messages)) if p), None)
        if problem:
            raise ValueError(f"{where}: not valid UTF-8 text ({problem})")
        conversations.append((where, messages))
    return conversations


def read_all_prompts(args: ChatArgs) -> list[tuple[str, list[dict]]]:
    """Every one-shot conversation with where it comes from: each --prompt, then the --prompts file's lines."""
    conversations = []
    for k, prompt in enumerate(args.prompt, start=1):
        problem = not_utf8(prompt)
        if problem:
            raise ValueError(f"--prompt #{k}: not valid UTF-8 ({problem}); give the prompt in UTF-8")
        conversations.append((f"--prompt #{k}", [{"role": "user", "content": prompt}]))
    if args.prompts:
        conversations += read_prompts(args.prompts)
    return conversations


def one_shot(chat: ChatModel, args: ChatArgs, conversations: list[tuple[str, list[dict]]]) -> int:
    """Answer each conversation on its own, a JSON line each. One that cannot be answered (longer than the context,
    or the chat template fails on it) does not stop the rest: its line says {"prompt", "error"}, stderr names where
    it came from, and the exit code is 1 once all the others are answered."""
    failed = []
    sink = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        for where, messages in conversations:
            if args.system and messages[0]["role"] != "system":
                messages = [{"role": "system", "content": args.system}] + messages
            try:
                messages, _ = fit_context(chat, messages, args.max_new_tokens)
            except ValueError as err:  # too long for the context, or a template that fails on it
                failed.append(where)
                print(f"{where}: not answered: {err}", file=sys.stderr, flush=True)
                sink.write(json.dumps({"prompt": messages[-1]["content"], "error": str(err)}, ensure_ascii=False)
                           + "\n")
                sink.flush()
                continue
            answer, new, finish = respond(chat, messages, args)
            record = {"prompt": messages[-1]["content"], "response": answer, "new_tokens": new, "finish": finish}
            if len(messages) > 1:
                record["messages"] = messages
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            sink.flush()
    finally:
        if sink is not sys.stdout:
            sink.close()
    if failed:
        print(f"{len(failed)} of {len(conversations)} prompts not answered ({', '.join(failed[:5])}"
              f"{', ...' if len(failed) > 5 else ''}); the others are answered", file=sys.stderr)
        return 1
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_flags
    from yunshan.loading.precision import CHOICES

    add_flags(parser, ChatArgs, positional={"model": "MODEL"}, metavars={"prompt": "TEXT", "prompts": "FILE"},
              choices={"dtype": CHOICES})


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import from_flags

    a = from_flags(ChatArgs, args)
    if a.out and not (a.prompt or a.prompts):
        raise ValueError("--out is for one-shot mode: give --prompt TEXT or --prompts FILE")
    conversations = read_all_prompts(a)  # before the model loads: a bad prompts file stops at once
    chat = load_chat_model(a)
    if a.max_new_tokens >= chat.max_length:
        raise ValueError(f"--max-new-tokens {a.max_new_tokens}: the model's context is {chat.max_length} tokens and "
                         f"must hold the prompt too; give at most {chat.max_length - 1}")
    if a.seed is not None:
        from transformers import set_seed

        set_seed(a.seed)
    if a.prompt or a.prompts:
        return one_shot(chat, a, conversations)
    interactive(chat, a)
    return 0
