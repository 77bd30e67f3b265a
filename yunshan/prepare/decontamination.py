"""Decontamination against the evaluation sets as a datatrove filter: yunshan's n-gram decontamination
(yunshan/data/decontamination.py, eval/decontamination.py) wrapped as a block (`yunshan data prepare`).

    EvalDecontamination(DecontaminationArgs(tasks=["lawbench=data/LawBench/data/zero_shot"]))

The evaluation sets are read by yunshan eval's own readers (eval_sets: benchmark layouts, your own sets, held-out
texts), indexed once per task (NgramIndex: windows of 13 words or 25 CJK characters after NFKC and case folding),
and the documents go through the same Scan as `yunshan data decontaminate`, a batch at a time: a document is dropped
(`contaminated`) when it alone holds at least `record_share` of an evaluation item, the same rule that puts a
record on `contaminated.jsonl`. Windows in `boilerplate_eval` or more distinct evaluation texts are boilerplate and
never count. What the block cannot do is the corpus-wide `boilerplate_train` rule (a window found in 10 or more
training records is boilerplate), which needs every document read before the first one is judged; a pipeline that
wants it runs `yunshan data decontaminate` on the prepared corpus, and its `decontamination:` stage does exactly
that before training. The items each dropped document covered are kept in its example (the report).

Hand-written only as the wrapper: the method, the index and the scan are the existing ones; datatrove's
NGramsDecontFilter cuts whitespace words of lighteval tasks (docs/decontamination.md says why that misses Chinese).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile

from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.utils.typeshelper import StatHints

from .args import DecontaminationArgs

def build_index(args: DecontaminationArgs):
    """The n-gram index of every evaluation set the arguments name, and the sets (name, path, items)."""
    from yunshan.data.decontamination import NgramIndex
    from yunshan.eval.decontamination import eval_sets

    sets, _ = eval_sets(args.decontaminate_args())
    items = [item for _, _, set_items in sets for item in set_items]
    return NgramIndex.build(items, args.n, args.cjk_n), sets


class EvalDecontamination(BaseFilter):
    """Drops documents holding `record_share` of an evaluation item (module docstring); reason `contaminated`."""

    name = "🧪 decontamination (yunshan n-grams)"

    def __init__(self, args: DecontaminationArgs, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.args = args
        self._index = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_index"] = None  # built in the task's process, never pickled
        return state

    def run(self, data, rank: int = 0, world_size: int = 1):
        if self._index is None:
            self._index = build_index(self.args)[0]
            self.stat_update("evaluation_items", value=len(self._index.items))
        with self.exclusion_writer if self.exclusion_writer else contextlib.nullcontext():
            batch, size = [], 0
            for doc in data:
                batch.append(doc)
                size += len(doc.text)
                if size >= self.args.batch_chars:
                    yield from self._judge(batch, rank)
                    batch, size = [], 0
            if batch:
                yield from self._judge(batch, rank)

    def filter(self, doc):  # datatrove's interface: one document is a batch of one
        return self._verdicts([doc])[0]

    def _verdicts(self, docs) -> list:
        from yunshan.data.decontamination import Scan, Text

        held: dict[int, list] = {}
        workdir = tempfile.mkdtemp(prefix="yunshan-decont-")
        try:
            scan = Scan(self._index, workdir, boilerplate_train=0, boilerplate_eval=self.args.boilerplate_eval)
            texts = (Text(doc.id, [doc.text], i) for i, doc in enumerate(docs))
            for _ in scan.read(texts, describe=lambda t: {"doc": t.tag}):
                pass

            def on_record(described, pairs):
                share = [p for p in pairs if p.share >= self.args.record_share]
                if share:
                    held[described["doc"]] = share

            scan.resolve(on_record)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        verdicts = []
        for i, doc in enumerate(docs):
            if i in held:
                doc.metadata["contaminated"] = [
                    {"eval": self._index.items[p.item].location, "share": round(p.share, 3)} for p in held[i][:5]]
                verdicts.append((False, "contaminated"))
            else:
                verdicts.append(True)
        return verdicts

    def _judge(self, batch, rank):
        with self.track_time():
            verdicts = self._verdicts(batch)
        for doc, verdict in zip(batch, verdicts):
            self.stat_update(StatHints.total)
            if verdict is True:
                self.stat_update(StatHints.forwarded)
                self.update_doc_stats(doc)
                yield doc
            else:
                self.stat_update(StatHints.dropped, "dropped_contaminated")
                if self.exclusion_writer:
                    doc.metadata["filter_reason"] = "contaminated"
                    self.exclusion_writer.write(doc, rank)
