"""The ``mtp-audit`` application: the root command, its error handling and the table of
command groups, each imported only when it runs (``mtp-audit --version`` and ``--help``
import none of them, nor the engine or ``runtime_check``).

Every error reaches the user as one line, ``mtp-audit: error: <message>``, and exit
code 2: the tool's own errors (:class:`~auditor.common.errors.AuditError`) and usage errors
found by the parser alike (:func:`main` runs the command in non-standalone mode so that
they come back here instead of being drawn as a box). Options are declared once in
:mod:`auditor.cli.options`.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Optional, TypeVar

import typer

from .. import __version__
from ..common.errors import AuditError

try:  # typer >= 0.24 carries its own copy of click
    from typer._click import exceptions as click_exceptions
    from typer._click.utils import make_default_short_help
    from typer.core import TyperCommand, TyperGroup
except ImportError:  # pragma: no cover - older typer on click
    from click import exceptions as click_exceptions  # type: ignore[no-redef,import-not-found,unused-ignore]
    from click.utils import make_default_short_help  # type: ignore[no-redef,import-not-found,unused-ignore]
    from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class Entry:
    """A command of the root group: where it lives (a function or a ``typer.Typer`` group in
    ``module``) and its one-line summary, which ``mtp-audit --help`` lists without importing
    the module (a test checks it is the command's own)."""

    module: str
    attr: str
    summary: str


COMMANDS: dict[str, Entry] = {
    "scan": Entry("auditor.cli.scan", "scan", "Find where spec_step_idx is lost on its way to the MTP layers."),
    "graph": Entry("auditor.cli.scan", "graph", "Export the call graph the analysis examined."),
    "explain": Entry("auditor.cli.scan", "explain", "Show one finding's call chain with the code at every hop."),
    "rules": Entry("auditor.cli.rules", "rules_cmd", "List the rules, or print one rule's documentation."),
    "lint": Entry("auditor.cli.lint", "lint", "Report only the findings a change introduces (a pre-merge gate)."),
    "fix": Entry("auditor.cli.fix", "fix", "Thread spec_step_idx through wrappers that drop it (MTP001)."),
    "history": Entry("auditor.cli.history", "history_command", "Findings of every release tag: introduced, fixed, kept."),
    "diff": Entry("auditor.cli.history", "diff_command", "What changed between two revisions (exit 1 if B adds findings)."),
    "bisect": Entry("auditor.cli.history", "bisect_command", "Find the commit that introduced or fixed a finding."),
    "layers": Entry("auditor.cli.layers", "layers_command",
                    "Which MTP layer runs at each draft step for one model and configuration, and why."),
    "baseline": Entry("auditor.cli.baseline", "app", "Record today's findings so that only new ones are reported."),
    "releases": Entry("auditor.cli.releases", "app", "Build a git repository of vLLM releases from their sdists."),
    "runtime": Entry("runtime_check.cli", "app",
                     "Run vLLM with MTP speculative decoding on a tiny synthetic model and record which "
                     "physical MTP layer runs at every draft step (needs the runtime environment: "
                     "runtime_check/setup_env.sh)."),
}
# The runtime checker is optional: without the package there is no `runtime` command.
OPTIONAL = {"runtime": ("runtime_check", "runtime_check.cli")}


class Command(TyperCommand):
    """Usage lines in one style: ``PATH`` when required, ``[PATH]`` when optional."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if getattr(param, "param_type_name", "") != "argument":
                continue
            name = (param.metavar or (param.name or "").upper()).rstrip(".")
            if param.nargs != 1:
                name += "..."
            pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """Arguments by name only (no ``<path>`` type tag), then the options."""
        args, opts = [], []
        for param in self.get_params(ctx):
            kind = getattr(param, "param_type_name", "")
            if kind == "argument" and not getattr(param, "hidden", False):
                args.append(((param.metavar or (param.name or "").upper()), getattr(param, "help", None) or ""))
            elif kind == "option":
                record = param.get_help_record(ctx)
                if record is not None:
                    opts.append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)


class Group(TyperGroup):
    """A command group; the root one also loads its commands from :data:`COMMANDS` on use."""

    lazy: dict[str, Entry] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        names = list(super().list_commands(ctx))
        return names + [n for n in self.lazy if n not in names and _installed(n)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in self.lazy and _installed(cmd_name):
            loaded = load_command(cmd_name)
            if loaded is None:
                return None
            self.commands[cmd_name] = loaded
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """As click lists commands, with the summaries of those not loaded."""
        rows: list[tuple[str, str]] = []
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        for name in names:
            cmd = self.commands.get(name)
            if cmd is None:
                rows.append((name, make_default_short_help(self.lazy[name].summary, limit)))
            elif not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class RootGroup(Group):
    lazy = COMMANDS


def _installed(name: str) -> bool:
    """An optional command's package is present (looked up, not imported)."""
    if name not in OPTIONAL:
        return True
    try:
        return importlib.util.find_spec(OPTIONAL[name][0]) is not None
    except (ImportError, ValueError):
        return False


def load_command(name: str) -> Any:
    """The click command of ``COMMANDS[name]``, its module imported now; None when an
    optional command's package is genuinely missing (an import error inside it, a bug, is raised)."""
    entry = COMMANDS[name]
    try:
        module = importlib.import_module(entry.module)
    except ModuleNotFoundError as exc:
        if name in OPTIONAL and exc.name in OPTIONAL[name]:
            return None
        raise
    obj = getattr(module, entry.attr)
    holder = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
    holder.callback()(lambda: None)
    if isinstance(obj, typer.Typer):
        holder.add_typer(obj, name=name)
    else:
        command(name, holder)(obj)
    return typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

app = typer.Typer(
    name="mtp-audit",
    help="Audit vLLM for a lost spec_step_idx between speculative draft loops and MTP layer selection.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings=CONTEXT,
    cls=RootGroup,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _err(message: str) -> None:
    typer.echo(f"mtp-audit: error: {message}", err=True)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"mtp-audit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_version_callback, help="Print the version and exit.")
    ] = False,
) -> None:
    """Audit vLLM for a lost spec_step_idx between speculative draft loops and MTP layer selection."""




_F = TypeVar("_F", bound=Callable[..., Any])


def command(name: Optional[str] = None, app_: typer.Typer = app) -> Callable[[_F], _F]:
    """Register a command of ``app_`` with the :class:`Command` help and usage style."""
    register: Callable[[_F], _F] = app_.command(name, cls=Command)
    return register


def group(help: str) -> typer.Typer:
    """A command group (``baseline``, ``releases``) in the root's style."""
    return typer.Typer(help=help, no_args_is_help=True, cls=Group, rich_markup_mode=None)


def _usage_message(exc: Any) -> str:
    msg = exc.format_message().strip().replace("Value error, ", "")
    msg = msg[:1].lower() + msg[1:]
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return " ".join(msg.split()).rstrip(".") + where


def main(argv: Optional[list[str]] = None) -> None:
    from ..common.streams import guard_stdout, stdout_error

    cli = typer.main.get_command(app)
    if argv is None:
        from ..common.gc_pause import process_ends_after_command

        process_ends_after_command()
    guard_stdout()  # a closed stdout (`>&-`) is an error of its own when something is printed
    try:
        rc = cli.main(args=argv, prog_name="mtp-audit", standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx is not None else "")
        rc = EXIT_ERROR
    except click_exceptions.UsageError as exc:
        _err(_usage_message(exc))
        rc = EXIT_ERROR
    except click_exceptions.ClickException as exc:
        _err(" ".join(exc.format_message().split()))
        rc = EXIT_ERROR
    except AuditError as exc:
        _err(str(exc))
        rc = EXIT_ERROR
    except (KeyboardInterrupt, typer.Abort):
        _err("interrupted")
        rc = 130
    except BrokenPipeError:
        sys.stderr.close()
        rc = EXIT_FINDINGS
    except RecursionError:
        _err("the input is nested too deeply to read (a JSON file or value given to the command?)")
        rc = EXIT_ERROR
    except OSError as exc:
        message = stdout_error(exc)
        if message is None:
            if os.environ.get("MTP_AUDIT_DEBUG"):
                raise
            message = f"internal error: {type(exc).__name__}: {exc} (set MTP_AUDIT_DEBUG=1 for details)"
        _err(message)
        rc = EXIT_ERROR
    except Exception as exc:  # never a traceback for the user; MTP_AUDIT_DEBUG=1 shows it
        if os.environ.get("MTP_AUDIT_DEBUG"):
            raise
        _err(f"internal error: {type(exc).__name__}: {exc} (set MTP_AUDIT_DEBUG=1 for details)")
        rc = EXIT_ERROR
    code = rc if isinstance(rc, int) else EXIT_CLEAN
    if argv is None:
        # This process's own command line: it ends now, so neither a last cyclic collection
        # nor the teardown of what the command allocated (a scan's whole heap) frees anything
        # the exit does not.
        from ..common.process_exit import exit_process

        gc.disable()
        exit_process(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
