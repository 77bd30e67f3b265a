"""ChERRANT at character level, reimplemented: the scorer LawBench runs for task 2-1 (document proofreading).

    from yunshan.eval.cherrant import CharAnnotator, corpus_f05
    annotator = CharAnnotator()                       # ChERRANT's alignment costs, merging and edit labels
    hyp = [annotator.annotate(src, pred) for src, pred in zip(sources, predictions)]
    ref = [annotator.annotate(src, gold) for src, gold in zip(sources, references)]
    f05 = corpus_f05(hyp, ref).f05                    # compare_m2_for_evaluation.py's score, rounded to 4 places

A reimplementation of open-compass/LawBench at commit e30981b, `evaluation/utils/`: the files LawBench's
`evaluation_functions/wsjd.py` runs for every model, `parallel_to_m2.py -g char` (with `modules/tokenizer.py`'s
`split_char`, `modules/alignment.py`, `modules/merger.py`, the character branch of `modules/classifier.py` and
`modules/annotator.py`), then `compare_m2_for_evaluation.py` with its defaults (span-based correction, beta 0.5).
LawBench's copy is ChERRANT (HillZhang1999/MuCGEC) with LawBench's timeout handling added.

Written by hand because ChERRANT is no library: it is a set of scripts that exchange M2 files through the file
system and subprocesses, imports LTP and torch at module level even on the character path, and waits up to 10 s
of wall-clock time per sentence. The algorithm is kept step for step, quirks included (each one changes scores):

- sentences lose all whitespace; the corrected side (prediction or reference, never the source) is converted from
  traditional to simplified Chinese with OpenCC's `t2s`; a token is one character (`[缺失成分]` is one token);
- alignment is ERRANT's dynamic programme with ChERRANT's character costs: insert and delete 1, a substitution
  `semantic/6 + spelling + punctuation` (semantic: the Cilin classes of the two characters, 4 when either is not
  in Cilin, else 0 / 2 / 4 / 6 by the number of differing class levels; spelling: 0.5 unless both are CJK
  ideographs sharing a pinyin reading (pypinyin, heteronyms) or confusable in ChERRANT's confusion set; 0.25 when
  neither is punctuation, 0 when both are, 0.499 when one is), transpositions of up to the run of non-free cells;
  equal characters always match; ties keep every cheapest operation in the order T, S, I, D;
- every cheapest alignment is enumerated (only the first when the lengths differ by more than 10), each is merged
  into edits by ChERRANT's rules (runs of deletions, of insertions, of substitutions and mixed runs merged;
  S-M-S, D-M-I and I-M-D word-order patterns become transpositions; common heads and tails trimmed), and each
  distinct edit list is kept;
- the M2 comparison puts the edits of all kept lists of a sentence under one annotator, so an edit found in two
  lists counts twice (in TP, FP and FN alike); a sentence without edits is a noop; corpus TP/FP/FN give precision,
  recall and F0.5, each rounded to 4 places, which is the number LawBench reports;
- LawBench's timeout: a sentence that ChERRANT cannot annotate within 10 s (or that raises, as a target that is
  empty once whitespace is removed does) is annotated again with the target "无". Time is not reproducible, so
  yunshan counts the cheapest alignments instead and treats more than `MAX_ALIGNMENTS` as a timeout.

Three things are only faster than ChERRANT, never different (tests/eval/test_cherrant.py compares each with
ChERRANT's plain programme; LawBench's published 2-1 predictions of three models, 2,500 annotations, came out
edit for edit as before, at a fifth of the time):

- the transposition search finds ChERRANT's first matching window in one look-up per cell (prefix sums of random
  token codes along each diagonal, the match then compared sorted as ChERRANT compares it);
- the programme runs first on a band of diagonals around the alignment, with an upper and a lower bound per cell,
  and is accepted only where the bounds prove every cell a cheapest alignment reaches (else widened, at worst
  whole: `Aligner.band_operations`);
- the distinct edit lists are collected run by run (`merged_edit_lists`) instead of merging each of up to
  50,000 alignments one by one.

The substitution costs need ChERRANT's two data files, `cilin.txt` (the extended Tongyici Cilin, GBK) and
`confusion_dict.txt`. yunshan ships what a character-level alignment can look up in them (`cherrant_data/`, built
by `write_char_resources` from LawBench e30981b, Apache-2.0; every cost the same); a LawBench checkout that holds
the task or predictions folder (`evaluation/utils/data/`) or $YUNSHAN_CHERRANT_DATA is read instead when present
(`find_resource_dir`, `load_resources`). The result records which folder scored it (`cherrant_resources`).
Without any (`load_resources(None)`) every character counts as outside Cilin and nothing as confusable, and
scores move (GPT-4's published 2-1: 12.53 with the files, 12.75 without).
"""

from __future__ import annotations

import gzip
import os
import random
import string
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import groupby
from pathlib import Path

# ChERRANT's two punctuation lists, kept as its two files write them (alignment.py and merger.py differ).
_ALIGN_PUNCT = ("！？｡＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘'‛“”„‟…‧﹏"
                + string.punctuation)
_MERGE_PUNCT = string.punctuation + ("！？｡＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙"
                                     "〚〛〜〝〞〟–—‘'‛“”„‟…‧.")
MISSING = "[缺失成分]"  # ChERRANT's "missing constituent" marker: one token
NOOP, NOT_ANNOTATABLE = "没有错误", "无法标注"  # targets that mean "no edit" and "cannot be annotated"
TIMEOUT_TARGET = "无"  # what LawBench puts in place of a target ChERRANT timed out on
# ChERRANT's 10 s per sentence, as a count of cheapest alignments: on LawBench's published 2-1 predictions of
# chatglm2-6b-hf (whose rewrites reach 10^12 alignments) results.csv's 1.84 lies between the thresholds 50,000 (1.85)
# and 100,000 (1.82); ChERRANT itself took 4.6 CPU s for 57,600 alignments of 110 characters and 13.9 s for 76,800
# of 155 here. The other models' sentences stay far below.
MAX_ALIGNMENTS = 50_000
BAND_START = 2  # diagonals each side of the alignment band tried first (Aligner.operations)


# ------------------------------------------------------------------------------------------------ resources
@dataclass
class Resources:
    """ChERRANT's substitution-cost resources: Cilin class of a word, and the confusion set of a character."""

    semantic: dict[str, str] = field(default_factory=dict)  # word -> Cilin code ("Aa01A01=")
    confusion: dict[str, list[str]] = field(default_factory=dict)  # character -> its confusable characters
    source: str = ""  # where they were read from (recorded with a score)


def read_cilin_lines(lines) -> dict[str, str]:
    """Word -> Cilin code from lines `CODE word word ...`; a word listed twice keeps its last code (as ChERRANT)."""
    semantic = {}
    for line in lines:
        code, *words = line.split(" ")
        for word in words:
            semantic[word] = code
    return semantic


def read_confusion_lines(lines) -> dict[str, list[str]]:
    """Character -> confusable characters from lines `char c1 c2 ...` (ChERRANT's confusion_dict.txt)."""
    confusion = {}
    for line in lines:
        first, *rest = line.rstrip("\n").split(" ")
        confusion[first] = rest
    return confusion


# ------------------------------------------------------------------------------------------------ tokens and costs
@lru_cache(maxsize=65536)
def _pinyin(token: str) -> tuple[str, ...]:
    from pypinyin import Style, pinyin

    return tuple(pinyin(token, style=Style.NORMAL, heteronym=True)[0])


def char_tokens(text: str) -> list[str]:
    """ChERRANT's split_char: one token per character, `[缺失成分]` kept whole."""
    return " ".join(text).replace(" ".join(MISSING), MISSING).split(" ")


def _all_chinese(word: str) -> bool:
    return all("\u4e00" <= ch <= "\u9fff" for ch in word)


class Aligner:
    """ChERRANT's character-level alignment (alignment.py with granularity "char")."""

    def __init__(self, resources: Resources):
        self.semantic = resources.semantic
        self.confusion = resources.confusion
        self._sub: dict[tuple[str, str], float] = {}
        self._sub_rows: dict[str, dict[str, float]] = {}  # source token -> target token -> substitution cost
        self._feature_cache: dict[str, tuple] = {}

    def _semantic_class(self, word):
        code = self.semantic.get(word)
        return None if code is None else (code[0], code[1], code[2:4])

    def _semantic_cost(self, a, b):
        a_class, b_class = self._semantic_class(a), self._semantic_class(b)
        if a_class is None or b_class is None:
            return 4
        if a_class == b_class:
            return 0
        return 2 * (3 - sum(x == y for x, y in zip(a_class, b_class)))

    def _spell_cost(self, a, b, pinyin_a, pinyin_b):
        count = 0
        shared_reading = set(pinyin_a) & set(pinyin_b)
        for ca in a:
            for cb in b:
                if (ca == cb or shared_reading or (cb in self.confusion and ca in self.confusion[cb])
                        or (ca in self.confusion and cb in self.confusion[ca])):
                    count += 1
                    break
        return (len(a) - count) / (len(a) * 2)

    def _char_cost(self, a, b):
        if not (_all_chinese(a) and _all_chinese(b)):
            return 0.5
        pinyin_a, pinyin_b = _pinyin(a), _pinyin(b)
        if len(a) > len(b):
            a, b, pinyin_a, pinyin_b = b, a, pinyin_b, pinyin_a
        return 0 if a == b else self._spell_cost(a, b, pinyin_a, pinyin_b)

    def _features(self, tok: str):
        """What a one-character token's substitution costs depend on: Cilin class, alignment punctuation,
        CJK ideograph, readings, confusable characters (None for a longer token: `_general_sub_cost`)."""
        found = self._feature_cache.get(tok)
        if found is None and len(tok) == 1:
            cjk = _all_chinese(tok)
            found = self._feature_cache[tok] = (
                self._semantic_class(tok), tok in _ALIGN_PUNCT, cjk,
                frozenset(_pinyin(tok)) if cjk else frozenset(), frozenset(self.confusion.get(tok, ())))
        return found

    def sub_cost(self, a: str, b: str) -> float:
        """ChERRANT's substitution cost of token a by token b (get_sub_cost, character level)."""
        if a == b:
            return 0
        fa, fb = self._features(a), self._features(b)
        if fa is None or fb is None:
            return self._general_sub_cost(a, b)
        class_a, punct_a, cjk_a, readings_a, confusable_a = fa
        class_b, punct_b, cjk_b, readings_b, confusable_b = fb
        if class_a is None or class_b is None:
            semantic = 4
        elif class_a == class_b:
            semantic = 0
        else:
            semantic = 2 * (3 - sum(x == y for x, y in zip(class_a, class_b)))
        pos_cost = 0.0 if punct_a and punct_b else 0.25 if not punct_a and not punct_b else 0.499
        if not (cjk_a and cjk_b):
            char_cost = 0.5
        else:  # _spell_cost of two characters: one shared reading or one confusion suffices
            char_cost = 0.0 if (readings_a & readings_b or a in confusable_b or b in confusable_a) else 0.5
        return semantic / 6.0 + char_cost + pos_cost

    def _general_sub_cost(self, a: str, b: str) -> float:
        """ChERRANT's get_sub_cost written as ChERRANT writes it, for any tokens (here: `[缺失成分]`)."""
        if a == b:
            return 0
        key = (a, b)
        cost = self._sub.get(key)
        if cost is None:
            semantic_cost = self._semantic_cost(a, b) / 6.0
            # `in` on a string, as ChERRANT tests it (a substring test for multi-character tokens)
            if a in _ALIGN_PUNCT and b in _ALIGN_PUNCT:
                pos_cost = 0.0
            elif a not in _ALIGN_PUNCT and b not in _ALIGN_PUNCT:
                pos_cost = 0.25
            else:
                pos_cost = 0.499
            # the same sum in the same order as ChERRANT: float ties decide which alignments are cheapest
            cost = semantic_cost + self._char_cost(a, b) + pos_cost
            self._sub[key] = cost
        return cost

    def operations(self, src: list[str], tgt: list[str], first_only: bool = False) -> list[list]:
        """The operation matrix: every cheapest last operation ("M", "S", "I", "D", "Tk") of each cell that a
        cheapest alignment passes through (other cells may hold None); what `full_operations` gives there.

        Tried first on a band of diagonals around the two sentences' alignment (`band_operations`, certified
        exact or refused), widened at each refusal, and computed whole once the band would cover it."""
        n, m = len(src), len(tgt)
        width = BAND_START
        while min(0, m - n) - width > -n or max(0, m - n) + width < m:
            oper, total = self.band_operations(src, tgt, width, first_only)
            if oper is not None:
                return oper
            # the band's cost of the whole alignment bounds ChERRANT's from above; a band proves the cells of
            # an alignment costing C only when leaving it costs more than C, so it needs about C diagonals
            width = max(4 * width, int(min(total, n + m)) + 2)
        return self.full_operations(src, tgt)

    def full_operations(self, src: list[str], tgt: list[str]) -> list[list]:
        """The whole operation matrix: every cheapest last operation of each cell.

        ChERRANT's dynamic programme cell for cell (same costs, same float sums, same tie order T, S, I, D). Its
        transposition search is only faster, not changed: ChERRANT walks back along the cell's diagonal while
        each diagonal step changes the cost, and takes the first k whose windows src[i-k..i] and tgt[j-k..j] hold
        the same tokens (sorted lists compared). Two windows ending at the same cell hold the same multiset
        exactly when the difference of the two sentences' prefix multisets is the same at both window starts; so
        each diagonal keeps the last position at which each prefix difference (a sum of random 61-bit token
        codes) was seen, and the last position of a free diagonal step. The nearest earlier position with the same
        difference is ChERRANT's k when no free step lies between; its windows are compared sorted, as
        ChERRANT compares them, and on a (astronomically unlikely) code collision ChERRANT's walk itself runs."""
        n, m = len(src), len(tgt)
        cost = [[0.0] * (m + 1) for _ in range(n + 1)]
        oper: list[list] = [[None] * (m + 1) for _ in range(n + 1)]
        for i in range(1, n + 1):
            cost[i][0] = cost[i - 1][0] + 1
            oper[i][0] = _D
        for j in range(1, m + 1):
            cost[0][j] = cost[0][j - 1] + 1
            oper[0][j] = _I
        inf = float("inf")
        h_src, h_tgt = _prefix_codes(src, tgt)
        # per diagonal d = j - i (index d + n): prefix difference -> last position i seen, last free step's i
        seen: list[dict] = [{} for _ in range(n + m + 1)]
        last_free = [-1] * (n + m + 1)
        rows = self._sub_rows
        for i in range(n):
            row, nxt, ops_row = cost[i], cost[i + 1], oper[i + 1]
            s = src[i]
            subs = rows.get(s)
            if subs is None:
                subs = rows[s] = {}
            hs_back, hs_here = h_src[i - 1] if i else 0, h_src[i + 1]
            for j in range(m):
                t = tgt[j]
                dd = j - i + n
                if i >= 1 and j >= 1:  # position i-1 of this diagonal becomes a possible window start
                    seen[dd][hs_back - h_tgt[j - 1]] = i - 1
                if s == t:
                    nxt[j + 1] = row[j]
                    ops_row[j + 1] = _M
                    last_free[dd] = i + 1
                    continue
                sub = subs.get(t)
                if sub is None:
                    sub = subs[t] = self.sub_cost(s, t)
                del_cost = row[j + 1] + 1
                ins_cost = nxt[j] + 1
                sub_cost = row[j] + sub
                trans_cost = inf
                k = 1
                start = seen[dd].get(hs_here - h_tgt[j + 1])
                if start is not None and last_free[dd] <= start:
                    k = i - start
                    if sorted(src[start: i + 1]) == sorted(tgt[start + j - i: j + 1]):
                        trans_cost = cost[start][start + j - i] + k
                    else:  # two different windows with the same code sum
                        trans_cost, k = self._transposition(src, tgt, cost, i, j)
                best = trans_cost
                if sub_cost < best:
                    best = sub_cost
                if ins_cost < best:
                    best = ins_cost
                if del_cost < best:
                    best = del_cost
                nxt[j + 1] = best
                if best == row[j]:
                    last_free[dd] = i + 1
                if trans_cost == best:
                    ops = [f"T{k + 1}"]
                    if sub_cost == best:
                        ops.append("S")
                    if ins_cost == best:
                        ops.append("I")
                    if del_cost == best:
                        ops.append("D")
                    ops_row[j + 1] = tuple(ops)
                else:
                    ops_row[j + 1] = _TIES[(sub_cost == best, ins_cost == best, del_cost == best)]
        return oper

    @staticmethod
    def _transposition(src, tgt, cost, i, j) -> tuple[float, int]:
        """ChERRANT's transposition search for cell (i+1, j+1), as it writes it: (cost, k), cost inf if none."""
        k = 1
        while i - k >= 0 and j - k >= 0 and cost[i - k + 1][j - k + 1] != cost[i - k][j - k]:
            if sorted(src[i - k: i + 1]) == sorted(tgt[j - k: j + 1]):
                return cost[i - k][j - k] + k, k
            k += 1
        return float("inf"), k


    def band_operations(self, src: list[str], tgt: list[str], width: int, first_only: bool = False):
        """ChERRANT's operations on the cells a cheapest alignment passes through, computed on a band of diagonals
        only (offsets j - i from min(0, m - n) - width to max(0, m - n) + width), or None when the band cannot
        prove them equal to the whole programme's; with the band's upper bound of the whole alignment's cost.

        Each band cell carries an upper and a lower bound of ChERRANT's float value, each summed in ChERRANT's
        order (float addition is monotone, so the bounds hold exactly). Upper: a cell outside the band is
        unreachable, and a transposition is left out unless every diagonal step ChERRANT's search reads is
        proven. Lower: a cell outside the band costs at least its distance |j - i| from the main diagonal (I and
        D steps cost 1), and a transposition whose search reads an unproven step costs at least its window's
        start cell's lower bound plus its length (the search finds that window or stops earlier, without one).
        Where the bounds meet the value is proven; a cell's operations are proven when its value is and every
        candidate (T, S, I, D) is proven equal to it (its upper bound is) or above it (its lower bound is). The
        band is accepted when every cell the alignments reach from the end (following the first operation only
        when `first_only`) holds proven operations: those cells and operations, so every alignment, are then
        exactly ChERRANT's. Near-identical sentences (LawBench 2-1's references and most predictions) need a few
        diagonals instead of all. The transposition search is `full_operations`'."""
        n, m = len(src), len(tgt)
        lo, hi = min(0, m - n) - width, max(0, m - n) + width
        inf = float("inf")
        ub = [[inf] * (m + 1) for _ in range(n + 1)]
        lb = [[0.0] * (m + 1) for _ in range(n + 1)]  # 0 bounds every cell; band edges get |j - i| below
        oper: list[list] = [[None] * (m + 1) for _ in range(n + 1)]
        for i in range(0, min(n, -lo) + 1):
            ub[i][0] = lb[i][0] = float(i)
            oper[i][0] = _D
        for j in range(1, min(m, hi) + 1):
            ub[0][j] = lb[0][j] = float(j)
            oper[0][j] = _I
        oper[0][0] = None
        for i in range(n + 1):  # the cells just outside the band that band cells read
            for j in (i + lo - 1, i + hi + 1):
                if 0 <= j <= m:
                    lb[i][j] = float(abs(j - i))
        h_src, h_tgt = _prefix_codes(src, tgt)
        # per diagonal (index j - i - lo): prefix difference -> last position; last proven free step; last
        # unproven step (a step is the pair of a cell and its diagonal predecessor, at the cell's row)
        seen: list[dict] = [{} for _ in range(hi - lo + 1)]
        last_free = [-1] * (hi - lo + 1)
        last_open = [-1] * (hi - lo + 1)
        rows = self._sub_rows
        for i in range(n):
            ub_row, lb_row, ub_nxt, lb_nxt, ops_row = ub[i], lb[i], ub[i + 1], lb[i + 1], oper[i + 1]
            s = src[i]
            subs = rows.get(s)
            if subs is None:
                subs = rows[s] = {}
            hs_back, hs_here = h_src[i - 1] if i else 0, h_src[i + 1]
            for j in range(max(0, i + lo), min(m, i + 1 + hi)):
                t = tgt[j]
                dd = j - i - lo
                if i >= 1 and j >= 1:
                    seen[dd][hs_back - h_tgt[j - 1]] = i - 1
                diag_ub, diag_lb = ub_row[j], lb_row[j]
                if s == t:
                    ub_nxt[j + 1], lb_nxt[j + 1] = diag_ub, diag_lb
                    ops_row[j + 1] = _M
                    if diag_ub == diag_lb:
                        last_free[dd] = i + 1
                    else:
                        last_open[dd] = i + 1
                    continue
                sub = subs.get(t)
                if sub is None:
                    sub = subs[t] = self.sub_cost(s, t)
                ub_s, lb_s = diag_ub + sub, diag_lb + sub
                ub_i, lb_i = ub_nxt[j] + 1, lb_nxt[j] + 1
                ub_d, lb_d = ub_row[j + 1] + 1, lb_row[j + 1] + 1
                ub_t = lb_t = inf
                k = 1
                start = seen[dd].get(hs_here - h_tgt[j + 1])
                if start is not None and last_free[dd] <= start:
                    k = i - start
                    if sorted(src[start: i + 1]) != sorted(tgt[start + j - i: j + 1]):
                        lb_t = 1.0  # a code collision: some transposition may still exist (each costs 1 or more)
                    elif last_open[dd] <= start:
                        ub_t = lb_t = ub[start][start + j - i] + k
                    else:
                        lb_t = lb[start][start + j - i] + k
                best = min(ub_t, ub_s, ub_i, ub_d)
                low = min(lb_t, lb_s, lb_i, lb_d)
                ub_nxt[j + 1], lb_nxt[j + 1] = best, low
                if best == low and diag_ub == diag_lb:
                    if best == diag_ub:
                        last_free[dd] = i + 1
                else:
                    last_open[dd] = i + 1
                if best != low:
                    continue  # unproven: None
                ops = []
                for name, c_ub, c_lb in ((f"T{k + 1}", ub_t, lb_t), ("S", ub_s, lb_s), ("I", ub_i, lb_i),
                                         ("D", ub_d, lb_d)):
                    if c_ub == best:
                        ops.append(name)
                    elif c_lb <= best:
                        break  # undecided whether this candidate ties
                else:
                    ops_row[j + 1] = tuple(ops)
        # every cell the enumeration reaches must hold proven operations
        seen_cells, todo = {(n, m)}, [(n, m)]
        while todo:
            i, j = todo.pop()
            if i + j == 0:
                continue
            ops = oper[i][j]
            if ops is None:
                return None, ub[n][m]
            for op in (ops[:1] if first_only else ops):
                cell = _step(op, i, j)
                if cell not in seen_cells:
                    seen_cells.add(cell)
                    todo.append(cell)
        return oper, ub[n][m]


def _token_codes(tokens: set[str]) -> dict[str, int]:
    """A random 61-bit code per token (seeded: the same codes every run)."""
    rng = random.Random(0)
    return {tok: rng.getrandbits(61) for tok in sorted(tokens)}


def _prefix_codes(src: list[str], tgt: list[str]) -> tuple[list[int], list[int]]:
    """Prefix sums of the token codes of both sentences: two windows hold the same tokens only if their sums are
    equal (a multiset's sum), and unequal windows almost never have equal sums (they are compared anyway)."""
    codes = _token_codes(set(src) | set(tgt))
    h_src, h_tgt = [0], [0]
    for tok in src:
        h_src.append(h_src[-1] + codes[tok])
    for tok in tgt:
        h_tgt.append(h_tgt[-1] + codes[tok])
    return h_src, h_tgt


_M, _D, _I = ("M",), ("D",), ("I",)
_TIES = {(s, i, d): tuple(op for op, on in (("S", s), ("I", i), ("D", d)) if on)
         for s in (False, True) for i in (False, True) for d in (False, True)}


def _step(op: str, i: int, j: int) -> tuple[int, int]:
    if op in ("M", "S"):
        return i - 1, j - 1
    if op == "D":
        return i - 1, j
    if op == "I":
        return i, j - 1
    k = int(op[1:])
    return i - k, j - k


def count_alignments(oper: list[list], first_only: bool) -> int:
    """How many cheapest alignments ChERRANT's depth-first search enumerates (cells reachable from the end only)."""
    n, m = len(oper) - 1, len(oper[0]) - 1
    seen, todo = {(n, m)}, [(n, m)]
    while todo:
        i, j = todo.pop()
        if i + j == 0:
            continue
        for op in (oper[i][j][:1] if first_only else oper[i][j]):
            cell = _step(op, i, j)
            if cell not in seen:
                seen.add(cell)
                todo.append(cell)
    counts = {}
    for i, j in sorted(seen, key=sum):
        if i + j == 0:
            counts[(i, j)] = 1
        else:
            counts[(i, j)] = sum(counts[_step(op, i, j)] for op in (oper[i][j][:1] if first_only else oper[i][j]))
    return counts[(n, m)]


def alignments(oper: list[list], first_only: bool):
    """Every cheapest alignment, as ChERRANT's _dfs finds them: lists of (op, i1, i2, j1, j2) in sentence order."""
    n, m = len(oper) - 1, len(oper[0]) - 1
    stack = [(n, m, None)]
    while stack:
        i, j, tail = stack.pop()
        if i + j == 0:
            out = []
            while tail is not None:  # the path is a linked list from its first operation on
                out.append(tail[0])
                tail = tail[1]
            yield out
            continue
        ops = oper[i][j][:1] if first_only else oper[i][j]
        for op in reversed(ops):  # pushed in reverse, so popped in ChERRANT's order
            pi, pj = _step(op, i, j)
            stack.append((pi, pj, ((op, pi, i, pj, j), tail)))


def _run_result(ops: tuple, start: tuple[int, int], end: tuple[int, int]) -> list[tuple]:
    """What _process_seq makes of a run of S/I/D operations from cell `start` to cell `end`: `ops` is "S" for a run
    holding a substitution (merged into one S whatever else it holds), else the run's D/I operations in order."""
    if ops == "S" or all(op[0] == ops[0][0] for op in ops):
        return [(ops if ops == "S" else ops[0][0], start[0], end[0], start[1], end[1])]
    return list(ops)


def merged_edit_lists(oper: list[list], first_only: bool) -> set[tuple]:
    """The distinct `merge_runs` lists over every cheapest alignment, without enumerating the alignments.

    `merge_runs` sees an alignment as a sequence of runs (M runs, single T operations, maximal runs of S/I/D); a
    run of S/I/D becomes one edit decided by its two end cells and whether it holds a substitution (a D/I-only
    run of both kinds stays operation by operation). So the alignments are walked from the end run by run, the
    runs of S/I/D from a cell being the distinct (end cell, merged result) pairs: ChERRANT's hundreds of
    thousands of cheapest alignments of a rewritten sentence (LawBench's chatglm2-6b-hf) are a handful of
    distinct lists here. `first_only` follows ChERRANT's first-operation-only search (one alignment)."""
    n, m = len(oper) - 1, len(oper[0]) - 1
    if first_only:
        return {tuple(merge_runs(next(alignments(oper, True))))}
    runs: dict[tuple[int, int], list] = {}

    def runs_from(cell):
        """Every maximal S/I/D run ending at `cell`: (its start cell, its merged edits)."""
        if cell in runs:
            return runs[cell]
        found, seen = [], set()
        todo = [(cell, ())]  # (cell reached going back, "S" or the D/I operations so far in sentence order)
        while todo:
            (i, j), ops = todo.pop()
            here = oper[i][j] if i + j else ()
            if ops and (i + j == 0 or any(op[0] in "MT" for op in here)):
                found.append(((i, j), _run_result(ops, (i, j), cell)))  # the run may stop here
            for op in here:
                if op[0] in "MT":
                    continue
                pi, pj = _step(op, i, j)
                nxt = "S" if op == "S" or ops == "S" else ((op, pi, i, pj, j),) + ops
                if ((pi, pj), nxt) not in seen:
                    seen.add(((pi, pj), nxt))
                    todo.append(((pi, pj), nxt))
        runs[cell] = found
        return found

    out = set()
    todo = [((n, m), False, None)]  # (cell, whether the group after it is a run of S/I/D, edits after it)
    while todo:
        (i, j), after_run, tail = todo.pop()
        if i + j == 0:
            edits = []
            while tail is not None:
                edits.extend(tail[0])
                tail = tail[1]
            out.add(tuple(edits))
            continue
        ops = oper[i][j]
        if ops == _M:  # an M run: forced back to the first cell that is not a match
            pi, pj = i, j
            while pi + pj and oper[pi][pj] == _M:
                pi, pj = pi - 1, pj - 1
            todo.append(((pi, pj), False, ([("M", pi, i, pj, j)], tail)))
            continue
        for op in ops:
            if op[0] == "T":
                pi, pj = _step(op, i, j)
                todo.append(((pi, pj), False, ([(op, pi, i, pj, j)], tail)))
        if not after_run:
            for start, result in runs_from((i, j)):
                todo.append((start, True, (result, tail)))
    return out


# ------------------------------------------------------------------------------------------------ merging
def _merge(seq, tag):
    return [(tag, seq[0][1], seq[-1][2], seq[0][3], seq[-1][4])] if seq else seq


def _levenshtein(a: str, b: str) -> int:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.distance(a, b)


def _process_seq(seq):
    if len(seq) <= 1:
        return seq
    ops = {op[0] for op in seq}
    if ops == {"D"} or ops == {"I"}:
        return _merge(seq, ops.pop())
    if ops == {"D", "I"}:
        return seq
    if ops == {"S"}:
        return _merge(seq, "S")  # character level merges substitution runs (word level does not)
    if ops == {"M"}:
        return _merge(seq, "M")
    return _merge(seq, "S")


def merge_runs(alignment: list[tuple]) -> list[tuple]:
    """The Merger's first step: runs of M merged, T kept one by one, each run of S/I/D by _process_seq."""
    edits = []
    for op, group in groupby(alignment, lambda x: x[0][0] if x[0][0] in ("M", "T") else False):
        group = list(group)
        edits.extend(group if op == "T" else _process_seq(group))
    return edits


def merge_edits(alignment: list[tuple], src: list[str], tgt: list[str]) -> list[tuple]:
    """ChERRANT's Merger (character level): one alignment's operations -> its edits (op, i1, i2, j1, j2)."""
    return finish_edits(merge_runs(alignment), src, tgt)


def finish_edits(edits: list[tuple], src: list[str], tgt: list[str]) -> list[tuple]:
    """The Merger's second step on merged runs (`merge_runs`): word-order patterns, then common heads and tails."""
    filtered = []
    i = 0
    while i < len(edits):
        e1 = edits[i][0][0]
        if i < len(edits) - 2:
            e2, e3 = edits[i + 1][0][0], edits[i + 2][0][0]
            if e1 == "S" and e2 == "M" and e3 == "S":  # word order: 冬阴功 对 外国人 / 外国人 对 冬阴功
                w1 = "".join(src[edits[i][1]: edits[i][2]])
                w2 = "".join(tgt[edits[i][3]: edits[i][4]])
                w3 = "".join(src[edits[i + 2][1]: edits[i + 2][2]])
                w4 = "".join(tgt[edits[i + 2][3]: edits[i + 2][4]])
                if min(len(w1), len(w2), len(w3), len(w4)) == 1:
                    swap = w1 == w4 and w2 == w3
                else:
                    swap = _levenshtein(w1, w4) <= 1 and _levenshtein(w2, w3) <= 1
                if swap:
                    filtered.extend(_merge(edits[i: i + 3], "T" + str(edits[i + 2][2] - edits[i][1])))
                    i += 3
                else:
                    filtered.append(edits[i])
                    i += 1
                continue
            if (e1 == "D" and (e2 == "M" or e2.startswith("T")) and e3 == "I") or \
                    (e1 == "I" and (e2 == "M" or e2.startswith("T")) and e3 == "D"):
                if e1 == "D":
                    a = "".join(src[edits[i][1]: edits[i][2]])
                    b = "".join(tgt[edits[i + 2][3]: edits[i + 2][4]])
                else:
                    a = "".join(src[edits[i + 2][1]: edits[i + 2][2]])
                    b = "".join(tgt[edits[i][3]: edits[i][4]])
                if len(a) < len(b):
                    a, b = b, a
                swap = False
                if a not in _MERGE_PUNCT and b not in _MERGE_PUNCT and len(a) - len(b) <= 1:
                    if len(b) == 1:
                        swap = a == b
                    else:
                        swap = _levenshtein(a, b) <= 1 or (len(a) == len(b) and b in a + a)
                if swap:
                    filtered.extend(_merge(edits[i: i + 3], "T" + str(edits[i + 2][2] - edits[i][1])))
                    i += 3
                else:
                    filtered.append(edits[i])
                    i += 1
                continue
        if e1 != "M":
            filtered.append(edits[i])
        i += 1

    out = []
    for edit in filtered:
        span1 = "".join(src[edit[1]: edit[2]])
        span2 = "".join(tgt[edit[3]: edit[4]])
        if span1 == span2:
            continue
        if edit[0] != "S":
            out.append(edit)
            continue
        unchanged = True
        # a common head: the edit starts later on both sides
        common = ""
        tmp_start_1 = edit[1]
        for k in range(edit[1], edit[2]):
            if not span2.startswith(common + src[k]):
                break
            common += src[k]
            tmp_start_1 = k + 1
        start_1, start_2 = edit[1], edit[3]
        if common:
            acc = ""
            for k in range(edit[3], edit[4]):
                acc += tgt[k]
                if acc == common:
                    start_1, start_2 = tmp_start_1, k + 1
                    unchanged = False
                    break
                if len(acc) > len(common):
                    break
        # a common tail (tested against the whole target span, as ChERRANT does)
        common = ""
        end_1, end_2 = edit[2], edit[4]
        tmp_end_1 = edit[2]
        for k in reversed(range(start_1, edit[2])):
            if not span2.endswith(src[k] + common):
                break
            common = src[k] + common
            tmp_end_1 = k
        if common:
            acc = ""
            for k in reversed(range(start_2, edit[4])):
                acc = tgt[k] + acc
                if acc == common:
                    end_1, end_2 = tmp_end_1, k
                    unchanged = False
                    break
                if len(acc) > len(common):
                    break
        if unchanged:
            out.append(edit)
        elif start_1 == end_1:
            out.append(("I", start_1, end_1, start_2, end_2))
        elif start_2 == end_2:
            out.append(("D", start_1, end_1, start_2, end_2))
        else:
            out.append(("S", start_1, end_1, start_2, end_2))
    return out


# ------------------------------------------------------------------------------------------------ annotation
@dataclass
class Annotation:
    """One sentence's M2 annotation: the (start, end, category, correction) edits of every kept edit list."""

    edits: list[tuple[int, int, str, str]]
    alignments: int = 0  # cheapest alignments of source and target (0 when none were needed)
    timed_out: bool = False  # annotated against "无" in place of the target, as LawBench does on a timeout


_CATEGORY = {"T": "W", "D": "R", "I": "M", "S": "S"}  # classifier.py's character branch


def _m2_edit(edit, tgt) -> tuple[int, int, str, str]:
    """An edit as compare_m2_for_evaluation.py reads it back from its M2 line (start, end, category, correction).

    The line is written and split on "|||" exactly as the two scripts do, so a correction that ends in "|" reads
    back as ChERRANT reads it (one "|" fewer)."""
    cat = _CATEGORY[edit[0][0]]
    tokens = "-NONE-" if cat == "R" else " ".join(tgt[edit[3]: edit[4]])
    fields = f"{edit[1]} {edit[2]}|||{cat}|||{tokens}|||REQUIRED|||-NONE-|||0".split("|||")
    start, end = fields[0].split()
    return int(start), int(end), fields[1], fields[2].replace(" ", "")


class CharAnnotator:
    """`parallel_to_m2.py -g char` for one (source, target) pair at a time, LawBench's timeout rule included."""

    def __init__(self, resources: Resources | None = None, max_alignments: int = MAX_ALIGNMENTS):
        self.resources = resources if resources is not None else Resources()
        self.aligner = Aligner(self.resources)
        self.max_alignments = max_alignments
        self._t2s = None

    def simplified(self, text: str) -> str:
        if self._t2s is None:
            import opencc

            self._t2s = opencc.OpenCC("t2s")
        return self._t2s.convert(text)

    def _edits(self, src: list[str], tgt: list[str], limit: float | None = None) -> tuple[list, int] | None:
        src_str, tgt_str = "".join(src), "".join(tgt)
        if tgt_str == NOOP or src_str == tgt_str:
            return [(-1, -1, "noop", "-NONE-")], 0
        if tgt_str == NOT_ANNOTATABLE:
            return [(-1, -1, "NA", "-NONE-")], 0
        first_only = abs(len(src) - len(tgt)) > 10
        oper = self.aligner.operations(src, tgt, first_only)
        n = count_alignments(oper, first_only)
        if limit is not None and n > limit:
            return None
        # each distinct edit list once (ChERRANT writes them in its search order; the M2 comparison counts edits
        # and does not see the order)
        kept = {tuple(finish_edits(list(runs), src, tgt)) for runs in merged_edit_lists(oper, first_only)}
        return [_m2_edit(e, tgt) for edits in sorted(kept) for e in edits], n

    def annotate(self, source: str, target: str) -> Annotation:
        """Edits turning `source` into `target`: both lose their whitespace, the target becomes simplified Chinese."""
        source = "".join(source.split())
        if not source:
            raise ValueError("ChERRANT cannot annotate an empty source sentence")
        target = self.simplified("".join(target.split()))
        src = char_tokens(source)
        found = self._edits(src, char_tokens(target), self.max_alignments) if target else None
        if found is None:  # LawBench: a sentence that timed out (or raised) is annotated again, without a time
            edits, n = self._edits(src, char_tokens(TIMEOUT_TARGET))  # limit, against "无"
            return Annotation(edits, n, timed_out=True)
        return Annotation(*found)


# ------------------------------------------------------------------------------------------------ M2 comparison
@dataclass
class M2Score:
    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f05: float


def _edit_dict(edits) -> dict[tuple, list[str]]:
    out: dict[tuple, list[str]] = {}
    for start, end, cat, cor in edits or [(-1, -1, "noop", "-NONE-")]:
        out.setdefault((start, end, cor), []).append(cat)
    return out


def compare_edits(hyp: Annotation, ref: Annotation) -> tuple[int, int, int]:
    """compare_m2_for_evaluation.py for one sentence: TP, FP and FN of the hypothesis edits against the reference."""
    hyp_edits, ref_edits = _edit_dict(hyp.edits), _edit_dict(ref.edits)
    if len(ref_edits) == 1 and next(iter(ref_edits.values()))[0] == "NA":
        return 0, 0, 0  # a sentence the reference could not annotate is skipped
    tp = fp = fn = 0
    for key, cats in hyp_edits.items():
        if cats[0] == "noop":
            continue
        if key in ref_edits:
            tp += len(ref_edits[key])  # counted by the reference's occurrences, as compareEdits does
        else:
            fp += len(cats)
    for key, cats in ref_edits.items():
        if cats[0] != "noop" and key not in hyp_edits:
            fn += len(cats)
    return tp, fp, fn


def f_score(tp: int, fp: int, fn: int, beta: float = 0.5) -> tuple[float, float, float]:
    """computeFScore: precision, recall and F-beta, each rounded to 4 places (1.0 without FP / FN)."""
    p = float(tp) / (tp + fp) if fp else 1.0
    r = float(tp) / (tp + fn) if fn else 1.0
    f = float((1 + beta ** 2) * p * r) / ((beta ** 2) * p + r) if p + r else 0.0
    return round(p, 4), round(r, 4), round(f, 4)


def corpus_f05(hyps: list[Annotation], refs: list[Annotation]) -> M2Score:
    """Corpus-level span-based correction F0.5 of hypothesis annotations against reference annotations."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypothesis annotations for {len(refs)} reference annotations")
    tp = fp = fn = 0
    for hyp, ref in zip(hyps, refs):
        a, b, c = compare_edits(hyp, ref)
        tp, fp, fn = tp + a, fp + b, fn + c
    return M2Score(tp, fp, fn, *f_score(tp, fp, fn))


# ------------------------------------------------------------------------------------------------ resource files
RESOURCE_FILES = ("cilin.txt", "confusion_dict.txt")  # as ChERRANT (and LawBench's copy) names them
RESOURCE_DIR = Path("evaluation") / "utils" / "data"  # where a LawBench checkout holds them
RESOURCE_ENV = "YUNSHAN_CHERRANT_DATA"  # a folder holding both files, for any other layout
# The copy shipped inside yunshan (cherrant_data/README.md): the entries of ChERRANT's two files that a
# character-level alignment can look up, built from LawBench e30981b by `write_char_resources`.
SHIPPED_DIR = Path(__file__).with_name("cherrant_data")
SHIPPED_FILES = ("cilin_chars.txt", "confusion_pairs.txt.gz")


def find_resource_dir(*near: str | Path) -> Path:
    """ChERRANT's data folder: $YUNSHAN_CHERRANT_DATA if set, else `evaluation/utils/data` of the LawBench checkout
    that holds one of `near` (a task or predictions folder), else the copy shipped with yunshan (the same costs on
    every pair of characters)."""
    env = os.environ.get(RESOURCE_ENV)
    if env:
        return Path(env)
    for start in near:
        for folder in (Path(start).resolve(), *Path(start).resolve().parents):
            if all((folder / RESOURCE_DIR / name).is_file() for name in RESOURCE_FILES):
                return folder / RESOURCE_DIR
    return SHIPPED_DIR


def _is_ideograph(word: str) -> bool:
    return len(word) == 1 and _all_chinese(word)


@lru_cache(maxsize=4)
def load_resources(folder: str | Path | None) -> Resources:
    """ChERRANT's Cilin classes and confusion set from `folder`: ChERRANT's own files (`cilin.txt`, GBK, and
    `confusion_dict.txt`, UTF-8; read as ChERRANT reads them) or yunshan's shipped form of them (`SHIPPED_FILES`,
    `write_char_resources`). None gives empty resources (every character outside Cilin, no confusions)."""
    if folder is None:
        return Resources()
    folder = Path(folder)
    if not all((folder / name).is_file() for name in RESOURCE_FILES) and \
            all((folder / name).is_file() for name in SHIPPED_FILES):
        return _load_shipped(folder)
    missing = [name for name in RESOURCE_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder}: no {' or '.join(missing)}; ChERRANT's data folder holds "
                                f"{' and '.join(RESOURCE_FILES)} (LawBench: {RESOURCE_DIR}), or yunshan's form of "
                                f"them, {' and '.join(SHIPPED_FILES)}")
    texts = {}
    for name, encoding in zip(RESOURCE_FILES, ("gbk", "utf-8")):
        raw = (folder / name).read_bytes()
        try:
            texts[name] = raw.decode(encoding)
        except UnicodeDecodeError as err:
            line = raw[: err.start].count(b"\n") + 1
            raise ValueError(f"{folder / name}:{line}: not {encoding.upper()} text; ChERRANT's {name} is "
                             f"{encoding.upper()}-encoded") from None
    # as Python's text mode gives them to ChERRANT: line ends \r\n and \r read as \n; cilin.txt read whole,
    # stripped and split on newlines, confusion_dict.txt line by line
    texts = {name: text.replace("\r\n", "\n").replace("\r", "\n") for name, text in texts.items()}
    semantic = read_cilin_lines(texts["cilin.txt"].strip().split("\n"))
    lines = texts["confusion_dict.txt"].split("\n")
    confusion = read_confusion_lines(lines[:-1] if lines and lines[-1] == "" else lines)
    return Resources(semantic, confusion, source=str(folder))


def _load_shipped(folder: Path) -> Resources:
    """yunshan's form: `CODE char char ...` lines (UTF-8) and the confusable pairs, each once (`a b b b ...`,
    gzip), read back into both directions."""
    semantic = {}
    for number, line in enumerate((folder / SHIPPED_FILES[0]).read_text(encoding="utf-8").splitlines(), 1):
        code, *chars = line.split(" ")
        if len(code) != 8 or not chars or any(len(ch) != 1 for ch in chars):
            raise ValueError(f"{folder / SHIPPED_FILES[0]}:{number}: expected an 8-character Cilin code and "
                             f"one-character words, got {line[:40]!r}")
        semantic.update(dict.fromkeys(chars, code))
    confusion: dict[str, list[str]] = {}
    with gzip.open(folder / SHIPPED_FILES[1], "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            first, *rest = line.rstrip("\n").split(" ")
            if not (_is_ideograph(first) and rest and all(_is_ideograph(ch) for ch in rest)):
                raise ValueError(f"{folder / SHIPPED_FILES[1]}:{number}: expected CJK characters separated by "
                                 f"spaces, got {line[:40]!r}")
            confusion.setdefault(first, []).extend(rest)
            for ch in rest:
                confusion.setdefault(ch, []).append(first)
    return Resources(semantic, confusion, source=str(folder))


def write_char_resources(folder: str | Path, out: str | Path) -> dict[str, int]:
    """Write yunshan's form of ChERRANT's files in `folder` to `out`: what a character-level alignment can look up.

    The alignment looks a token up in Cilin as a whole word, and its tokens are single characters (and
    `[缺失成分]`, which Cilin does not hold), so only one-character words are kept, each with the code ChERRANT
    reads for it (the last one). It asks the confusion set only whether one CJK ideograph is confusable with
    another, in either direction (`_spell_cost`), so only ideograph pairs are kept, each unordered pair once. The
    costs of every pair of tokens are then the same as with ChERRANT's files (tests/eval/test_cherrant.py).

        python -c "from yunshan.eval.cherrant import write_char_resources as w; \\
                   print(w('LawBench/evaluation/utils/data', 'eval/cherrant_data'))"
    """
    full = load_resources.__wrapped__(folder)
    if MISSING in full.semantic:
        raise ValueError(f"{folder}: Cilin holds {MISSING}, which the alignment reads as one token")
    groups: dict[str, list[str]] = {}
    for word, code in full.semantic.items():
        if len(word) == 1:
            groups.setdefault(code, []).append(word)
    pairs: dict[str, set[str]] = {}
    for first, others in full.confusion.items():
        if _is_ideograph(first):
            for ch in others:
                if _is_ideograph(ch) and ch != first:
                    a, b = sorted((first, ch))
                    pairs.setdefault(a, set()).add(b)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / SHIPPED_FILES[0]).write_text("".join(f"{code} {' '.join(words)}\n" for code, words in groups.items()),
                                        encoding="utf-8")
    text = "".join(f"{a} {' '.join(sorted(pairs[a]))}\n" for a in sorted(pairs))
    with open(out / SHIPPED_FILES[1], "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as f:
        f.write(text.encode("utf-8"))  # mtime 0 and no name: the same bytes on every run
    return {"cilin_characters": sum(len(words) for words in groups.values()),
            "confusable_pairs": sum(len(b) for b in pairs.values())}


__all__ = ["Aligner", "Annotation", "CharAnnotator", "M2Score", "Resources", "char_tokens", "compare_edits",
           "corpus_f05", "count_alignments", "f_score", "merge_edits", "find_resource_dir", "load_resources",
           "write_char_resources"]
