"""Coalesce concurrent generation requests from many in-flight tasks into batches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

from .config import BATCH_SETTLE_TICKS
from .records import Generation, GenerationRequest

BatchFn = Callable[[list[GenerationRequest]], list[Generation]]


def batch_key(request: GenerationRequest) -> Hashable:
    """Requests with equal keys can share one ``generate`` call."""
    return (request.temperature, request.top_p, tuple(request.stop), request.max_new_tokens)


class Batcher:
    """Queue requests; one worker runs compatible ones together in a thread, one batch at a time.

    After the first request arrives the worker yields to the event loop a few times so that
    every task that is ready to ask the model gets into the same batch. While a batch runs,
    new requests queue up and form the next one.
    """

    def __init__(self, fn: BatchFn, max_batch: int, settle_ticks: int = BATCH_SETTLE_TICKS):
        self.fn = fn
        self.max_batch = max(1, max_batch)
        self.settle_ticks = settle_ticks
        self._pending: list[tuple[GenerationRequest, asyncio.Future[Generation]]] = []
        self._worker: asyncio.Task[None] | None = None
        self.batch_sizes: list[int] = []

    async def submit(self, request: GenerationRequest) -> Generation:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Generation] = loop.create_future()
        self._pending.append((request, future))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            for _ in range(self.settle_ticks):
                await asyncio.sleep(0)
            key = batch_key(self._pending[0][0])
            batch = [item for item in self._pending if batch_key(item[0]) == key][: self.max_batch]
            taken = {id(item) for item in batch}
            self._pending = [item for item in self._pending if id(item) not in taken]
            self.batch_sizes.append(len(batch))
            try:
                results = await asyncio.to_thread(self.fn, [request for request, _ in batch])
                if len(results) != len(batch):
                    raise RuntimeError(
                        f"backend returned {len(results)} results for {len(batch)} requests"
                    )
            except BaseException as exc:  # noqa: BLE001 - delivered to every waiting caller
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)
