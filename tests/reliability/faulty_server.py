"""The real `vq-lsp` server with one injected fault, for the fault tests.

Run as `python -m tests.reliability.faulty_server [vq-lsp options]` with VQ_FAULT set to
comma-separated "where:first[:count]": calls number first .. first + count - 1 (1-based;
count 0: every call from `first` on) of the chosen function raise RuntimeError("injected
fault"). Where:
  layer  inference.engine.layer.update_layer: one layer of one window inside an incremental
         update, i.e. in the middle of the engine's state update
  build  inference.DocumentBuilder.step of a build's first window: builds are counted (an open or
         a rebuild), not windows, since a document has a window per paragraph with the paragraph
         context (the server's default) and one in all with the window context
  settle inference.IncrementalDocument.settle: an idle document brought to rest
  hints  vq_lsp.hints.lsp.choose, after the engine update, while choosing diagnostics
  hover  vq_lsp.hints.lsp.hover_text, inside a request
The server code is untouched; only these functions are wrapped before it starts.
"""

from __future__ import annotations

import functools
import os
import sys


def _wrap(fn, first: int, count: int, counted=None):
    """fn, raising on the chosen calls; counted(*args): whether a call counts (default: every call),
    a call not counted runs as it is."""
    calls = {"n": 0}

    @functools.wraps(fn)
    def faulty(*args, **kwargs):
        if counted is not None and not counted(*args):
            return fn(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] >= first and (count == 0 or calls["n"] < first + count):
            raise RuntimeError(f"injected fault (call {calls['n']} of {fn.__qualname__})")
        return fn(*args, **kwargs)

    return faulty


def _first_window(builder) -> bool:
    return not builder.windows


def install(specs: str) -> None:
    for spec in filter(None, specs.split(",")):
        _install(spec)


def _install(spec: str) -> None:
    where, first, *rest = spec.split(":")
    first, count = int(first), int(rest[0]) if rest else 1
    import inference
    import inference.engine.layer
    from vq_lsp.hints import lsp as hints

    if where == "layer":
        inference.engine.layer.update_layer = _wrap(inference.engine.layer.update_layer, first, count)
    elif where == "build":
        inference.DocumentBuilder.step = _wrap(inference.DocumentBuilder.step, first, count, _first_window)
    elif where == "settle":
        inference.IncrementalDocument.settle = _wrap(inference.IncrementalDocument.settle, first, count)
    elif where == "hints":
        hints.choose = _wrap(hints.choose, first, count)
    elif where == "hover":
        hints.hover_text = _wrap(hints.hover_text, first, count)
    else:
        raise SystemExit(f"unknown fault site {where!r}")


if __name__ == "__main__":
    install(os.environ.get("VQ_FAULT", ""))
    from vq_lsp.cli import main

    sys.exit(main())
