"""Progress of the long phases: a tqdm bar on stderr, with a count and an ETA, for every loop of work that can take
more than a few seconds, printed by the main process only.

    from yunshan.io.progress import progress_bar
    with progress_bar(len(windows), "held-out bits/char civil_code", unit="window") as bar:
        for batch in batches:
            ...
            bar.update(len(batch))

No phase of a run is silent for minutes (issue 47): the held-out cost of a vocabulary extension, each round of the
output-row fit and the token distillation, the forgetting monitor's measurements, evaluation item by item, the GGUF
export tensor by tensor and the merge (mergekit's own bars) each show what they are doing and how far they are. The
bars count units of work (windows, sequences, questions, prompts, tensors), never whole batches, so a bar that says
"0/1" for minutes does not happen; a bar appears the moment its phase starts and goes when it ends (`leave=False`),
leaving the phase's own one-line result. Training steps have transformers' Trainer bar.

On and off: commands that have a switch pass it (`yunshan eval --no-progress`, eval's `progress`); under
`accelerate launch` only RANK 0 shows bars (the others would print the same bar N times); and tqdm's own
environment variable `TQDM_DISABLE=1` turns every bar off, this module's, the Trainer's and the libraries', for logs
that want none.
"""

from __future__ import annotations

import os
import time


def main_process() -> bool:
    """Whether this process prints progress: RANK 0 of an `accelerate launch` / torchrun, or a single process."""
    return int(os.environ.get("RANK", "0")) == 0


def progress_bar(total: int | None, desc: str, unit: str = "it", enabled: bool = True):
    """A tqdm bar on stderr for `total` units of work (None: a count without total), shown when `enabled` and on the
    main process; `leave=False`: it is erased when closed (use it as a context manager, or close it)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False, disable=not (enabled and main_process()))


class TokenCount:
    """A stopping criterion of generate() that never stops: it shows the tokens generated so far on `bar`
    ("token 12/48"), at most once a second, so a bar whose prompts finish together (a batch, or one long answer)
    moves while they are being answered."""

    def __init__(self, bar, max_new_tokens: int):
        self.bar, self.max_new_tokens, self.tokens, self.shown = bar, max_new_tokens, 0, 0.0

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        self.tokens += 1
        now = time.monotonic()
        if now - self.shown >= 1.0:
            self.shown = now
            self.bar.set_postfix_str(f"token {self.tokens}/{self.max_new_tokens}")
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
