"""Inference off the event loop: a bounded queue in front of the one set of models.

Handler calls run in worker threads, so the event loop stays free for health checks and
refusals; the orchestrator's lock keeps requests on the shared models from interleaving, and
the queue answers 503 with ``Retry-After`` instead of piling work up.
"""

from __future__ import annotations

import asyncio
import functools
import math
import statistics
import threading
import time
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np
from fastapi import Request

from speaker_transcripts.config import ServerSettings
from speaker_transcripts.errors import InvalidRequestError, RequestAbandoned
from speaker_transcripts.server.errors import ServiceError, logger
from speaker_transcripts.server.metrics import ServiceMetrics
from speaker_transcripts.server.middleware import ADMITTED

INFERENCE_WORKERS = 2  # one decodes the next upload while the other holds the models


class Handler(Protocol):
    """What the server needs of the orchestrator (``pipeline.transcriber.Transcriber``)."""

    settings: Any
    configured: Any  # the settings as configured: model names, not cache folders
    capabilities: Any

    def __call__(self, data: Any, **callbacks: Any) -> dict[str, Any]: ...


class InferenceQueue:
    """Runs handler calls off the event loop; admits one running and ``max_queue`` waiting."""

    def __init__(
        self, handler: Handler, settings: ServerSettings, redact: Callable[[str], str], metrics: ServiceMetrics | None = None
    ) -> None:
        self.handler = handler
        self.redact = redact
        self.metrics = metrics or ServiceMetrics()
        self.metrics.queue_depth.set_function(lambda: self.pending)
        self.max_queue = settings.max_queue
        self.max_held_bytes = settings.max_queued_bytes
        self.held_bytes = 0  # audio the admitted requests hold (held_bytes of their data); on the event loop
        self.timeout_s = settings.request_timeout_s
        self.pending = 0  # running + waiting; touched only on the event loop
        self.reading = 0  # admitted by the AdmissionGate, body still being read or parsed
        self.reading_bytes = 0  # what those uploads have sent so far
        self.max_upload_bytes = settings.max_upload_bytes
        self._executor = ThreadPoolExecutor(max_workers=INFERENCE_WORKERS, thread_name_prefix="inference")
        self._recent_seconds: deque[float] = deque(maxlen=20)
        self._started: dict[int, float] = {}  # worker thread -> when its current call began

    async def run(
        self,
        data: dict[str, Any],
        client_gone: Callable[[], Awaitable[bool]] | None = None,
        work: Callable[..., dict[str, Any]] | None = None,
        **callbacks: Any,
    ) -> dict[str, Any]:
        """The handler's answer to ``data`` (or ``work``'s: another call on the same models, such as
        enrolling a voice, under the same bounds); ``callbacks`` (``on_segment``) go to it.

        Work whose deadline passes (504) or whose client hangs up (``client_gone``, polled) is
        told to stop: the handler ends it at the next decoder step, or as soon as it gets the
        models if it was still waiting, and its queue slot frees then, not when the work would
        have finished. Until it has stopped it keeps its slot, so the queue never admits more
        work than the models can take."""
        weight = held_bytes(data)
        refusal = self.refusal(self.pending) or self.too_heavy(weight)
        if refusal is not None:
            raise refusal
        self.pending += 1
        self.held_bytes += weight
        stop = threading.Event()
        future = asyncio.get_running_loop().run_in_executor(
            self._executor, self._timed_call, work or self.handler, data, {**callbacks, "should_stop": stop.is_set}
        )
        future.add_done_callback(functools.partial(self._finished, weight))
        watcher = asyncio.ensure_future(_poll(client_gone)) if client_gone is not None else None
        try:
            waiting = {future, *([watcher] if watcher else [])}  # asyncio.wait never cancels what it waits on
            done, _ = await asyncio.wait(waiting, timeout=self.timeout_s, return_when=asyncio.FIRST_COMPLETED)
            if future.done():
                return future.result()
            stop.set()
            self.metrics.abandoned.inc()
            if watcher is not None and watcher in done:
                raise RequestAbandoned("the client hung up")
            raise ServiceError(504, f"the request took longer than {self.timeout_s:g} s (REQUEST_TIMEOUT_S) and was abandoned")
        except asyncio.CancelledError:  # the response task itself was cancelled: nobody is waiting
            stop.set()
            self.metrics.abandoned.inc()
            raise
        finally:
            if watcher is not None:
                watcher.cancel()

    def refusal(self, in_hand: int | None = None) -> ServiceError | None:
        """The 503 for one more request, or None when there is room. Before its body is read a
        request counts what is queued and what is still being uploaded (``reading``)."""
        in_hand = self.pending + self.reading if in_hand is None else in_hand
        if in_hand <= self.max_queue:
            return None
        return ServiceError(
            503,
            f"the server is busy ({in_hand} requests in progress, queued or uploading, MAX_QUEUE={self.max_queue}); retry later",
            {"Retry-After": str(self.retry_after_s())},
        )

    def too_heavy(self, weight: int, uploading: int | None = None) -> ServiceError | None:
        """The 503 for ``weight`` more bytes that would take what admitted requests hold (queued
        audio, uploads by what they have sent) past ``MAX_QUEUED_MB``: a new request's, or, with
        ``uploading`` (the bytes it sent before), the next chunk of an admitted upload. Counting
        requests alone let 17 near-limit uploads hold 4.6 GB; a request that would be the only one
        held is always taken, so any upload the size limit allows runs."""
        held = self.held_bytes + self.reading_bytes
        alone = not (self.pending or self.reading) if uploading is None else held == uploading and self.reading == 1
        if alone or held + weight <= self.max_held_bytes:
            return None
        mib = 1024 * 1024
        this = weight if uploading is None else uploading + weight
        return ServiceError(
            503,
            f"the server is busy (the requests in progress, queued or uploading hold {(held - (uploading or 0)) / mib:.1f} MB, this one "
            f"{this / mib:.1f} MB, MAX_QUEUED_MB={self.max_held_bytes / mib:g}); retry later",
            {"Retry-After": str(self.retry_after_s())},
        )

    def admit_upload(self) -> None:
        self.reading += 1

    def upload_received(self, size: int) -> None:
        """An admitted upload sent ``size`` more bytes (``too_heavy`` said they fit)."""
        self.reading_bytes += size

    def upload_done(self, received: int) -> None:
        """An admitted upload reached the queue or failed before it: the ``received`` bytes it counted end."""
        self.reading -= 1
        self.reading_bytes -= received

    def retry_after_s(self) -> int:
        """Seconds until a slot is likely free, which is all a refused client needs: the typical
        (median) recent processing time, less what the longest-running call has already spent.
        (Multiplying by the queue length overstated it 4x: work ahead of a retry is not the
        whole queue, and abandoned work now leaves early.)"""
        typical = statistics.median(self._recent_seconds) if self._recent_seconds else 1.0
        spent = time.monotonic() - min(self._started.values()) if self._started else 0.0
        return max(1, math.ceil(typical - spent))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _timed_call(self, work: Callable[..., dict[str, Any]], data: dict[str, Any], callbacks: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        self._started[threading.get_ident()] = started
        try:
            result = work(data, **callbacks)
            self.metrics.observe_work(float(result.get("duration") or 0.0), time.monotonic() - started)
            return result
        except (InvalidRequestError, ServiceError, RequestAbandoned):
            raise
        except Exception as error:  # a bug or a device failure: log it here, tell the client little
            logger.error("inference failed: %s", self.redact("".join(traceback.format_exception(error))))
            raise ServiceError(500, "internal error while processing the audio; the server log has the details") from error
        finally:
            self._started.pop(threading.get_ident(), None)
            self._recent_seconds.append(time.monotonic() - started)

    def _finished(self, weight: int, future: asyncio.Future) -> None:
        self.pending -= 1
        self.held_bytes -= weight
        if not future.cancelled():
            future.exception()  # seen: abandoned work ends in RequestAbandoned that nobody awaits


CLIENT_POLL_S = 0.5
MAX_WEIGHED_ITEMS = 64  # containers walked by held_bytes: a request's data is a few fields and up to 8 clips


def held_bytes(data: Any) -> int:
    """Bytes of audio ``data`` holds while it waits: its byte strings, arrays and strings (base64
    or a URL), in ``data`` and the containers in it, up to ``MAX_WEIGHED_ITEMS`` of them."""
    total, stack, walked = 0, [data], 0
    while stack and walked < MAX_WEIGHED_ITEMS:
        item = stack.pop()
        walked += 1
        if isinstance(item, bytes | bytearray | memoryview):
            total += memoryview(item).nbytes
        elif isinstance(item, np.ndarray):
            total += item.nbytes
        elif isinstance(item, str):
            total += len(item)
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total


async def _poll(client_gone: Callable[[], Awaitable[bool]]) -> None:
    """Return once ``client_gone`` says so (checked every ``CLIENT_POLL_S``)."""
    while not await client_gone():
        await asyncio.sleep(CLIENT_POLL_S)


async def infer(request: Request, data: dict[str, Any], work: Callable[..., dict[str, Any]] | None = None, **callbacks: Any) -> dict[str, Any]:
    """The orchestrator's answer to ``data`` (or ``work``'s) through the app's queue, stopped if the client hangs up."""
    queue: InferenceQueue = request.app.state.queue
    state = request.scope.get("state", {})
    if ADMITTED in state:
        queue.upload_done(state.pop(ADMITTED))  # its body is in: from here it counts in ``pending`` and ``held_bytes``
    return await queue.run(data, client_gone=request.is_disconnected, work=work, **callbacks)
