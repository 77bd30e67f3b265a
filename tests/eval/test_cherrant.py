"""yunshan's ChERRANT (LawBench 2-1): edits by hand, the alignment against a plain restatement of ChERRANT's
dynamic programme, the M2 comparison's counting, the timeout rule and the resource files. Real predictions against
LawBench's published 2-1 scores: tests/eval/test_lawbench_real.py."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yunshan.eval import cherrant
from yunshan.eval.cherrant import (
    RESOURCE_DIR, RESOURCE_ENV, Aligner, Annotation, CharAnnotator, Resources, alignments, char_tokens,
    compare_edits, corpus_f05, count_alignments, f_score, find_resource_dir, load_resources, merge_edits,
    merge_runs, merged_edit_lists, write_char_resources,
)
from yunshan.eval.cherrant import SHIPPED_DIR, SHIPPED_FILES

NOOP = [(-1, -1, "noop", "-NONE-")]


@pytest.fixture(scope="module")
def plain():
    """No Cilin classes, no confusion set: every substitution cost follows from readings and punctuation."""
    return CharAnnotator(Resources())


def edits(annotator, src, tgt):
    return sorted(annotator.annotate(src, tgt).edits)


def test_edits_by_hand(plain):
    assert edits(plain, "他门去了学校", "他们去了学校") == [(1, 2, "S", "们")]  # substitution: the correction
    assert edits(plain, "我去学校", "我们去学校") == [(1, 1, "M", "们")]  # insertion: "missing"
    assert edits(plain, "我们们去", "我们去") == [(1, 2, "R", "-NONE-")]  # deletion: "redundant", no correction
    assert edits(plain, "今天天气很好", "今天天气真的很好") == [(4, 4, "M", "真的")]  # an insertion run is one edit
    assert edits(plain, "甲乙丙丁戊", "甲丙乙丁戊") == [(1, 3, "W", "丙乙")]  # a transposition: word order
    assert edits(plain, "我爱北京天安门", "我爱天安门北京") == [(2, 7, "W", "天安门北京")]  # D-M-I merged into one


def test_what_the_sentences_go_through(plain):
    assert plain.annotate("学校", "学校").edits == NOOP  # the same sentence: no edit
    assert plain.annotate("他门去", "没有错误").edits == NOOP  # "no error" as the target means no edit too
    assert plain.annotate("他门去", "无法标注").edits == [(-1, -1, "NA", "-NONE-")]
    assert plain.annotate("他 门\u3000去", "他们 去").edits == [(1, 2, "S", "们")]  # whitespace is dropped
    # The corrected side becomes simplified Chinese, the source never does: a traditional source that the target
    # copies is an edit.
    assert edits(plain, "他门去了学校", "他們去了學校") == [(1, 2, "S", "们")]
    assert edits(plain, "學校", "學校") == [(0, 1, "S", "学")]
    assert char_tokens("甲[缺失成分]乙") == ["甲", "[缺失成分]", "乙"]  # ChERRANT's marker is one token


def test_a_correction_ending_in_a_bar_reads_back_as_chertant_reads_its_m2_line(plain):
    # "A 1 2|||S||||||REQUIRED|||-NONE-|||0" split on "|||": the correction "|" is read back as "".
    assert plain.annotate("ab", "a|").edits == [(1, 2, "S", "")]


def test_substitution_costs_by_hand(tmp_path):
    aligner = Aligner(Resources(semantic={"甲": "Aa01A01=", "乙": "Aa01A02=", "丙": "Ab02A01=", "丁": "Bb02A01=",
                                          "戊": "Ba01A01="}, confusion={"己": ["已"]}))
    unknown = 4 / 6  # a character outside Cilin
    assert aligner.sub_cost("A", "B") == pytest.approx(unknown + 0.5 + 0.25)  # not CJK: spelling 0.5
    assert aligner.sub_cost("，", "！") == pytest.approx(unknown + 0.5 + 0.0)  # both punctuation
    # "。" is missing from ChERRANT's alignment punctuation list, so it counts as a character
    assert aligner.sub_cost("，", "。") == pytest.approx(unknown + 0.5 + 0.499)
    assert aligner.sub_cost("他", "她") == pytest.approx(unknown + 0.0 + 0.25)  # a shared reading (ta)
    assert aligner.sub_cost("己", "已") == pytest.approx(unknown + 0.0 + 0.25)  # confusable (ji / yi)
    assert aligner.sub_cost("已", "己") == pytest.approx(unknown + 0.0 + 0.25)  # either direction
    assert aligner.sub_cost("门", "窗") == pytest.approx(unknown + 0.5 + 0.25)
    # Cilin: the first four code characters (class levels A, a, 01) decide; 0 when all equal, else 2 per level
    # that differs (out of 6)
    assert aligner.sub_cost("甲", "乙") == pytest.approx(0 + 0.5 + 0.25)
    assert aligner.sub_cost("甲", "戊") == pytest.approx(2 / 6 + 0.5 + 0.25)
    assert aligner.sub_cost("甲", "丙") == pytest.approx(4 / 6 + 0.5 + 0.25)
    assert aligner.sub_cost("甲", "丁") == pytest.approx(6 / 6 + 0.5 + 0.25)
    assert aligner.sub_cost("甲", "甲") == 0


def reference_operations(aligner, src, tgt):
    """ChERRANT's alignment written plainly: transposition windows compared as sorted lists at every step."""
    n, m = len(src), len(tgt)
    cost = [[0.0] * (m + 1) for _ in range(n + 1)]
    oper = [[None] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        cost[i][0], oper[i][0] = cost[i - 1][0] + 1, ("D",)
    for j in range(1, m + 1):
        cost[0][j], oper[0][j] = cost[0][j - 1] + 1, ("I",)
    for i in range(n):
        for j in range(m):
            if src[i] == tgt[j]:
                cost[i + 1][j + 1], oper[i + 1][j + 1] = cost[i][j], ("M",)
                continue
            trans, k = float("inf"), 1
            while i - k >= 0 and j - k >= 0 and cost[i - k + 1][j - k + 1] != cost[i - k][j - k]:
                if sorted(src[i - k: i + 1]) == sorted(tgt[j - k: j + 1]):
                    trans = cost[i - k][j - k] + k
                    break
                k += 1
            costs = [trans, cost[i][j] + aligner.sub_cost(src[i], tgt[j]), cost[i + 1][j] + 1, cost[i][j + 1] + 1]
            cost[i + 1][j + 1] = min(costs)
            oper[i + 1][j + 1] = tuple(op for op, c in zip((f"T{k + 1}", "S", "I", "D"), costs) if c == min(costs))
    return oper


sentences = st.lists(st.sampled_from(list("甲乙丙丁他她们门，。ab")), min_size=1, max_size=12)
COSTS = Resources(semantic={"甲": "Aa01A01=", "乙": "Aa01A02=", "丙": "Ab02A01="}, confusion={"门": ["们"]})


def reached(oper, first_only):
    """The cells ChERRANT's search reaches from the end, with their operations."""
    n, m = len(oper) - 1, len(oper[0]) - 1
    out, todo = {}, [(n, m)]
    while todo:
        i, j = todo.pop()
        if (i, j) in out:
            continue
        out[(i, j)] = ops = tuple(oper[i][j]) if i + j else ()
        for op in ops[:1] if first_only else ops:
            k = 1 if op in "MSDI" else int(op[1:])
            todo.append((i - (k if op[0] in "MSDT" else 0), j - (k if op[0] in "MSIT" else 0)))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("甲乙丙丁他她们门，。ab")), min_size=1, max_size=16), sentences,
       st.integers(min_value=0, max_value=3))
def test_band_and_run_walk_equal_the_whole_programme(src, tgt, width):
    """A band's operations, when it accepts them, are the whole programme's on every cell the search reaches; the
    merged runs walked run by run are exactly the distinct merged runs of every alignment."""
    tgt = (src[: len(src) // 2] + tgt)[:16]  # half of the pairs share a prefix, as corrections do
    aligner = Aligner(COSTS)
    whole = aligner.full_operations(src, tgt)
    for first_only in (False, True):
        expected = reached(whole, first_only)
        band, total = aligner.band_operations(src, tgt, width, first_only)
        assert total < float("inf")  # an upper bound of the whole alignment's cost
        if band is not None:
            assert reached(band, first_only) == expected
        assert reached(aligner.operations(src, tgt, first_only), first_only) == expected
        runs = {tuple(merge_runs(a)) for a in alignments(whole, first_only)}
        assert merged_edit_lists(whole, first_only) == runs


def test_a_narrow_band_refuses_a_rewrite_and_proves_a_correction():
    aligner = Aligner(COSTS)
    src = list("甲乙丙丁他她们门甲乙丙丁")
    assert aligner.band_operations(src, list("门们她他丁丙乙甲ab"), 1)[0] is None  # leaving the band is cheaper
    band, total = aligner.band_operations(src, list("甲乙丙丁他她门们甲乙丁"), 1)
    whole = aligner.full_operations(src, list("甲乙丙丁他她门们甲乙丁"))
    assert band is not None and reached(band, False) == reached(whole, False)
    assert sum(c is not None for row in band for c in row) < sum(c is not None for row in whole for c in row)


@settings(max_examples=100, deadline=None)
@given(sentences, sentences, st.integers(min_value=0, max_value=2))
def test_window_code_collisions_fall_back_to_chertants_search(src, tgt, width):
    """Every token given the same code: every earlier window start looks like a match and must be checked."""
    aligner = Aligner(COSTS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cherrant, "_token_codes", lambda tokens: dict.fromkeys(tokens, 1))
        whole = aligner.full_operations(src, tgt)
        band, _ = aligner.band_operations(src, tgt, width)
    assert [[tuple(c) if c else c for c in row] for row in whole] == reference_operations(aligner, src, tgt)
    if band is not None:
        assert reached(band, False) == reached(whole, False)


@settings(max_examples=300, deadline=None)
@given(sentences, sentences)
def test_alignment_equals_the_plain_dynamic_programme(src, tgt):
    aligner = Aligner(Resources(semantic={"甲": "Aa01A01=", "乙": "Aa01A02=", "丙": "Ab02A01="},
                                confusion={"门": ["们"]}))
    oper = aligner.full_operations(src, tgt)
    assert [[tuple(c) if c else c for c in row] for row in oper] == reference_operations(aligner, src, tgt)
    for first_only in (False, True):
        found = list(alignments(oper, first_only))
        assert count_alignments(oper, first_only) == len(found)
        assert len({tuple(a) for a in found}) == len(found)
        for a in found:  # each alignment covers both sentences, in order, without gaps
            assert [(x[1], x[3]) for x in a] == [(0, 0)] + [(x[2], x[4]) for x in a[:-1]]
            assert (a[-1][2], a[-1][4]) == (len(src), len(tgt))
            # the merged edits rebuild the target from the source
            rebuilt, at = [], 0
            for op, i1, i2, j1, j2 in merge_edits(a, src, tgt):
                rebuilt += src[at:i1] + tgt[j1:j2]
                at = i2
            assert rebuilt + src[at:] == tgt


def test_every_distinct_edit_list_is_kept(plain):
    # Two cheapest alignments whose merged edits differ: ChERRANT writes both lists under annotator 0, so an edit
    # of both lists is there twice (and counts twice in TP, FP or FN).
    annotation = plain.annotate("丁他乙乙乙", "他乙甲")
    assert annotation.alignments == 2
    assert sorted(annotation.edits) == [(0, 1, "R", "-NONE-"), (0, 1, "R", "-NONE-"), (2, 3, "R", "-NONE-"),
                                        (3, 5, "S", "甲"), (4, 5, "S", "甲")]
    assert compare_edits(annotation, Annotation([(0, 1, "R", "-NONE-")])) == (1, 3, 0)  # TP: the reference once
    assert compare_edits(Annotation([(0, 1, "R", "-NONE-")]), annotation) == (2, 0, 3)


def test_m2_comparison_counts_like_compare_m2(plain):
    hyp = Annotation([(1, 2, "S", "们"), (3, 3, "M", "的"), (3, 3, "M", "的"), (5, 6, "R", "-NONE-")])
    ref = Annotation([(1, 2, "S", "们"), (1, 2, "S", "们"), (7, 7, "M", "了")])
    # TP counted by the reference's occurrences of a found edit, FP by the hypothesis's, FN by the reference's
    assert compare_edits(hyp, ref) == (2, 3, 1)
    assert compare_edits(Annotation(NOOP), ref) == (0, 0, 3)
    assert compare_edits(hyp, Annotation([(-1, -1, "NA", "-NONE-")])) == (0, 0, 0)  # not annotatable: skipped
    assert compare_edits(Annotation(NOOP), Annotation(NOOP)) == (0, 0, 0)
    assert f_score(0, 0, 0) == (1.0, 1.0, 1.0)  # nothing to find and nothing found
    assert f_score(2, 3, 1) == (0.4, round(2 / 3, 4), round(1.25 * 0.4 * (2 / 3) / (0.25 * 0.4 + 2 / 3), 4))
    score = corpus_f05([hyp, Annotation(NOOP)], [ref, Annotation([(0, 1, "S", "甲")])])
    assert (score.tp, score.fp, score.fn) == (2, 3, 2) and score.f05 == f_score(2, 3, 2)[2]


def test_timeouts_are_annotated_against_wu(plain):
    # LawBench annotates a sentence ChERRANT gave up on (10 s) against "无"; yunshan counts alignments instead.
    many = CharAnnotator(Resources(), max_alignments=1)
    source, target = "丁他乙乙乙", "他乙甲"
    assert plain.annotate(source, target).alignments == 2
    out = many.annotate(source, target)
    assert out.timed_out and out.edits == plain.annotate(source, "无").edits
    # a target that is empty once its whitespace is gone makes ChERRANT raise, which LawBench treats the same way
    blank = plain.annotate("他门去", " \u3000 ")
    assert blank.timed_out and blank.edits == [(0, 3, "S", "无")]
    with pytest.raises(ValueError, match="empty source sentence"):
        plain.annotate(" ", "他们")


def write_resources(folder, cilin_lines, confusion_lines):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cilin.txt").write_bytes("\n".join(cilin_lines).encode("gbk") + b"\n")
    (folder / "confusion_dict.txt").write_text("\n".join(confusion_lines) + "\n", encoding="utf-8")
    return folder


def test_resource_files_read_as_chertant_reads_them(tmp_path):
    folder = write_resources(tmp_path / "data", ["Aa01A01= 甲 乙", "Ba01A01= 乙 丙"], ["己 已 巳", "门 们"])
    res = load_resources(folder)
    assert res.semantic == {"甲": "Aa01A01=", "乙": "Ba01A01=", "丙": "Ba01A01="}  # a word listed twice: last code
    assert res.confusion == {"己": ["已", "巳"], "门": ["们"]} and res.source == str(folder)
    assert load_resources(None).semantic == {} and load_resources(None).source == ""
    (folder / "confusion_dict.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"data: no confusion_dict.txt; ChERRANT's data folder holds"):
        load_resources.__wrapped__(folder)
    bad = write_resources(tmp_path / "bad", ["Aa01A01= 甲", "Aa01A02= 乙"], ["门 们"])
    (bad / "cilin.txt").write_bytes((bad / "cilin.txt").read_bytes() + b"Aa01A03= \xff\xff\n")
    with pytest.raises(ValueError, match=rf"{bad / 'cilin.txt'}:3: not GBK text"):
        load_resources.__wrapped__(bad)


def test_resource_folder_found_in_a_lawbench_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv(RESOURCE_ENV, raising=False)
    checkout = tmp_path / "LawBench"
    (checkout / "data" / "zero_shot").mkdir(parents=True)
    (checkout / "predictions" / "zero_shot" / "m").mkdir(parents=True)
    assert find_resource_dir(checkout / "data" / "zero_shot") == SHIPPED_DIR  # no checkout data: the shipped copy
    write_resources(checkout / RESOURCE_DIR, ["Aa01A01= 甲"], ["门 们"])
    for near in (checkout / "data" / "zero_shot", checkout / "predictions" / "zero_shot" / "m"):
        assert find_resource_dir(near) == (checkout / RESOURCE_DIR).resolve()
    monkeypatch.setenv(RESOURCE_ENV, str(tmp_path / "elsewhere"))
    assert find_resource_dir(checkout / "data" / "zero_shot") == tmp_path / "elsewhere"
    assert os.environ[RESOURCE_ENV]


def test_one_character_costs_equal_chertant_general_formula():
    aligner = Aligner(Resources(semantic={"甲": "Aa01A01=", "乙": "Aa01A02=", "丙": "Ab02A01=", "丁": "Bb02A01=",
                                          "戊": "Ba01A01=", "，": "Zz01A01="}, confusion={"己": ["已"], "门": ["们"]}))
    tokens = list("甲乙丙丁戊己已门们他她，。！AB1") + ["[缺失成分]"]
    for a in tokens:
        for b in tokens:
            assert aligner.sub_cost(a, b) == aligner._general_sub_cost(a, b), (a, b)


def test_shipped_form_gives_chertants_costs(tmp_path):
    """write_char_resources keeps what a character alignment can look up: every substitution cost stays the same."""
    cilin = ["Aa01A01= 甲 乙 甲乙 人士", "Aa01A02= 丙 a", "Ba01A01= 乙 丁丁 ，", "Ca01A01= 人物 人员"]
    confusion = ["门 们 扪 门", "己 已 a 已已", "们 闷", "x 门", "巳 己"]  # self, non-CJK, multi-character, one-way
    folder = write_resources(tmp_path / "full", cilin, confusion)
    counts = write_char_resources(folder, tmp_path / "shipped")
    # 甲, 乙 (last code), 丙, a, ，; pairs 门-们, 门-扪, 己-已, 们-闷, 巳-己
    assert counts == {"cilin_characters": 5, "confusable_pairs": 5}
    full, shipped = load_resources.__wrapped__(folder), load_resources.__wrapped__(tmp_path / "shipped")
    assert shipped.semantic == {"甲": "Aa01A01=", "乙": "Ba01A01=", "丙": "Aa01A02=", "a": "Aa01A02=",
                                "，": "Ba01A01="}
    tokens = list("甲乙丙丁人门们扪闷己已巳a，x") + ["[缺失成分]"]
    a_full, a_shipped = Aligner(full), Aligner(shipped)
    for a in tokens:
        for b in tokens:
            assert a_full.sub_cost(a, b) == a_shipped.sub_cost(a, b), (a, b)
    first = (tmp_path / "shipped" / SHIPPED_FILES[1]).read_bytes()
    write_char_resources(folder, tmp_path / "shipped")  # the same bytes again (gzip without a time stamp)
    assert (tmp_path / "shipped" / SHIPPED_FILES[1]).read_bytes() == first


def test_the_shipped_files_read_with_their_counts(monkeypatch):
    monkeypatch.delenv(RESOURCE_ENV, raising=False)
    res = load_resources(find_resource_dir())
    assert res.source == str(SHIPPED_DIR)
    assert len(res.semantic) == 4720 and all(len(w) == 1 and len(c) == 8 for w, c in res.semantic.items())
    assert sum(map(len, res.confusion.values())) == 2 * 254843  # each pair read into both directions
    assert all(a in res.confusion[b] for a in res.confusion for b in res.confusion[a][:3])


def test_a_broken_shipped_file_is_refused_at_its_line(tmp_path):
    import gzip

    (tmp_path / SHIPPED_FILES[0]).write_text("Aa01A01= 甲 乙\nAa01A02 丙\n", encoding="utf-8")
    with gzip.open(tmp_path / SHIPPED_FILES[1], "wt", encoding="utf-8") as f:
        f.write("门 们\n")
    with pytest.raises(ValueError, match=r"cilin_chars.txt:2: expected an 8-character Cilin code"):
        load_resources.__wrapped__(tmp_path)
    (tmp_path / SHIPPED_FILES[0]).write_text("Aa01A01= 甲 乙\n", encoding="utf-8")
    with gzip.open(tmp_path / SHIPPED_FILES[1], "wt", encoding="utf-8") as f:
        f.write("门 们\n门 ab\n")
    with pytest.raises(ValueError, match=r"confusion_pairs.txt.gz:2: expected CJK characters"):
        load_resources.__wrapped__(tmp_path)
