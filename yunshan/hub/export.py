"""`yunshan export`: a run or model folder -> a folder ready for the Hugging Face Hub (then `yunshan push`).

    yunshan export runs/demo_tiny --out exports/demo-tiny --license apache-2.0 --language zh en
    yunshan export runs/pangu-7b --out exports/yunshan-7b --max-shard-size 5GB --dtype bfloat16 --repo-id org/yunshan-7b
    yunshan export runs/sft-lora --out exports/adapter --adapter --base-model org/base-7b
    yunshan export runs/pangu-n1 --out exports/llama --as-llama      # a Llama-equivalent PanGu-π as LlamaForCausalLM
    yunshan export runs/demo_tiny --out exports/demo-gguf --gguf --quant q8_0 --ollama   # one .gguf + Modelfile

The export holds: the weights as safetensors (sharded with model.safetensors.index.json above --max-shard-size,
copied tensor by tensor so memory stays at one shard: yunshan.hub.weights), config.json with `auto_map` and the
modeling code for yunshan's own architectures (so the folder loads with `trust_remote_code=True` where yunshan is
not installed; transformers' own architectures need no code), the tokenizer (with the chat template SFT used),
generation_config.json, the resolved recipe and a model card README.md (yunshan.hub.card, from what
yunshan.hub.provenance reads beside the model). A LoRA run exports the merged weights by default, or with --adapter
only the PEFT adapter (adapter_config.json naming the base on the Hub). With --as-llama a PanGu-π whose settings
make it exactly a Llama (siaf_terms=1, aug_shortcuts=0, no neighbour convolution) is written as LlamaForCausalLM,
for runtimes that know Llama but run no remote code (yunshan.models.pangu_pi.convert.LlamaExport); any other config
is refused with the reason. With --gguf the folder holds one GGUF file for llama.cpp and Ollama instead of the
safetensors (yunshan.hub.gguf: the tokenizer described so that llama.cpp tokenises as the HF tokenizer does,
extended vocabularies included; --quant f16 by default), with --ollama an Ollama Modelfile (yunshan.hub.ollama), and
the card. Everything is written to a temporary folder beside --out, checked (tensor names, shapes
and dtypes against the source, the tokenizer encodes a probe as the source does, the card's front matter parses),
then renamed into place: --out is untouched unless the export succeeds.

--overwrite replaces only a previous export: a folder holding the marker EXPORT_MARKER (the list of files the
export wrote; `yunshan push` leaves it out of the upload) and nothing else. An --out that is a file, holds the
source, lies inside the model folder, or holds anything yunshan export did not write is refused before anything
is written, so an export never deletes a run, its checkpoints or a user's files.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path

from yunshan.hub.card import CardOptions, ExportFacts, build_model_card
from yunshan.hub.provenance import collect_provenance
from yunshan.hub.weights import check_weights, dtype_label, parameter_count, parse_size, read_layout, write_weights
from yunshan.loading.precision import DTYPE_CHOICES, precision_name
from yunshan.arguments.field_rules import check_fields

# Tokenizer files save_pretrained writes for the tokenizers transformers knows (fast, SentencePiece, BPE, WordPiece).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "vocab.json", "vocab.txt",
                   "merges.txt", "chat_template.jinja", "chat_template.json")
# In every export: the files it wrote. --overwrite removes only a folder that holds this marker and nothing else.
EXPORT_MARKER = ".yunshan_export.json"


@dataclass
class ExportArgs(CardOptions):
    """Settings of `yunshan export` (the card fields come from yunshan.hub.card.CardOptions), and the `export`
    section of a `yunshan run` recipe (where the runner fills `source`, `out` and `overwrite`)."""

    source: str = field(default="", metadata={"path": True,
        "help": "a `yunshan run` folder (run.json) or a model folder"})
    out: str = field(default="", metadata={"path": True,
        "help": "folder to create (written only if the export succeeds)"})
    adapter: bool = field(default=False, metadata={
        "help": "LoRA runs: export only the PEFT adapter instead of the merged weights"})
    as_llama: bool = field(default=False, metadata={
        "help": "write a Llama-equivalent PanGu-π (siaf_terms=1, aug_shortcuts=0) as LlamaForCausalLM: no remote "
                "code, loadable by any Llama runtime; refused with the reason for any other config"})
    max_shard_size: str = field(default="2GB", metadata={
        "help": "largest safetensors file (KB/MB/GB decimal, KiB/MiB/GiB binary, or bytes); larger models shard"})
    dtype: str | None = field(default=None, metadata={
        "help": "convert floating-point weights to float32, bfloat16 or float16 (default: keep as trained)"})
    eval: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "extra `yunshan eval` results.json (or its folder) for the card; repeatable"})
    recipe: bool = field(default=True, metadata={"help": "include the resolved recipe.yaml"})
    overwrite: bool = field(default=False, metadata={
        "help": "replace --out if it is a previous export (only after success; nothing else is ever removed)"})
    gguf: bool = field(default=False, metadata={
        "help": "write one GGUF file for llama.cpp / Ollama (merged weights; Llama, Mistral and Qwen2 layouts, a "
                "Llama-equivalent PanGu-π with --as-llama) instead of safetensors"})
    quant: str = field(default="f16", metadata={
        "help": "GGUF tensor type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 (gguf's quantisers), or q4_k_m, "
                "q5_k_m, q6_k, ... (llama.cpp's quantiser: needs llama-cpp-python)"})
    ollama: bool = field(default=False, metadata={
        "help": "with --gguf: also write an Ollama Modelfile (the chat template as Ollama's TEMPLATE, the stop "
                "tokens)"})
    trust_remote_code: bool = field(default=False, metadata={
        "help": "allow the source's own tokenizer code (auto_map in tokenizer_config.json) to run for the export "
                "check; without it such a source is refused (PanGu-π and OTCE need no remote code)"})

    def __post_init__(self):
        check_fields(self)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_flags

    from yunshan.hub.gguf import QUANTS

    add_flags(parser, ExportArgs, positional={"source": "RUN_OR_MODEL"}, required=("out",),
              names={"datasets": "--dataset", "tags": "--tag"}, choices={"dtype": DTYPE_CHOICES, "quant": QUANTS},
              metavars={"language": "CODE", "datasets": "ORG/NAME", "tags": "TAG", "eval": "RESULTS"})


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import from_flags

    options = {f.name: getattr(from_flags(ExportArgs, args), f.name) for f in fields(ExportArgs)}
    source, out = options.pop("source"), options.pop("out")
    result = export_model(source, out, **options)
    print(f"exported {result['source_model']} -> {result['out']}")
    for item in result["files"]:
        print(f"  {item['path']:<44} {item['bytes']:>14,} bytes")
    print(f"  {result['bytes']:,} bytes in {len(result['files'])} files; {result['parameters']:,} parameters "
          f"({result['dtype']}, {result['weight_files']} weight file{'s' if result['weight_files'] > 1 else ''})")
    meta = result["card"]
    base = meta.get("base_model") or "-"
    if not meta.get("base_model") and result.get("base_model"):  # a base that is no Hub id is named in the body
        local = Path(result["base_model"])
        base += f" ({local.name}: a local folder, not a Hub id)" if local.exists() else f" ({result['base_model']})"
    print(f"  card: license {meta.get('license')}, base_model {base}, "
          f"{sum(len(r['results']) for r in meta.get('model-index', []))} model-index result(s)")
    for note in result["notes"]:
        print(f"note: {note}")
    return 0


# ---------------------------------------------------------------- config, code, tokenizer


def _auto_map_modules(auto_map: dict) -> set[str]:
    """Local module names an auto_map refers to ("modeling_x.Class"); "repo--module.Class" entries live elsewhere."""
    modules = set()
    for value in auto_map.values():
        for ref in value if isinstance(value, (list, tuple)) else [value]:
            if ref and "--" not in ref:
                modules.add(ref.rsplit(".", 1)[0])
    return modules


def yunshan_classes(model_type: str) -> list | None:
    """yunshan's config, base-model and causal-LM classes for a model_type it registers (PanGu-π, OTCE, ...)."""
    from transformers import AutoModel, AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import yunshan  # noqa: F401  (registers yunshan's architectures)

    try:
        config_cls = CONFIG_MAPPING[model_type]
    except KeyError:
        return None
    if not config_cls.__module__.startswith("yunshan."):
        return None
    classes = [config_cls]
    for auto in (AutoModel, AutoModelForCausalLM):
        try:
            classes.append(auto._model_mapping[config_cls])
        except KeyError:
            pass
    return classes


def write_config_and_code(model_dir: Path, out: Path, dtype: str | None) -> tuple[dict, str]:
    """config.json (+ auto_map) and the modeling code. Returns (config, where the code came from)."""
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    model_type = config.get("model_type")
    if not model_type:
        raise ValueError(f"{model_dir / 'config.json'}: no model_type field")
    from transformers.dynamic_module_utils import get_relative_import_files

    auto_map = config.get("auto_map") or {}
    modules = _auto_map_modules(auto_map)
    tok_config = model_dir / "tokenizer_config.json"
    tok_modules = _auto_map_modules(json.loads(tok_config.read_text(encoding="utf-8")).get("auto_map") or {}) if (
        tok_config.is_file()) else set()
    folder_code = bool(auto_map) and all((model_dir / f"{m}.py").is_file() for m in modules)
    classes = yunshan_classes(model_type)
    origin = "none needed (transformers architecture)"
    if folder_code:
        # The code saved beside the weights at training time, exactly what produced them.
        origin = "copied from the model folder"
    elif classes is not None:
        import sys

        import yunshan

        auto_map = dict(auto_map)
        for cls in classes:
            if getattr(cls, "_auto_class", None):
                auto_map[cls._auto_class] = f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"
            module_file = Path(sys.modules[cls.__module__].__file__)
            for path in [module_file, *map(Path, get_relative_import_files(str(module_file)))]:
                shutil.copyfile(path, out / path.name)
        config["auto_map"] = auto_map
        origin = f"written from yunshan {yunshan.__version__}"
        modules = set()
    elif auto_map:
        raise FileNotFoundError(f"{model_dir / 'config.json'}: auto_map names modules {sorted(modules)} that are "
                                f"not in {model_dir}; copy the model's code files there")
    # The folder's own modules that config.json and tokenizer_config.json name, and what they import relatively.
    for module in sorted(modules | tok_modules):
        source = model_dir / f"{module}.py"
        if not source.is_file():
            raise FileNotFoundError(f"{model_dir}: auto_map names module {module} but {source.name} is missing")
        for path in [source, *map(Path, get_relative_import_files(str(source)))]:
            shutil.copyfile(path, out / path.name)
    if dtype:
        config["dtype"] = dtype
        if "torch_dtype" in config:
            config["torch_dtype"] = dtype
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return config, origin


def write_tokenizer(model_dir: Path, out: Path) -> list[str]:
    copied = []
    for name in TOKENIZER_FILES:
        if (model_dir / name).is_file():
            shutil.copyfile(model_dir / name, out / name)
            copied.append(name)
    extra = model_dir / "additional_chat_templates"
    if extra.is_dir():
        shutil.copytree(extra, out / extra.name)
        copied.append(extra.name)
    if "tokenizer_config.json" not in copied:
        raise FileNotFoundError(f"{model_dir}: no tokenizer (tokenizer_config.json); yunshan cpt/sft save it beside "
                                "the weights")
    return copied


def check_tokenizer(model_dir: Path, out: Path, trust_remote_code: bool = False) -> None:
    """The exported tokenizer encodes a probe exactly as the source folder's does (and renders the same chat).
    A tokenizer with its own code (auto_map) is loaded only with `trust_remote_code` (yunshan.loading.remote_code)."""
    from transformers import AutoTokenizer

    from yunshan.io.folders import readable_by_transformers
    from yunshan.loading.remote_code import refuse_remote_code

    probe = "根据《民法典》第六百八十条，借款的利率不得违反国家有关规定。Net interest margin rose 12 bp in Q3."
    with refuse_remote_code(model_dir, "--trust-remote-code (in a `yunshan run` recipe: model.trust_remote_code)"):
        with readable_by_transformers(model_dir, "tokenizer"):
            a = AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=trust_remote_code)
        b = AutoTokenizer.from_pretrained(str(out), trust_remote_code=trust_remote_code)
    if a(probe)["input_ids"] != b(probe)["input_ids"] or len(a) != len(b):
        raise RuntimeError(f"export check: the tokenizer in {out} does not encode like the one in {model_dir}")
    if a.chat_template:
        messages = [{"role": "user", "content": probe}]
        if a.apply_chat_template(messages, tokenize=False) != b.apply_chat_template(messages, tokenize=False):
            raise RuntimeError("export check: the exported chat template renders differently")


def write_generation_config(model_dir: Path, out: Path, config: dict) -> None:
    if (model_dir / "generation_config.json").is_file():
        shutil.copyfile(model_dir / "generation_config.json", out / "generation_config.json")
        return
    from transformers import GenerationConfig

    ids = {k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if config.get(k) is not None}
    GenerationConfig(**ids).save_pretrained(str(out))


def write_adapter(adapter_dir: Path, out: Path, base_model: str | None) -> dict:
    """adapter_model.safetensors as trained and adapter_config.json naming the base on the Hub (never a local path)."""
    if not (adapter_dir / "adapter_model.safetensors").is_file():
        raise FileNotFoundError(f"{adapter_dir}: no adapter_model.safetensors")
    config = json.loads((adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    recorded = config.get("base_model_name_or_path")
    if base_model is None:
        from yunshan.hub.provenance import hub_id_of

        base_model = hub_id_of(recorded)
    if base_model is None:
        raise ValueError(f"{adapter_dir / 'adapter_config.json'}: the adapter's base is {recorded!r}, not a Hub "
                         "model; an adapter is only usable with its base, so publish the base first (yunshan export "
                         "+ yunshan push of that folder) and name it with --base-model ORG/NAME, or export the merged "
                         "weights (without --adapter)")
    config["base_model_name_or_path"] = base_model
    shutil.copyfile(adapter_dir / "adapter_model.safetensors", out / "adapter_model.safetensors")
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return config


# ---------------------------------------------------------------- the export

# What `yunshan cpt` / `yunshan sft` leave in a run folder and a plain save_pretrained folder does not hold.
RUN_FILES = ("recipe.yaml", "data_report.json", "checkpoints")


def check_finished(model_dir: Path) -> None:
    """A `yunshan cpt` / `yunshan sft` run folder is exported only under the marker its final save writes last
    (yunshan.io.artifacts.FinalOutputs), with every file it lists as saved. A plain model folder (save_pretrained,
    an import, an earlier export) holds none of RUN_FILES and is exported as it is."""
    from yunshan.io.artifacts import FinalOutputs

    if (model_dir / EXPORT_MARKER).is_file() or not any((model_dir / name).exists() for name in RUN_FILES):
        return
    finish = ("run the same `yunshan cpt` / `yunshan sft` command again to finish it (it continues from its last "
              "checkpoint), then export. A model folder that was never a yunshan run exports as it is, but must not "
              f"hold {', '.join(RUN_FILES)}: copy the model files to a folder of their own")
    path = model_dir / FinalOutputs.FILE
    if not path.is_file():
        raise ValueError(f"{model_dir}: a yunshan training run whose final save did not complete (no {path.name}: "
                         f"stopped, killed or failed before its end, so its weights, recipe and reports may not "
                         f"belong together); {finish}")
    problems = FinalOutputs.read(path).problems(model_dir)
    if problems:
        raise ValueError(f"{model_dir}: the run's final outputs changed after its final save ({'; '.join(problems)})"
                         f"; {finish}")


def check_out(out: Path, source: Path, model_dir: Path, overwrite: bool) -> None:
    """Refuse an --out the export may not write or replace (module docstring); nothing has been written yet."""
    if out.is_file():  # (a link to a file too; a link to a folder, or to none yet, is written through)
        raise ValueError(f"--out {out} is a file; give the path of a folder to create (a previous export is replaced "
                         "with --overwrite)")
    target = out.resolve()
    if target == model_dir or model_dir in target.parents:
        raise ValueError(f"--out {out} is inside the model folder {model_dir}; choose a folder outside it")
    for what, path in (("source", source.resolve()), ("model folder", model_dir)):
        if target == path or target in path.parents:
            raise ValueError(f"--out {out} contains the {what} {path}; replacing it would delete the {what}: choose a "
                             "folder outside it")
    if not out.exists() or not any(out.iterdir()):
        return
    if not overwrite:
        raise ValueError(f"--out {out} already exists; pass --overwrite to replace it (only after a successful "
                         "export)")
    from yunshan.io.folders import check_replaceable

    check_replaceable(out, EXPORT_MARKER, "yunshan export", "--out")


def export_model(source: str | os.PathLike, out: str | os.PathLike, *, adapter: bool = False,
                 as_llama: bool = False, max_shard_size: str | int = "2GB", dtype: str | None = None,
                 license: str | None = None,
                 license_name: str | None = None, license_link: str | None = None,
                 language: list[str] | None = None, base_model: str | None = None, datasets: list[str] | None = None,
                 tags: list[str] | None = None, name: str | None = None, repo_id: str | None = None,
                 eval: list[str] | None = None, recipe: bool = True, overwrite: bool = False,
                 gguf: bool = False, quant: str = "f16", ollama: bool = False,
                 trust_remote_code: bool = False) -> dict:
    """Export a run's final model (or a model folder) to `out`; see the module docstring. Returns a summary:
    out, files (path, bytes), bytes, parameters, dtype, weight_files, card (front matter), notes."""
    options = CardOptions(license=license, license_name=license_name, license_link=license_link,
                          language=list(language) if language is not None else ["zh", "en"], base_model=base_model,
                          datasets=list(datasets or []), tags=list(tags or []), name=name, repo_id=repo_id)
    from yunshan.hub.card import check_options

    check_options(options)
    shard_bytes = parse_size(max_shard_size)
    if dtype is not None:
        dtype = precision_name(dtype, "--dtype", auto=False)
    if adapter and dtype is not None:
        raise ValueError("--dtype converts merged weights; an adapter is exported as trained (drop --dtype)")
    if adapter and as_llama:
        raise ValueError("--as-llama rewrites merged weights; an adapter is exported as trained (drop one of them)")
    if gguf and (adapter or dtype is not None):
        raise ValueError("--gguf writes the merged weights at --quant; drop " + ("--adapter" if adapter else "--dtype"))
    if ollama and not gguf:
        raise ValueError("--ollama writes a Modelfile for the GGUF file; add --gguf")
    out = Path(out)
    prov = collect_provenance(source, eval_files=eval, adapter=adapter)
    if prov.run_dir is None:  # a `yunshan run` folder vouches for its stages by run.json (collect_provenance)
        check_finished(prov.model_dir)
    if options.name is None and prov.run_dir is None:
        # A bare model folder is usually named by its stage (05_sft); the repo or the export folder says more.
        options.name = repo_id.split("/")[1] if repo_id else Path(out).name
    model_dir = prov.model_dir.resolve()
    if as_llama:
        from yunshan.models.pangu_pi.convert import llama_equivalence_problems

        source_config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        problems = llama_equivalence_problems(source_config)
        if problems:
            code = (" (PanGu-π with its own code, loaded with trust_remote_code=True)"
                    if source_config.get("model_type") == "pangu_pi" else "")
            raise ValueError(f"{model_dir / 'config.json'}: --as-llama refused, this model is not exactly a Llama: "
                             f"{'; '.join(problems)}. Export it without --as-llama{code}")
    check_out(out, Path(source), model_dir, overwrite)
    from yunshan.io.folder_lock import folder_lock
    from yunshan.io.folders import check_output_folder

    check_output_folder(out.parent, "--out")  # the export is written beside --out, then renamed into place
    # Another export to the same --out stops here (yunshan.io.folder_lock); --out is checked again under the lock, as
    # it may have changed while this one waited to take it.
    with folder_lock(out, "--out"):
        check_out(out, Path(source), model_dir, overwrite)
        return _write_export(prov, out, model_dir, options, adapter=adapter, as_llama=as_llama,
                             shard_bytes=shard_bytes, dtype=dtype, recipe=recipe, gguf=gguf, quant=quant,
                             ollama=ollama, trust_remote_code=trust_remote_code)


def _write_export(prov, out: Path, model_dir: Path, options: CardOptions, *, adapter: bool, as_llama: bool,
                  shard_bytes: int, dtype: str | None, recipe: bool, gguf: bool, quant: str, ollama: bool,
                  trust_remote_code: bool) -> dict:
    """Write the export of `model_dir` into a folder beside `out` and swap it in (export_model holds the lock)."""
    from yunshan.io.folders import staged_folder

    # A fresh hidden folder beside --out (same filesystem, so the final rename is atomic), swapped in only when
    # everything below succeeded (yunshan.io.folders.replace_folder: a failed swap puts the old --out back).
    with staged_folder(out) as tmp:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8")) if (
            model_dir / "config.json").is_file() else {}
        lora = None
        if prov.adapter_dir is not None:
            lora = json.loads((prov.adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
        if adapter:
            lora = write_adapter(prov.adapter_dir, tmp, options.base_model)
            options.base_model = lora["base_model_name_or_path"]
            layout, _ = read_layout([tmp / "adapter_model.safetensors"])
            weights = {"files": ["adapter_model.safetensors"], "shards": 1, "parameters": parameter_count(layout),
                       "dtype": dtype_label(sorted({d for _, d, _ in layout.values()}))}
            code_origin = "none (an adapter; the base model's code loads the base)"
            remote_code = bool(config.get("auto_map"))
            # The adapter was trained on a grown vocabulary when the base it names has fewer rows than the model
            # it was merged into: the base must then be resized before the adapter loads.
            base_dir = Path(str(prov.base_model)) if prov.base_model else None
            base_vocab = None
            if base_dir is not None and (base_dir / "config.json").is_file():
                base_vocab = json.loads((base_dir / "config.json").read_text(encoding="utf-8")).get("vocab_size")
            grown_vocab = (base_vocab != config.get("vocab_size")) if base_vocab else bool(
                lora.get("trainable_token_indices") or lora.get("modules_to_save"))
        elif gguf:
            from yunshan.hub.gguf import check_gguf, gguf_file_name, load_tokenizer, stop_ids_of, write_gguf

            gguf_path = tmp / gguf_file_name(options.name or out.name, quant)
            tokenizer = load_tokenizer(model_dir)
            stops = stop_ids_of(model_dir, tokenizer)
            gguf_report = write_gguf(model_dir, gguf_path, quant, name=options.name or out.name, as_llama=as_llama,
                                     stop_ids=stops, tokenizer=tokenizer)
            check_gguf(gguf_path, model_dir, gguf_report, tokenizer)
            if ollama:
                from yunshan.hub.ollama import write_modelfile

                prov.notes += write_modelfile(tokenizer, tmp, gguf_path.name, stops)
            if as_llama:  # the card names what the file holds: a Llama
                config = dict(config, architectures=["LlamaForCausalLM"], model_type="llama")
            weights = {"parameters": gguf_report.parameters, "dtype": f"GGUF {quant}", "shards": 1}
            code_origin = "none (GGUF for llama.cpp)"
            remote_code, grown_vocab = False, False
        else:
            weights = write_weights(model_dir, tmp, shard_bytes, dtype, as_llama=config if as_llama else None)
            if as_llama:
                config = weights["llama_config"]
                if dtype:
                    config["dtype"] = dtype
                (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n",
                                                 encoding="utf-8")
                code_origin = "none needed (written as LlamaForCausalLM)"
            else:
                config, code_origin = write_config_and_code(model_dir, tmp, dtype)
            remote_code = bool(config.get("auto_map"))
            grown_vocab = False
        if gguf:  # the GGUF file holds the tokenizer, its chat template and the stop tokens
            tokenizer_files = []
            chat = gguf_report.chat_template
        else:
            write_generation_config(model_dir, tmp, config)
            tokenizer_files = write_tokenizer(model_dir, tmp)
            tok_cfg = json.loads((tmp / "tokenizer_config.json").read_text(encoding="utf-8"))
            chat = (tmp / "chat_template.jinja").is_file() or bool(tok_cfg.get("chat_template"))
        recipe_included = False
        if recipe and prov.recipe_path is not None:
            shutil.copyfile(prov.recipe_path, tmp / "recipe.yaml")
            recipe_included = True
        vocab_size = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
        facts = ExportFacts(
            adapter=adapter, remote_code=remote_code, architecture=(config.get("architectures") or ["?"])[0],
            model_type=config.get("model_type", "?"), parameters=weights["parameters"], dtype=weights["dtype"],
            weight_files=weights["shards"], vocab_size=vocab_size,
            context_length=config.get("max_position_embeddings"), chat_template=chat,
            recipe_included=recipe_included, lora=lora,
            grown_vocab=grown_vocab, converted_from="PanguPiForCausalLM" if as_llama else None,
            gguf_file=gguf_path.name if gguf else None, ollama=ollama)
        card, metadata = build_model_card(prov, options, facts)
        (tmp / "README.md").write_text(card, encoding="utf-8")

        if not adapter and not gguf:
            check_weights(tmp, weights["layout"], weights["out_dtype"])
        if not gguf:
            check_tokenizer(model_dir, tmp, trust_remote_code)
        # (staged_folder gives every file the user's umask mode: safetensors writes 0600)
        listed = [{"path": p.relative_to(tmp).as_posix(), "bytes": p.stat().st_size}
                  for p in sorted(tmp.rglob("*")) if p.is_file()]
        from yunshan import __version__

        (tmp / EXPORT_MARKER).write_text(json.dumps({
            "yunshan_version": __version__, "source": str(model_dir), "files": [f["path"] for f in listed]},
            indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return {"out": str(out), "source_model": str(prov.model_dir), "base_model": prov.base_model, "files": listed,
            "bytes": sum(f["bytes"] for f in listed), "parameters": weights["parameters"], "dtype": weights["dtype"],
            "weight_files": weights["shards"], "adapter": adapter, "code": code_origin,
            "tokenizer_files": tokenizer_files, "card": metadata, "notes": list(prov.notes),
            "gguf": dataclasses.asdict(gguf_report) if gguf else None}

