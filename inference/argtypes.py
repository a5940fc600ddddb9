"""Argument types shared by every command line (`vq-lsp`, `vq-lsp score`, `vq-train`, benchmarks).

Each type either returns a valid value or raises `argparse.ArgumentTypeError`, so argparse
prints one line naming the flag (``argument --threads: must be an integer >= 1, got '-1'``) and
exits with status 2, before any work starts. Checking here, not where a value is first used,
is what keeps a bad flag from surfacing minutes later as a traceback deep in torch.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MAX_THREADS = 1024


def int_range(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An integer in [lo, hi] (hi None: no upper bound)."""
    want = f"an integer >= {lo}" if hi is None else f"an integer from {lo} to {hi}"

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except (ValueError, AttributeError):
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def float_range(
    lo: float, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False
) -> Callable[[str], float]:
    """A finite float in the interval from lo to hi (open ends where asked); nan and inf never pass."""
    left, right = "(" if lo_open else "[", ")" if hi_open else "]"
    want = f"a number in {left}{lo:g}, {'inf)' if hi is None else f'{hi:g}{right}'}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except (ValueError, TypeError):
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}") from None
        bad = not math.isfinite(value) or value < lo or (lo_open and value == lo)
        if hi is not None:
            bad = bad or value > hi or (hi_open and value == hi)
        if bad:
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


positive_int = int_range(1)
non_negative_int = int_range(0)
threads = int_range(1, MAX_THREADS)
seed = int_range(0, 2**32 - 1)  # numpy's seeds stop at 2**32 - 1
positive_float = float_range(0.0, lo_open=True)
non_negative_float = float_range(0.0)
probability = float_range(0.0, 1.0)


def log_level(text: str) -> str:
    """A logging level name, in any case."""
    name = text.strip().upper()
    if name not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(LOG_LEVELS)} (any case), got {text!r}")
    return name


def device(text: str) -> str:
    """A torch device this machine has: cpu, cuda, cuda:N (N below the GPU count), mps."""
    import torch  # only when the flag is given: `--help` stays fast

    try:
        dev = torch.device(text.strip())
    except (RuntimeError, ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"must be cpu, cuda, cuda:N or mps, got {text!r}") from None
    if dev.type == "cpu":
        return str(dev)
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise argparse.ArgumentTypeError(f"{text!r}: this machine has no CUDA device (use cpu)")
        if dev.index is not None and dev.index >= count:
            raise argparse.ArgumentTypeError(
                f"{text!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}"
            )
        return str(dev)
    if dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise argparse.ArgumentTypeError(f"{text!r}: MPS is not available on this machine (use cpu)")
        return str(dev)
    raise argparse.ArgumentTypeError(f"must be cpu, cuda, cuda:N or mps, got {text!r}")


def refuse_bare_double_dash(parser: argparse.ArgumentParser, argv: list[str] | None) -> None:
    """`--steps=--`: argparse (3.11) drops the "--" and stores an empty list, no type check run.

    Called before parse_args, so such a value is one error naming the flag, not a TypeError later.
    """
    for arg in argv or ():
        flag, eq, value = arg.partition("=")
        if eq and value == "--" and flag.startswith("-"):
            parser.error(f"argument {flag}: expected one value, got '--'")
