"""`yunshan model import-gguf`: a tiny Llama written to GGUF here (as llama.cpp's converter writes it) comes back as
a plain HF folder with the same logits and the same tokenizer, digit rule included."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch


def _train_smollm_style_tokenizer(folder):
    """A byte-level BPE that splits every digit first (SmolLM2's pre-tokeniser), with ChatML specials."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    words = "the court held that revenue rose in 2021 to 350 million 资产 负债 合同 法院".split()
    texts = [" ".join(rng.choice(words) for _ in range(20)) for _ in range(300)]
    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=380, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   unk_token="<|endoftext|>", pad_token="<|im_end|>")
    fast.save_pretrained(str(folder))
    return fast, tok


def _permute(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """llama.cpp's convert_hf_to_gguf permutation of q/k rows (interleaved rotary halves)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_llama_gguf(path, model, rust_tokenizer, pre: str = "smollm", arch: str = "llama"):
    import gguf

    c = model.config
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("tiny-test-llama")
    writer.add_block_count(c.num_hidden_layers)
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_rope_freq_base(c.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    writer.add_vocab_size(c.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    data = json.loads(rust_tokenizer.to_str())
    vocab = data["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    specials = {t["content"] for t in data["added_tokens"]}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in tokens])
    writer.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]])
    writer.add_bos_token_id(vocab["<|im_start|>"])
    writer.add_eos_token_id(vocab["<|im_end|>"])
    writer.add_unk_token_id(vocab["<|endoftext|>"])
    writer.add_pad_token_id(vocab["<|im_end|>"])
    writer.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                             "{% endfor %}")
    sd = {k: v.detach().float() for k, v in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"].numpy())
    writer.add_tensor("output_norm.weight", sd["model.norm.weight"].numpy())
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        writer.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"].numpy())
        writer.add_tensor(f"blk.{i}.attn_q.weight",
                          _permute(sd[p + "self_attn.q_proj.weight"], c.num_attention_heads).numpy())
        writer.add_tensor(f"blk.{i}.attn_k.weight",
                          _permute(sd[p + "self_attn.k_proj.weight"], c.num_key_value_heads).numpy())
        writer.add_tensor(f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"].numpy())
        writer.add_tensor(f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"].numpy())
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"].numpy())
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", sd[p + "mlp.gate_proj.weight"].numpy())
        writer.add_tensor(f"blk.{i}.ffn_up.weight", sd[p + "mlp.up_proj.weight"].numpy())
        writer.add_tensor(f"blk.{i}.ffn_down.weight", sd[p + "mlp.down_proj.weight"].numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("gguf")
    fast, rust = _train_smollm_style_tokenizer(root / "tokenizer")
    config = LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         tie_word_embeddings=True, rms_norm_eps=1e-5, rope_theta=10000.0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # visible norm weights, so a wrong tensor mapping cannot hide behind all-ones
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    path = write_tiny_llama_gguf(root / "tiny.F32.gguf", model, rust)
    return path, model, fast


def test_import_gives_the_same_logits_tokenizer_and_tied_head(tiny_gguf, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.models.gguf import IMPORT_REPORT, import_gguf

    path, original, fast = tiny_gguf
    report = import_gguf(path, tmp_path / "out", log=lambda *a: None)
    out = tmp_path / "out"
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    config = json.loads((out / "config.json").read_text())
    assert config["tie_word_embeddings"] is True and "quantization_config" not in config
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "float32"
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert "lm_head.weight" not in f.keys()  # one matrix: the head is tied
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tok = AutoTokenizer.from_pretrained(out)
    text = "the court held that revenue rose in 2021 to 350 million 资产"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids == fast(text, add_special_tokens=False)["input_ids"]
    assert [tok.decode([i]) for i in tok(" 2021", add_special_tokens=False)["input_ids"]] == [" ", "2", "0", "2", "1"]
    assert tok.chat_template and tok.eos_token == "<|im_end|>"
    x = torch.tensor([ids])
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits, original(x).logits, rtol=1e-5, atol=1e-5)
    saved = json.loads((out / IMPORT_REPORT).read_text())
    assert saved["repairs"] and "Digits" in saved["repairs"][0] and saved["source"]["sha256"] == report["source"]["sha256"]
    assert saved["tie_word_embeddings"] is True and saved["parameters"] == sum(p.numel() for p in original.parameters())


def test_import_gguf_cli_errors(tiny_gguf, tmp_path, capsys):
    from yunshan.cli import main

    path, _, _ = tiny_gguf
    assert main(["model", "import-gguf", str(tmp_path / "missing.gguf"), str(tmp_path / "o")]) == 1
    assert "no such GGUF file" in capsys.readouterr().err
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all" * 10)
    assert main(["model", "import-gguf", str(junk), str(tmp_path / "o")]) == 1
    assert "not a readable GGUF file" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    assert main(["model", "import-gguf", str(path), str(tmp_path / "full")]) == 1
    assert "not empty" in capsys.readouterr().err and (tmp_path / "full" / "keep.txt").is_file()


def test_unsupported_architecture_is_a_clear_error(tmp_path):
    import gguf

    from yunshan.models.gguf import import_gguf

    writer = gguf.GGUFWriter(str(tmp_path / "odd.gguf"), "notanarch")
    writer.add_tensor("x", np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="architecture 'notanarch' cannot be read by transformers"):
        import_gguf(tmp_path / "odd.gguf", tmp_path / "out", log=lambda *a: None)
    assert not (tmp_path / "out").exists()


def test_overwrite_replaces_only_an_earlier_import(tiny_gguf, tmp_path, capsys):
    """--overwrite follows export's rule: only a folder written by import-gguf (its report lists its files) and
    holding nothing else is replaced; a user's folder, a file, or a folder holding the GGUF file is refused in one
    line and left as it was."""
    from yunshan.cli import main

    path, _, _ = tiny_gguf
    out = tmp_path / "model"

    def refused(target, expected):
        assert main(["model", "import-gguf", str(path), str(target), "--overwrite"]) == 1
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err and err.count("\n") == 1, err

    # A user's folder without an import report: nothing in it is removed.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("{}")
    (mine / "notes.txt").write_text("keep me")
    refused(mine, "not a folder written by yunshan model import-gguf")
    assert sorted(p.name for p in mine.iterdir()) == ["config.json", "notes.txt"]
    # A file at OUT stays a file.
    plain = tmp_path / "plain"
    plain.write_text("a file")
    refused(plain, "is a file")
    assert plain.read_text() == "a file"
    # OUT holding the GGUF file itself.
    refused(path.parent, "holds the GGUF file")
    assert path.is_file()

    assert main(["model", "import-gguf", str(path), str(out)]) == 0
    capsys.readouterr()  # the import's progress bars
    listed = json.loads((out / "yunshan_import.json").read_text())["files"]
    assert set(listed) == {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    # An earlier import with a user's file added: refused, both kept.
    (out / "eval_notes.md").write_text("mine")
    refused(out, "holds eval_notes.md, which yunshan model import-gguf did not write")
    assert (out / "eval_notes.md").read_text() == "mine" and (out / "model.safetensors").is_file()
    (out / "eval_notes.md").unlink()
    # An earlier import alone: replaced.
    before = (out / "model.safetensors").stat().st_mtime_ns
    assert main(["model", "import-gguf", str(path), str(out), "--overwrite"]) == 0
    assert (out / "model.safetensors").stat().st_mtime_ns != before
    capsys.readouterr()


def test_overwrite_never_guesses_from_a_damaged_or_older_report(tiny_gguf, tmp_path, capsys):
    """Issue 27 item 1: an import report without its list of files (an older yunshan) is read by exact names at
    the top of OUT only, so a user's model_backup.safetensors, tokenizer_backup/notes.txt or models/a.safetensors
    is refused, never deleted; a damaged report is refused outright."""
    from yunshan.cli import main

    path, _, _ = tiny_gguf
    out = tmp_path / "model"
    assert main(["model", "import-gguf", str(path), str(out)]) == 0
    report = out / "yunshan_import.json"
    older = {k: v for k, v in json.loads(report.read_text()).items() if k != "files"}
    report.write_text(json.dumps(older))
    capsys.readouterr()

    def refused(expected):
        assert main(["model", "import-gguf", str(path), str(out), "--overwrite"]) == 1
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err and err.count("\n") == 1, err

    for mine in ("model_backup.safetensors", "tokenizer_backup/notes.txt", "models/a.safetensors"):
        (out / mine).parent.mkdir(parents=True, exist_ok=True)
        (out / mine).write_text("mine")
        refused(f"holds {mine}, which yunshan model import-gguf did not write")
        assert (out / mine).read_text() == "mine"
        (out / mine).unlink()
    for damaged in ('{"files": ', "[1, 2]", '{"files": "model.safetensors"}', "\xff\xfe"):
        report.write_bytes(damaged.encode("latin-1"))
        (out / "notes.txt").write_text("mine")
        refused("cannot tell its files from yours")
        assert (out / "notes.txt").read_text() == "mine" and (out / "model.safetensors").is_file()
        (out / "notes.txt").unlink()
    # The older report over exactly the files an import writes: replaced.
    report.write_text(json.dumps(older))
    for empty in [p for p in sorted(out.rglob("*"), reverse=True) if p.is_dir()]:
        empty.rmdir()
    assert main(["model", "import-gguf", str(path), str(out), "--overwrite"]) == 0
    assert "files" in json.loads(report.read_text())
    capsys.readouterr()


def test_a_symlinked_out_is_written_through(tiny_gguf, tmp_path, capsys):
    """Issue 27 item 5: OUT that is a symbolic link to an earlier import: --overwrite replaces the folder it points
    to and keeps the link (before, the link was renamed aside and replaced by a real folder)."""
    from yunshan.cli import main

    path, _, _ = tiny_gguf
    real, link = tmp_path / "models" / "smol-v1", tmp_path / "smol"
    assert main(["model", "import-gguf", str(path), str(real)]) == 0
    link.symlink_to(real, target_is_directory=True)
    first = json.loads((real / "yunshan_import.json").read_text())
    (real / "yunshan_import.json").write_text(json.dumps({**first, "notes": ["the earlier import"]}))
    assert main(["model", "import-gguf", str(path), str(link), "--overwrite"]) == 0
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert json.loads((real / "yunshan_import.json").read_text())["notes"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models", "smol"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["smol-v1"]
    capsys.readouterr()
