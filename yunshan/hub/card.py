"""The model card (README.md) of an exported model: Hub front matter plus a body that says how the model was made.

    yunshan export runs/demo_tiny --out exports/demo      # writes the card with the weights (yunshan.hub.export)

    from yunshan.hub.card import CardOptions, build_model_card
    from yunshan.hub.provenance import collect_provenance
    prov = collect_provenance("runs/demo_tiny")           # a run folder (run.json) or a plain model folder
    text, metadata = build_model_card(prov, CardOptions(license="apache-2.0", language=["zh", "en"]), facts)

This module only renders: what the card shows comes from the typed records yunshan.hub.provenance gathers
(yunshan.io.artifacts), and from `ExportFacts`, what the export wrote. It knows no benchmark: the evaluation table and
`model-index` show the headline metrics `yunshan eval` recorded with each result, whatever the task.

What the card is built from, and what it shows when a part is missing (every part is optional):

| source | card section | when missing |
|---|---|---|
| run.json stages (name, status, seconds, summary) | Pipeline table | plain model folder: one row from its data_report.json (its kind), else a line saying no training record was found |
| run.json `base_model`, `--base-model`; for a plain folder its recipe's model, followed back through the yunshan cpt / sft folders it names to the checkpoint the first started from (a GGUF import's `yunshan_import.json`: the file and the Hub repository its metadata names) | `base_model` front matter, intro | omitted from the front matter when it is not a Hub id (a local folder is named in the body instead) |
| cpt stage `data_report.json` + `recipe.yaml` | Continual-pretraining tokens per source | "not recorded" |
| sft stage `data_report.json` + `recipe.yaml` | SFT samples and tokens per source | "not recorded" |
| preference stage `data_report.json` + `recipe.yaml` | Preference tuning: method, pairs per source, held-out preference metrics before and after | section left out |
| tokenizer stage `report.json` (TokenizerReport) | Tokenizer: vocabulary sizes, tokens per character before/after | section left out |
| decontamination stage `decontamination.json`, data reports' `contaminated` drops | Decontamination: training records overlapping the evaluation sets, dropped or kept | "not checked" |
| eval stages' `results.json` (`eval_before`, `eval_after`), `--eval FILE` | Evaluation table and `model-index` (the recorded headline metrics) | no `model-index`; the section says how to add results |

Only results recorded for exactly the exported weights go into `model-index`: `yunshan eval` stores a sha256 over
the model folder's files, and the card compares it with the folder being exported. Results measured on the bundled
sample sets are named as such (never as the real benchmark).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from yunshan.hub.provenance import (
    REPO_ID, EvalColumn, Provenance, hub_id_of, is_complete, resolve_in_run, stage_kind)

# Hub license identifiers (https://huggingface.co/docs/hub/repositories-licenses). The Hub rejects others;
# any other license is `other` with license_name and license_link.
HUB_LICENSES = frozenset("""
apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0 bigcode-openrail-m
afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc cc0-1.0 cc-by-2.0 cc-by-2.5
cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0
cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0 cdla-permissive-1.0
cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl
lgpl-2.1 lgpl-3.0 isc lppl-1.3c ms-pl mpl-2.0 odc-by odbl openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib
pddl lgpl-lr deepfloyd-if-license llama2 llama3 llama3.1 llama3.2 llama3.3 llama4 gemma unknown other
""".split())

LANGUAGE = re.compile(r"^[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})?$")

STAGE_WHAT = {
    "base": "base model",
    "tokenizer": "vocabulary extension",
    "decontamination": "decontamination: n-gram overlap of the training data with the evaluation sets",
    "cpt": "continual pretraining",
    "sft": "supervised fine-tuning",
    "preference": "preference tuning",
    "eval": "evaluation",
    "export": "export",
    "push": "push",
}


@dataclass
class CardOptions:
    """Choices the user makes for the card (`yunshan export` flags)."""

    license: str | None = field(default=None, metadata={
        "help": "Hub license id (apache-2.0, mit, llama2, other, ...); default: the base model card's license, "
                "else 'unknown'"})
    license_name: str | None = field(default=None, metadata={"help": "with --license other: the license's name"})
    license_link: str | None = field(default=None, metadata={"help": "with --license other: a link to its text"})
    language: list[str] = field(default_factory=lambda: ["zh", "en"], metadata={
        "help": "ISO 639 codes of the languages the model was trained for"})
    base_model: str | None = field(default=None, metadata={
        "help": "Hub id of the base model (default: from the run / HF cache path when it names one)"})
    datasets: list[str] = field(default_factory=list, metadata={"help": "extra Hub dataset ids for `datasets`"})
    tags: list[str] = field(default_factory=list, metadata={"help": "extra tags"})
    name: str | None = field(default=None, metadata={"help": "model name (title, model-index); default: run name"})
    repo_id: str | None = field(default=None, metadata={"help": "ORG/NAME the export will be pushed to (usage code)"})



# ---------------------------------------------------------------- the card


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _seconds(value) -> str:
    if not isinstance(value, (int, float)):
        return ""
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    return f"{value / 60:.1f} min" if value >= 120 else f"{value:.1f} s"


def _source_data(source: dict) -> str:
    """Where a source's data came from, without the local machine's folders (file names, dataset ids, card)."""
    parts = []
    if source.get("dataset"):
        parts.append(f"`{source['dataset']}`")
    paths = source.get("path")
    for p in [paths] if isinstance(paths, str) else (paths or []):
        parts.append(f"`{Path(p).parent.name}/{Path(p).name}`" if Path(p).parent.name else f"`{Path(p).name}`")
    if source.get("card"):
        parts.append(f"card: {source['card']}")
    return ", ".join(parts) or "–"


def training_datasets(prov: Provenance) -> list[str]:
    """Hub dataset ids named by the training sources (local files are not Hub datasets)."""
    ids = []
    for record in (prov.cpt, prov.sft, prov.preference):
        for s in record.sources if record else []:
            ds = s.get("dataset")
            # `dataset` is a load_dataset name or a save_to_disk folder; only the former is a Hub dataset.
            local = prov.run_dir is not None and (prov.run_dir / str(ds)).exists()
            if ds and not s.get("path") and hub_id_of(str(ds)) == ds and not local and ds not in ids:
                ids.append(ds)
    return ids


def base_license(prov: Provenance) -> tuple[str | None, str | None, str | None]:
    """(license, license_name, license_link) from the base model folder's own card, when it has one."""
    if not prov.base_model:
        return None, None, None
    base = resolve_in_run(prov.run_dir, prov.base_model) if prov.run_dir else Path(prov.base_model)
    if base is None or not (base / "README.md").is_file():
        return None, None, None
    from huggingface_hub import ModelCard

    try:
        data = ModelCard.load(base / "README.md", ignore_metadata_errors=True).data
    except (ValueError, OSError):
        return None, None, None
    return data.get("license"), data.get("license_name"), data.get("license_link")


def check_options(options: CardOptions) -> None:
    """Reject values the Hub would refuse, before anything is written."""
    if options.license is not None and options.license not in HUB_LICENSES:
        raise ValueError(f"--license {options.license!r} is not a Hub license id; use one of "
                         f"https://huggingface.co/docs/hub/repositories-licenses (e.g. apache-2.0, mit, llama2) or "
                         "--license other --license-name NAME --license-link URL")
    if options.license == "other" and not options.license_name:
        raise ValueError("--license other needs --license-name (and --license-link) naming the license")
    for code in options.language:
        if not LANGUAGE.match(code) and code not in ("code", "multilingual"):
            raise ValueError(f"--language {code!r} is not an ISO 639-1/2/3 code (e.g. zh, en, yue)")
    for ident, flag in [(options.base_model, "--base-model"), (options.repo_id, "--repo-id")] + [
            (d, "--dataset") for d in options.datasets]:
        if ident is not None and not REPO_ID.match(ident):
            raise ValueError(f"{flag} {ident!r} is not a Hub id of the form ORG/NAME")


def _usage(prov: Provenance, model_ref: str, remote_code: bool, chat: bool, adapter: bool,
           base_ref: str | None, grown_vocab: bool) -> str:
    trust = ", trust_remote_code=True" if remote_code else ""
    lines = ["```python", "import torch"]
    if adapter:
        lines += ["from peft import PeftModel",
                  "from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig", "",
                  f'base = AutoModelForCausalLM.from_pretrained("{base_ref}", dtype=torch.float32{trust})',
                  f'tokenizer = AutoTokenizer.from_pretrained("{model_ref}")']
        if grown_vocab:
            lines.append("base.resize_token_embeddings(len(tokenizer))  # the adapter was trained on an extended "
                         "vocabulary")
        lines += [f'model = PeftModel.from_pretrained(base, "{model_ref}").eval()',
                  f'model.generation_config = GenerationConfig.from_pretrained("{model_ref}")']
    else:
        lines += ["from transformers import AutoModelForCausalLM, AutoTokenizer", "",
                  f'tokenizer = AutoTokenizer.from_pretrained("{model_ref}"{trust})',
                  f'model = AutoModelForCausalLM.from_pretrained("{model_ref}", dtype="auto"{trust}).eval()']
    if chat:
        lines += ["", 'messages = [{"role": "user", "content": "根据《民法典》，借款合同的利率有什么限制？"}]',
                  "inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors=\"pt\", "
                  "return_dict=True)"]
    else:
        lines += ["", 'inputs = tokenizer("银行间同业拆借利率是指", return_tensors="pt")']
    lines += ["with torch.no_grad():",
              "    output = model.generate(**inputs, max_new_tokens=64, do_sample=False)",
              'print(tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))', "```"]
    return "\n".join(lines)


def _gguf_usage(model_ref: str, facts: ExportFacts) -> str:
    """How to run the GGUF file: llama.cpp's server and CLI, llama-cpp-python, Ollama."""
    file = facts.gguf_file
    lines = ["```bash", f"llama-server -m {file} --port 8080          # llama.cpp: an OpenAI-compatible server",
             f'llama-cli -m {file} -p "银行间同业拆借利率是指" -n 64']
    if facts.ollama:
        lines.append("ollama create yunshan -f Modelfile && ollama run yunshan   # the Modelfile beside it")
    lines += ["```", "", "```python", "from llama_cpp import Llama", "",
              f'llm = Llama(model_path="{file}", n_ctx={min(facts.context_length or 2048, 4096)})']
    if facts.chat_template:
        lines += ['print(llm.create_chat_completion(messages=[{"role": "user", "content": '
                  '"根据《民法典》，借款合同的利率有什么限制？"}], temperature=0)["choices"][0]["message"]["content"])']
    else:
        lines += ['print(llm("银行间同业拆借利率是指", max_tokens=64, temperature=0)["choices"][0]["text"])']
    lines += ["```", "", f"transformers reads it too: `AutoModelForCausalLM.from_pretrained(\"{model_ref}\", "
              f"gguf_file=\"{file}\")` (dequantised to float32)."]
    return "\n".join(lines)


@dataclass
class ExportFacts:
    """What the export wrote, for the card (filled by yunshan.hub.export)."""

    adapter: bool
    remote_code: bool
    architecture: str
    model_type: str
    parameters: int
    dtype: str
    weight_files: int
    vocab_size: int | None
    context_length: int | None
    chat_template: bool
    recipe_included: bool
    lora: dict | None = None  # r, alpha, targets of the run's adapter
    grown_vocab: bool = False
    converted_from: str | None = None  # the trained architecture when the export rewrote it (--as-llama)
    gguf_file: str | None = None  # the export is this one GGUF file (--gguf)
    ollama: bool = False  # ... with an Ollama Modelfile beside it


def build_model_card(prov: Provenance, options: CardOptions, facts: ExportFacts) -> tuple[str, dict]:
    """The README.md text (front matter + body) and its metadata as a dict. Raises ValueError if the front matter
    does not round-trip through huggingface_hub's ModelCard parser."""
    from huggingface_hub import EvalResult, ModelCardData

    check_options(options)
    name = options.name or prov.name
    license_, license_name, license_link = options.license, options.license_name, options.license_link
    if license_ is None:
        license_, license_name, license_link = base_license(prov)
        if license_ is None:
            license_ = "unknown"
            prov.notes.append("no --license given and the base model folder has no card with one: the card says "
                              "license: unknown; set --license before publishing")
    base_id = options.base_model or prov.base_model_id

    # Evaluation: columns, metrics per column, the exported model's metrics for model-index.
    columns = [(c, c.metrics) for c in prov.evals]
    mine = next((metrics for c, metrics in columns if c.this_model), None)
    eval_results = [EvalResult(**m.eval_result) for m in (mine or {}).values() if m.eval_result]

    tags = ["yunshan", "finance", "legal", facts.model_type, "text-generation"]
    kinds = {stage_kind(s) for s in prov.stages if is_complete(s)}
    if "cpt" in kinds or prov.cpt:
        tags.append("continual-pretraining")
    if "sft" in kinds or prov.sft:
        tags.append("sft")
    if prov.preference and prov.preference.report and prov.preference.report.method:
        tags.append(prov.preference.report.method["name"])  # dpo, ipo, kto, orpo or simpo
    if facts.lora or facts.adapter:
        tags.append("lora")
    if prov.stand_in_base:
        tags.append("demo")
    if facts.gguf_file:
        tags.append("gguf")
    tags += options.tags
    datasets = training_datasets(prov) + [d for d in options.datasets if d not in training_datasets(prov)]
    data = ModelCardData(
        license=license_, license_name=license_name, license_link=license_link, language=list(options.language),
        base_model=base_id, base_model_relation=("adapter" if facts.adapter else "finetune") if base_id else None,
        datasets=datasets or None, tags=tags, pipeline_tag="text-generation",
        library_name="peft" if facts.adapter else "gguf" if facts.gguf_file else "transformers",
        model_name=name if eval_results else None, eval_results=eval_results or None,
    )
    front = data.to_yaml()

    model_ref = options.repo_id or f"path/to/{name}"
    lines = [f"# {name}", ""]
    lines += _intro(prov, facts, base_id)
    lines += _model_table(prov, facts, base_id)
    lines += _pipeline(prov)
    lines += _data(prov)
    lines += _tokenizer(prov)
    lines += _evaluation(prov, columns, bool(eval_results), facts.adapter)
    base_ref = base_id or (f"path/to/{Path(prov.base_model).name}" if prov.base_model else "path/to/base-model")
    lines += ["## Usage", ""]
    if facts.remote_code:
        lines += [f"`{facts.architecture}` is not part of transformers: its modeling code is in this repository and "
                  "loads with `trust_remote_code=True` (review it first; it imports only torch and transformers). "
                  "yunshan itself is not needed.", ""]
    if facts.adapter and not base_id:
        lines += [f"This is a LoRA adapter for `{prov.base_model}`, a model that is not on the Hub: publish that "
                  "model and load it where the code says `" + base_ref + "`.", ""]
    if facts.gguf_file:
        lines += [_gguf_usage(model_ref, facts), ""]
    else:
        lines += [_usage(prov, model_ref, facts.remote_code, facts.chat_template, facts.adapter, base_ref,
                         facts.grown_vocab), ""]
    lines += ["## Reproducing", ""]
    version = prov.yunshan_version or _installed_version()
    lines.append(f"Made with yunshan {version}." + (
        " `recipe.yaml` in this repository is the resolved recipe of the run (its paths are those of the machine "
        "that ran it); `yunshan run recipe.yaml` repeats it." if facts.recipe_included and prov.run_dir else
        " `recipe.yaml` in this repository is the resolved training recipe." if facts.recipe_included else ""))
    lines += ["", "## Limitations", "",
              "A domain-adapted language model: it can state wrong figures, outdated rules or invented citations "
              "with confidence. Its answers about finance and law are not professional advice; check them against "
              "the primary sources."]
    card = f"---\n{front}\n---\n\n" + "\n".join(lines).rstrip() + "\n"
    metadata = validate_card(card)
    return card, metadata


def _installed_version() -> str:
    from yunshan import __version__

    return __version__


def _intro(prov: Provenance, facts: ExportFacts, base_id: str | None) -> list[str]:
    kinds = [(stage_kind(s), s) for s in prov.stages if is_complete(s)]
    steps = []
    for kind, s in kinds:
        summary = s.summary or {}
        if kind == "tokenizer":
            new = summary.get("new_tokens")
            steps.append("extended the vocabulary" + (f" by {new:,} domain tokens" if isinstance(new, int) else ""))
        elif kind == "cpt":
            tokens = (prov.cpt and prov.cpt.report and prov.cpt.report.tokens_trained) or summary.get("tokens")
            steps.append("continued pretraining" + (f" on {tokens:,} tokens" if isinstance(tokens, int) else "")
                         + " of domain text mixed with replayed general text")
        elif kind == "sft":
            samples = (prov.sft and prov.sft.report and prov.sft.report.samples) or summary.get("samples")
            steps.append("tuned on" + (f" {samples:,}" if isinstance(samples, int) else "")
                         + " general and domain instructions in one stage")
        elif kind == "preference":
            report = prov.preference.report if prov.preference else None
            method = (report.method or {}).get("name") if report else (summary.get("method") or {}).get("name")
            samples = (report.samples if report else None) or summary.get("samples")
            steps.append("tuned on preferences" + (f" with {method.upper()}" if method else "")
                         + (f" ({samples:,} training samples)" if isinstance(samples, int) else ""))
    base = f"[{base_id}](https://huggingface.co/{base_id})" if base_id else (
        f"`{Path(prov.base_model).name}`" if prov.base_model and Path(prov.base_model).exists() else
        f"`{prov.base_model}`" if prov.base_model else "its base model")
    if prov.base_source:
        base += f", {prov.base_source},"
    what = "A LoRA adapter of a finance and legal specialist" if facts.adapter else "A finance and legal specialist"
    text = f"{what} built from {base} with yunshan, which follows the YunShan " \
           "recipe of the PanGu-π paper (section 6)"
    text += ": " + ", then ".join(steps) + "." if steps else "."
    lines = [text, ""]
    if prov.stand_in_base:
        lines += ["> **Demo model.** The base is a stand-in trained by `yunshan run` on the bundled general sample "
                  "text (no base model could be downloaded where it ran). It shows the pipeline, not a useful model.",
                  ""]
    if any(m.sample for c in prov.evals for m in c.metrics.values()):
        lines += ["> **Sample evaluation sets.** Some results below were measured on yunshan's bundled sample sets "
                  "(synthetic questions in the benchmarks' formats), not on the released benchmarks; they are "
                  "labelled as such and are not comparable with published scores.", ""]
    return lines


def _model_table(prov: Provenance, facts: ExportFacts, base_id: str | None) -> list[str]:
    rows = [("architecture", f"`{facts.architecture}` (model_type `{facts.model_type}`)"
             + (", code in this repository" if facts.remote_code else "")
             + (f"; trained as `{facts.converted_from}`, which with these settings computes exactly a Llama "
                "(the SIAF scale folded into gate_proj, its shift into the gate bias)" if facts.converted_from
                else ""))]
    rows.append(("parameters", f"{facts.parameters:,}" + (" (adapter)" if facts.adapter else "")))
    if facts.vocab_size:
        rows.append(("vocabulary", f"{facts.vocab_size:,}"))
    if facts.context_length:
        rows.append(("context length", f"{facts.context_length:,}"))
    if facts.gguf_file:
        rows.append(("weights", f"`{facts.gguf_file}` ({facts.dtype}) for llama.cpp and Ollama"))
    else:
        rows.append(("weights", f"{facts.dtype} safetensors, {facts.weight_files} file"
                     + ("s" if facts.weight_files > 1 else "")))
    if facts.lora:
        lora = facts.lora
        form = "this repository holds the adapter only" if facts.adapter else "merged into these weights"
        variants = [name for key, name in (("use_dora", "DoRA"), ("use_rslora", "rsLoRA")) if lora.get(key)]
        rows.append(("LoRA", f"r={lora.get('r')}, alpha={lora.get('lora_alpha')}"
                     + "".join(f", {v}" for v in variants) + f"; {form}"))
    rows.append(("chat template", "yes, the one used in SFT" if facts.chat_template else "no (plain text model)"))
    base = base_id or (prov.base_model and Path(prov.base_model).name) or "–"
    rows.append(("base model", f"`{base}`" + (" (stand-in, see above)" if prov.stand_in_base else "")
                 + (f"; {prov.base_source}" if prov.base_source else "")))
    return ["## Model", "", "| | |", "|---|---|"] + [f"| {k} | {_md(v)} |" for k, v in rows] + [""]


def _pipeline(prov: Provenance) -> list[str]:
    lines = ["## Pipeline", ""]
    stages = [s for s in prov.stages if stage_kind(s) not in ("export", "push")]
    if not stages:
        return lines + ["No training record (run.json, recipe.yaml, data_report.json) was found beside the weights.",
                        ""]
    show_status = any(not is_complete(s) for s in stages)
    head = "| stage | what | time | result |" + (" status |" if show_status else "")
    lines += [head, "|---|---|---:|---|" + ("---|" if show_status else "")]
    for s in stages:
        kind = stage_kind(s)
        summary = s.summary or {}
        what = STAGE_WHAT.get(kind, kind)
        if kind == "base" and prov.stand_in_base:
            what = "stand-in base: tokenizer and pretraining on general sample text"
        elif kind == "eval":
            what = "evaluation of the " + ("base model" if "before" in s.name else "final model"
                                           if "after" in s.name else "model")
        result = []
        if summary.get("tokens") is not None:
            result.append(f"{summary['tokens']:,} tokens")
        if summary.get("samples") is not None:
            result.append(f"{summary['samples']:,} samples")
        if summary.get("steps") is not None:
            result.append(f"{summary['steps']:,} steps")
        if summary.get("train_loss") is not None:
            result.append(f"final mean loss {summary['train_loss']:.3f}")
        if summary.get("new_tokens") is not None:
            result.append(f"vocabulary {summary.get('base_vocab', '?'):,} → {summary.get('new_vocab', '?'):,} "
                          f"(+{summary['new_tokens']:,})")
        if kind == "decontamination" and summary.get("records") is not None:
            result.append(f"{summary.get('contaminated', 0):,} of {summary['records']:,} training records listed "
                          + ("(left out of training)" if summary.get("drop") else "(kept)")
                          + (f"; {summary['dirty']:,} evaluation items dirty" if "dirty" in summary else ""))
        row = f"| {s.name} | {_md(what)} | {_seconds(s.seconds)} | {_md(', '.join(result))} |"
        lines.append(row + (f" {s.status} |" if show_status else ""))
    return lines + [""]


def _data(prov: Provenance) -> list[str]:
    lines = ["## Training data", ""]
    cpt = prov.cpt.report if prov.cpt else None
    lines += ["### Continual pretraining: tokens per source", ""]
    if cpt and cpt.sources:
        defs = {s.get("name"): s for s in prov.cpt.sources}
        drops = any(_dropped(s.dropped) for s in cpt.sources.values())
        lines += ["| source | data | weight | tokens trained | share |" + (" documents dropped |" if drops else ""),
                  "|---|---|---:|---:|---:|" + ("---:|" if drops else "")]
        for name, s in cpt.sources.items():
            data = _source_data(defs.get(name, {"path": s.path}))
            lines.append(f"| {_md(name)} | {_md(data)} | {_fmt(s.weight, 3)} | {s.tokens_trained:,} | "
                         f"{100 * (s.token_share or 0):.2f}% |" + (f" {_md(_dropped_text(s.dropped))} |" if drops else ""))
        lines += ["", f"{cpt.tokens_trained or 0:,} tokens in {cpt.steps or 0:,} steps of {cpt.tokens_per_step or 0:,} "
                      f"tokens (sequences of {cpt.seq_len} tokens); shares are exact counts of the tokens trained on.",
                  ""]
    else:
        lines += ["Not recorded (no continual-pretraining data report).", ""]
    sft = prov.sft.report if prov.sft else None
    lines += ["### Supervised fine-tuning: samples per source", ""]
    if sft and sft.sources:
        defs = {s.get("name"): s for s in prov.sft.sources}
        drops = any(_dropped(s.dropped) for s in sft.sources.values())
        lines += ["| source | data | format | samples | tokens | trained tokens | share of samples |"
                  + (" dropped |" if drops else ""), "|---|---|---|---:|---:|---:|---:|" + ("---:|" if drops else "")]
        for name, s in sft.sources.items():
            d = defs.get(name, {})
            lines.append(f"| {_md(name)} | {_md(_source_data(d))} | {_md(d.get('format', '–'))} | "
                         f"{s.samples:,} | {s.tokens:,} | {s.trained_tokens:,} | {100 * (s.share_of_samples or 0):.2f}% |"
                         + (f" {_md(_dropped_text(s.dropped))} |" if drops else ""))
        lines += ["", f"The SFT set: {sft.samples or 0:,} samples shuffled into one training set"
                      + (", best-fit packed" if sft.packing else "")
                      + "; loss on assistant tokens only"
                      + (f"; trained for {sft.steps:,} steps" if sft.steps else "")
                      + ". Tokens are per pass over the set.", ""]
    else:
        lines += ["Not recorded (no SFT data report).", ""]
    return lines + _preference(prov) + _decontamination(prov)


# The held-out preference metrics the card shows (yunshan.training.preference_monitor), with their labels.
PREFERENCE_METRICS = (("heldout/likelihood_accuracy", "chosen answer more likely per token", "{:.3f}"),
                      ("heldout/reward_accuracy", "reward accuracy", "{:.3f}"),
                      ("heldout/reward_margin", "reward margin", "{:+.4f}"))


def _preference(prov: Provenance) -> list[str]:
    """Preference tuning, when the model had it: the method as TRL ran it, the pairs per source, and the held-out
    pairs' metrics before the first step and after the last."""
    report = prov.preference.report if prov.preference else None
    if report is None:
        return []
    method = report.method or {}
    lines = ["### Preference tuning: pairs per source", "",
             f"{method.get('name', '?').upper()} with TRL {method.get('trl', '?')}'s `{method.get('trainer', '?')}` "
             f"(loss {method.get('loss_type', '?')}, beta {method.get('beta', '?')}, reference "
             f"{method.get('reference', '?')}), {report.steps or 0:,} steps.", ""]
    defs = {s.get("name"): s for s in prov.preference.sources}
    lines += ["| source | data | format | training samples | held-out pairs | dropped |", "|---|---|---|---:|---:|---:|"]
    for name, s in report.sources.items():
        d = defs.get(name, {})
        lines.append(f"| {_md(name)} | {_md(_source_data(d))} | {_md(d.get('format', '–'))} | {s.samples:,} | "
                     f"{s.heldout:,} | {_md(_dropped_text(s.dropped))} |")
    heldout = report.heldout or {}
    before, after = heldout.get("before"), heldout.get("after")
    if before and after:
        lines += ["", f"| held-out pairs ({report.heldout_pairs or 0:,}) | step {before['step']} | "
                      f"step {after['step']} |", "|---|---:|---:|"]
        for key, label, fmt in PREFERENCE_METRICS:
            if key in before and key in after:
                lines.append(f"| {label} | {fmt.format(before[key])} | {fmt.format(after[key])} |")
    return lines + [""]


def _decontamination(prov: Provenance) -> list[str]:
    """How many training records overlap the evaluation sets, and whether training left them out: always stated,
    zero or not, or said to be unchecked."""
    lines = ["### Decontamination: overlap with the evaluation sets", ""]
    dropped = {f"{kind}:{name}": s.dropped.get("contaminated", 0)
               for kind, record in (("cpt", prov.cpt), ("sft", prov.sft)) if record and record.report
               for name, s in record.report.sources.items()}
    lists = [r.report.exclude for r in (prov.cpt, prov.sft) if r and r.report and r.report.exclude]
    report = prov.decontamination
    if report is None:
        if lists:
            total = sum(dropped.values())
            return lines + [f"Training left out the records of a contamination list (`{Path(lists[0]['list']).name}`, "
                            f"{lists[0].get('records', 0):,} records): {total:,} reads dropped. The comparison itself "
                            "was made outside this run.", ""]
        return lines + ["Not checked: no decontamination was run for this model (`yunshan data decontaminate`, or a "
                        "`decontamination` section in the pipeline recipe).", ""]
    lines += [f"**{report.contaminated:,} of {report.records:,} training records** hold at least "
              f"{report.record_share:.0%} of an evaluation item ({report.overlapping:,} share a window of {report.n} "
              f"words or {report.cjk_n} CJK characters that is not boilerplate: {report.hits:,} record-item pairs). "
              f"Units: {report.normalization}.", "",
              "Evaluation items by the share of each found in the training data (the Llama 2 report's measure: clean "
              f"below {report.clean_below:.0%}, dirty from {report.dirty_from:.0%}); boilerplate windows (in at least "
              f"{report.boilerplate.train_records} training records or {report.boilerplate.eval_texts} evaluation "
              "texts) left out:", "",
              "| evaluation set | items | clean | partial | dirty | not checkable |", "|---|---:|---:|---:|---:|---:|"]
    for name, s in report.eval_sets.items():
        lines.append(f"| {_md(name)} | {s.items:,} | {s.clean:,} | {s.partial:,} | {s.dirty:,} | {s.unchecked:,} |")
    lines.append("")
    lines += ["| training source | records | overlapping | listed | dropped in training |", "|---|---:|---:|---:|---:|"]
    for name, s in report.sources.items():
        lines.append(f"| {_md(name)} | {s.records:,} | {s.overlapping:,} | {s.contaminated:,} | "
                     f"{dropped.get(name, 0):,} |")
    if report.drop:
        lines += ["", "The listed records were left out of training (drops are counted per read, so a source "
                      "read for several epochs counts a record once per epoch)."]
    elif report.contaminated:
        lines += ["", "The listed records were **kept** in training (`drop: false`): scores on the partial and dirty "
                      "items of those evaluation sets may be inflated."]
    return lines + [""]


def _dropped(dropped: dict) -> int:
    return sum(v for v in (dropped or {}).values() if isinstance(v, int))


def _dropped_text(dropped: dict) -> str:
    """'12 (too_long 10, bad_json 2)': records left out, by the reason the data reader gave."""
    dropped = {k: v for k, v in (dropped or {}).items() if isinstance(v, int) and v}
    if not dropped:
        return "0"
    return f"{sum(dropped.values()):,} (" + ", ".join(f"{k} {v:,}" for k, v in sorted(dropped.items())) + ")"


def _tokenizer(prov: Provenance) -> list[str]:
    comp = prov.tokenizer_report.compression if prov.tokenizer_report else None
    if comp is None:
        return []
    lines = ["## Tokenizer", ""]
    sizes = comp.vocabulary_change()
    if sizes is not None and all(isinstance(v, int) for v in sizes):
        base, ext = sizes
        lines += [f"Vocabulary extended from {base:,} to {ext:,} tokens (+{ext - base:,}, "
                  f"{100 * (ext / base - 1):.1f}%) with domain BPE merges and word lists.", ""]
    rows = [f"| `{_md(Path(path).name)}` | {b:.4f} | {a:.4f} | {100 * (a / b - 1):+.1f}% |"
            for path, b, a in comp.tokens_per_char() if b and a is not None]
    if rows:
        lines += ["| text | tokens/char before | after | change |", "|---|---:|---:|---:|"] + rows + [
            "", "Tokens per Unicode character, no special tokens (the paper's compression rate); lower is better.", ""]
    return lines if len(lines) > 2 else []


def _evaluation(prov: Provenance, columns: list[tuple[EvalColumn, dict]], in_index: bool,
                adapter: bool = False) -> list[str]:
    lines = ["## Evaluation", ""]
    if not columns:
        return lines + ["No evaluation results were recorded with this model. Run `yunshan eval --model FOLDER "
                        "--tasks ... --out DIR` and export again with `--eval DIR/results.json`.", ""]
    keys: list[str] = []
    for _, metrics in columns:
        keys += [k for k in metrics if k not in keys]
    header = [c.label + (" (this model)" if c.this_model else "") for c, _ in columns]
    pair = len(columns) == 2
    lines += ["| benchmark | metric | " + " | ".join(_md(h) for h in header) + " |" + (" change |" if pair else ""),
              "|---|---|" + "---:|" * len(columns) + ("---:|" if pair else "")]
    details = {}
    for key in keys:
        first = next(m[key] for _, m in columns if key in m)
        cells = [_fmt(m[key].value, 4 if first.lower_is_better else 2) if key in m else "–" for _, m in columns]
        row = f"| {_md(first.benchmark)} | {_md(first.metric)} | " + " | ".join(cells) + " |"
        if pair:
            a, b = columns[0][1].get(key), columns[1][1].get(key)
            if a and b:
                change = b.value - a.value
                row += (f" {100 * change / a.value:+.1f}% |" if first.lower_is_better and a.value
                        else f" {change:+.2f} pt |" if first.metric.startswith("accuracy") else f" {change:+.2f} |")
            else:
                row += " |"
        lines.append(row)
        if first.detail:
            details.setdefault(first.benchmark, first.detail)
    lines.append("")
    if details:
        lines += [f"- {_md(b)}: {d}" for b, d in details.items()] + [""]
    lines.append("Measured with `yunshan eval` (accuracy in percent; bits per character over sliding windows). "
                 + ("The exported model's results are in the card's `model-index`." if in_index else
                    "None of the columns is verified as the exported weights, so the card has no `model-index`."))
    if adapter and in_index:
        lines.append("The results were measured on the merged weights (the base with this adapter merged in), which "
                     "equal the base plus the adapter up to rounding.")
    for c, _ in columns:
        if c.stale:
            lines.append(f"The column {c.label!r} was recorded for other files than the exported ones.")
    return lines + [""]


def validate_card(text: str) -> dict:
    """Parse the card as the Hub's client does and check what the Hub requires of the front matter.

    Returns the metadata dict. Raises ValueError naming the field and what would be valid."""
    from huggingface_hub import ModelCard
    from huggingface_hub.repocard_data import eval_results_to_model_index, model_index_to_eval_results

    if not text.startswith("---\n"):
        raise ValueError("README.md: the card must start with a '---' YAML front matter block")
    try:
        card = ModelCard(text)  # strict: a malformed model-index raises here
    except (ValueError, yaml.YAMLError) as err:
        raise ValueError(f"README.md front matter: {err}") from err
    meta = card.data.to_dict()
    if meta.get("license") is not None and meta["license"] not in HUB_LICENSES:
        raise ValueError(f"README.md front matter: license {meta['license']!r} is not a Hub license id")
    if meta.get("license") == "other" and not meta.get("license_name"):
        raise ValueError("README.md front matter: license 'other' needs license_name")
    for code in meta.get("language") or []:
        if not (LANGUAGE.match(code) or code in ("code", "multilingual")):
            raise ValueError(f"README.md front matter: language {code!r} is not an ISO 639 code")
    for key in ("base_model", "datasets"):
        values = meta.get(key) or []
        for value in [values] if isinstance(values, str) else values:
            if not REPO_ID.match(value):
                raise ValueError(f"README.md front matter: {key} {value!r} is not a Hub id ORG/NAME")
    if "model-index" in meta:
        name, results = model_index_to_eval_results(meta["model-index"])
        if eval_results_to_model_index(name, results) != meta["model-index"]:
            raise ValueError("README.md front matter: model-index does not round-trip through huggingface_hub")
        for r in results:
            if not isinstance(r.metric_value, (int, float)):
                raise ValueError(f"README.md front matter: model-index metric {r.metric_type} of {r.dataset_name} "
                                 f"has a non-numeric value {r.metric_value!r}")
    return meta
