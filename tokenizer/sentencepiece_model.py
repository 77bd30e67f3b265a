"""SentencePiece BPE `.model` files: read the ModelProto, build the equivalent `tokenizers` pipeline, append pieces.

    yunshan tokenizer extend --base llama/tokenizer.model --corpus C.jsonl --new-tokens N --out OUT

Used by `yunshan tokenizer extend --base tokenizer.model ...` (see `extend.py`). A SentencePiece BPE model has no
merge list: its encoder repeatedly joins the adjacent pair whose concatenation is a piece of highest score. So the
extension writes the new tokens as NORMAL pieces with scores below every existing score (the k-th new piece gets
`min_score - k`) and derives the `tokenizer.json` merges from the final piece list the same way (every split of a
piece into two pieces, ordered by the piece's id, which for these files is the score order), so the `.model` and the
`tokenizer.json` written next to it cut text the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

# Piece types of sentencepiece_model.proto (ModelProto.SentencePiece.Type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# TrainerSpec.ModelType
MODEL_TYPES = {1: "Unigram", 2: "BPE", 3: "Word", 4: "Char"}


def load_model_proto(path: Path):
    """Parse a SentencePiece `.model` file; errors name the file and say what is supported."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    proto = model_pb2.ModelProto()
    try:
        proto.ParseFromString(Path(path).read_bytes())
    except Exception as err:  # protobuf raises its own DecodeError type
        raise ValueError(f"{path}: not a SentencePiece model file ({err})") from err
    if not proto.pieces:
        raise ValueError(f"{path}: SentencePiece model has no pieces")
    model_type = proto.trainer_spec.model_type
    if model_type != 2:
        raise ValueError(
            f"{path}: SentencePiece model_type is {MODEL_TYPES.get(model_type, model_type)}; supported are BPE "
            "SentencePiece models (model_type=bpe), byte-level BPE tokenizer.json files (GPT-2 / Llama-3 / Qwen "
            "style) and SentencePiece-style BPE tokenizer.json files (Metaspace, byte fallback; Llama-2 style)")
    return proto


def load_model_proto_bytes(blob: bytes):
    """Parse a serialized ModelProto (an extended model before it is written)."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    proto = model_pb2.ModelProto()
    proto.ParseFromString(blob)
    return proto


def mergeable_piece_type(piece_type: int) -> bool:
    """Pieces the SentencePiece BPE encoder can build from and merge into (not control, unknown or byte pieces)."""
    return piece_type in (NORMAL, USER_DEFINED)


def merges_from_pieces(pieces: list[tuple[str, int]]) -> list[tuple[str, str]]:
    """All (left, right) splits of each mergeable piece into two mergeable pieces, in piece-id order.

    `pieces` is the ordered list of (piece, type). The order (by the merged piece's id, then by the length of the
    left half) is the one transformers' SentencePiece extractor uses, so a tokenizer.json written from these merges
    behaves like the one transformers would build from the `.model` alone; control, unknown and byte pieces are left
    out because the SentencePiece encoder never merges into them.
    """
    vocab = {piece: (i, kind) for i, (piece, kind) in enumerate(pieces)}
    merges: list[tuple[str, str]] = []
    for piece, kind in pieces:
        if not mergeable_piece_type(kind) or len(piece) < 2:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            lk, rk = vocab.get(left), vocab.get(right)
            if lk is not None and rk is not None and mergeable_piece_type(lk[1]) and mergeable_piece_type(rk[1]):
                merges.append((left, right))
    return merges


def tokenizer_json_from_proto(proto) -> dict:
    """The `tokenizers` pipeline equivalent to a SentencePiece BPE model, as a tokenizer.json dict.

    Normaliser: the model's precompiled rules (if any), the dummy "▁" prefix (if add_dummy_prefix), spaces to "▁";
    no pre-tokeniser (SentencePiece BPE runs on the whole text; no piece spans a "▁" inside it); BPE with byte
    fallback; a decoder undoing all of it; BOS before every sequence when the model has a BOS piece. Control and unknown
    pieces become special added tokens and user-defined pieces non-special added tokens, as transformers does.
    SentencePiece's remove_extra_whitespaces has no `tokenizers` equivalent; `extend.py` records a note when it is on.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, processors
    from tokenizers.models import BPE

    pieces = [(p.piece, p.type) for p in proto.pieces]
    vocab = {piece: i for i, (piece, _) in enumerate(pieces)}
    spec = proto.trainer_spec
    unk = spec.unk_piece if spec.unk_id >= 0 and spec.unk_id < len(pieces) else None
    model = BPE(vocab=vocab, merges=merges_from_pieces(pieces), unk_token=unk, fuse_unk=True,
                byte_fallback=bool(spec.byte_fallback), dropout=None)
    tokenizer = Tokenizer(model)
    # SentencePiece's own order: normalise, add the dummy "▁" prefix to every text, spaces become "▁". (A
    # Metaspace pre-tokeniser with prepend_scheme="first" skips the prefix when a text starts with a space, which
    # differs from SentencePiece and loses that space on decoding.)
    steps_in = []
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if charsmap:
        steps_in.append(normalizers.Precompiled(charsmap))
    prefix = bool(proto.normalizer_spec.add_dummy_prefix)
    if prefix:
        steps_in.append(normalizers.Prepend("▁"))
    steps_in.append(normalizers.Replace(" ", "▁"))
    tokenizer.normalizer = normalizers.Sequence(steps_in)
    steps = [decoders.Replace("▁", " ")]
    if spec.byte_fallback:
        steps.append(decoders.ByteFallback())
    steps.append(decoders.Fuse())
    if prefix:
        steps.append(decoders.Strip(content=" ", left=1, right=0))
    tokenizer.decoder = decoders.Sequence(steps)
    if 0 <= spec.bos_id < len(pieces):
        # Begin every sequence with BOS, as Llama's tokenizer.json does (transformers reads the post-processor from
        # the file; `add_special_tokens=False` leaves it out).
        bos = pieces[spec.bos_id][0]
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, spec.bos_id)])
    special = [AddedToken(p, special=True, normalized=False) for p, kind in pieces if kind in (CONTROL, UNKNOWN)]
    user = [AddedToken(p, special=False, normalized=False) for p, kind in pieces if kind == USER_DEFINED]
    if special:
        tokenizer.add_special_tokens(special)
    if user:
        tokenizer.add_tokens(user)
    return json.loads(tokenizer.to_str())


def proto_special_tokens(proto) -> dict[str, str]:
    """bos/eos/unk/pad token strings named by the trainer spec (for tokenizer_config.json)."""
    spec, pieces = proto.trainer_spec, proto.pieces
    out = {}
    for name, idx in (("bos_token", spec.bos_id), ("eos_token", spec.eos_id), ("unk_token", spec.unk_id),
                      ("pad_token", spec.pad_id)):
        if 0 <= idx < len(pieces):
            out[name] = pieces[idx].piece
    return out


def extended_proto_bytes(proto, new_pieces: list[str]) -> bytes:
    """The model with `new_pieces` appended as NORMAL pieces scored below every existing piece (min - k)."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    out = model_pb2.ModelProto()
    out.CopyFrom(proto)
    floor = min(p.score for p in proto.pieces)
    for k, piece in enumerate(new_pieces, start=1):
        entry = out.pieces.add()
        entry.piece = piece
        entry.score = floor - k
        entry.type = NORMAL
    out.trainer_spec.vocab_size = len(out.pieces)
    return out.SerializeToString(deterministic=True)
