"""One thread that makes a rollout's writes, in order, off the requests' critical path.

Episodes hand it small functions of a session (add these turns, beat, finish, save these
grades) and go on to their next request without waiting. Each write is transactional as
before; whatever has queued up meanwhile shares one transaction, so a busy rollout costs
one commit per batch of writes rather than per turn. A write that fails is retried on its
own, so one bad write never takes others down with it; its error is raised to the
rollout at the next `check()`.

Order is the submission order: the turns of a trajectory land contiguous, and a claim
made through `call` is stored before any turn of what it claimed.
"""
from __future__ import annotations

import asyncio
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

from colbench.store.db import Database

Write = Callable[[Any], Any]  # a function of a session
MOST_PER_TRANSACTION = 256
_STOP = object()


class StoreWriter:
    def __init__(self, db: Database):
        self.db = db
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="colbench-store-writer", daemon=True)
        self._thread.start()

    def submit(self, write: Write) -> Future:
        future: Future = Future()
        self._queue.put((write, future))
        return future

    async def call(self, write: Write) -> Any:
        """Run a write and wait for its result (e.g. a claim whose rows the caller needs)."""
        return await asyncio.wrap_future(self.submit(write))

    def check(self) -> None:
        """Raise the first error of a write nobody waited for."""
        if self._error is not None:
            raise self._error

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every write submitted so far is done; False if that took too long."""
        try:
            self.submit(lambda session: None).result(timeout_s)
        except TimeoutError:
            return False
        return True

    def close(self, timeout_s: float | None = None) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout_s)

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            batch = [first]
            while len(batch) < MOST_PER_TRANSACTION:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    self._queue.put(_STOP)  # after this batch
                    break
                batch.append(item)
            try:
                self._write(batch)
            except BaseException:  # noqa: BLE001 - retry one by one: isolate the bad write
                for item in batch:
                    try:
                        self._write([item])
                    except BaseException as error:  # noqa: BLE001
                        self._error = self._error or error
                        item[1].set_exception(error)

    def _write(self, batch: list[tuple[Write, Future]]) -> None:
        with self.db.write() as session:
            results = [write(session) for write, _ in batch]
        for (_, future), result in zip(batch, results):
            if not future.done():
                future.set_result(result)
