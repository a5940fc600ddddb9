"""The engine thread lets a job's function and arguments go once the job is done: a build
window's job is its builder's bound step, and the builder's windows are the finished state's, so
a stale reference kept a dropped long document's state (hundreds of MiB) alive until the next
job came."""

from __future__ import annotations

import asyncio
import gc
import weakref

from vq_lsp.server.engine_thread import BUILD, EngineThread


class Builder:
    def __init__(self) -> None:
        self.windows = [bytearray(2**20)]

    def step(self) -> None:
        self.windows.append(bytearray(2**20))


def test_a_finished_job_holds_no_reference_to_its_work():
    worker = EngineThread("vq-test")
    try:
        builder = Builder()
        gone = weakref.ref(builder)

        async def run(job) -> None:
            await worker.submit(job, lane=BUILD)

        asyncio.run(run(builder.step))
        assert worker.idle.wait(5)
        del builder
        gc.collect()
        assert gone() is None, [type(r).__name__ for r in gc.get_referrers(gone())]
    finally:
        worker.shutdown()
