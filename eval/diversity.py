"""Feature diversity: effective dimension d(eps) of every decoder layer's hidden states (the paper's Fig. 4).

    yunshan eval --model pangu-pi --model llama --tasks diversity --diversity-text heldout/general.txt

Per layer, the token hidden states of the layer's output (padding excluded) are mean-centred and their principal
components computed in float64; d(eps) is the smallest number of components whose cumulative explained-variance
ratio reaches eps (0.8 in Fig. 4). A collapsing model needs fewer dimensions in its deep layers. The outputs are
read with forward hooks on the decoder layers, so the last layer is its raw output, not the final-normed state
transformers returns as the last `hidden_states` entry.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .texts import default_texts, read_documents


def effective_dimension(states: torch.Tensor, eps: float = 0.8) -> int:
    """Smallest k with cumulative explained-variance ratio >= eps, for rows = samples (computed in float64)."""
    x = states.to(torch.float64)
    x = x - x.mean(dim=0, keepdim=True)
    # Singular values of the centred data: their squares are the PCA variances, without forming the covariance.
    s = torch.linalg.svdvals(x)
    var = s**2
    total = var.sum()
    if total <= 0:
        return 0
    ratio = torch.cumsum(var, 0) / total
    # A small tolerance so a ratio that equals eps exactly (up to rounding) counts as reaching it.
    return int(torch.searchsorted(ratio, torch.tensor(eps - 1e-12, dtype=torch.float64)).item()) + 1


def _decoder_layers(model):
    for getter in (lambda m: m.get_decoder().layers, lambda m: m.model.layers, lambda m: m.transformer.h):
        try:
            layers = getter(model)
        except AttributeError:
            continue
        if isinstance(layers, torch.nn.ModuleList) and len(layers):
            return layers
    raise ValueError(f"{type(model).__name__}: cannot find its decoder layers (looked for .model.layers and "
                     ".transformer.h)")


@torch.no_grad()
def layer_states(lm, documents: list[str], max_tokens_per_doc: int = 512, batch_size: int = 8) -> list[torch.Tensor]:
    """Per decoder layer, the float64 hidden states of every real (non-padding) token of the documents."""
    model, tokenizer = lm.model, lm.tokenizer
    device = next(model.parameters()).device
    layers = _decoder_layers(model)
    captured: list[torch.Tensor | None] = [None] * len(layers)

    def hook(index):
        def save(_module, _inputs, output):
            captured[index] = output[0] if isinstance(output, tuple) else output
        return save

    handles = [layer.register_forward_hook(hook(i)) for i, layer in enumerate(layers)]
    per_layer: list[list[torch.Tensor]] = [[] for _ in layers]
    try:
        ids = [tokenizer(d, add_special_tokens=False)["input_ids"][:max_tokens_per_doc] for d in documents]
        ids = [x for x in ids if x]
        for start in range(0, len(ids), batch_size):
            rows = ids[start: start + batch_size]
            width = max(len(r) for r in rows)
            batch = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, r in enumerate(rows):
                batch[i, : len(r)] = torch.tensor(r)
                mask[i, : len(r)] = 1
            model(input_ids=batch.to(device), attention_mask=mask.to(device), use_cache=False)
            keep = mask.bool().to(device)
            for i, out in enumerate(captured):
                per_layer[i].append(out[keep].to(torch.float64).cpu())
    finally:
        for h in handles:
            h.remove()
    return [torch.cat(chunks) for chunks in per_layer]


def run_diversity(lm, text_file: str | Path, eps: float = 0.8, limit: int | None = None,
                  max_tokens_per_doc: int = 512, batch_size: int = 8) -> dict:
    """d(eps) per layer of one model on the documents of `text_file`."""
    # Passages, not one document: d(eps) is taken over the first tokens of each paragraph of a .txt.
    docs = read_documents(text_file, txt_document="paragraph")
    docs = docs[:limit] if limit is not None else docs
    states = layer_states(lm, docs, max_tokens_per_doc, batch_size)
    dims = [effective_dimension(s, eps) for s in states]
    hidden = states[0].shape[1]
    return {"format": "diversity", "eps": eps, "text": str(text_file), "tokens": int(states[0].shape[0]),
            "hidden_size": hidden, "effective_dimension": dims, "relative": [d / hidden for d in dims],
            "columns": [f"layer {i + 1}" for i in range(len(dims))]}


def plot_diversity(results: dict[str, dict], out_png: str | Path) -> None:
    """Fig. 4-style plot: d(eps) against layer depth, one line per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 4))
    eps = None
    for name, res in results.items():
        dims = res["effective_dimension"]
        ax.plot(range(1, len(dims) + 1), dims, marker="o", label=name)
        eps = res["eps"]
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("layer")
    ax.set_ylabel(f"effective dimension d({eps})")
    ax.set_title("Feature diversity per layer")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)


def run_task(lm, data, args, chat: bool, task=None) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks diversity` (--diversity-text FILE): this module's entry in yunshan.eval.tasks. Its
    result is a curve per layer (plotted), not a headline number."""
    text = Path(args.diversity_text) if args.diversity_text else default_texts("diversity")[0]
    return run_diversity(lm, text, eps=args.eps, batch_size=args.batch_size, limit=args.limit), [text]


def headline(task, result: dict, data) -> list:
    return []
