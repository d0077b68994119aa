"""The settings a command runs with: the registered rules, the ``[tool.mtp-audit]``
configuration with ``--select``/``--ignore`` applied (every rule code checked), and the cache root."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from ..common.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from rules.base import Rule

    from ..common.config import Config


def registered_rules() -> "list[type[Rule]]":
    """The rules this tool runs. The only call to the rule registry: the engine is handed
    this list, and every list of known codes (validation, `rules`, error messages) comes
    from here."""
    from rules import all_rules

    return all_rules()


def check_codes(codes: Sequence[str], where: str, exact: bool = False) -> list[str]:
    """``codes`` upper-cased; an unknown code (or, unless ``exact``, a prefix matching no
    rule) is an error naming the code and the known ones."""
    known = [r.code for r in registered_rules()]
    out = []
    for raw in codes:
        code = raw.strip().upper()
        if not code:
            continue
        ok = code in known if exact else any(k.startswith(code) for k in known)
        if not ok:
            raise UsageError(f"unknown rule code {raw.strip()!r} in {where} (known: {', '.join(known)})")
        out.append(code)
    return out


def split_codes(values: Optional[list[str]]) -> list[str]:
    return [c for v in values or [] for c in v.split(",") if c.strip()]


def load_settings(root: Optional[Path], config_path: Optional[Path], select: Optional[list[str]], ignore: Optional[list[str]]) -> "Config":
    """The configuration (``--config``, else ``root``'s pyproject.toml) with ``--select``/``--ignore``
    applied; every rule code in it is checked."""
    from ..common.config import load_config

    if config_path is not None and not config_path.is_file():
        raise UsageError(f"configuration file not found: {config_path}")
    source = config_path if config_path is not None else (root / "pyproject.toml" if root else None)
    cfg = load_config(source)
    origin = f"{source}: tool.mtp-audit"
    try:
        cfg.select = check_codes(cfg.select, f"{origin}.select")
        cfg.ignore = check_codes(cfg.ignore, f"{origin}.ignore")
        severity = dict(zip(check_codes(list(cfg.severity), f"{origin}.severity", exact=True), cfg.severity.values()))
    except UsageError as exc:
        raise ConfigError(str(exc)) from None
    cfg.severity = severity
    if select:
        cfg.select = check_codes(split_codes(select), "--select")
        if not cfg.select:
            raise UsageError("--select needs at least one rule code (e.g. --select MTP001)")
    if ignore:
        cfg.ignore = check_codes(split_codes(ignore), "--ignore")
    return cfg


def cache_root(no_cache: bool, cache_dir: Optional[Path]) -> Optional[Path]:
    from ..common.paths import default_cache_dir

    return None if no_cache else (cache_dir or default_cache_dir())
