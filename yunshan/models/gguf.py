"""`yunshan model import-gguf FILE OUT`: a GGUF checkpoint into a plain Hugging Face model folder.

    yunshan model import-gguf SmolLM2-135M-Instruct.Q4_1.gguf models/smollm2-135m

GGUF is a common form in which users hold their models (llama.cpp, Ollama, LM Studio). transformers reads it
(`from_pretrained(dir, gguf_file=...)`, dequantising every tensor with the `gguf` package); this module writes what
it read as an ordinary folder that every yunshan stage takes: float32 safetensors, `config.json`, the tokenizer with
its chat template, `generation_config.json`, and `yunshan_import.json` (the source file's sha256, its GGUF metadata
and what was repaired). A quantised file (Q4_1, Q8_0, ...) is dequantised: the folder holds exactly the weights the
quantised model computes with, in float32.

One repair: GGUF names the base's pre-tokeniser (`tokenizer.ggml.pre`) and transformers rebuilds only some of them
(Llama-3, Qwen2, GPT-4o, ...). For the others it falls back to GPT-2's regex, which changes how the tokenizer cuts
text from how the model was trained. The names in `DIGIT_FIRST_PRE_TOKENIZERS` (llama.cpp's `\\p{N}` pass before
GPT-2's regex: SmolLM, StarCoder, ...) are restored here as a `Digits(individual_digits=True)` step before the
ByteLevel one, as the original tokenizer.json has it; an unknown name is recorded in the import report. An added
token the file holds as USER_DEFINED outside the byte alphabet (`tokenizer.add_tokens(["民法典"])`), which
transformers' loader leaves as a BPE entry no merge makes, is an added token at its id again (llama.cpp matches it
whole). And a token transformers adds beyond the model's embedding rows (an `<|endoftext|>` unknown token for a
byte-level vocabulary that names none) is removed, so the folder's tokenizer has the file's tokens and no more.

Written by hand only for what transformers does not do: dropping the GGUF quantizer so the model can be saved, the
pre-tokeniser and added-token repairs, the atomic write and the report.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

# llama.cpp pre-tokeniser names whose first pass isolates every digit (`\p{N}`) before GPT-2's regex
# (llama-vocab.cpp: LLAMA_VOCAB_PRE_TYPE_STARCODER, _REFACT, _COMMAND_R, _SMOLLM, _CODESHELL, _EXAONE, _MINERVA).
DIGIT_FIRST_PRE_TOKENIZERS = ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b")
# Names transformers' GGUF loader rebuilds itself, or for which GPT-2's regex is right.
GPT2_PRE_TOKENIZERS = ("gpt-2", "default", "gpt2")
IMPORT_REPORT = "yunshan_import.json"


def read_gguf_metadata(path: Path) -> dict:
    """The GGUF key/value metadata, without the large arrays (token lists, merges, scores)."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, KeyError, IndexError) as err:
        raise ValueError(f"{path}: not a readable GGUF file ({err})") from None
    meta = {}
    for key, field_ in reader.fields.items():
        if key.startswith("tokenizer.ggml.") and key.split(".")[-1] in ("tokens", "merges", "token_type", "scores"):
            meta[key] = f"<{len(field_.data)} entries>"
            continue
        try:
            value = field_.contents()
        except Exception:  # noqa: BLE001  (an exotic field type must not stop the import; it is only recorded)
            value = "<unreadable>"
        meta[key] = value
    meta["_tensor_types"] = sorted({t.tensor_type.name for t in reader.tensors})
    return meta


def _supported_architectures() -> list[str]:
    """GGUF architecture names this transformers reads (its GGUF loader and its legacy loader); empty if unknown."""
    names: set[str] = set()
    try:
        from transformers.integrations.gguf.utils import GGUF_ARCHS
        names |= set(GGUF_ARCHS)
    except ImportError:
        pass
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
        names |= set(GGUF_SUPPORTED_ARCHITECTURES)
    except ImportError:
        pass
    return sorted(names - {"general", "tokenizer"})  # metadata sections, not architectures


def _repair_pre_tokenizer(tokenizer_json: dict, pre: str | None) -> str | None:
    """Restore the digit pass of a `DIGIT_FIRST_PRE_TOKENIZERS` base; returns what was done (None: nothing)."""
    if pre not in DIGIT_FIRST_PRE_TOKENIZERS:
        return None
    current = tokenizer_json.get("pre_tokenizer") or {}
    if current.get("type") != "ByteLevel":
        return None  # transformers built something of its own: leave it
    tokenizer_json["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        current,
    ]}
    return (f"pre-tokeniser {pre!r}: added Digits(individual_digits=True) before ByteLevel (llama.cpp splits every "
            "digit first for this name; transformers' GGUF loader had used GPT-2's regex alone)")


def _drop_tokens_beyond(tokenizer_json: dict, rows: int) -> str | None:
    """Remove added tokens whose id has no embedding row. transformers' GGUF loader adds an `<|endoftext|>` unknown
    token to a byte-level vocabulary that names none; the model has no row for it, so encoding it would fail."""
    added = tokenizer_json.get("added_tokens") or []
    dropped = [t["content"] for t in added if t["id"] >= rows]
    if not dropped:
        return None
    tokenizer_json["added_tokens"] = [t for t in added if t["id"] < rows]
    return (f"removed added token(s) {dropped} that transformers' GGUF loader put beyond the model's {rows} "
            "embedding rows (the GGUF file does not have them)")


def user_defined_tokens(path: Path) -> dict[int, str]:
    """The file's USER_DEFINED tokens (type 4: the tokenizer's added tokens that are not special), id -> text."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    tokens, types = (reader.fields.get(f"tokenizer.ggml.{key}") for key in ("tokens", "token_type"))
    if tokens is None or types is None:
        return {}
    return {i: text for i, (text, kind) in enumerate(zip(tokens.contents(), types.contents()))
            if kind == gguf.TokenType.USER_DEFINED}


def _restore_user_defined(tokenizer_json: dict, user_defined: dict[int, str]) -> str | None:
    """Put back the added tokens transformers' GGUF loader drops. A GGUF file holds an added token that is not special
    as USER_DEFINED with its text as typed (`民法典`), which llama.cpp matches whole in the raw text before the
    pre-tokeniser (llama-vocab.cpp, tokenizer_st_partition), as the HF tokenizer it came from does. transformers
    (5.x, byte_level_tokenizer) respells every such text into the byte alphabet for the BPE vocabulary and then adds
    as a token only the texts found in that vocabulary as they are, so an added token outside the byte alphabet (any
    CJK word) stays a BPE entry that no merge makes, and the text is cut into pieces. Here each is an added token
    again at its own id, spelled as typed in the BPE vocabulary too."""
    added = {t["content"] for t in tokenizer_json.get("added_tokens") or []}
    vocab = (tokenizer_json.get("model") or {}).get("vocab")
    if not isinstance(vocab, dict):
        return None
    by_id = {i: key for key, i in vocab.items()}
    restored = []
    for i, text in sorted(user_defined.items()):
        if text in added:
            continue
        # The BPE vocabulary holds the text itself at its id (no merge makes it): tokenizers gives an added token the
        # id its text has in the vocabulary, and a fresh one past the end otherwise.
        if by_id.get(i) is not None and by_id[i] != text:
            del vocab[by_id[i]]
        vocab[text] = i
        tokenizer_json.setdefault("added_tokens", []).append({
            "id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": False})
        restored.append(text)
    if not restored:
        return None
    tokenizer_json["added_tokens"].sort(key=lambda t: t["id"])
    shown = ", ".join(repr(t) for t in restored[:10]) + (f" and {len(restored) - 10} more" if len(restored) > 10 else "")
    return (f"restored {len(restored)} added token(s) the file holds as USER_DEFINED ({shown}), which transformers' "
            "GGUF loader had left to be cut into pieces")


def import_gguf(gguf_file: str | os.PathLike, out: str | os.PathLike, overwrite: bool = False, log=print) -> dict:
    """Write the GGUF model at `gguf_file` as a Hugging Face folder at `out`; returns the import report."""
    from yunshan.io.folders import check_output_folder

    src = Path(gguf_file)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such GGUF file")
    out = Path(out)
    check_out(out, src, overwrite)
    check_output_folder(out, "OUT")  # a path through a file, or a folder this user cannot write: before the load
    from yunshan.io.folder_lock import folder_lock

    # Another import writing the same OUT stops here (yunshan.io.folder_lock); OUT is checked again under the lock, as
    # it may have changed before the lock was taken.
    with folder_lock(out, "OUT", log):
        check_out(out, src, overwrite)
        return _import(src, out, log)


def _import(src: Path, out: Path, log) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.io.folders import staged_folder
    from yunshan.loading.remote_code import refuse_remote_code

    started = time.perf_counter()
    meta = read_gguf_metadata(src)
    arch = meta.get("general.architecture")
    supported = _supported_architectures()
    if supported and arch not in supported:
        raise ValueError(f"{src}: GGUF architecture {arch!r} cannot be read by transformers "
                         f"(it reads: {', '.join(supported)})")
    log(f"reading {src.name}: {arch}, tensors {', '.join(meta['_tensor_types'])} (dequantised to float32)")
    # The GGUF file's folder may hold a config.json or tokenizer_config.json with an auto_map: its code never runs.
    never = ("yunshan model import-gguf never runs a folder's code (the GGUF file holds the whole model): move "
             "the .gguf file to a folder of its own")
    try:
        with refuse_remote_code(src.parent, None, never):
            model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32,
                                                         trust_remote_code=False)
            tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name, trust_remote_code=False)
    except (ValueError, KeyError, NotImplementedError, RuntimeError) as err:
        if "import-gguf never runs" in str(err):
            raise
        raise ValueError(f"{src}: transformers could not load this GGUF file ({type(err).__name__}: {err})") from None
    # The GGUF quantizer stays attached after dequantisation and blocks save_pretrained; the weights are plain now.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    name = meta.get("general.name") or src.stem
    model.config.name_or_path = str(name)

    # Written beside OUT and swapped in only when complete (a failed swap puts an earlier import back).
    with staged_folder(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        repairs = []
        tj_path = tmp / "tokenizer.json"
        if tj_path.is_file():
            data = json.loads(tj_path.read_text(encoding="utf-8"))
            repaired = [_repair_pre_tokenizer(data, meta.get("tokenizer.ggml.pre")),
                        _restore_user_defined(data, user_defined_tokens(src)),
                        _drop_tokens_beyond(data, model.get_input_embeddings().weight.shape[0])]
            if any(repaired):
                tj_path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
                repairs += [r for r in repaired if r]
                tokenizer = AutoTokenizer.from_pretrained(tmp)  # as written, for the report
        pre = meta.get("tokenizer.ggml.pre")
        known = set(DIGIT_FIRST_PRE_TOKENIZERS) | set(GPT2_PRE_TOKENIZERS) | _transformers_pre_tokenizers()
        notes = []
        if pre and pre not in known:
            notes.append(f"pre-tokeniser {pre!r} is not rebuilt by transformers or yunshan: the tokenizer uses "
                         "transformers' default for this tokenizer model; check number and whitespace handling")
        report = {
            "source": {"file": src.name, "bytes": src.stat().st_size, "sha256": _sha256(src)},
            "architecture": arch, "model_class": type(model).__name__,
            "parameters": sum(p.numel() for p in model.parameters()),
            "tie_word_embeddings": bool(getattr(model.config, "tie_word_embeddings", False)),
            "vocab_size": len(tokenizer), "chat_template": tokenizer.chat_template is not None,
            "tensor_types": meta["_tensor_types"], "dtype": "float32",
            "gguf_metadata": {k: v for k, v in meta.items() if not k.startswith("_") and k != "tokenizer.chat_template"},
            "repairs": repairs, "notes": notes,
            # what a later --overwrite may replace (check_out): every file this import wrote, this report included
            "files": sorted([*(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file()), IMPORT_REPORT]),
        }
        (tmp / IMPORT_REPORT).write_text(json.dumps(report, ensure_ascii=False, indent=2, default=str) + "\n",
                                         encoding="utf-8")
    for line in repairs + notes:
        log(line)
    log(f"wrote {out}: {report['model_class']}, {report['parameters']:,} parameters, vocabulary "
        f"{report['vocab_size']:,}, tied embeddings {report['tie_word_embeddings']} "
        f"in {time.perf_counter() - started:.1f}s")
    return report


# What an import writes, for a report of an older yunshan that did not list its files: fnmatch patterns of names at
# the top of the folder (yunshan.io.folders.check_replaceable never lets them reach into a subfolder), as exact as the
# names save_pretrained gives, so a user's model_backup.safetensors or tokenizer_notes.txt beside them is not taken.
IMPORT_FILE_PATTERNS = ("config.json", "generation_config.json", "model.safetensors",
                        "model-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].safetensors",
                        "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                        "special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "vocab.json",
                        "merges.txt", IMPORT_REPORT)


def check_out(out: Path, src: Path, overwrite: bool) -> None:
    """Refuse an OUT the import may not write or replace, before anything is read or written: a file; a folder
    holding the GGUF file; a non-empty folder without --overwrite; and with --overwrite anything but an earlier
    import (its IMPORT_REPORT lists the files it wrote) holding nothing else. So an import never deletes a user's
    files, the same rule as `yunshan export` and `yunshan tokenizer extend`."""
    if out.is_file():  # (a link to a file too; a link to a folder, or to none yet, is written through)
        raise ValueError(f"OUT {out} is a file; give the path of a folder to create (an earlier import is replaced "
                         "with --overwrite)")
    if src.resolve().is_relative_to(out.resolve()):
        raise ValueError(f"OUT {out} holds the GGUF file {src}; replacing it would delete the file: choose another "
                         "output folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not overwrite:
        raise ValueError(f"OUT {out} exists and is not empty; pass --overwrite to replace an earlier import")
    from yunshan.io.folders import check_replaceable

    check_replaceable(out, IMPORT_REPORT, "yunshan model import-gguf", "OUT",
                      fallback=IMPORT_FILE_PATTERNS)


def _transformers_pre_tokenizers() -> set[str]:
    try:
        from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS
        return set(GGUF_PRE_TOKENIZER_SPLITS)
    except ImportError:
        return set()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
