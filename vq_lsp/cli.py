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

from .settings import Settings


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vq-lsp", description="Live sentiment and writing-quality hints (LSP).")
    sub = p.add_subparsers(dest="command")
    sub.add_parser("score", help="score revision histories (see vq-lsp score --help)", add_help=False)
    serve = sub.add_parser("serve", help="run the language server over stdio (the default)")
    for q in (p, serve):
        q.add_argument("--model", metavar="PATH", help="model folder (initializationOptions.modelPath overrides it)")
        q.add_argument("--device", help="torch device: cpu, cuda, cuda:N (default: CUDA when present)")
        q.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
        q.add_argument("--log-level", default="WARNING", help="logging level on stderr (default WARNING)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["score"]:  # the batch scorer has its own options
        from .batch import main as score

        return score(argv[1:])
    args = _parser().parse_args(argv)
    if args.command not in (None, "serve"):
        print(f"vq-lsp: unknown command {args.command!r}", file=sys.stderr)
        return 2
    if args.threads < 1:
        print("vq-lsp: --threads must be at least 1", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="vq-lsp %(levelname)s %(name)s: %(message)s")
    import torch  # after argument parsing: `vq-lsp --help` stays fast

    torch.set_num_threads(args.threads)
    from .server import build

    defaults = dataclasses.replace(Settings(), model_path=args.model, device=args.device, threads=args.threads)
    server = build(defaults)
    code = server.start_io()
    if not server.engine_finished():  # an engine job nobody waits for any more: do not wait for it either
        logging.getLogger(__name__).warning("exiting while the engine finishes a job it no longer needs")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
