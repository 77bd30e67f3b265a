"""The `yunshan` command: one subcommand per stage of the YunShan pipeline.

    yunshan --help
    yunshan model info pangu-pi-7b

Each subcommand lives in the module that owns its concern; that module defines `add_arguments(parser)` and
`run(args) -> int` (flags come from the command's arguments dataclass, yunshan.arguments.flags). Only the module of the
subcommand being run is imported, and `import yunshan` loads neither torch nor transformers, so `yunshan --help`
answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Adding a subcommand is one line here plus the module.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("yunshan.pipeline", "the whole YunShan pipeline from one recipe (the main job)"),
    "model": ("yunshan.models.commands", "inspect PanGu-π and OTCE presets and checkpoints; upcycle LLaMA to PanGu-π"),
    "cpt": ("yunshan.training.cpt", "continual pretraining with token-exact replay mixing"),
    "sft": ("yunshan.training.sft", "single-stage mixed SFT on general and domain instructions"),
    "pref": ("yunshan.training.preference", "preference tuning after SFT: DPO, IPO, KTO, ORPO, SimPO (TRL)"),
    "plan": ("yunshan.plan", "memory per GPU and time of a recipe's training stages on each engine, before a run"),
    "data": ("yunshan.cli.data", "convert released datasets into yunshan JSONL, messages SFT data and eval layouts"),
    "eval": ("yunshan.eval.commands", "run FinEval/C-Eval, FinanceIQ/CMMLU, LawBench, JEC-QA, BPC, compression, diversity"),
    "chat": ("yunshan.serve.chat", "talk to a model in the terminal (streamed), or answer prompts as JSON lines"),
    "serve": ("yunshan.serve.command", "an OpenAI-compatible HTTP server (chat/completions, completions, models)"),
    "export": ("yunshan.hub.export", "export a run or model folder for the Hub: safetensors, code, tokenizer, model card"),
    "push": ("yunshan.hub.push", "upload an exported folder to the Hugging Face Hub (token from HF_TOKEN or the login)"),
    "tokenizer": ("yunshan.tokenizer.commands", "extend a tokenizer with domain vocabulary; compare compression"),
}


def build_parser(commands: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; the arguments of `commands` (default: all) are filled in, the others only listed."""
    from yunshan import __version__

    parser = argparse.ArgumentParser(prog="yunshan", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"yunshan {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        if commands is not None and name not in commands:
            subparsers.add_parser(name, help=help_text, add_help=False)
            continue
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=help_text, description=module.__doc__,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    # HF_HUB_OFFLINE is the user's to set: a Hub id in a recipe or flag downloads unless it is 1
    # (yunshan.loading.hub_download). Only what nobody asked for runs offline by default: the tests (tests/conftest.py)
    # and `make demo` (Makefile).
    argv = sys.argv[1:] if argv is None else list(argv)
    # The subcommand is the first word that is not an option (the top-level options take no values).
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser([chosen] if chosen in COMMANDS else [])
    args = _parse(parser, argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args._module.run(args) or 0)
    except (ValueError, OSError, EOFError) as err:
        # Bad input or a file the system refuses: one line (yunshan's messages name file, line and field; an OS
        # error names the file and the reason), no traceback.
        print(f"yunshan {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:
        # Ctrl-C: one line, no traceback. A command that keeps something resumable says what in the exception
        # (yunshan run: the stages kept and the checkpoint a rerun continues from).
        detail = _one_line(err) if str(err) else "Ctrl-C; nothing is kept beyond what the command had finished writing"
        # The interrupted frames hold the progress bars: freed first, they close (and redraw) before the line.
        err.__context__ = err.__cause__ = err.__traceback__ = None
        del err
        import gc

        gc.collect()
        sys.stderr.flush()
        print(f"\nyunshan {args.command}: interrupted: {detail}", file=sys.stderr)
        return 130
    finally:
        _close_process_group()


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The parsed command line. The recipe commands' dotted overrides may come anywhere, after options too
    (`yunshan run R.yaml --from cpt cpt.training.max_steps=10`): argparse stops filling a positional list at the
    first option, so the KEY=VALUE words after one are taken here; anything else unknown is argparse's error."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        if hasattr(args, "overrides") and all("=" in a and not a.startswith("-") for a in extra):
            args.overrides = [*(args.overrides or []), *extra]
        else:
            parser.parse_args(argv)  # exits with argparse's "unrecognized arguments" message
    return args


def _one_line(err: BaseException) -> str:
    """The error as one line: an OSError from the system as 'file: reason' (not "[Errno 13] Permission denied:
    'path'"), any other message with its line breaks folded."""
    if isinstance(err, OSError) and err.strerror and err.filename is not None and str(err).startswith("[Errno"):
        target = f"{err.filename} -> {err.filename2}" if err.filename2 is not None else f"{err.filename}"
        return f"{target}: {err.strerror}"
    text = " ".join(str(err).split())
    return text or type(err).__name__


def _close_process_group() -> None:
    """Destroy the process group of a distributed launch before the interpreter exits: left to interpreter teardown,
    a gloo process group under DeepSpeed sometimes aborted a finished process ("terminate called without an active
    exception", exit code -6), which failed the whole launch."""
    torch = sys.modules.get("torch")  # never imported just for this (`yunshan --help` stays fast)
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()

