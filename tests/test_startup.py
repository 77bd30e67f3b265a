"""`yunshan --help` loads no heavy library, and `import yunshan` still registers PanGu-π and OTCE with the Auto
classes (the moment transformers is imported, in either order)."""

import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "transformers", "datasets", "peft", "accelerate", "numpy", "tokenizers")


def python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd="/")
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def test_the_command_line_starts_without_heavy_libraries():
    # What the console script runs for `yunshan --help` and `yunshan` alone; the wall time of those (0.05 s here,
    # 3.2-3.8 s when importing yunshan imported transformers) follows from what they load.
    code = ("import sys, contextlib, io\nfrom yunshan.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
            "assert 'cpt' in out.getvalue() and 'tokenizer' in out.getvalue()\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert python(code) == "[]"
    exe = Path(sys.executable).with_name("yunshan")
    result = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "push" in result.stdout


def test_import_yunshan_is_light_and_registers_when_transformers_arrives():
    code = ("import sys\nimport yunshan\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
            "from transformers import AutoConfig, AutoModelForCausalLM\n"
            "config = AutoConfig.for_model('pangu_pi')\n"
            "tiny = AutoConfig.for_model('pangu_pi', hidden_size=32, intermediate_size=64, num_hidden_layers=2, "
            "num_attention_heads=4, num_key_value_heads=2, vocab_size=64, aug_reduction=4)\n"
            "print(type(config).__name__, type(AutoModelForCausalLM.from_config(tiny)).__name__)\n"
            "print(yunshan.PanguPiConfig is type(config))")
    assert python(code).splitlines() == ["[]", "PanguPiConfig PanguPiForCausalLM", "True"]


def test_import_yunshan_after_transformers_registers_at_once():
    code = ("import transformers\nimport yunshan\nfrom transformers import AutoConfig\n"
            "from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as lora\n"
            "print(AutoConfig.for_model('otce').model_type, 'q_proj' in lora['pangu_pi'])")
    assert python(code) == "otce True"


def test_importing_a_model_package_first_registers_when_it_is_complete():
    # The model package imports transformers for the first time while it is itself half-initialised: the
    # registration waits for it (no warning, nothing missing).
    code = ("import warnings\nwarnings.simplefilter('error')\n"
            "from yunshan.models.pangu_pi import PanguPiConfig\nfrom transformers import AutoConfig\n"
            "print(AutoConfig.for_model('pangu_pi').model_type, AutoConfig.for_model('otce').model_type)")
    assert python(code) == "pangu_pi otce"
