"""Analysis settings: vLLM's conventions, overridable from ``[tool.mtp-audit]`` in pyproject.toml."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass
class Config:
    # Keyword arguments threaded from draft loops to layer selection.
    threaded_params: list[str] = field(default_factory=lambda: ["spec_step_idx"])
    # A `for` loop whose iterable mentions one of these counts is a draft loop.
    draft_loop_counts: list[str] = field(
        default_factory=lambda: ["num_speculative_tokens", "num_speculative_steps", "num_spec_tokens"]
    )
    # Functions that build the draft model from the architecture registry.
    loaders: list[str] = field(default_factory=lambda: ["get_model"])
    # Module-level tables mapping architecture -> (module, class) for draft models.
    registry_tables: list[str] = field(default_factory=lambda: ["_SPECULATIVE_DECODING_MODELS"])
    # Calls by which a platform plugin registers a model class for an architecture
    # (``ModelRegistry.register_model("Arch", "pkg.mod:Class")``; issue 13).
    plugin_register_calls: list[str] = field(default_factory=lambda: ["register_model"])
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    severity: dict[str, str] = field(default_factory=dict)

    def rule_enabled(self, code: str) -> bool:
        if self.select and not any(code.startswith(s) for s in self.select):
            return False
        return not any(code.startswith(s) for s in self.ignore)


_LIST_KEYS = {"threaded_params", "draft_loop_counts", "loaders", "registry_tables", "select", "ignore",
              "plugin_register_calls"}
_TOML_NAMES = {f.name.replace("_", "-"): f.name for f in fields(Config)}
_SEVERITIES = {"error", "warning", "note"}


def load_config(pyproject: Path | None) -> Config:
    cfg = Config()
    if pyproject is None or not pyproject.is_file():
        return cfg
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{pyproject}: cannot read configuration: {exc}") from None
    section = data.get("tool", {}).get("mtp-audit")
    if section is None:
        return cfg
    if not isinstance(section, dict):
        raise ConfigError(f"{pyproject}: [tool.mtp-audit] must be a table")
    return apply_settings(cfg, section, str(pyproject))


def apply_settings(cfg: Config, section: dict[str, Any], origin: str) -> Config:
    for key, value in section.items():
        name = _TOML_NAMES.get(key) or (key if key in {f.name for f in fields(Config)} else None)
        if name is None:
            known = ", ".join(sorted(_TOML_NAMES))
            raise ConfigError(f"{origin}: unknown key tool.mtp-audit.{key} (known: {known})")
        if name in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(f"{origin}: tool.mtp-audit.{key} must be a list of non-empty strings")
            if name == "threaded_params" and not value:
                raise ConfigError(f"{origin}: tool.mtp-audit.{key} must name at least one parameter")
            setattr(cfg, name, list(value))
        elif name == "severity":
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v in _SEVERITIES for k, v in value.items()
            ):
                raise ConfigError(
                    f"{origin}: tool.mtp-audit.severity must map rule codes to one of error, warning, note"
                )
            cfg.severity = dict(value)
    return cfg
