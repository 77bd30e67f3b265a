"""A model or tokenizer folder's own Python code runs only when the user asked for it.

    yunshan eval --model FOLDER --trust-remote-code ...      # recipes: model.trust_remote_code: true

A folder whose config.json or tokenizer_config.json has an `auto_map` names Python files of its own, which
transformers imports (and so runs) to load it. yunshan passes `trust_remote_code` to transformers explicitly on
every load, False unless the user opted in (never None: transformers would then ask on a terminal and wait), and
`refuse_remote_code` turns transformers' refusal into one line saying why and how to opt in. PanGu-π and OTCE
folders saved by yunshan carry an auto_map too, for machines without yunshan; where yunshan is installed their
classes are registered with the Auto classes, so they load without any remote code. The same opt-in lets an
lm-evaluation-harness task YAML's `!function` run the Python beside it (yunshan/eval/lm_eval_tasks.py, `task_code`),
refused in the same words (`refusal`) otherwise.
"""

from __future__ import annotations

import contextlib
import os


def refusal(why: str, whose: str, opt_in: str) -> str:
    """The one line refusing code the user did not ask to run: `why` (what would run, from where), then `opt_in`."""
    return f"{why}, and yunshan runs {whose} only when asked: review that code, then run it with {opt_in}"


@contextlib.contextmanager
def refuse_remote_code(folder: str | os.PathLike, opt_in: str | None, never: str | None = None):
    """Around a `from_pretrained(..., trust_remote_code=False)`: transformers' refusal to run the folder's code
    becomes a one-line ValueError naming the folder and `opt_in` (the flag or recipe field that allows it); for a
    command that has no opt-in because it never runs a folder's code, `opt_in` is None and `never` says what to do
    instead."""
    try:
        yield
    except ValueError as err:
        if "trust_remote_code" not in str(err):
            raise
        why = (f"{folder}: loading it would run Python code shipped in the folder (auto_map in its config.json or "
               "tokenizer_config.json)")
        if opt_in is None:
            raise ValueError(f"{why}; {never}") from None
        raise ValueError(refusal(why, "a folder's own code", opt_in)) from None
