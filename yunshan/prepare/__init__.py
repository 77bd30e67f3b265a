"""Corpus preparation at scale on datatrove: `yunshan data prepare --config X.yaml` and the `prepare:` stage of
`yunshan run` (docs/prepare.md).

    yunshan data prepare --config recipes/prepare/laws.yaml [executor=ray|slurm]

datatrove does the reading of WARC, the HTML extraction (trafilatura), exact and MinHash deduplication, the writing
and the local, Ray and Slurm executors; yunshan adds, each as a datatrove block, what it lacks for Chinese finance and
legal text: `readers.py` (yunshan's validating record reader: every bad record counted or a one-line error),
`language.py` (language identification with a model inside its wheel; OpenCC), `quality.py` (page furniture removed
line by line, character-level quality rules), `pii.py` (personal data masked with check digits), `decontamination.py`
(yunshan's n-gram decontamination), `dedup.py` (CJK characters as MinHash words, the cluster list). `args.py` holds
the arguments (no datatrove import), `pipeline.py` the stages and executors, `report.py` the report, `examples.py`
the examples of each drop. The prepared corpus, OUT/documents/*.jsonl.zst, is what the tokenizer and cpt read.
"""
