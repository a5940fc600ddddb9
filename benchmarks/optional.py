"""Optional packages of the benchmarks, checked before any work starts.

A benchmark runs for minutes; finding out at the last step that `matplotlib` is missing used to
lose every result. So: a package a benchmark cannot run without stops it at once with the pip
command that installs it, and a missing plotting library only skips the plots (said up front),
after the results are written.
"""

from __future__ import annotations

import importlib.util
import sys


def missing(*modules: str) -> list[str]:
    """The modules of `modules` that cannot be imported here."""
    out = []
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                out.append(name)
        except (ImportError, ValueError):  # a parent package missing, or a module blocked in sys.modules
            out.append(name)
    return out


def require(script: str, *modules: str, why: str) -> None:
    """Exit with status 2 and the install command when a needed module is absent."""
    absent = missing(*modules)
    if absent:
        print(f'{script}: error: needs {", ".join(absent)} ({why}): pip install -e ".[bench]"', file=sys.stderr)
        raise SystemExit(2)


def can_plot(script: str) -> bool:
    """True when matplotlib is importable; else say once, before the work, that plots will be skipped."""
    if missing("matplotlib"):
        print(
            f"{script}: matplotlib is not installed: results and tables are written, plots are skipped "
            f'(pip install -e ".[bench]" to get them)',
            file=sys.stderr,
        )
        return False
    return True
