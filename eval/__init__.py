"""yunshan.eval: the domain benchmarks the PanGu-π paper judges YunShan with, scored as published.

    yunshan eval --model PATH [--model PATH ...] --tasks fineval financeiq lawbench jecqa bpc compression diversity

One file per benchmark family: `ceval.py` (C-Eval, FinEval), `cmmlu.py` (CMMLU, FinanceIQ), `financeiq.py`
(FinanceIQ's generated answers scored as its owners' code scores them), `lawbench.py` with `lawbench_scoring.py`,
`jecqa.py`, `bpc.py` (bits per character, forgetting vs gain), `compression.py` (tokens per character),
`diversity.py` (effective dimension per layer). Shared machinery: `likelihood.py` (batched
option scoring), `generation.py`, `extraction.py`, `multiple_choice.py`, `report.py`. `items.py` reads every
benchmark layout as items, which `decontamination.py` compares training data with. See README.md.
"""
