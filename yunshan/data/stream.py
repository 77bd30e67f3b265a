"""The packed, mixed stream as a torch IterableDataset for transformers' Trainer, with exact resume.

The Trainer (through accelerate) reads batches ahead of the step it trains on, so "where the stream is" is not
"what has been trained on". The dataset therefore records the mixer state *before* every sequence it yields (a
small dict), keeps the recent ones, and answers `state_before(n)`: the state from which sequence n (the first
one not yet trained on at a checkpoint) is produced. Resuming restores that state, so the run continues with
exactly the sequences an uninterrupted run would have seen.

With several processes accelerate lets one process read the stream and hands each process its slice of every
global batch (dispatch); the slices are disjoint and together they are what a single process would train on.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch

from .mixing import TokenBudgetMixer

STATE_FILE = "data_state.json"


class PackedStreamDataset(torch.utils.data.IterableDataset):
    """Yields {"input_ids", "labels"[, "position_ids"]} tensors of length seq_len from a TokenBudgetMixer."""

    def __init__(self, mixer: TokenBudgetMixer, document_mask: bool, keep_states: int = 4096):
        super().__init__()
        self.mixer = mixer
        self.document_mask = document_mask
        self.keep_states = keep_states
        self.states: OrderedDict[int, dict] = OrderedDict()
        self.yielded = 0  # sequences produced so far (== mixer.sequence)

    def __iter__(self):
        for _ in range(1 << 62):
            self._remember(self.mixer.sequence, self.mixer.state())
            try:
                seq = self.mixer.next_sequence()
            except StopIteration:
                return
            self.yielded = self.mixer.sequence
            item = {
                "input_ids": torch.tensor(seq.input_ids, dtype=torch.long),
                "labels": torch.tensor(seq.labels, dtype=torch.long),
            }
            if self.document_mask:
                item["position_ids"] = torch.tensor(seq.position_ids, dtype=torch.long)
            yield item

    def _remember(self, index: int, state: dict) -> None:
        self.states[index] = copy.deepcopy(state)
        while len(self.states) > self.keep_states:
            self.states.popitem(last=False)

    def state_before(self, sequence: int) -> dict:
        """The mixer state from which `sequence` is produced (it must be recent)."""
        if sequence == self.mixer.sequence and sequence not in self.states:
            return copy.deepcopy(self.mixer.state())
        if sequence not in self.states:
            known = f"{min(self.states)}..{max(self.states)}" if self.states else "none"
            raise RuntimeError(f"no data state recorded for sequence {sequence} (recorded: {known})")
        return copy.deepcopy(self.states[sequence])

    def save_state(self, folder: str | Path, sequence: int) -> None:
        """Write the state for resuming at `sequence` (and each source's dedup hashes) into `folder`."""
        folder = Path(folder)
        state = self.state_before(sequence)
        for stream in self.mixer.streams:
            if stream.dedup:
                np.save(folder / f"dedup_{stream.name}.npy", stream.dedup_hashes(state["sources"][stream.name]))
        (folder / STATE_FILE).write_text(json.dumps(state, indent=1, ensure_ascii=False))

    def load_state(self, folder: str | Path) -> dict:
        folder = Path(folder)
        path = folder / STATE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{folder}: no {STATE_FILE}; this checkpoint was not written by yunshan cpt")
        state = json.loads(path.read_text())
        hashes = {}
        for stream in self.mixer.streams:
            if stream.dedup and (folder / f"dedup_{stream.name}.npy").exists():
                hashes[stream.name] = np.load(folder / f"dedup_{stream.name}.npy")
        self.mixer.restore(state, hashes)
        self.states.clear()
        self.yielded = self.mixer.sequence
        return state
