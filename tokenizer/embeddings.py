"""Grow a model's embeddings for an extended tokenizer, starting each new row from the pieces it replaces.

    from yunshan.tokenizer import resize_embeddings
    resize_embeddings(model, "base_tokenizer/", "extended_tokenizer/", init="subword_mean")

Works on any transformers causal LM through `get_input_embeddings` / `get_output_embeddings` and
`resize_token_embeddings` (which keeps tied weights tied and updates `config.vocab_size`). A model whose embedding
matrix is already padded past the new vocabulary (rows rounded up to a multiple) is not resized: the rows of the new
ids are initialised in place. The base rows, and so the logits of text made only of base tokens, do not change.

Initialisation of each new id's input row (and lm_head row and bias when the head is not tied):
- `subword_mean` (default): the mean of the rows of the base pieces its text decomposes into (the base BPE model's
  segmentation of the token's model-space string), so the model first treats it like the sequence it replaces;
- `mean`: the mean of all base rows;
- `random`: normal with the config's `initializer_range` (or the base rows' standard deviation), seeded.

Under DeepSpeed ZeRO-3 every rank holds only a slice of each matrix (local shape (0,), full shape in `ds_shape`):
`resize_token_embeddings` gathers on its own, and the caller passes `gathered` (yunshan.training.engines.gathered)
so that the new rows are computed on whole matrices and written back to every rank's slice.
"""

from __future__ import annotations

from pathlib import Path

INITS = ("subword_mean", "mean", "random")


def _backend(tokenizer):
    """A `tokenizers.Tokenizer` from a path, a transformers tokenizer or a `tokenizers.Tokenizer`."""
    if isinstance(tokenizer, (str, Path)):
        from .report import load_backend

        return load_backend(tokenizer)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend
    if hasattr(tokenizer, "get_vocab") and hasattr(tokenizer, "model"):
        return tokenizer
    raise ValueError(f"cannot read a vocabulary from {type(tokenizer).__name__}; give a path, a transformers "
                     "tokenizer or a tokenizers.Tokenizer")


def decompose(base, new, token_id: int) -> list[int]:
    """Base ids that the text of new token `token_id` decomposes into."""
    added = new.get_added_tokens_decoder()
    if token_id in added:
        return base.encode(added[token_id].content, add_special_tokens=False).ids
    return [t.id for t in base.model.tokenize(new.id_to_token(token_id))]


def resize_embeddings(model, base_tokenizer, new_tokenizer, init: str = "subword_mean",
                      pad_to_multiple_of: int | None = None, seed: int = 0, gathered=None) -> dict:
    """Make room for the new tokenizer's ids and initialise the new rows; returns what was done.

    Args:
        model: a transformers PreTrainedModel (causal LM) sized for `base_tokenizer`.
        base_tokenizer / new_tokenizer: paths, transformers tokenizers or `tokenizers.Tokenizer`s; every base token
            must keep its id in the new one.
        init: "subword_mean", "mean" or "random" (module docstring).
        pad_to_multiple_of: when the matrix must grow, round its rows up to a multiple of this.
        seed: seed of the "random" initialisation.
        gathered: a context manager factory `gathered(params, modify=True)` that makes sharded parameters whole
            inside the block and keeps what the block writes (module docstring); None for ordinary tensors.
    """
    import contextlib

    import torch

    if init not in INITS:
        raise ValueError(f"init={init!r}: valid values are {', '.join(INITS)}")
    base, new = _backend(base_tokenizer), _backend(new_tokenizer)
    base_vocab, new_vocab = base.get_vocab(with_added_tokens=True), new.get_vocab(with_added_tokens=True)
    for token, idx in base_vocab.items():
        if new_vocab.get(token) != idx:
            raise ValueError(f"the new tokenizer is not an extension of the base: token {token!r} has id {idx} in "
                             f"the base and {new_vocab.get(token)} in the new one")
    base_size = max(base_vocab.values()) + 1
    new_size = max(new_vocab.values()) + 1
    new_ids = sorted(idx for token, idx in new_vocab.items() if token not in base_vocab)

    rows = _rows(model.get_input_embeddings().weight)
    if rows < base_size:
        raise ValueError(f"the model has {rows} embedding rows but the base tokenizer has {base_size} ids; give the "
                         "tokenizer the model was trained with")
    resized = rows < new_size
    if resized:
        model.resize_token_embeddings(new_size, pad_to_multiple_of=pad_to_multiple_of, mean_resizing=False)
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    # Identity, not storage: the local tensors of ZeRO-3 partitions are all empty and share no storage to compare.
    tied = head is None or head.weight is embed or (embed.numel() > 0 and head.weight.data_ptr() == embed.data_ptr())
    matrices = [embed] if tied else [embed, head.weight]
    bias = None if tied or getattr(head, "bias", None) is None else head.bias

    pieces = {idx: decompose(base, new, idx) for idx in new_ids} if init == "subword_mean" else {}
    generator = torch.Generator().manual_seed(seed)
    whole = gathered([*matrices, *([bias] if bias is not None else [])], modify=True) if gathered is not None \
        else contextlib.nullcontext()
    with whole, torch.no_grad():
        for matrix in matrices:
            original = matrix[:base_size].float()
            if init == "subword_mean":
                rows_new = torch.stack([original[pieces[i]].mean(0) if pieces[i] else original.mean(0)
                                        for i in new_ids]) if new_ids else None
            elif init == "mean":
                rows_new = original.mean(0, keepdim=True).expand(len(new_ids), -1)
            else:
                std = getattr(model.config, "initializer_range", None) or original.std().item()
                rows_new = torch.randn(len(new_ids), original.shape[1], generator=generator) * std
            if new_ids:
                matrix[new_ids] = rows_new.to(matrix.dtype)
        if bias is not None and new_ids:
            base_bias = bias[:base_size].float()
            values = [base_bias[pieces[i]].mean() if init == "subword_mean" and pieces[i] else base_bias.mean()
                      for i in new_ids]
            bias[new_ids] = torch.stack(values).to(bias.dtype)
    return {"rows_before": rows, "rows_after": _rows(model.get_input_embeddings().weight), "resized": resized,
            "tied": tied, "initialised": len(new_ids), "init": init, "base_size": base_size, "new_size": new_size}


def _rows(weight) -> int:
    """Rows of an embedding matrix, also of a DeepSpeed ZeRO-3 partition (whose local shape is (0,))."""
    return (weight.ds_shape if hasattr(weight, "ds_shape") else weight.shape)[0]
