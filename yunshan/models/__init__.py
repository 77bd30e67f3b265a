"""Model architectures yunshan ships as transformers classes (PanGu-π, OTCE): the one registry of architectures and
their presets, and their registration with transformers' Auto classes.

    yunshan model info pangu-pi-7b

Adding an architecture is its folder (configuration_*.py and modeling_*.py, Hub-portable: they import only torch,
transformers and their siblings) plus one entry in ARCHITECTURES; presets, `yunshan model info`, `model.preset` in
recipes and the Auto-class registration all read that entry.

Nothing here imports transformers or torch until a class is asked for: `import yunshan` stays light (the command
line starts in a fraction of a second) and registers the architectures the moment transformers is imported
(`register_on_transformers_import`), so `import yunshan` followed by `AutoModelForCausalLM.from_pretrained(...)` on
a PanGu-π folder works as before.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Architecture:
    """One architecture: its model_type, the package holding it, and the names it exports there."""

    model_type: str
    package: str
    config: str
    model: str
    causal_lm: str
    presets: str  # name of the dict of presets in the package (preset name -> config fields)
    lora_targets: str  # name of the list of PEFT's default LoRA targets in the package


ARCHITECTURES = (
    Architecture("pangu_pi", "yunshan.models.pangu_pi", "PanguPiConfig", "PanguPiModel", "PanguPiForCausalLM",
                 "PANGU_PI_PRESETS", "PANGU_PI_LORA_TARGETS"),
    Architecture("otce", "yunshan.models.otce", "OtceConfig", "OtceModel", "OtceForCausalLM",
                 "OTCE_PRESETS", "OTCE_LORA_TARGETS"),
)


def _package(arch: Architecture):
    return importlib.import_module(arch.package)


def presets() -> dict[str, Architecture]:
    """Every preset name yunshan knows, with the architecture that builds it."""
    return {name: arch for arch in ARCHITECTURES for name in getattr(_package(arch), arch.presets)}


def preset_config(name: str, **overrides):
    """The config of preset `name` (pangu-pi-7b, pangu-pi-1b, tiny, otce-1b, ...) with fields overridden."""
    known = presets()
    if name not in known:
        raise ValueError(f"{name!r} is not a preset; valid: {', '.join(known)}")
    arch = known[name]
    return getattr(_package(arch), arch.config).from_preset(name, **overrides)


_registered = False


def register_architectures() -> None:
    """Register every architecture with transformers' Auto classes and PEFT's default LoRA targets (idempotent).

    `register_for_auto_class` makes `save_pretrained` write `auto_map` and copy the modeling code next to the
    weights, so the folder loads with `trust_remote_code=True` where yunshan is not installed.
    """
    global _registered
    if _registered:
        return
    _registered = True  # set first: importing the packages below may come back here (their loaders try again)
    try:
        _register_all()
    except BaseException:
        _registered = False
        raise


def _register_all() -> None:
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    for arch in ARCHITECTURES:
        package = _package(arch)
        config_cls, base_cls, lm_cls = (getattr(package, n) for n in (arch.config, arch.model, arch.causal_lm))
        try:
            AutoConfig.register(arch.model_type, config_cls)
        except ValueError:  # already registered
            pass
        for auto, cls in ((AutoModel, base_cls), (AutoModelForCausalLM, lm_cls)):
            try:
                auto.register(config_cls, cls)
            except ValueError:
                pass
        config_cls.register_for_auto_class("AutoConfig")
        base_cls.register_for_auto_class("AutoModel")
        lm_cls.register_for_auto_class("AutoModelForCausalLM")
        try:
            from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as lora_defaults
        except ImportError:  # PEFT is a dependency of yunshan, but a model user may run without it
            continue
        lora_defaults.setdefault(arch.model_type, list(getattr(package, arch.lora_targets)))


def _try_register(finished: str | None = None) -> None:
    """Register once transformers and every architecture package already being imported are complete: a model
    package that imports transformers for the first time is still half-initialised when transformers finishes,
    so it registers when it finishes itself (`finished`: the module whose execution just ended)."""
    if "transformers" not in sys.modules or _registered:
        return
    for arch in ARCHITECTURES:
        module = sys.modules.get(arch.package)
        if module is not None and arch.package != finished and getattr(module.__spec__, "_initializing", False):
            return
    try:
        register_architectures()
    except Exception as err:  # noqa: BLE001  (a failed registration must not make an import fail)
        warnings.warn(f"yunshan could not register its architectures with transformers: {err}", stacklevel=2)
    for finder in [f for f in sys.meta_path if isinstance(f, _RegisterOnImport)]:
        sys.meta_path.remove(finder)


class _RegisteringLoader:
    """Runs a module's own loader, then tries the registration; everything else is the original loader's."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _try_register(finished=module.__name__)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """A finder that answers only for transformers and yunshan's architecture packages: it returns their own
    specs with a loader that tries the registration once the module has been executed."""

    NAMES = frozenset({"transformers", *(arch.package for arch in ARCHITECTURES)})

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.NAMES:
            return None
        index = sys.meta_path.index(self)
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(index, self)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisteringLoader(spec.loader)
        return spec


def register_on_transformers_import() -> None:
    """Register now if transformers is already imported, else as soon as it is (the hook removes itself)."""
    if "transformers" in sys.modules:
        _try_register()
        if _registered:
            return
    if not any(isinstance(f, _RegisterOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterOnImport())


# The model classes, imported on first use: `from yunshan.models import PanguPiConfig` works as before.
_EXPORTS = {name: arch for arch in ARCHITECTURES for name in (arch.config, arch.model, arch.causal_lm)}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(_package(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ARCHITECTURES", "Architecture", "preset_config", "presets", "register_architectures",
           "register_on_transformers_import", *_EXPORTS]
