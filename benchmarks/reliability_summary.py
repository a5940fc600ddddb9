"""Reliability summary: run every reliability scenario once and print one table.

    python -m benchmarks.reliability_summary [--data DIR] [--fuzz-examples N] [--out FILE]

It runs the drivers tests/reliability runs in CI, with the same parameters, each against its
own real `vq-lsp` process over stdio: the 5,000-edit long session (drift against a full pass
every 250 edits), the edit storms, 50 documents of 2,000 tokens under a memory budget, the
fault scenarios and the hostile-input fuzzer. Model: the tests' small random model with the
bundled model's tokenizer (the scenarios measure the server, not the model's quality).

A crash is a server process that ended without being asked to (no exit, input still open),
on a signal, or with a fatal interpreter error; or an LSP session whose server did not exit
with code 0 after shutdown and exit. Scenario failures are listed under the table and make
the exit code 1. The table and the notes are written to --out
(default benchmarks/results/reliability_summary.md) as a README-ready section.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch

import inference
from benchmarks.common import REPO, data_dir, markdown_table
from tests.reliability import big_opens as bo
from tests.reliability import faults
from tests.reliability import scenarios as sc
from tests.reliability.fuzzing import FuzzStats, check_case, messages, start_session
from tests.reliability.rawclient import RawClient, encode
from tests.server.lsp_helpers import CONFIG, initialize

COMMAND = "python -m benchmarks.reliability_summary"


@dataclass
class Tally:
    failures: list[str] = field(default_factory=list)
    lsp_crashes: int = 0
    details: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)

    def failed(self, name: str) -> None:
        self.failures.append(f"{name}: {traceback.format_exc(limit=3).strip().splitlines()[-1]}")
        print(f"  FAILED: {self.failures[-1]}", flush=True)


async def lsp_scenario(name: str, tally: Tally, model_dir: Path, run):
    """Run one scenario on its own server started through pytest-lsp's client; returns its result."""
    print(f"{name} ...", flush=True)
    client = await CONFIG.start()
    result = None
    try:
        await initialize(client, "visual-studio-code", {"modelPath": str(model_dir)})
        result = await run(client)
    except Exception:
        tally.failed(name)
    finally:
        server = client._server
        if server.returncode is None:
            await client.shutdown_session()
        if server.returncode != 0:
            tally.lsp_crashes += 1
            tally.failures.append(f"{name}: the server ended with code {server.returncode}")
        await client.stop()
    return result


async def lsp_scenarios(model_dir: Path, data: Path, tally: Tally) -> None:
    revisions = sc.revision_history(data, sc.LONG_DOC)
    long = await lsp_scenario(
        "long session", tally, model_dir, lambda c: sc.long_session(c, revisions, sc.LONG_EDITS, sc.CHECK_EVERY)
    )
    if long:
        tally.values["edits applied"] = f"{long.edits:,}"
        tally.values["max drift"] = f"{long.max_drift:.1e}"
        tally.details["long session"] = (
            f"{long.edits:,} didChange notifications into one document ({long.revisions} real revisions of "
            f"`{sc.LONG_DOC}` + random typing, cutting and pasting), {long.engine_updates:,} engine updates, "
            f"{len(long.checks)} drift checks against a full pass (every {sc.CHECK_EVERY} edits): codes equal at "
            f"every check, max |difference| {long.max_drift:.1e} (float32, the server's default precision; "
            f"tolerance {sc.DRIFT_TOLERANCE['float32']:g}), final "
            f"{long.final_tokens} tokens, {long.seconds:.0f} s"
        )
    storm = await lsp_scenario(
        "edit storms", tally, model_dir, lambda c: sc.edit_storm(c, revisions[-1], storms=sc.STORMS)
    )
    if storm:
        tally.values["storms survived"] = f"{storm.storms} of {sc.STORMS}"
        tally.details["edit storms"] = (
            f"{storm.changes:,} keystrokes in bursts of 50 every 2 ms -> {storm.engine_updates} engine updates, "
            f"{storm.publishes} publishes (in versions that never go back: mid-storm, hints moved through the "
            f"edits still waiting, at most every 50 ms and only when a hint survives); hover and documentScores "
            f"sent mid-storm answered "
            f"mid-storm in at most {max(storm.request_seconds) * 1000:.0f} ms; state exact after each storm"
        )
    tok = inference.Tokenizer.from_file(model_dir / "tokenizer.json")
    docs = sc.chapter_documents(data, tok, sc.MEMORY_DOCS + 1, sc.MEMORY_TOKENS)

    async def memory(c):
        res = await sc.many_documents(c, docs[1:], sc.MEMORY_BUDGET_MB, tok, warmup=docs[0])
        sc.check_memory(res, sc.REST_SLACK_MB, sc.TRANSIENT_MB)
        return res

    mem = await lsp_scenario("memory", tally, model_dir, memory)
    if mem:
        mib = 2**20
        tally.values["peak memory"] = f"{mem.peak_rss / mib:.0f} MiB RSS"
        tally.details["memory"] = (
            f"{mem.documents} documents, {mem.tokens:,} tokens, budget {mem.budget_bytes / mib:.0f} MiB: "
            f"{mem.bytes_per_document / mib:.1f} MiB per live state ({mem.bytes_per_token:,.0f} B per token), at most "
            f"{mem.live_states_max} live states, {mem.state_bytes_max / mib:.0f} MiB of states at most; RSS baseline "
            f"{mem.baseline_rss / mib:.0f} MiB, at rest at most {mem.rest_rss_max / mib:.0f} MiB (limit baseline + "
            f"budget + {sc.REST_SLACK_MB:.0f}), peak {mem.peak_rss / mib:.0f} MiB (limit baseline + budget + "
            f"{sc.TRANSIENT_MB:.0f} for one full pass's temporaries)"
        )


def fault_scenarios(model_dir: Path, data: Path, tally: Tally) -> None:
    tok = inference.Tokenizer.from_file(model_dir / "tokenizer.json")
    long_docs = sc.chapter_documents(data, tok, 4, 2000)
    injected, names = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        runs = [
            (
                "damaged model folders (missing, truncated, mismatched shapes)",
                lambda: faults.bad_model_folders(model_dir, Path(tmp)),
            ),
            ("engine raising mid-update", lambda: faults.engine_fault_mid_update(model_dir)),
            ("full pass, diagnostics and a request raising", lambda: faults.handler_faults(model_dir)),
            ("diagnostics raising on every call", lambda: faults.repeating_fault(model_dir)),
            ("client dying mid-message (idle, busy) or vanishing", lambda: faults.client_dies(model_dir, long_docs)),
            (
                "shutdown/exit with work pending",
                lambda: faults.shutdown_and_exit_with_work_pending(model_dir, long_docs),
            ),
        ]
        for name, run in runs:
            print(f"faults: {name} ...", flush=True)
            try:
                n = run()
                injected += n
                names.append(f"{name}: {n}")
            except Exception:
                tally.failed(f"faults: {name}")
    tally.values["faults injected"] = str(injected)
    tally.details["faults"] = (
        "; ".join(names) + ". Each: a clear message, state verified afterwards, recovery or a clean exit"
    )


def fuzz(model_dir: Path, examples: int, tally: Tally) -> None:
    from hypothesis import HealthCheck, given, settings

    print(f"fuzz: {examples} hostile messages ...", flush=True)
    stats = FuzzStats()
    c = RawClient(args=["--model", str(model_dir)])
    try:
        start_session(c)

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(messages())
        def one(case):
            check_case(c, *case, stats)

        one()
        for data, err in stats.internal[:5]:
            print(f"  internal error: {err} for {data[:200]!r}")
        sc.expect(not c.undecodable, f"the server wrote {len(c.undecodable)} frames that are not JSON")
        sc.expect(not stats.internal, f"{len(stats.internal)} internal errors (unexpected exceptions in handlers)")
        sc.expect(c.shutdown_and_exit() == 0, "no clean exit after the fuzz session")
    except Exception:
        tally.failed("fuzz")
    finally:
        c.kill()
    oversized = 0
    for declared in (64 * 2**20 + 1,):  # a body over the limit: skipped in chunks, then answered
        c = RawClient(args=["--model", str(model_dir)])
        try:
            start_session(c)
            c.send_raw(b"Content-Length: %d\r\n\r\n" % declared + b"x" * declared)
            c.wait_for(lambda ms: any(m.get("id", 0) is None and "error" in m for m in ms))
            sc.expect("result" in c.call("vqLsp/documentScores", {"uri": "file:///tmp/vq/fuzz-sentinel.txt"}), "")
            c.send_raw(b"Content-Length: 99999999999999\r\n\r\n" + encode({"jsonrpc": "2.0", "id": 1, "method": "x"}))
            c.close_input()  # never sent: the server waits for it, then sees the client go
            sc.expect(c.wait_exit(30) == 1, "no clean exit after an absurd Content-Length")
            oversized += 2
        except Exception:
            tally.failed("fuzz: oversized messages")
        finally:
            c.kill()
    tally.values["malformed messages sent"] = f"{stats.sent + oversized:,}"
    codes = ", ".join(f"{k}: {v}" for k, v in sorted(stats.codes.items(), key=str))
    tally.details["hostile input"] = (
        f"{stats.sent:,} hypothesis cases (broken framing, non-JSON, wrong types, invalid URIs, positions past the "
        f"end or negative, lines up to 300,000 characters, NUL, lone surrogates) + {oversized} oversized frames: "
        f"{stats.requests_answered} requests answered ({codes}), {stats.null_errors} errors with id null, "
        f"{len(stats.internal)} internal errors; a sentinel request answered after every message"
    )


def big_opens(data: Path, tally: Tally) -> None:
    """The storm of big opens with the bundled model and the default budget: 300 hostile messages, 12 of
    them opens of a 50,000-token document (each float32 state alone over 1,024 MiB)."""
    print("big-open storm (bundled model) ...", flush=True)
    tok = inference.load_model(device="cpu").tokenizer
    big, n = bo.big_document(data, tok, 50_000)
    c = RawClient()
    try:
        c.initialize({"threads": 1})
        res = bo.big_open_storm(
            c, "A short, happy note about a lovely film.\n", big, n, idle_after=10.0, idle_window=10.0
        )
        sc.expect(c.shutdown_and_exit() == 0, "no clean exit after the big-open storm")
        ms = [1000 * x for x in res.hover_seconds]
        tally.values["small-document hover after a storm of big opens"] = (
            f"p50 {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms"
        )
        tally.details["storm of big opens"] = (
            f"{res.messages} hostile messages (settings flips, keystrokes and requests on the big documents, bad "
            f"JSON, positions far out of range) with {res.big_opens} opens of a {res.big_tokens:,}-token document "
            f"(bundled model, default 1,024 MiB budget: each state alone would be over it): each refused once with a "
            f"message ({res.refused_messages} messages); then {len(ms)} hovers on a small open document answered in "
            f"p50 {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms (server CPU {res.storm_cpu_seconds:.1f} s "
            f"from the first storm message to the first answer); server CPU {res.idle_cpu_seconds:.2f} s in the "
            f"{res.idle_window_s:.0f} s from {res.idle_after_s:.0f} s after the storm"
        )
    except Exception:
        tally.failed("big-open storm")
    finally:
        c.kill()


def report(tally: Tally, seconds: float) -> str:
    crashes = tally.lsp_crashes + sum(c.crashed() for c in RawClient.started)
    tally.values["crashes"] = str(crashes)
    order = [
        "edits applied",
        "max drift",
        "storms survived",
        "small-document hover after a storm of big opens",
        "peak memory",
        "faults injected",
        "malformed messages sent",
        "crashes",
    ]
    table = markdown_table(order, [[tally.values.get(k, "failed") for k in order]])
    lines = [
        "### Reliability",
        "",
        f"`{COMMAND}` ({seconds / 60:.1f} minutes on {os.cpu_count()} CPU cores, one "
        "torch thread; the same scenarios and parameters run in CI as `tests/reliability/`):",
        "",
        table,
        "",
    ]
    lines += [f"- **{k}**: {v}" for k, v in tally.details.items()]
    lines += [
        "",
        f"Servers started: {len(RawClient.started) + 3}; crashes: {crashes}.",
        "Model: random weights with the bundled model's 8192-token tokenizer and 256-token windows (the "
        "scenarios measure the server: sync, scheduling, memory, recovery). The bundled model's states: "
        "`python -m benchmarks.memory_docs` (benchmarks/results/memory_docs.md).",
    ]
    if tally.failures:
        lines += ["", "Failures:"] + [f"- {f}" for f in tally.failures]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="data folder (default: $VQ_LSP_DATA)")
    p.add_argument("--fuzz-examples", type=int, default=1000, help="hypothesis cases (CI runs 300)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "reliability_summary.md"))
    p.add_argument(
        "--only",
        choices=["lsp", "faults", "fuzz", "big-opens"],
        nargs="+",
        help="run only these scenario groups (default: all)",
    )
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    groups = set(args.only or ["lsp", "faults", "fuzz", "big-opens"])
    data = data_dir(args.data)
    tally = Tally()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = sc.build_test_model(Path(tmp) / "tiny8k")
        if "lsp" in groups:
            asyncio.run(lsp_scenarios(model_dir, data, tally))
        if "faults" in groups:
            fault_scenarios(model_dir, data, tally)
        if "fuzz" in groups:
            fuzz(model_dir, args.fuzz_examples, tally)
        if "big-opens" in groups:
            big_opens(data, tally)
    text = report(tally, time.perf_counter() - t0)
    print("\n" + text)
    Path(args.out).write_text(text)
    print(f"written to {args.out}")
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
