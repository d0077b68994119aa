"""Shared by every layer: errors, cache paths, atomic writes, progress lines and the
``[tool.mtp-audit]`` settings (:mod:`auditor.common.config`)."""
