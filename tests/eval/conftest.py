"""Tiny models and a tokenizer trained in-process, plus small benchmark folders written by the tests themselves."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

CORPUS = [
    "以下是中国关于会计考试的单项选择题，请选出其中的正确答案。",
    "以下是关于税务师的单项选择题，请直接给出正确答案的选项。",
    "题目：企业的资产负债表反映的是什么？\nA. 财务状况\nB. 经营成果\nC. 现金流量\nD. 所有者权益变动\n答案是：A",
    "下列关于货币政策的说法正确的是\nA. 降低利率\nB. 提高存款准备金率\nC. 公开市场操作\nD. 以上都对\n答案：D",
    "根据《刑法》第二百六十四条，盗窃公私财物，数额较大的，处三年以下有期徒刑。",
    "被告人张某犯盗窃罪，判处有期徒刑一年六个月。刑期:18个月",
    "The answer is B. Bonds pay coupons; equity pays dividends. 答案是C。正确答案：A。",
    "合同纠纷 劳动纠纷 交通事故 债权债务 婚姻家庭 罪名:盗窃;诈骗 法条:刑法第264条",
    "银行 证券 保险 基金 利率 通货膨胀 宏观经济 微观经济 审计 会计 税法 金融",
]


def _train_tokenizer(folder: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=["<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = ("{% for m in messages %}<|user|>{{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    fast.save_pretrained(folder)
    return fast


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tokenizer")
    _train_tokenizer(folder)
    return folder


def _save(model, tokenizer_dir: Path, folder: Path) -> Path:
    from transformers import AutoTokenizer

    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def llama_dir(tokenizer_dir, tmp_path_factory) -> Path:
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    vocab = len(AutoTokenizer.from_pretrained(tokenizer_dir))
    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=vocab, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger logits than the default init, so options differ clearly (no near-ties)
        model.lm_head.weight.normal_(0.0, 0.5)
    return _save(model, tokenizer_dir, tmp_path_factory.mktemp("llama"))


@pytest.fixture(scope="session")
def pangu_dir(tokenizer_dir, tmp_path_factory) -> Path:
    from transformers import AutoTokenizer

    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    vocab = len(AutoTokenizer.from_pretrained(tokenizer_dir))
    torch.manual_seed(2)
    config = PanguPiConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, aug_reduction=4, max_position_embeddings=512,
                           bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    model = PanguPiForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 0.5)
    return _save(model, tokenizer_dir, tmp_path_factory.mktemp("pangu"))


@pytest.fixture(scope="session")
def tokenizer_folders(tokenizer_dir, tmp_path_factory):
    """(folder of a tokenizer that adds BOS by default, as Gemma's and Llama's do, folder of one that does not),
    both with the vocabulary of `tokenizer_dir` (test_bos.py, test_lm_eval_agreement.py)."""
    from transformers import AutoTokenizer

    plain = tmp_path_factory.mktemp("tok_plain")
    adding = tmp_path_factory.mktemp("tok_adding")
    for folder in (plain, adding):
        AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(folder)
    data = json.loads((adding / "tokenizer.json").read_text(encoding="utf-8"))
    bos = next(t["id"] for t in data["added_tokens"] if t["content"] == "<s>")
    data["post_processor"] = {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                       {"Sequence": {"id": "A", "type_id": 0}},
                                       {"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]}}}
    (adding / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return adding, plain


@pytest.fixture(scope="session")
def llama(llama_dir):
    from yunshan.eval.loading import load_model

    return load_model(str(llama_dir))


@pytest.fixture(scope="session")
def pangu(pangu_dir):
    from yunshan.eval.loading import load_model

    return load_model(str(pangu_dir))


# ------------------------------------------------------------------------------------------------ benchmark folders
QUESTIONS = [
    ("企业的资产负债表反映的是", "财务状况", "经营成果", "现金流量", "利润分配", "A"),
    ("下列属于货币政策工具的是", "税收", "公开市场操作", "财政补贴", "国债发行", "B"),
    ("通货膨胀时，央行通常会", "降低利率", "增加货币供应", "提高利率", "减少税收", "C"),
    ("审计报告的意见类型不包括", "无保留意见", "保留意见", "否定意见", "建议意见", "D"),
    ("股票的收益主要来自", "股息和资本利得", "利息", "租金", "保费", "A"),
    ("商业银行的主要负债是", "贷款", "存款", "债券投资", "现金", "B"),
]


@pytest.fixture(scope="session")
def pangu_conv_lm(tokenizer_dir):
    """PanGu-π with the causal neighbour convolution (its cached state is repeated, never packed), weights made
    large enough that the convolution matters."""
    from transformers import AutoTokenizer

    from yunshan.eval.loading import wrap_model
    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(3)
    config = PanguPiConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, aug_reduction=4, siaf_neighbor_kernel=3,
                           max_position_embeddings=512, pad_token_id=0)
    model = PanguPiForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.neighbor_conv.weight.normal_(0.0, 0.5)
    return wrap_model(model, tok)


def write_ceval(root: Path, subjects: dict[str, tuple[str, str, str]] | None = None, n_val: int = 4,
                n_dev: int = 3) -> Path:
    subjects = subjects or {"accounting": ("Accounting", "会计", "Accounting"),
                            "banking": ("Banking", "银行从业资格", "Certificate"),
                            "finance": ("Finance", "金融学", "Finance")}
    (root / "dev").mkdir(parents=True, exist_ok=True)
    (root / "val").mkdir(parents=True, exist_ok=True)
    (root / "subject_mapping.json").write_text(json.dumps({k: list(v) for k, v in subjects.items()},
                                                          ensure_ascii=False), encoding="utf-8")
    for s, key in enumerate(subjects):
        for split, n, offset in (("dev", n_dev, 0), ("val", n_val, n_dev)):
            with open(root / split / f"{key}_{split}.csv", "w", encoding="utf-8", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["id", "question", "A", "B", "C", "D", "answer", "explanation"])
                for i in range(n):
                    q = QUESTIONS[(i + offset + s) % len(QUESTIONS)]
                    w.writerow([i, q[0] + f"（{key}{i}）", *q[1:5], q[5], "因为……"])
    return root


def write_cmmlu(root: Path, subjects=("注册会计师（CPA）", "银行从业资格"), n_test: int = 4, n_dev: int = 3) -> Path:
    for split in ("dev", "test"):
        (root / split).mkdir(parents=True, exist_ok=True)
    for s, name in enumerate(subjects):
        for split, n, offset in (("dev", n_dev, 0), ("test", n_test, n_dev)):
            with open(root / split / f"{name}.csv", "w", encoding="utf-8", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["", "Question", "A", "B", "C", "D", "Answer"])
                for i in range(n):
                    q = QUESTIONS[(i + offset + s) % len(QUESTIONS)]
                    w.writerow([i, q[0], *q[1:5], q[5]])
    return root


def write_lawbench(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    tasks = {
        "1-1": [{"instruction": "回答以下问题，只需直接给出法条内容:", "question": "刑法第二百六十四条的内容是什么？",
                 "answer": "答案:盗窃公私财物，数额较大的，处三年以下有期徒刑。"}],
        "1-2": [{"instruction": "请你运用法律知识从A,B,C,D中选出一个正确的答案，并写在[正确答案]和<eoa>之间。",
                 "question": "下列哪项正确?A:甲;B:乙;C:丙;D:丁。", "answer": "正确答案：B。"}],
        "2-9": [{"instruction": "请从以下事件类型中选出下面事实所包含的事件类型。", "question": "被告人盗窃后卖出手机。",
                 "answer": "卖出;获利"}],
        "3-3": [{"instruction": "请你模拟法官依据下面事实给出罪名。", "question": "事实:被告人秘密窃取他人财物。",
                 "answer": "罪名:盗窃"}],
        "3-4": [{"instruction": "根据下列事实预测判决刑期。", "question": "事实:被告人盗窃价值五千元的手机。",
                 "answer": "刑期:8个月"}],
    }
    for task, records in tasks.items():
        (root / f"{task}.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return root


def write_jecqa(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [
        {"id": "0_0", "statement": "关于盗窃罪，下列说法正确的是", "option_list": {"A": "甲", "B": "乙", "C": "丙", "D": "丁"},
         "answer": ["A", "C"], "source": 0},
        {"id": "1_0", "statement": "张某窃取他人手机，应如何认定", "option_list": {"A": "盗窃", "B": "诈骗", "C": "抢夺", "D": "侵占"},
         "answer": ["A"], "source": 1},
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    return path


def write_text(path: Path, docs: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def writers():
    """The folder writers above, for tests that build variants of the benchmark folders."""
    class W:
        ceval = staticmethod(write_ceval)
        cmmlu = staticmethod(write_cmmlu)
        lawbench = staticmethod(write_lawbench)
        jecqa = staticmethod(write_jecqa)
        text = staticmethod(write_text)
    return W


@pytest.fixture
def bench(tmp_path) -> dict[str, Path]:
    """One small folder per task family under tmp_path, plus held-out texts."""
    general = ["The central bank raised interest rates to fight inflation.", "今天天气很好，我们去公园散步。"]
    legal = ["根据《刑法》第二百六十四条，盗窃公私财物，数额较大的，处三年以下有期徒刑。", "被告人张某犯盗窃罪。"]
    return {
        "fineval": write_ceval(tmp_path / "fineval"),
        "financeiq": write_cmmlu(tmp_path / "financeiq"),
        "lawbench": write_lawbench(tmp_path / "lawbench"),
        "jecqa": write_jecqa(tmp_path / "jecqa" / "0_test.json").parent,
        "general": write_text(tmp_path / "heldout" / "general.txt", general),
        "legal": write_text(tmp_path / "heldout" / "legal.txt", legal),
    }
