"""Admin REST: a subscription's scheduled (delayed) messages.

Scheduled messages (beyond Pulsar: its trackers cannot show or change what they hold), under
``/admin/v2/persistent/{tenant}/{ns}/{topic}/subscription/{sub}/scheduled``:

* ``GET ?from=&to=&offset=0&limit=100``: ``{"total", "inWindow", "offset", "messages":
  [{"messageId" "L:E", "ledgerId", "entryId", "partition", "deliverAt" (ms since epoch),
  "key" (partition key or null), "properties" (the message's), "size" (bytes stored)}]}``,
  earliest deliver-at first, of those due at or after ``from`` and before ``to`` (ms since
  epoch, each optional); ``total`` counts every message scheduled on the subscription,
  ``inWindow`` those due in the window (all of them without one); ``offset`` pages within
  the window;
* ``GET /histogram?from=&to=&buckets=60``: ``{"from", "to", "bucketMs", "counts": [n per
  bucket], "before", "after", "total"}``: ``buckets`` buckets (1..500) of ``bucketMs =
  ceil((to - from) / buckets)`` from ``from`` (default now) to ``to`` (default an hour
  later, at most ten years; answered as the buckets' end, ``from + buckets * bucketMs``),
  the messages due before ``from`` and at or after ``to``, and all of them (``before +
  sum(counts) + after``);
* ``DELETE /{ledgerId}:{entryId}``: cancel: acknowledged on this subscription, never
  delivered to it; 204;
* ``POST /{ledgerId}:{entryId}`` with ``{"deliverAt": ms}`` or ``{"deliverAfterMs": ms}``:
  reschedule; 204.

A subscription that does not exist, or a message not scheduled on it, is a 404; bad
parameters a 400; all with Pulsar's ``{"reason": ...}`` body.
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.resource import fail, handler, read_text, topic_name
from pulsar_gateway.core import (
    MAX_PAGE,
    MAX_TIME_MS,
    MessageId,
    ScheduledMessage,
    Services,
    histogram_window,
)
from pulsar_gateway.entry_codec import MessageFormatError, unpack_entry

__all__ = ["add_routes"]

_SCHEDULED = (
    "/admin/v2/{domain:persistent}/{tenant}/{namespace}/{topic}/subscription/{subscription}"
    "/scheduled"
)


_MAX_OFFSET = 2**31 - 1


def _optional_int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        # int() alone would take "1_000" and " 5 "; a query parameter is plain digits
        if not raw.lstrip("-").isdecimal() or not raw.isascii():
            raise ValueError
        return int(raw)
    except ValueError:
        raise fail(web.HTTPBadRequest, f"{name} must be an integer, got {raw!r}") from None


def _int_query(request: web.Request, name: str, default: int) -> int:
    value = _optional_int(request, name)
    return default if value is None else value


def _message_id(request: web.Request) -> MessageId:
    """``{ledgerId}:{entryId}`` (a trailing ``:{partition}`` is allowed and ignored: the
    topic path names the partition)."""
    raw = request.match_info["message_id"]
    parts = raw.split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        ledger_id, entry_id = int(parts[0]), int(parts[1])
        if ledger_id < 0 or entry_id < 0:
            raise ValueError
    except ValueError:
        raise fail(
            web.HTTPBadRequest, f"Invalid message id {raw!r}: expected ledgerId:entryId"
        ) from None
    return MessageId(ledger_id, entry_id)


def _describe(message: ScheduledMessage) -> dict[str, Any]:
    # the key and properties of the entry's first message: a delayed message is sent on its
    # own (the Java client's ProducerImpl does not batch a message with a deliver-at time),
    # and a batch's key is its first message's, as compaction keys it
    mid = message.message_id
    key, properties = None, {}
    try:
        first = unpack_entry(mid.stream_id, message.blob, partition=mid.partition)[0]
        key, properties = first.key, first.properties
    except (MessageFormatError, IndexError):
        pass
    return {
        "messageId": f"{mid.ledger_id}:{mid.entry_id}",
        "ledgerId": mid.ledger_id,
        "entryId": mid.entry_id,
        "partition": mid.partition,
        "deliverAt": message.deliver_at,
        "key": key,
        "properties": properties,
        "size": len(message.blob),
    }


async def list_scheduled(services: Services, request: web.Request) -> dict[str, Any]:
    offset = _int_query(request, "offset", 0)
    limit = _int_query(request, "limit", 100)
    # offset is a Java int in Pulsar's paging; Redis takes no larger index from a script
    if not 0 <= offset <= _MAX_OFFSET or not 0 < limit <= MAX_PAGE:
        raise fail(
            web.HTTPBadRequest,
            f"offset must be within 0..{_MAX_OFFSET} and limit within 1..{MAX_PAGE}",
        )
    start, end = _optional_int(request, "from"), _optional_int(request, "to")
    for name, bound in (("from", start), ("to", end)):
        if bound is not None and not 0 <= bound <= MAX_TIME_MS:
            raise fail(web.HTTPBadRequest, f"{name} must be a time within 0..{MAX_TIME_MS} (ms)")
    if start is not None and end is not None and start > end:
        raise fail(web.HTTPBadRequest, f"from ({start}) must not be after to ({end})")
    page = await services.scheduled.list(
        str(topic_name(request)), request.match_info["subscription"], offset, limit, start, end
    )
    return {
        "total": page.total,
        "inWindow": page.in_window,
        "offset": offset,
        "messages": [_describe(m) for m in page.messages],
    }


async def scheduled_histogram(services: Services, request: web.Request) -> dict[str, Any]:
    start, end = _optional_int(request, "from"), _optional_int(request, "to")
    buckets = _optional_int(request, "buckets")
    try:
        window = histogram_window(start, end, buckets, int(time.time() * 1000))
    except ValueError as exc:
        raise fail(web.HTTPBadRequest, str(exc)) from None
    counted = await services.scheduled.histogram(
        str(topic_name(request)), request.match_info["subscription"], window
    )
    return {
        "from": window.start,
        "to": window.end,
        "bucketMs": window.bucket_ms,
        "counts": list(counted.counts),
        "before": counted.before,
        "after": counted.after,
        "total": counted.total,
    }


async def cancel_scheduled(services: Services, request: web.Request) -> None:
    await services.scheduled.cancel(
        str(topic_name(request)), request.match_info["subscription"], _message_id(request)
    )


async def _deliver_at(request: web.Request) -> int:
    """The new time from ``{"deliverAt": ms}`` or ``{"deliverAfterMs": ms}``."""
    try:
        body = json.loads(await read_text(request))
    except ValueError as exc:
        raise fail(web.HTTPBadRequest, f"Invalid JSON: {exc}") from None
    if isinstance(body, dict) and len(body) == 1:
        ((name, value),) = body.items()
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        if name == "deliverAt" and valid:
            return int(value)
        if name == "deliverAfterMs" and valid:
            return int(time.time() * 1000) + int(value)
    raise fail(
        web.HTTPBadRequest,
        'Expected {"deliverAt": <ms since epoch>} or {"deliverAfterMs": <ms>}, integers >= 0',
    )


async def reschedule(services: Services, request: web.Request) -> None:
    deliver_at = await _deliver_at(request)
    await services.scheduled.reschedule(
        str(topic_name(request)),
        request.match_info["subscription"],
        _message_id(request),
        deliver_at,
    )


def add_routes(app: web.Application) -> None:
    def route(method: str, path: str, body: Any) -> None:
        app.router.add_route(method, path, handler(body))

    route("GET", _SCHEDULED, list_scheduled)
    # before the message-id routes: "histogram" is no ledgerId:entryId
    route("GET", _SCHEDULED + "/histogram", scheduled_histogram)
    route("DELETE", _SCHEDULED + "/{message_id}", cancel_scheduled)
    route("POST", _SCHEDULED + "/{message_id}", reschedule)
