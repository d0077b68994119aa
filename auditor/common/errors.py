"""Errors that reach the user as one clear line and exit code 2."""


class AuditError(Exception):
    """Base class: the CLI prints ``mtp-audit: error: <message>`` and exits 2."""


class UsageError(AuditError):
    pass


class FetchError(AuditError):
    pass


class GitError(AuditError):
    pass


class ConfigError(AuditError):
    pass
