"""Compare tokenizers on text files: vocabulary size, compression rate (tokens per character), bytes per token.

    yunshan tokenizer report --tokenizer base/ --tokenizer extended/ --text heldout/finance.txt heldout/general.txt
    yunshan tokenizer report --tokenizer base/ --tokenizer extended/ --text a.jsonl --json report.json

Compression rate as the PanGu-π paper defines it (Table 7; docs/evaluation-formats.md): the sum of tokens over
the sum of Unicode characters of the texts, no BOS or other special tokens added; lower is better. A `.jsonl` file
gives one text per record ("text" field, `--text-field`), a `.txt` file is one text (a held-out or evaluation text is
one continuous document: yunshan.data.records' `.txt` rule; `--txt-document paragraph` cuts it at blank lines),
every format and compression `yunshan cpt` reads (corpus.py: the data layer's one reader; files, folders,
globs; one row per file). Every tokenizer after the first is compared with the first (token change in percent)
and lists the tokens it has that the first lacks, most used first. Output: a markdown table on stdout and, with
`--json`, the same numbers as JSON.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from .corpus import corpus_files, read_corpus


def load_backend(path: str | Path):
    """The `tokenizers.Tokenizer` a model sees: a folder through AutoTokenizer, a .model through our conversion."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"tokenizer {path} does not exist")
    if path.is_dir():
        if not (path / "tokenizer.json").is_file() and not (path / "tokenizer.model").is_file():
            raise FileNotFoundError(f"tokenizer folder {path} has no tokenizer.json or tokenizer.model")
        from transformers import AutoTokenizer

        from yunshan.loading.remote_code import refuse_remote_code

        # Only the tokenizer.json pipeline is used here, so a folder's own tokenizer code is never needed.
        with refuse_remote_code(path, None, "the tokenizer tools read tokenizer.json and never run a folder's code: "
                                            "give a folder without an auto_map in tokenizer_config.json"):
            return AutoTokenizer.from_pretrained(str(path), trust_remote_code=False).backend_tokenizer
    from .base import load_base_tokenizer

    return load_base_tokenizer(path).backend


def compression_report(tokenizers: list[str | Path], texts: list[str | Path], *, text_field: str = "text",
                       format: str = "auto", txt_document: str = "file", top_new: int = 20,
                       batch_size: int = 1000) -> dict:
    """Token counts of every tokenizer on every text file (`texts`: files, folders or globs); see the module
    docstring for the definitions. An unusable record is an error naming file, line and field."""
    if not tokenizers:
        raise ValueError("give at least one --tokenizer")
    backends = [load_backend(t) for t in tokenizers]
    names = [str(t) for t in tokenizers]
    first_vocab = backends[0].get_vocab(with_added_tokens=True)
    new_counts = [Counter() for _ in backends]
    new_ids = [{i for s, i in b.get_vocab(with_added_tokens=True).items() if s not in first_vocab}
               for b in backends]
    files = []
    for path in corpus_files(texts, format=format, what="--text"):
        documents = list(read_corpus([path], format=format, text_field=text_field, txt_document=txt_document,
                                     what="--text"))
        characters = sum(len(d) for d in documents)
        n_bytes = sum(len(d.encode("utf-8")) for d in documents)
        results = []
        for k, backend in enumerate(backends):
            tokens = 0
            for start in range(0, len(documents), batch_size):
                for enc in backend.encode_batch(documents[start:start + batch_size], add_special_tokens=False):
                    tokens += len(enc.ids)
                    if new_ids[k]:
                        new_counts[k].update(i for i in enc.ids if i in new_ids[k])
            results.append({"tokenizer": names[k], "tokens": tokens, "tokens_per_char": tokens / characters,
                            "bytes_per_token": n_bytes / tokens if tokens else None})
        for r in results:
            r["change_vs_first"] = r["tokens"] / results[0]["tokens"] - 1 if results[0]["tokens"] else None
        files.append({"path": str(path), "texts": len(documents), "characters": characters, "bytes": n_bytes,
                      "results": results})
    report = {
        "definition": "compression rate = sum of tokens / sum of Unicode characters (no special tokens); lower "
                      "is better",
        "tokenizers": [{"name": n, "vocab_size": b.get_vocab_size(with_added_tokens=True),
                        "new_vs_first": len(new_ids[k])} for k, (n, b) in enumerate(zip(names, backends))],
        "files": files,
        "new_tokens_most_used": [
            {"tokenizer": names[k], "top": [{"id": i, "token": backends[k].id_to_token(i),
                                             "text": backends[k].decode([i], skip_special_tokens=False),
                                             "count": c} for i, c in new_counts[k].most_common(top_new)]}
            for k in range(1, len(backends))],
    }
    return report


def format_markdown(report: dict) -> str:
    """The report as markdown tables."""
    lines = ["| tokenizer | vocabulary | new vs first |", "|---|---:|---:|"]
    for t in report["tokenizers"]:
        lines.append(f"| {t['name']} | {t['vocab_size']:,} | {t['new_vs_first']:,} |")
    lines += ["", "| file | tokenizer | texts | characters | tokens | tokens/char | bytes/token | tokens vs first |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for f in report["files"]:
        for r in f["results"]:
            change = f"{r['change_vs_first'] * 100:+.2f}%" if r["change_vs_first"] is not None else "n/a"
            bpt = f"{r['bytes_per_token']:.3f}" if r["bytes_per_token"] else "n/a"
            lines.append(f"| {Path(f['path']).name} | {r['tokenizer']} | {f['texts']:,} | {f['characters']:,} | "
                         f"{r['tokens']:,} | {r['tokens_per_char']:.4f} | {bpt} | {change} |")
    for entry in report["new_tokens_most_used"]:
        if not entry["top"]:
            continue
        lines += ["", f"New tokens of {entry['tokenizer']} most used:", "",
                  "| id | text | count |", "|---:|---|---:|"]
        for t in entry["top"]:
            text = json.dumps(t["text"], ensure_ascii=False).replace("|", "\\|")
            lines.append(f"| {t['id']} | {text} | {t['count']:,} |")
    return "\n".join(lines)
