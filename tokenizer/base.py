"""Load the base tokenizer that an extension grows: its pipeline, vocabulary, merges and the files kept beside it.

    from yunshan.tokenizer.base import load_base_tokenizer
    base = load_base_tokenizer("path/to/model_folder")     # folder with tokenizer.json, or a SentencePiece .model

Three kinds are supported (anything else gets an error naming them):
- `byte_level`: BPE tokenizer.json with a ByteLevel pre-tokeniser (GPT-2, Llama-3, Qwen);
- `metaspace`: SentencePiece-style BPE tokenizer.json (Metaspace pre-tokeniser or "▁" normaliser, usually with byte
  fallback; Llama-2, Mistral);
- `sentencepiece`: a SentencePiece BPE `.model` file, converted to the equivalent tokenizer.json pipeline.

The base segmentation of a corpus comes from the `tokenizers` library itself (its normaliser, pre-tokeniser and BPE
model run in Rust); only the continued-BPE merge loop is written by hand (`continued_bpe.py`).

Added tokens: `tokenizers` gives an added token that is not in the model vocabulary the next id after the model
vocabulary when it loads a file, whatever id the file wrote, so appending model tokens after such added tokens
would renumber them. `load_base_tokenizer` therefore places every added token inside the model vocabulary at its
own id before anything is appended (see ../shared/docs/tokenizer-extension.md, "Ids of added tokens").
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import regex

from .sentencepiece_model import (
    extended_proto_bytes,  # noqa: F401  (re-exported for extend.py)
    load_model_proto,
    proto_special_tokens,
    tokenizer_json_from_proto,
)

SUPPORTED = ("BPE tokenizer.json files, byte-level (GPT-2 / Llama-3 / Qwen style) or SentencePiece-style "
             "(Metaspace pre-tokeniser, byte fallback; Llama-2 style), and SentencePiece BPE .model files")
# Files that travel with a tokenizer and are copied to the extended folder unchanged (ids of added tokens are kept,
# so nothing in them needs rewriting).
COPIED_FILES = ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "chat_template.json",
                "added_tokens.json", "generation_config.json")
_BYTE_TOKEN = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
# The pattern the `tokenizers` ByteLevel pre-tokeniser uses when use_regex=true (GPT-2's).
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# Documents compared word for word between the fast counting path and the `tokenizers` pipeline before the fast
# path is trusted for a corpus.
FAST_PATH_CHECK_DOCUMENTS = 200
# A SentencePiece-style word: a run of "▁" and what follows up to the next "▁" (or text before the first "▁").
_METASPACE_WORD = re.compile(r"▁+[^▁]*|[^▁]+")
# Training pieces of a SentencePiece-style word: punctuation runs apart from the rest.
_PUNCTUATION_SPLIT = regex.compile(r"\p{P}+|[^\p{P}]+")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from the 256 byte values to printable characters (the byte-level BPE alphabet)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, codes)))


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
# str.translate table from latin-1 code points (one per UTF-8 byte) to the byte-level alphabet.
_LATIN1_TO_BYTE_LEVEL = {b: c for b, c in BYTE_TO_CHAR.items()}


def _types(component) -> list[str]:
    """All `type` names inside a (possibly nested Sequence) normaliser / pre-tokeniser / decoder JSON."""
    if not component:
        return []
    if isinstance(component, list):
        return [t for item in component for t in _types(item)]
    found = [component.get("type", "")]
    for key in ("normalizers", "pretokenizers", "decoders"):
        found += _types(component.get(key))
    return found


def _replaces_space_with_metaspace(component) -> bool:
    if not component:
        return False
    if isinstance(component, list):
        return any(_replaces_space_with_metaspace(c) for c in component)
    if component.get("type") == "Replace" and component.get("content") == "▁":
        return True
    return any(_replaces_space_with_metaspace(component.get(k)) for k in ("normalizers", "pretokenizers"))


def _prepends_metaspace(data: dict) -> bool:
    """Whether the pipeline puts a "▁" before the first word of a text (Llama's dummy prefix)."""
    def visit(component) -> bool:
        if not component:
            return False
        if isinstance(component, list):
            return any(visit(c) for c in component)
        kind = component.get("type")
        if kind == "Prepend" and component.get("prepend") == "▁":
            return True
        if kind == "Metaspace":
            scheme = component.get("prepend_scheme", "always" if component.get("add_prefix_space", True) else "never")
            return scheme in ("always", "first")
        return any(visit(component.get(k)) for k in ("normalizers", "pretokenizers"))
    return visit(data.get("normalizer")) or visit(data.get("pre_tokenizer"))


@dataclass
class BaseTokenizer:
    """A base tokenizer ready to be extended. Build it with `load_base_tokenizer`."""

    source: Path                     # the folder or .model file given by the user
    kind: str                        # "byte_level" | "metaspace" | "sentencepiece"
    data: dict                       # tokenizer.json content, added tokens placed inside the model vocabulary
    files: dict[str, bytes]          # files copied unchanged to the extended folder (tokenizer_config.json, ...)
    fingerprint: str                 # sha256 over the tokenizer files read
    sp_proto: object | None = None   # the ModelProto for kind "sentencepiece"
    notes: list[str] = field(default_factory=list)  # caveats recorded in the extension report
    sp_special_tokens: dict[str, str] = field(default_factory=dict)  # bos/eos/unk/pad of a .model's trainer spec

    def __post_init__(self):
        from tokenizers import Tokenizer

        model = self.data["model"]
        self.vocab: dict[str, int] = dict(model["vocab"])
        size = max(self.vocab.values()) + 1
        self.id_to_token: list[str | None] = [None] * size
        for token, idx in self.vocab.items():
            self.id_to_token[idx] = token
        self.merges: list[tuple[str, str]] = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                                               for m in model.get("merges", [])]
        self.byte_fallback = bool(model.get("byte_fallback"))
        self.ignore_merges = bool(model.get("ignore_merges"))
        self.unk_token = model.get("unk_token")
        self.added_tokens: list[dict] = list(self.data.get("added_tokens") or [])
        self.added_ids = {t["id"] for t in self.added_tokens}
        # Strings a new token must never equal: added tokens (their ids are reserved), byte-fallback tokens (the
        # encoder would turn the text "<0x41>" into the byte A) and the unknown token.
        self.reserved_strings = {t["content"] for t in self.added_tokens}
        if self.unk_token:
            self.reserved_strings.add(self.unk_token)
        if self.byte_fallback:
            self.reserved_strings.update(t for t in self.vocab if _BYTE_TOKEN.match(t))
        self.backend = Tokenizer.from_str(json.dumps(self.data, ensure_ascii=False))
        self.normalizer = self.backend.normalizer
        self.pre_tokenizer = self.backend.pre_tokenizer
        self.prefix_space = _prepends_metaspace(self.data) if self.kind != "byte_level" else False
        contents = sorted((t["content"] for t in self.added_tokens if t["content"]), key=len, reverse=True)
        self._added_split = re.compile("|".join(map(re.escape, contents))) if contents else None

    # ----- the pipeline, exactly as the encoder runs it -----
    def words(self, text: str) -> list[str]:
        """Pre-tokenised words of `text` in model space (byte-mapped for byte-level, "▁" for SentencePiece-style).

        Added tokens are cut out first, as the encoder does; SentencePiece-style words are split before each "▁" run
        because no SentencePiece piece spans a word boundary.
        """
        pieces = self._added_split.split(text) if self._added_split is not None else [text]
        out: list[str] = []
        for piece in pieces:
            if not piece:
                continue
            if self.normalizer is not None:
                piece = self.normalizer.normalize_str(piece)
            if self.pre_tokenizer is not None:
                found = [w for w, _ in self.pre_tokenizer.pre_tokenize_str(piece)]
            else:
                found = [piece]
            if self.kind == "byte_level":
                out.extend(found)
            else:
                for word in found:
                    out.extend(_METASPACE_WORD.findall(word))
        return out

    def training_words(self, text: str) -> list[str]:
        """The words the corpus BPE counts: `words()`, with SentencePiece-style words also cut at punctuation.

        A SentencePiece-style word runs from one space to the next, so a Chinese sentence is one word; cutting it at
        punctuation keeps the training pieces short and repeated (no new token then contains punctuation).
        """
        found = self.words(text)
        if self.kind == "byte_level":
            return found
        return [piece for word in found for piece in _PUNCTUATION_SPLIT.findall(word)]

    def _fast_splitter(self):
        """(split, to_model) that reproduce `training_words` without `tokenizers`' per-piece offsets, or None.

        split(document) -> raw pieces; to_model(piece) -> the model-space word (run once per unique piece).
        """
        pre = self.data.get("pre_tokenizer") or {}
        norm = self.data.get("normalizer")
        if self.kind == "byte_level":
            if norm is not None:
                return None
            # A Digits step in front (SmolLM2, StarCoder): numbers apart first, then the byte-level split of the rest.
            digits = None
            if pre.get("type") == "Sequence" and (pre.get("pretokenizers") or [{}])[0].get("type") == "Digits":
                digits = regex.compile(r"\p{N}" if pre["pretokenizers"][0].get("individual_digits") else r"\p{N}+")
                rest = pre["pretokenizers"][1:]
                pre = rest[0] if len(rest) == 1 else {"type": "Sequence", "pretokenizers": rest}
            pattern = None
            if pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space"):
                pattern = GPT2_SPLIT
            steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
            if (steps and len(steps) == 2 and steps[0].get("type") == "Split"
                    and "Regex" in steps[0].get("pattern", {}) and steps[0].get("behavior") == "Isolated"
                    and not steps[0].get("invert") and steps[1].get("type") == "ByteLevel"
                    and not steps[1].get("use_regex", True) and not steps[1].get("add_prefix_space")):
                pattern = steps[0]["pattern"]["Regex"]
            if pattern is None:
                return None
            splitter = regex.compile(pattern)

            def split_text(text: str) -> list[str]:
                if not splitter.groups:
                    found = splitter.findall(text)
                    if sum(map(len, found)) == len(text):  # the matches cover the text: no gaps to keep
                        return found
                pieces, end = [], 0
                for match in splitter.finditer(text):
                    if match.start() > end:  # text between matches is a piece too ("Isolated" keeps it)
                        pieces.append(text[end:match.start()])
                    pieces.append(match.group())
                    end = match.end()
                if end < len(text):
                    pieces.append(text[end:])
                return pieces

            if digits is not None:
                split_rest = split_text

                def split_text(text: str) -> list[str]:
                    pieces, end = [], 0
                    for match in digits.finditer(text):
                        if match.start() > end:
                            pieces += split_rest(text[end:match.start()])
                        pieces.append(match.group())
                        end = match.end()
                    if end < len(text):
                        pieces += split_rest(text[end:])
                    return pieces

            def to_model(piece: str) -> str:
                return piece.encode("utf-8").decode("latin-1").translate(_LATIN1_TO_BYTE_LEVEL)
        else:
            # "▁" handling of the two SentencePiece-style layouts: Prepend("▁") + Replace(" ", "▁") normaliser and
            # no pre-tokeniser (SentencePiece's own order), or a Metaspace pre-tokeniser and no normaliser.
            legacy = [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "},
                                                              "content": "▁"}]
            if norm is not None and not pre and norm.get("type") == "Sequence" and \
                    norm.get("normalizers") in (legacy, legacy[1:]):
                always = len(norm["normalizers"]) == 2

                def prefix(text: str) -> str:
                    return ("▁" if always else "") + text.replace(" ", "▁")
            elif norm is None and pre.get("type") == "Metaspace" and pre.get("replacement") == "▁":
                scheme = pre.get("prepend_scheme", "always")

                def prefix(text: str) -> str:
                    text = text.replace(" ", "▁")
                    return text if scheme == "never" or text.startswith("▁") else "▁" + text
            else:
                return None
            pieces_of = regex.compile(r"▁+[^▁\p{P}]*|\p{P}+|[^▁\p{P}]+")

            def split_text(text: str) -> list[str]:
                return pieces_of.findall(prefix(text))

            def to_model(piece: str) -> str:
                return piece

        def split(document: str) -> list[str]:
            if self._added_split is None:
                return split_text(document)
            # Added tokens are cut out first, as in words().
            return [p for text in self._added_split.split(document) if text for p in split_text(text)]

        return split, to_model

    def word_splitter(self, documents: list[str]) -> tuple[Callable[[str], list[str]], Callable[[str], str] | None]:
        """(split, to_model) for counting: split(document) -> pieces, to_model(piece) -> the model-space training word
        (run once per unique piece), or to_model None when split already gives training words.

        The fast path (the base's split regex in the `regex` module, the byte mapping once per unique piece; for the
        common pipelines: a byte-level split regex plus the byte mapping, optionally after a Digits step, as GPT-2,
        Llama-3, Qwen and SmolLM2 without normaliser; the two SentencePiece-style "▁" layouts) is used only after it
        matched the `tokenizers` pipeline word for word on `documents` (the first ones of the corpus); otherwise
        `training_words` is the split. `tokenizers`' own `pre_tokenize_str` spends most of its time building offsets
        for every piece, which counting does not need."""
        fast = self._fast_splitter()
        if fast is None:
            return self.training_words, None
        split, to_model = fast
        for text in documents:
            if [to_model(p) for p in split(text)] != self.training_words(text):
                self.notes.append("the fast word count did not match the tokenizers pipeline on this corpus; "
                                  "counted with the pipeline instead")
                return self.training_words, None
        return split, to_model

    def count_words(self, documents, processes: int = 1) -> Counter:
        """Frequency of every training word (model space, `training_words`) over an iterable of documents, counted
        in `processes` worker processes when the documents are many (`parallel.Workers`)."""
        from .parallel import Workers

        documents = iter(documents)
        head = list(itertools.islice(documents, FAST_PATH_CHECK_DOCUMENTS))
        with Workers(processes, *self.word_splitter(head)) as workers:
            return workers.count(itertools.chain(head, documents))

    def segment(self, word: str) -> list[int]:
        """The base model's segmentation of one pre-tokenised word (every base merge applied)."""
        return [t.id for t in self.backend.model.tokenize(word)]

    def is_byte_token(self, idx: int) -> bool:
        token = self.id_to_token[idx] if 0 <= idx < len(self.id_to_token) else None
        return self.byte_fallback and token is not None and bool(_BYTE_TOKEN.match(token))

    def mergeable(self, idx: int) -> bool:
        """Whether a new merge may use this base id as one of its halves (not added, byte-fallback or unknown)."""
        token = self.id_to_token[idx] if 0 <= idx < len(self.id_to_token) else None
        return token is not None and idx not in self.added_ids and token not in self.reserved_strings

    def text_of(self, token: str) -> str | None:
        """The text whose encoding, alone, should be this model-space token; None when no text can be.

        None for byte-level tokens that are part of a UTF-8 character and for SentencePiece-style pieces that do not
        start a word while the pipeline prefixes every text with "▁" (such pieces appear only inside words).
        """
        if self.kind == "byte_level":
            try:
                text = bytes(CHAR_TO_BYTE[c] for c in token).decode("utf-8")
            except (KeyError, UnicodeDecodeError):
                return None
        else:
            text = token.replace("▁", " ")
            if self.prefix_space:
                if not text.startswith(" "):
                    return None
                text = text[1:]
        return text if self.words(text) == [token] else None

    def token_bytes(self, token: str) -> bytes:
        """The UTF-8 bytes a model-space token stands for."""
        if self.kind == "byte_level":
            return bytes(CHAR_TO_BYTE[c] for c in token)
        if self.is_byte_token(self.vocab.get(token, -1)):
            return bytes([int(token[3:5], 16)])
        return token.replace("▁", " ").encode("utf-8")


def _sha256(*blobs: bytes) -> str:
    digest = hashlib.sha256()
    for blob in blobs:
        digest.update(hashlib.sha256(blob).digest())
    return digest.hexdigest()


def _place_added_tokens_in_vocab(data: dict, where: str) -> dict:
    """Put every added token into the BPE vocabulary at its own id (see module docstring); check for clashes."""
    data = copy.deepcopy(data)
    vocab = data["model"]["vocab"]
    by_id = {idx: token for token, idx in vocab.items()}
    for added in data.get("added_tokens") or []:
        content, idx = added["content"], added["id"]
        if vocab.get(content) == idx:
            continue
        if content in vocab:
            raise ValueError(f"{where}: added token {content!r} has id {idx} but the model vocabulary maps it to "
                             f"{vocab[content]}; a consistent tokenizer.json has the same id in both")
        if idx in by_id:
            raise ValueError(f"{where}: added token {content!r} has id {idx}, which the model vocabulary gives to "
                             f"{by_id[idx]!r}; ids must be unique")
        vocab[content] = idx
        by_id[idx] = content
    return data


def _kind_of(data: dict, where: str) -> str:
    model = data.get("model") or {}
    model_type = model.get("type") or ("BPE" if "merges" in model else None)
    if model_type != "BPE":
        raise ValueError(f"{where}: model type {model_type or 'unknown'} is not supported; supported are {SUPPORTED}")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise ValueError(f"{where}: BPE with {key}={model[key]!r} is not supported; supported are {SUPPORTED}")
    if model.get("dropout"):
        raise ValueError(f"{where}: BPE dropout={model['dropout']} makes encoding random; save the tokenizer with "
                         "dropout null before extending it")
    types = _types(data.get("pre_tokenizer")) + _types(data.get("normalizer"))
    if "ByteLevel" in types:
        return "byte_level"
    if "Metaspace" in types or _replaces_space_with_metaspace(data.get("normalizer")):
        return "metaspace"
    raise ValueError(f"{where}: BPE tokenizer without a ByteLevel or Metaspace pre-tokeniser (found "
                     f"{sorted(set(types)) or 'none'}); supported are {SUPPORTED}")


def load_base_tokenizer(path: str | Path) -> BaseTokenizer:
    """Read a base tokenizer: a folder with tokenizer.json (plus its config files), or a SentencePiece .model file.

    A folder that holds only tokenizer.model is read as that SentencePiece model.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"base tokenizer {path} does not exist; give a folder with tokenizer.json or a "
                                "SentencePiece .model file")
    if path.is_dir():
        tokenizer_json = path / "tokenizer.json"
        sp_model = path / "tokenizer.model"
        if not tokenizer_json.is_file() and not sp_model.is_file():
            present = ", ".join(sorted(p.name for p in path.iterdir())[:10]) or "nothing"
            raise FileNotFoundError(f"base folder {path} has no tokenizer.json or tokenizer.model (it holds: "
                                    f"{present}); supported are {SUPPORTED}")
        files = {name: (path / name).read_bytes() for name in COPIED_FILES if (path / name).is_file()}
        if tokenizer_json.is_file():
            raw = tokenizer_json.read_bytes()
            try:
                data = json.loads(raw)
            except json.JSONDecodeError as err:
                raise ValueError(f"{tokenizer_json}: line {err.lineno}: not valid JSON ({err.msg})") from err
            kind = _kind_of(data, str(tokenizer_json))
            notes = []
            if sp_model.is_file():
                notes.append("tokenizer.model of the base folder was not copied: it would not contain the new "
                             "tokens; tokenizer.json is the extended tokenizer")
            return BaseTokenizer(source=path, kind=kind, data=_place_added_tokens_in_vocab(data, str(tokenizer_json)),
                                 files=files, fingerprint=_sha256(raw), notes=notes)
        path = sp_model
    else:
        files = {}  # a .model file given directly: its neighbours are not assumed to belong to it
    if path.suffix != ".model":
        raise ValueError(f"base tokenizer {path} is a file but not a SentencePiece .model; give a folder with "
                         f"tokenizer.json or a .model file ({SUPPORTED})")
    raw = path.read_bytes()
    proto = load_model_proto(path)
    data = tokenizer_json_from_proto(proto)
    notes = []
    if proto.normalizer_spec.remove_extra_whitespaces:
        notes.append("the SentencePiece model collapses runs of whitespace (remove_extra_whitespaces); the "
                     "tokenizer.json pipeline keeps them, as transformers' own conversion does")
    return BaseTokenizer(source=Path(path), kind="sentencepiece", data=_place_added_tokens_in_vocab(data, str(path)),
                         files=files, fingerprint=_sha256(raw), sp_proto=proto, notes=notes,
                         sp_special_tokens=proto_special_tokens(proto))
