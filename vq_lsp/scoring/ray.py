"""`vq-lsp score --ray`: the single-process scorer's rows, computed by workers of a Ray cluster.

Documents are independent, so each goes whole to one worker: a Ray actor that loads the model
once and keeps a `BatchScorer`, with the incremental state of every document it was given. The
driver reads the revisions, sends each to its document's actor (a new document goes to the actor
with the least text so far), and hands rows back in input order, so the output is the one of
`BatchScorer` (the `seconds` of each row aside: those are wall clock), and the summary is added
up from the rows by the same `Summary.add`. Without an address a local cluster is started on
the driver's machine (no dashboard) and stopped at the end. `ray_address` checks the --ray flag.

Optional: `pip install "vq-lsp[cluster]"` (ray). Every node must have vq-lsp installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Iterable, Iterator

import torch

import inference

from ..settings import load_options
from .revisions import Revision
from .rows import RevisionRow
from .scorer import BatchScorer, Summary

INSTALL_HINT = 'pip install "vq-lsp[cluster]"'
LOCAL = "local"
PROBE_SECONDS = 5.0  # a head that does not answer a TCP connect this fast is reported, not waited on
IN_FLIGHT_PER_WORKER = 32  # revisions sent ahead per worker: keeps workers busy, the driver's memory bounded
RAY_ADDRESS_FORMS = "local, auto, HOST:PORT or ray://HOST:PORT"


class RayUnavailable(ValueError):
    """Ray is missing or the cluster cannot be reached; `vq-lsp score` reports it and exits with 2."""


def ray_address(text: str) -> str:
    """Where `vq-lsp score --ray` finds its cluster: local (start one here), auto (the one already running
    here), HOST:PORT (a head node) or ray://HOST:PORT (Ray Client). A folder or file name here is the
    usual slip (`--ray PATH` takes PATH as the address), so the message says how to write both."""
    value = text.strip()
    if value.lower() in ("local", "auto"):
        return value.lower()
    rest = value[len("ray://") :] if value.startswith("ray://") else value
    host, colon, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host  # [::1]:6379
    ok_host = bool(host) and all(c.isascii() and (c.isalnum() or c in ".-_:") for c in host)
    if colon and ok_host and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535:
        return value
    raise argparse.ArgumentTypeError(
        f"must be a Ray address ({RAY_ADDRESS_FORMS}), got {text!r}; to score a "
        f"folder on a local cluster write PATH before --ray, or --ray=local"
    )


def ray_installed() -> bool:
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # ray blocked in sys.modules, or a broken install
        return False


def require_ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable(f"--ray needs the ray package: {INSTALL_HINT}") from None
    return ray


class ScoringWorker:
    """One worker: the model, loaded once, and a BatchScorer holding its documents' chains."""

    def __init__(self, model_path: str | None, threads: int, load: dict, scorer_options: dict) -> None:
        torch.set_num_threads(threads)
        self.model = inference.load_model(model_path, device="cpu", **load)
        self.scorer = BatchScorer(self.model, **scorer_options)

    def ready(self) -> dict[str, str]:
        """The engine this worker loaded (the driver keeps it: what its rows were scored with)."""
        m = self.model
        return {"precision": str(m.dtype).removeprefix("torch."), "context": m.context, "state_layout": m.layout}

    def cpu_seconds(self) -> float:
        """CPU time this worker process has used (benchmarks: throughput per CPU-second)."""
        return time.process_time()

    def score(self, index: int, name: str, label: str, text: str) -> RevisionRow:
        return self.scorer.score_revision(index, name, label, text)


class RayScorer:
    """Same interface as BatchScorer (`score(revisions)` yields rows, `summary`), on Ray actors."""

    def __init__(
        self,
        address: str,
        workers: int | None,
        model_path: str | os.PathLike | None,
        threads: int | None = None,
        load: dict | None = None,
        **scorer_options,
    ) -> None:
        """load: load_model's options for every worker (dtype, dense, context, layout), each one not given
        the `vq-lsp score` default (settings.load_options: the server's settings), so that a worker's rows
        are the single-process scorer's; scorer_options: BatchScorer's own (verify, hints, markup, writer,
        grammar_rules), passed to every worker's scorer."""
        self.ray = require_ray()
        self.threads = threads or 1
        self.started = connect(self.ray, address, workers, self.threads)
        if workers is None:
            workers = max(1, int(self.ray.cluster_resources().get("CPU", 1)) // self.threads)
        self.workers = workers
        actor = self.ray.remote(num_cpus=self.threads)(ScoringWorker)
        model_path = None if model_path is None else os.path.abspath(model_path)  # workers have their own cwd
        load = {**load_options(), **(load or {})}
        self.actors = [actor.remote(model_path, self.threads, load, scorer_options) for _ in range(workers)]
        try:  # every worker has loaded the model before the first revision is read
            self.engines: list[dict[str, str]] = self.ray.get([a.ready.remote() for a in self.actors])
        except self.ray.exceptions.RayError as e:
            self.close()
            raise RayUnavailable(f"a Ray worker could not load the model: {_cause(e)}") from None
        self.assigned: dict[str, int] = {}  # document -> actor
        self.load = [0] * workers  # characters sent to each actor
        self.summary = Summary()
        self._counted: set[str] = set()  # documents whose first row came back

    def _actor_for(self, name: str, size: int) -> int:
        if name not in self.assigned:
            self.assigned[name] = min(range(self.workers), key=self.load.__getitem__)
        a = self.assigned[name]
        self.load[a] += size
        return a

    def score(self, revisions: Iterable[Revision]) -> Iterator[RevisionRow]:
        pending: deque = deque()
        try:
            for index, (name, label, text) in enumerate(revisions):
                pending.append(self.actors[self._actor_for(name, len(text))].score.remote(index, name, label, text))
                if len(pending) >= IN_FLIGHT_PER_WORKER * self.workers:
                    yield self._count(self.ray.get(pending.popleft()))
            while pending:
                yield self._count(self.ray.get(pending.popleft()))
        finally:
            self.close()

    def _count(self, row: RevisionRow) -> RevisionRow:
        """Add a row to the summary, as BatchScorer does with its own rows."""
        self.summary.add(row, row.doc not in self._counted)
        self._counted.add(row.doc)
        return row

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)
        self.actors = []
        if self.started:
            self.ray.shutdown()
            self.started = False


def _cause(error: Exception) -> str:
    """The worker's own exception line out of Ray's wrapped error (its traceback text stays out)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    named = [line for line in lines if "Error:" in line and not line.startswith(("ray.", "The actor"))]
    return (named or lines or [type(error).__name__])[-1]


def probe(address: str, seconds: float = PROBE_SECONDS) -> None:
    """Fail fast when nothing listens at HOST:PORT: ray.init itself retries for minutes."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=seconds):
            pass
    except OSError as e:
        raise RayUnavailable(
            f"nothing answers at {address} ({e.strerror or e}); is a Ray head node running there?"
        ) from None


def connect(ray, address: str, workers: int | None, threads: int) -> bool:
    """Join the cluster at `address`, or start a local one; True when this call started it.

    A Ray session the calling program already opened is used as it is (and left open)."""
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine
    quiet = dict(logging_level=logging.ERROR, log_to_driver=False)
    if address not in (LOCAL, "auto"):
        probe(address)
    try:
        if address == LOCAL:
            cpus = (workers or os.cpu_count() or 1) * threads
            ray.init(num_cpus=cpus, num_gpus=0, include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
        where = "a local cluster" if address == LOCAL else f"the Ray cluster at {address}"
        raise RayUnavailable(f"cannot start or reach {where}: {e}") from None
    return True
