"""An update's first pass captured once per shape and replayed: CUDA graphs for graphed sizing.

On a GPU an edit is bound by the host launching a few hundred small kernels, not by the GPU's
work. Bucketed sizing makes a pass a function of its shapes alone: the same ops with the same
arguments for every edit whose plan has the same shapes (the padded lengths of A and of the
edited rows, the deleted rows, the room of each layer, the riders), and no host read before the
pass's end (tests/engine/test_pass_graphs.py checks both). So a window keeps, per shape key, the
plan and the pass results of the edit that captured it: a later edit with that key copies its
plan into the captured plan's tensors and replays the graph, which writes the state in place
and the results into the captured tensors. A key is run eagerly the first time it is seen (which
warms its kernels up), captured the second time, replayed after that.

Replay needs the tensors it read and wrote at capture to stay where they were: the window's
state (WindowState.make_views drops its graphs whenever its tensors are reallocated), the
captured plan and the captured results (kept by the entry, in the graph's own memory pool).
Resumed passes (an overflow, rare) run eagerly.

On a CPU there are no CUDA graphs: the same bookkeeping runs with an emulated replay that runs
the pass again on the captured plan, checks that every host-side value it produces equals the
captured one, and copies its tensors into the captured results. That is what the tests use to
check, without a GPU, that replay on captured inputs gives a dense pass's codes.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch

from .plan import EditPlan, LayerRecord, PassState, Riders
from .policy import Room

READ_AFTER = ("sets", "n_tied", "n_next")  # LayerRecord fields filled from the pass's results
MAX_GRAPHS = 48  # captured passes a window keeps (least recently used dropped first)
MAX_SEEN = 16 * MAX_GRAPHS  # shape keys a window remembers having run once (least recently seen forgotten first)
DevicePass = Callable[[EditPlan, "Riders | None"], PassState]


class CaptureMismatch(RuntimeError):
    """An emulated replay produced a host-side value or a shape that differs from the capture's:
    the pass depends on more than its shapes, and a CUDA graph of it would be wrong."""


@dataclass
class Captured:
    """One captured pass: its inputs (the plan and riders it was captured with, refreshed by each
    replaying edit) and its outputs (the PassState it produced, whose tensors each replay rewrites)."""

    plan: EditPlan
    riders: Riders | None
    run: PassState
    device_pass: DevicePass
    graph: torch.cuda.CUDAGraph | None  # None: emulated (CPU)
    inputs: dict[str, torch.Tensor] = field(init=False)  # the plan's tensors, by field name

    def __post_init__(self) -> None:
        self.inputs = _plan_tensors(self.plan)


def pass_key(plan: EditPlan, rooms: list[Room], riders: Riders | None) -> tuple:
    """What a captured pass depends on: the shapes of every plan tensor, the rooms, the riders."""
    return _key(_plan_tensors(plan), rooms, riders)


def _key(tensors: dict[str, torch.Tensor], rooms: list[Room], riders: Riders | None) -> tuple:
    shapes = tuple(tuple(t.shape) for t in tensors.values())
    return shapes, tuple(rooms), None if riders is None else tuple(riders.slots.shape)


def _plan_tensors(plan: EditPlan) -> dict[str, torch.Tensor]:
    return {f.name: v for f in fields(plan) if isinstance(v := getattr(plan, f.name), torch.Tensor)}


class PassGraphs:
    """A window's captured first passes, by shape key; `run` is the only entry point."""

    def __init__(self, device: torch.device, limit: int = MAX_GRAPHS) -> None:
        self.cuda = torch.device(device).type == "cuda"
        self.limit = limit
        self.seen: OrderedDict[tuple, None] = OrderedDict()  # keys run once, eagerly: captured if seen again
        self.captured: OrderedDict[tuple, Captured] = OrderedDict()
        self.replays = self.captures = self.eager = 0
        self.failure: str | None = None  # why a capture failed, after which every pass runs eagerly

    def run(self, plan: EditPlan, rooms: list[Room], riders: Riders | None, device_pass: DevicePass) -> PassState:
        """The pass of `plan`, eager, captured or replayed; riders.outputs is set either way."""
        tensors = _plan_tensors(plan)  # read once per edit: the key and the staging both need them
        key = _key(tensors, rooms, riders)
        entry = self.captured.get(key)
        if entry is not None:
            self.captured.move_to_end(key)
            self.replays += 1
            _stage(tensors, riders, entry)
            run = self._replay(entry)
        elif key not in self.seen or self.failure is not None:
            self._saw(key)
            self.eager += 1
            return device_pass(plan, riders)
        else:
            try:
                entry = self._capture(plan, riders, device_pass)
            except Exception as e:  # a capture the device refuses: this window runs its passes eagerly
                self.failure = f"{type(e).__name__}: {e}"
                warnings.warn(f"graphed sizing: capture failed, passes run eagerly ({self.failure})", stacklevel=2)
                self.eager += 1
                return device_pass(plan, riders)  # (capturing ran nothing, so the state is as it was)
            self.captures += 1
            self.captured[key] = entry
            if len(self.captured) > self.limit:
                self.captured.popitem(last=False)
            run = entry.run
        if riders is not None and entry.riders is not None:
            riders.outputs = entry.riders.outputs
        return run

    def _saw(self, key: tuple) -> None:
        """Remember a key run once; among many one-off shapes, the least recently seen are forgotten."""
        self.seen[key] = None
        self.seen.move_to_end(key)
        if len(self.seen) > MAX_SEEN:
            self.seen.popitem(last=False)

    def _capture(self, plan: EditPlan, riders: Riders | None, device_pass: DevicePass) -> Captured:
        if not self.cuda:  # emulated: running it is capturing and replaying it once
            return Captured(plan, riders, device_pass(plan, riders), device_pass, None)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # other threads may read the device
            run = device_pass(plan, riders)
        graph.replay()  # capturing ran nothing
        return Captured(plan, riders, run, device_pass, graph)

    def _replay(self, entry: Captured) -> PassState:
        if entry.graph is not None:
            entry.graph.replay()
            return entry.run
        riders = Riders(entry.riders.slots) if entry.riders is not None else None
        fresh = entry.device_pass(entry.plan, riders)
        _copy_results(entry.run, fresh)
        if riders is not None:
            entry.riders.outputs.copy_(riders.outputs)
        return entry.run


def _stage(tensors: dict[str, torch.Tensor], riders: Riders | None, entry: Captured) -> None:
    """Copy an edit's plan tensors (and riders) into the captured plan's, which the graph reads."""
    for name, t in tensors.items():
        if entry.inputs[name] is not t:
            entry.inputs[name].copy_(t)
    if riders is not None:
        entry.riders.slots.copy_(riders.slots)


def _copy_results(captured: PassState, fresh: PassState) -> None:
    """Emulated replay: fresh results into the captured ones, every host-side value checked equal."""
    _copy_tensors(captured.counts, fresh.counts, "counts")
    if len(captured.records) != len(fresh.records):
        raise CaptureMismatch(f"{len(fresh.records)} layer records, captured {len(captured.records)}")
    for i, (a, b) in enumerate(zip(captured.records, fresh.records)):
        host_a, host_b = _host_fields(a), _host_fields(b)
        if host_a != host_b:
            raise CaptureMismatch(f"layer record {i}: {host_b}, captured {host_a}")
        _copy_tensors(a.sets, b.sets, f"record {i} sets")
    if captured.saved.keys() != fresh.saved.keys():
        raise CaptureMismatch(f"saved layers {sorted(fresh.saved)}, captured {sorted(captured.saved)}")
    for l, saved in captured.saved.items():
        names = [f.name for f in fields(saved)]
        _copy_tensors([getattr(saved, n) for n in names], [getattr(fresh.saved[l], n) for n in names], f"saved {l}")
    _copy_tensors(list(captured.carry or ()), list(fresh.carry or ()), "carry")


def _host_fields(record: LayerRecord) -> dict:
    """What a pass decided on the host about a layer (not the counts read after it)."""
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name not in READ_AFTER}


def _copy_tensors(into: list, source: list, what: str) -> None:
    if len(into) != len(source):
        raise CaptureMismatch(f"{what}: {len(source)} tensors, captured {len(into)}")
    for a, b in zip(into, source):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise CaptureMismatch(f"{what}: {tuple(b.shape)} {b.dtype}, captured {tuple(a.shape)} {a.dtype}")
        if a is not b:
            a.copy_(b)
