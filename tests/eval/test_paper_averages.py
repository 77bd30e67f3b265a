"""The paper's AVG columns (Tables 8-10) reproduced by yunshan's own aggregation code from the per-column figures.

FinEval AVG = (305 Acc + 334 Cert + 207 Econ + 305 Fin) / 1151 is a micro-average over the 1,151 validation
questions; FinanceIQ AVG is the unweighted mean of 10 subjects; LawBench AVG = (2 Mem + 10 Und + 8 App) / 20 is the
plain mean over 20 tasks. Figures copied from ../shared/seeds/002_df30946ac1f038c6.txt, section 6.
"""

import pytest

from yunshan.eval import ceval, cmmlu
from yunshan.eval.lawbench_scoring import TASKS, aggregate_levels
from yunshan.eval.multiple_choice import Question

FINEVAL = {  # Accounting, Certificate, Economy, Finance, AVG (Table 9)
    "LLaMA2-7B": (37.56, 34.13, 34.30, 28.85, 33.71),
    "InternLM-7B": (49.51, 52.99, 42.03, 53.11, 50.13),
    "Baichuan2-7B": (53.11, 56.89, 50.24, 59.67, 55.43),
    "Qwen-7B": (62.30, 61.38, 56.04, 61.00, 60.56),
    "FinGPT-7B": (29.18, 25.45, 30.90, 25.90, 27.54),
    "FinMA-7B": (35.08, 32.34, 34.78, 35.41, 34.32),
    "LawGPT-7B": (25.25, 31.74, 28.50, 27.54, 28.32),
    "HanFei-7B": (29.84, 29.64, 27.54, 31.48, 29.80),
    "YunShan": (65.57, 69.46, 51.21, 55.08, 61.34),
}
FINEVAL_N = {"Accounting": 305, "Certificate": 334, "Economy": 207, "Finance": 305}
# Cells that are not k / n for any integer k (typos in the paper): the counts nearest to them still give the AVG.
FINEVAL_NOT_A_COUNT = {("LLaMA2-7B", "Accounting"), ("Qwen-7B", "Finance"), ("FinGPT-7B", "Economy")}

FINANCEIQ = {  # CPA, BQ, SPQ, CFPQ, IPQ, Economist, Tax Accountant, FQ, Financial Planner, Actuary, AVG (Table 8)
    "LLaMA2-7B": (28.38, 26.53, 26.11, 24.54, 26.44, 25.77, 28.41, 26.10, 25.00, 25.41, 26.27),
    "InternLM-7B": (31.81, 43.57, 34.69, 40.02, 36.49, 42.50, 43.19, 37.29, 32.95, 31.56, 37.41),
    "Baichuan2-7B": (34.25, 49.04, 40.14, 42.32, 41.52, 52.69, 41.11, 41.02, 30.68, 35.86, 40.86),
    "Qwen-7B": (30.36, 37.38, 35.97, 37.61, 33.19, 43.65, 38.11, 38.31, 27.27, 27.66, 34.95),
    "FinGPT-7B": (25.32, 25.88, 24.40, 24.89, 25.57, 25.58, 27.48, 20.68, 22.73, 29.51, 25.20),
    "FinMA-7B": (24.94, 29.66, 33.25, 29.93, 35.34, 32.31, 26.56, 26.78, 22.73, 25.00, 28.65),
    "LawGPT-7B": (26.47, 24.92, 23.98, 24.77, 25.14, 24.62, 27.02, 27.46, 20.45, 26.43, 25.13),
    "HanFei-7B": (27.00, 34.08, 33.93, 34.52, 37.36, 37.88, 32.79, 30.51, 22.73, 30.33, 32.11),
    "YunShan": (52.78, 63.42, 52.89, 57.57, 52.30, 72.50, 52.66, 55.93, 34.09, 51.43, 54.56),
}

LAWBENCH = {  # Memorization, Understanding, Applying, AVG (Table 10)
    "LLaMA2-7B": (1.52, 9.09, 16.19, 11.16),
    "InternLM-7B": (3.10, 8.29, 29.76, 16.36),
    "Baichuan2-7B": (2.78, 8.13, 19.79, 12.26),
    "Qwen-7B": (0.82, 17.43, 31.54, 21.41),
    "FinGPT-7B": (0.00, 0.28, 0.00, 0.11),
    "FinMA-7B": (0.88, 6.43, 14.10, 8.94),
    "LawGPT-7B": (1.69, 3.41, 19.64, 9.73),
    "HanFei-7B": (13.71, 6.91, 25.22, 14.92),
    "YunShan": (44.11, 19.72, 43.70, 31.75),
}
# Rows whose printed AVG the printed columns cannot give under any rounding (off by 0.013 and 0.03).
LAWBENCH_INCONSISTENT = {"LLaMA2-7B", "FinGPT-7B"}


def _subjects_with_counts(counts):
    """One C-Eval subject per FinEval group holding n questions, `correct` of them answered right."""
    subjects, correct = [], {}
    for group, n in FINEVAL_N.items():
        q = Question("0", "q", ("a", "b", "c", "d"), "A", "x.csv", 2)
        subjects.append(ceval.Subject(group.lower(), group, group, group, questions=[q] * n))
        correct[group.lower()] = counts[group]
    return subjects, correct


@pytest.mark.parametrize("model", FINEVAL)
def test_fineval_avg_is_the_micro_average_of_the_validation_counts(model):
    *cols, avg = FINEVAL[model]
    counts = {g: round(acc * n / 100) for (g, n), acc in zip(FINEVAL_N.items(), cols)}
    subjects, correct = _subjects_with_counts(counts)
    result = ceval.aggregate(subjects, correct)
    assert result["n"] == 1151
    assert round(result["overall"], 2) == avg
    for (group, _), acc in zip(FINEVAL_N.items(), cols):
        if (model, group) not in FINEVAL_NOT_A_COUNT:
            assert round(result["groups"][group]["accuracy"], 2) == acc
    # The paper's formula on the printed columns agrees to rounding, and differs from the plain (macro) mean.
    weighted = sum(FINEVAL_N[g] * a for g, a in zip(FINEVAL_N, cols)) / 1151
    assert abs(weighted - avg) < 0.05
    if model == "YunShan":
        assert round(sum(cols) / 4, 2) == 60.33 != avg  # macro would understate YunShan by a point


def test_group__micro_average_differs_from_macro_on_unequal_groups():
    subjects, correct = _subjects_with_counts({"Accounting": 305, "Certificate": 0, "Economy": 0, "Finance": 0})
    result = ceval.aggregate(subjects, correct)
    assert result["overall"] == pytest.approx(100 * 305 / 1151)
    assert result["overall"] != pytest.approx(25.0)


@pytest.mark.parametrize("model", FINANCEIQ)
def test_financeiq_avg_is_the_unweighted_mean_of_subjects(model):
    *cols, avg = FINANCEIQ[model]
    subjects, correct = [], {}
    for i, acc in enumerate(cols):
        # Subjects of different sizes: the mean must not weight them. Accuracy acc% of 10,000 questions.
        n = 10_000
        q = Question("0", "q", ("a", "b", "c", "d"), "A", "x.csv", 2)
        subjects.append(cmmlu.Subject(f"s{i}", f"s{i}", questions=[q] * n))
        correct[f"s{i}"] = round(acc * n / 100)
    result = cmmlu.aggregate(subjects, correct)
    assert round(result["overall"], 2) == avg


@pytest.mark.parametrize("model", LAWBENCH)
def test_lawbench_avg_is_the_mean_over_twenty_tasks(model):
    mem, und, app, avg = LAWBENCH[model]
    # Task scores whose level means are the paper's columns (spread within a level, same mean).
    scores = {}
    for level, value in (("1", mem), ("2", und), ("3", app)):
        ids = [t for t in TASKS if t.startswith(level + "-")]
        spread = [0.5 * ((k % 2) * 2 - 1) * min(value, 1.0) for k in range(len(ids))]
        if len(ids) % 2:
            spread[-1] = 0.0
        for t, d in zip(ids, spread):
            scores[t] = value + d
    result = aggregate_levels(scores)
    assert result["n_tasks"] == 20 and result["missing_tasks"] == []
    assert result["levels"]["Memorization"] == pytest.approx(mem)
    assert result["levels"]["Understanding"] == pytest.approx(und)
    assert result["levels"]["Applying"] == pytest.approx(app)
    assert result["overall"] == pytest.approx((2 * mem + 10 * und + 8 * app) / 20)
    # Printed columns are rounded to 0.005, so the formula may move by 0.005, the AVG's own rounding by 0.005.
    if model in LAWBENCH_INCONSISTENT:
        assert abs(result["overall"] - avg) > 0.01
    else:
        assert abs(result["overall"] - avg) <= 0.01 + 1e-9
