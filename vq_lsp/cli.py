"""The `vq-lsp` command. `vq-lsp` or `vq-lsp serve`: the language server over stdio.

The server's exit code follows LSP: 0 when `shutdown` came before `exit` (or before the client
closed the connection), else 1.

Subcommands are parsed with argparse subparsers so that a batch `vq-lsp score PATH` can be
added beside `serve` without changing how the server is started.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys

from . import stdio
from .engine_flags import add_engine_flags, checked
from .settings import Settings

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")  # inference.argtypes.LOG_LEVELS


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vq-lsp", description="Live sentiment and writing-quality hints (LSP).")
    sub = p.add_subparsers(dest="command")
    sub.add_parser("score", help="score revision histories (see vq-lsp score --help)", add_help=False)
    sub.add_parser(
        "check", help="print the hints of files and folders, for CI (see vq-lsp check --help)", add_help=False
    )
    serve = sub.add_parser("serve", help="run the language server over stdio (the default)")
    for q in (p, serve):
        # `vq-lsp --threads 2 serve`: the subcommand must not reset what was given before it
        keep = {} if q is p else {"default": argparse.SUPPRESS}
        add_engine_flags(
            q,
            keep_earlier=q is not p,
            notes={"model": "(initializationOptions.modelPath overrides it)"},
        )
        q.add_argument(
            "--log-level",
            type=checked("log_level"),
            **(keep or {"default": "WARNING"}),
            metavar="LEVEL",
            help=f"logging level on stderr: {', '.join(LOG_LEVELS)} (default WARNING)",
        )
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Every check of the server's flags: a bad one exits with status 2 and a line naming it."""
    parser = _parser()
    if any(arg.endswith("=--") for arg in argv):
        from inference.argtypes import refuse_bare_double_dash

        refuse_bare_double_dash(parser, argv)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["score"]:  # the batch scorer has its own options
        from .scoring.command import main as score

        return score(argv[1:])
    if argv[:1] == ["check"]:  # the CI checker too
        from .scoring.check import main as check

        return check(argv[1:])
    args = parse_args(argv)
    reserved = stdio.reserve_stdout()  # only the protocol reaches the editor
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="vq-lsp %(levelname)s %(name)s: %(message)s")
    import torch  # after argument parsing: `vq-lsp --help` stays fast

    torch.set_num_threads(args.threads)
    from .server.handlers import build

    defaults = dataclasses.replace(
        Settings(),
        model_path=args.model,
        device=args.device,
        threads=args.threads,
        precision=args.precision,
        context=args.context,
        state_layout=args.state_layout,
        sizing=args.sizing,
    )
    server = build(defaults)
    code = server.start_io(stdout=reserved.binary if reserved else None)
    if not server.engine_finished():  # an engine job nobody waits for any more: do not wait for it either
        logging.getLogger(__name__).warning("exiting while the engine finishes a job it no longer needs")
        if reserved:
            reserved.binary.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
