"""Chinese-aware quality rules as datatrove blocks: boilerplate lines removed from inside documents, then documents
dropped by character-level rules (`yunshan data prepare`).

    BoilerplateLines()      # 上一篇/下一篇, page numbers, breadcrumbs and menus, copyright footers: the lines go
    ChineseQuality(QualityArgs())     # too short, repetitive, too little Chinese, too many symbols: the document goes

Line rules (BoilerplateLines; each removed line counted by kind, `lines_<kind>`, with examples):
- `navigation`: 上一篇/下一篇/上一条/下一条/上一页/下一页 lines, 返回顶部/返回首页/打印本页/关闭窗口/【打印】/
  【关闭】/分享到/扫一扫/字号：大 中 小, 当前位置：/您的位置： breadcrumbs, and short lines of three or more short items
  joined by >, », ›, |, ｜ (首页 > 新闻中心 > 正文, 首页 | 关于我们 | 联系我们);
- `page_number`: a line that is only a page number (第 3 页, 第3页 共10页, - 3 -, — 3 —, Page 3 of 10, 3/10);
- `copyright`: a short line (under 120 characters) with 版权所有, Copyright, ©, All Rights Reserved, ICP备/ICP证 or
  公网安备, or opening with 技术支持：, 主办单位：, 承办单位： or 网站维护： and a name (a law's "确定承办单位：" ending
  an article's sentence is content).
Blank lines left on both sides of a removed line collapse to one.

Document rules (ChineseQuality; the first that fails is the reason, datatrove's `dropped_<reason>`):
- `too_short`: fewer than `min_chars` characters that are not white space;
- `top_char_ngram`: the most frequent character `top_ngram`-gram (4 characters, about two Chinese words) covers more
  than `max_top_ngram_share` of the characters (Gopher's top word 2-gram rule, by characters);
- `dup_char_ngram`: characters inside character `dup_ngram`-grams (10 characters, about five words) that occur more
  than once cover more than `max_dup_ngram_share` (Gopher's duplicate word 5-10-gram rules, by characters);
- `dup_lines`: characters in lines that occur more than once cover more than `max_dup_line_share` (Gopher);
- `cjk_share`: Chinese documents (language zh, or every document without a language) whose CJK characters are less
  than `min_cjk_share` of the non-space characters (a page of English boilerplate or code passed as Chinese);
- `symbol_share`: punctuation and symbols (Unicode P* and S*) more than `max_symbol_share` of the non-space
  characters (tables of dashes, menus, mojibake).
The thresholds are tuned on the real laws corpus (benchmarks/prepare_quality.py): legal text repeats itself (the
median law has 27% of its characters in repeated 10-grams, the most repetitive 72%; Gopher's word rules would drop a
third of the corpus), so the defaults sit above the real laws' highest values (top 4-gram 0.21, repeated 10-grams
0.72, repeated lines 0.17, symbols 0.24, CJK share at least 0.56) and still drop repeated spam, menus, tables and
code, which score near 1.

Documents the language step labels with another language than Chinese also go through datatrove's own Gopher
quality and repetition filters (`OtherLanguageGopherQuality`, `OtherLanguageGopherRepetition`; words cut by
yunshan/prepare/dedup.py MixedScriptWords), and skip the CJK share rule.

Hand-written because datatrove's Gopher and C4 rules count words (a Chinese text has no spaces: its whole paragraph
is one "word"), and its line filters (C4's) drop lines by English cues (javascript, lorem ipsum, a terminal period);
none removes Chinese page furniture. Both are datatrove blocks (BaseFormatter-like step, BaseFilter), so the
pipeline counts them as it counts its own.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.utils.typeshelper import StatHints

from .args import QualityArgs
from .examples import Examples

_NAVIGATION = re.compile(
    r"^\s*(?:[【\[]?(?:上一篇|下一篇|上一条|下一条|上一页|下一页|上一章|下一章)[】\]]?\s*[:：]?.{0,60}"
    r"|.{0,20}(?:返回顶部|返回首页|返回列表|打印本页|关闭窗口|【打印】|【关闭】|【打印本页】|【关闭窗口】|分享到[:：]?|扫一扫).{0,30}"
    r"|字号[:：]?\s*[【\[]?\s*大\s*[】\]]?\s*[【\[]?\s*中\s*[】\]]?\s*[【\[]?\s*小.{0,20}"
    r"|(?:当前位置|您的位置|你的位置|您现在的位置)[:：].{0,80})\s*$")
_MENU_SEPARATORS = re.compile(r"\s*(?:>|»|›|＞|\||｜|→)\s*")
_PAGE_NUMBER = re.compile(
    r"^\s*(?:第\s*[0-9一二三四五六七八九十百]+\s*页(?:\s*[/，,]?\s*共\s*[0-9一二三四五六七八九十百]+\s*页)?"
    r"|共\s*[0-9]+\s*页\s*第\s*[0-9]+\s*页"
    r"|[-—–]\s*[0-9]+\s*[-—–]"
    r"|(?:page|Page|PAGE)\s*[0-9]+(?:\s*(?:of|/)\s*[0-9]+)?"
    r"|[0-9]+\s*/\s*[0-9]+)\s*$")
_COPYRIGHT = re.compile(r"版权所有|Copyright|COPYRIGHT|copyright|©|All Rights Reserved|all rights reserved|"
                        r"ICP备|ICP证|公网安备|^\s*(?:技术支持|主办单位|承办单位|网站维护)[:：]\s*\S")
LINE_KINDS = ("navigation", "page_number", "copyright")


def boilerplate_kind(line: str) -> str | None:
    """The kind of page furniture a line is (LINE_KINDS), or None for a line of content."""
    stripped = line.strip()
    if not stripped or len(stripped) > 200:
        return None
    if _PAGE_NUMBER.match(stripped):
        return "page_number"
    if _NAVIGATION.match(stripped):
        return "navigation"
    if len(stripped) < 120 and _COPYRIGHT.search(stripped):
        return "copyright"
    if len(stripped) <= 80:
        parts = [p for p in _MENU_SEPARATORS.split(stripped) if p]
        if len(parts) >= 3 and len(_MENU_SEPARATORS.findall(stripped)) >= 2 and all(len(p) <= 10 for p in parts):
            return "navigation"
    return None


def remove_boilerplate_lines(text: str) -> tuple[str, dict[str, list[str]]]:
    """`text` without its page-furniture lines, and the lines removed by kind."""
    removed: dict[str, list[str]] = {}
    kept: list[str] = []
    for line in text.split("\n"):
        kind = boilerplate_kind(line)
        if kind is None:
            if not line.strip() and kept and not kept[-1].strip():
                continue  # blank lines around a removed line collapse to one
            kept.append(line)
        else:
            removed.setdefault(kind, []).append(line)
    if not removed:
        return text, removed
    return "\n".join(kept).strip("\n"), removed


class BoilerplateLines(PipelineStep):
    """Removes page-furniture lines from inside documents (module docstring); counts lines and characters removed by
    kind (`lines_<kind>`, `chars_<kind>`) and documents changed."""

    type = "✂️ - FORMAT"
    name = "🧹 boilerplate lines (zh)"

    def __init__(self, examples: Examples | None = None):
        super().__init__()
        self.examples = examples

    def run(self, data, rank: int = 0, world_size: int = 1):
        for doc in data:
            self.stat_update(StatHints.total)
            with self.track_time():
                text, removed = remove_boilerplate_lines(doc.text)
            if removed:
                self.stat_update("documents_changed")
                for kind, lines in removed.items():
                    self.stat_update(f"lines_{kind}", value=len(lines))
                    self.stat_update(f"chars_{kind}", value=sum(len(line) + 1 for line in lines))
                    if self.examples is not None:
                        self.examples.add(f"lines_{kind}", doc, "\n".join(lines[:5]), rank)
                doc.text = text
            self.stat_update("chars_out", value=len(doc.text))
            yield doc
        if self.examples is not None:
            self.examples.close(rank)


_SPACE = re.compile(r"\s+")


def repetition_shares(text: str, top_n: int, dup_n: int) -> tuple[float, float]:
    """(share of characters covered by the most frequent character top_n-gram, share covered by dup_n-grams that
    occur more than once), both over the text with white space removed."""
    compact = _SPACE.sub("", text)
    codes = np.frombuffer(compact.encode("utf-32-le"), dtype=np.uint32)
    size = len(codes)
    top = dup = 0.0
    if size >= top_n:
        hashes = _window_hashes(codes, top_n)
        _, counts = np.unique(hashes, return_counts=True)
        top = min(1.0, float(counts.max()) * top_n / size) if counts.max() > 1 else 0.0
    if size >= dup_n:
        hashes = _window_hashes(codes, dup_n)
        order = np.argsort(hashes, kind="stable")
        sorted_h = hashes[order]
        same = np.zeros(len(hashes), dtype=bool)
        equal = sorted_h[1:] == sorted_h[:-1]
        same[order[1:][equal]] = True
        same[order[:-1][equal]] = True
        covered = np.zeros(size + 1, dtype=np.int64)
        starts = np.flatnonzero(same)
        np.add.at(covered, starts, 1)
        np.add.at(covered, starts + dup_n, -1)
        dup = float((np.cumsum(covered)[:size] > 0).sum()) / size
    return top, dup


def _window_hashes(codes: np.ndarray, n: int) -> np.ndarray:
    """A 64-bit hash (FNV-1a over code points) of every window of n code points, in n vectorised passes."""
    count = len(codes) - n + 1
    h = np.full(count, np.uint64(0xCBF29CE484222325), dtype=np.uint64)
    prime = np.uint64(0x100000001B3)
    for k in range(n):
        h = (h ^ codes[k:k + count].astype(np.uint64)) * prime
    return h


def dup_line_share(text: str) -> float:
    """Share of characters (white space removed) in lines that occur more than once."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    total = sum(len(line) for line in lines)
    if not total:
        return 0.0
    seen: dict[str, int] = {}
    for line in lines:
        seen[line] = seen.get(line, 0) + 1
    return sum(len(line) * n for line, n in seen.items() if n > 1) / total


_TABLES: dict[str, np.ndarray] = {}


def _table(kind: str) -> np.ndarray:
    """A bool per code point: punctuation or symbol (Unicode P*, S*) or CJK; built once per process (a second)."""
    if kind not in _TABLES:
        if kind == "symbol":
            _TABLES[kind] = np.array([unicodedata.category(chr(c))[0] in "PS" for c in range(0x110000)])
        else:
            table = np.zeros(0x110000, dtype=bool)
            for lo, hi in ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x323AF)):
                table[lo:hi + 1] = True
            _TABLES[kind] = table
    return _TABLES[kind]


def symbol_share(compact: str) -> float:
    if not compact:
        return 0.0
    codes = np.frombuffer(compact.encode("utf-32-le"), dtype=np.uint32)
    return float(_table("symbol")[codes].sum()) / len(codes)


def cjk_share(compact: str) -> float:
    if not compact:
        return 0.0
    codes = np.frombuffer(compact.encode("utf-32-le"), dtype=np.uint32)
    return float(_table("cjk")[codes].sum()) / len(codes)


def quality_reason(text: str, args: QualityArgs, chinese: bool = True) -> str | None:
    """The first document rule `text` fails (module docstring), or None."""
    compact = _SPACE.sub("", text)
    if len(compact) < args.min_chars:
        return "too_short"
    top, dup = repetition_shares(text, args.top_ngram, args.dup_ngram)
    if top > args.max_top_ngram_share:
        return "top_char_ngram"
    if dup > args.max_dup_ngram_share:
        return "dup_char_ngram"
    if dup_line_share(text) > args.max_dup_line_share:
        return "dup_lines"
    if chinese and args.min_cjk_share > 0 and cjk_share(compact) < args.min_cjk_share:
        return "cjk_share"
    if symbol_share(compact) > args.max_symbol_share:
        return "symbol_share"
    return None


def _gopher_classes():
    from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter

    return GopherQualityFilter, GopherRepetitionFilter


class OtherLanguageGopherQuality(_gopher_classes()[0]):
    """datatrove's GopherQualityFilter with its defaults, for documents the language step labelled with a language
    other than Chinese (Chinese documents pass untouched: its word rules do not fit them); words are cut by
    MixedScriptWords (datatrove's English tokenizer needs spaCy, not installed with datatrove[processing])."""

    name = "🥇 Gopher quality (not zh)"

    def __init__(self, exclusion_writer=None):
        from .dedup import MixedScriptWords

        super().__init__(exclusion_writer=exclusion_writer, language=MixedScriptWords())

    def filter(self, doc):
        return True if doc.metadata.get("language") in (None, "zh") else super().filter(doc)


class OtherLanguageGopherRepetition(_gopher_classes()[1]):
    """datatrove's GopherRepetitionFilter with its defaults, for documents labelled another language than Chinese."""

    name = "🔁 Gopher repetition (not zh)"

    def __init__(self, exclusion_writer=None):
        from .dedup import MixedScriptWords

        super().__init__(exclusion_writer=exclusion_writer, language=MixedScriptWords())

    def filter(self, doc):
        return True if doc.metadata.get("language") in (None, "zh") else super().filter(doc)


class ChineseQuality(BaseFilter):
    """Drops documents by the character-level rules (module docstring); a document labelled with another language
    than Chinese by the language step skips the CJK share rule."""

    name = "🀄 quality (zh)"

    def __init__(self, args: QualityArgs, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.args = args

    def filter(self, doc) -> bool | tuple[bool, str]:
        language = doc.metadata.get("language")
        reason = quality_reason(doc.text, self.args, chinese=language in (None, "zh"))
        return True if reason is None else (False, reason)
