"""Continuous batching at turn granularity: many episodes, one batched call at a time.

In an asynchronous rollout each episode asks for one generation (or one simulated reply)
and awaits it. A Batcher gathers what is waiting into one call of a batched function
(an engine's ``generate``, a simulator's ``reply``), runs it in a daemon thread so the
event loop stays free, and the moment it returns starts the next call with whatever
came in meanwhile. The batch refills as episodes come back instead of shrinking to its
stragglers, as lock-step batches did.

Daemon threads, not an executor: on Ctrl-C nothing waits for a batch still computing.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Batcher(Generic[Item, Result]):
    def __init__(
        self,
        call: Callable[[list[Item]], list[Result]],
        max_batch: int,
        *,
        expected: Callable[[], int] | None = None,
        linger_s: float = 0.05,
        in_thread: bool = True,
    ):
        """``call(items)`` gives one result per item. ``expected()``: how many callers could
        join this batch (e.g. live episodes); a partial batch waits up to ``linger_s`` for
        them. ``in_thread=False`` for calls too quick to be worth a thread (rule-based)."""
        self.call, self.max_batch = call, max(1, int(max_batch))
        self.expected = expected or (lambda: 0)
        self.linger_s, self.in_thread = linger_s, in_thread
        self._waiting: list[tuple[Item, asyncio.Future]] = []
        self._arrived: asyncio.Event | None = None
        self._pump: asyncio.Task | None = None
        self.calls = 0  # batched calls made
        self.largest = 0
        self._thread: threading.Thread | None = None

    async def __call__(self, item: Item) -> Result:
        loop = asyncio.get_running_loop()
        if self._pump is None or self._pump.done():
            self._arrived = asyncio.Event()
            self._pump = loop.create_task(self._run())
        future = loop.create_future()
        self._waiting.append((item, future))
        self._arrived.set()
        return await future

    async def _run(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            give_up = time.monotonic() + self.linger_s
            while (len(self._waiting) < min(self.max_batch, self.expected())
                   and time.monotonic() < give_up):
                await asyncio.sleep(0.001)
            batch = [(item, future) for item, future in self._waiting[: self.max_batch] if not future.cancelled()]
            del self._waiting[: self.max_batch]
            if self._waiting:
                self._arrived.set()  # more than one batch's worth: go round again at once
            if not batch:
                continue
            self.calls += 1
            self.largest = max(self.largest, len(batch))
            try:
                results = await self._call([item for item, _ in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"a batched call gave {len(results)} results for {len(batch)} items")
            except Exception as error:  # noqa: BLE001 - it belongs to the callers
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, future), result in zip(batch, results):
                if not future.done():
                    future.set_result(result)

    async def _call(self, items: list[Item]) -> list[Result]:
        if not self.in_thread:
            return self.call(items)
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def work() -> None:
            try:
                outcome = (True, self.call(items))
            except BaseException as error:  # noqa: BLE001 - handed to the loop
                outcome = (False, error)
            try:
                loop.call_soon_threadsafe(_settle, done, outcome)
            except RuntimeError:  # the loop is gone (the run was interrupted): nobody waits
                pass

        self._thread = threading.Thread(target=work, name="colbench-batch", daemon=True)
        self._thread.start()
        return await done

    def join(self, timeout_s: float) -> None:
        """Wait a little for a batch still computing (after asking its engine to stop):
        a daemon thread inside native code at interpreter exit can crash the process."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()


def _settle(future: asyncio.Future, outcome: tuple[bool, object]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)  # type: ignore[arg-type]
