"""Whole WebSocket API sessions with hostile upgrades and frames, on a raw socket.

A raw socket (not a WebSocket library) so the fuzzer can write what no library would: client
frames without a mask, reserved bits and opcodes, control frames too long or fragmented,
continuations with nothing to continue, length fields that lie, text that is not UTF-8, and
closes with codes RFC 6455 forbids.

:class:`WebSocketSession` is the script of one session: an upgrade request on one of the
API's paths (producer, consumer, reader, multi-topic consumer, ping-pong, or a path that is
none of them) with query parameters of the right names and hostile values, and now and then
broken headers; after a 101, frames carrying JSON of the shapes the endpoint reads
(``ProducerMessage``, ``ConsumerCommand``) with values of the wrong type or out of range, ids
the gateway delivered and ids it never did, and frame-level damage. :func:`run_websocket_session`
plays it, reads every answer (an upgrade status of 500 or above is a finding, as is a text
frame from the gateway that is not JSON) and counts the close codes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import struct
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from tests.fuzz.hostile import Hostile
from tests.fuzz.stats import SessionStats

TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0

#: Values for query parameters: right and wrong.
_PARAM_VALUES = (
    "",
    "0",
    "1",
    "-1",
    "true",
    "false",
    "TRUE",
    "yes",
    "2147483647",
    "2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "1e3",
    "0x10",
    " 5",
    "Shared",
    "Exclusive",
    "Failover",
    "Key_Shared",
    "Earliest",
    "Latest",
    "LZ4",
    "ZSTD",
    "RoundRobinPartition",
    "SinglePartition",
    "Murmur3_32Hash",
    "Durable",
    "NonDurable",
    "earliest",
    "latest",
    "CAESAAYAAA==",
    "%ZZ",
    "\u00e9",
    "x" * 5000,
)
#: Values each query parameter accepts (a session mostly sends these).
_VALID_VALUES = {
    "sendTimeoutMillis": ("0", "30000"),
    "batchingEnabled": ("true", "false"),
    "batchingMaxMessages": ("1", "1000"),
    "maxPendingMessages": ("1", "1000"),
    "batchingMaxPublishDelay": ("1", "10"),
    "messageRoutingMode": ("RoundRobinPartition", "SinglePartition"),
    "compressionType": ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"),
    "producerName": ("fuzz-ws",),
    "initialSequenceId": ("0", "100"),
    "hashingScheme": ("JavaStringHash", "Murmur3_32Hash"),
    "token": ("x",),
    "ackTimeoutMillis": ("0", "1000", "5000"),
    "subscriptionType": ("Exclusive", "Shared", "Failover", "Key_Shared"),
    "receiverQueueSize": ("1", "10", "1000"),
    "consumerName": ("fuzz-ws",),
    "priorityLevel": ("0", "1"),
    "maxRedeliverCount": ("0", "1", "3"),
    "deadLetterTopic": ("fuzz-dlq",),
    "pullMode": ("true", "false"),
    "negativeAckRedeliveryDelay": ("0", "100"),
    "subscriptionMode": ("Durable", "NonDurable"),
    "cryptoFailureAction": ("FAIL", "CONSUME", "DISCARD"),
    "readerName": ("fuzz-ws",),
    "messageId": ("earliest", "latest"),
}
_PRODUCER_PARAMS = (
    "sendTimeoutMillis",
    "batchingEnabled",
    "batchingMaxMessages",
    "maxPendingMessages",
    "batchingMaxPublishDelay",
    "messageRoutingMode",
    "compressionType",
    "producerName",
    "initialSequenceId",
    "hashingScheme",
    "token",
)
_CONSUMER_PARAMS = (
    "ackTimeoutMillis",
    "subscriptionType",
    "receiverQueueSize",
    "consumerName",
    "priorityLevel",
    "maxRedeliverCount",
    "deadLetterTopic",
    "pullMode",
    "negativeAckRedeliveryDelay",
    "subscriptionMode",
    "cryptoFailureAction",
    "token",
)
_READER_PARAMS = ("readerName", "receiverQueueSize", "messageId", "cryptoFailureAction")
#: Regular expressions for ``topicsPattern``, some that backtrack badly on long names.
_PATTERNS = (
    "fuzz-.*",
    "persistent://public/default/fuzz-[0-9]+",
    ".*",
    "(",
    "[",
    "a{99999999}",
    "(a+)+$",
    "(.*a){20}",
    "persistent://public/default/(x+x+)+y",
    "(?P<n>",
    "\\",
)
#: JSON values of every type, some hostile for a field expecting a string or a number.
_JSON_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**31,
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
    1.5,
    -0.0,
    1e308,
    "",
    "x",
    "\u0000",
    "2024-05-01T12:00:00Z",
    "not-a-date",
    "-1",
    [],
    [1, 2],
    {},
    {"a": 1},
    {"a": [None]},
)


def _json_value(rng: random.Random, hostile: Hostile) -> Any:
    if rng.random() < 0.7:
        return rng.choice(_JSON_VALUES)
    return hostile.text()


def encode_frame(
    opcode: int,
    payload: bytes,
    *,
    fin: bool = True,
    rsv: int = 0,
    masked: bool = True,
    lie: int | None = None,
    wide: bool = False,
) -> bytes:
    """One client frame (RFC 6455 5.2). ``lie`` writes that length instead of the payload's;
    ``wide`` uses the 64-bit length form even for a short payload (not minimal)."""
    length = len(payload) if lie is None else lie
    head = bytearray([(0x80 if fin else 0) | (rsv & 0x7) << 4 | opcode & 0xF])
    mask_bit = 0x80 if masked else 0
    if wide or length > 0xFFFF:
        head += bytes([mask_bit | 127]) + struct.pack(">Q", length % 2**64)
    elif length > 125:
        head += bytes([mask_bit | 126]) + struct.pack(">H", length)
    else:
        head += bytes([mask_bit | length])
    if not masked:
        return bytes(head) + payload
    key = random.randbytes(4)
    n = len(payload)
    stream = (key * (n // 4 + 1))[:n]
    masked_payload = (int.from_bytes(payload) ^ int.from_bytes(stream)).to_bytes(n)
    return bytes(head) + key + masked_payload


class WebSocketSession:
    """The script of one WebSocket session."""

    def __init__(self, rng: random.Random, topics: tuple[str, ...], subscriptions: tuple[str, ...]):
        self.rng = rng
        #: local names of the pool's topics (all in public/default)
        self.topics = tuple(t.rsplit("/", 1)[-1] for t in topics)
        self.subscriptions = subscriptions
        self.hostile = Hostile(rng, self.topics + subscriptions)
        self.endpoint = ""
        #: the share of query parameters with a hostile value, and of frames that are damaged
        self.wildness = rng.choice((0.0, 0.02, 0.1, 0.3))
        #: messageIds the gateway pushed, to ack
        self.delivered: list[str] = []
        #: the gateway's compressed frames, when it accepted permessage-deflate
        self.inflate: Any = None

    # -- the upgrade -----------------------------------------------------------------------

    def _segment(self, names: tuple[str, ...]) -> str:
        if self.rng.random() >= self.wildness:
            return self.rng.choice(names)
        return quote(self.hostile.text()[:300], safe="") or "%ZZ"

    def _query(self, names: tuple[str, ...]) -> str:
        r = self.rng
        pairs = []
        for name in names:
            if r.random() < 0.3:
                if r.random() >= self.wildness:
                    value = r.choice(_VALID_VALUES[name])
                elif r.random() < 0.8:
                    value = r.choice(_PARAM_VALUES)
                else:
                    value = self.hostile.text()[:500]
                pairs.append(f"{name}={quote(value, safe='')}")
                if name == "deadLetterTopic" and value in _VALID_VALUES[name]:
                    pairs.append("maxRedeliverCount=2")  # a dead letter topic needs it
        if r.random() < 0.05:
            pairs.append("%=%&&=&" + "a=1&" * r.randrange(1, 50))
        return "&".join(pairs)

    def upgrade_request(self, host: str) -> bytes:
        r = self.rng
        domain = "persistent" if r.random() < 0.95 else r.choice(("non-persistent", "foo"))
        ns = "public/default" if r.random() < 0.95 else r.choice(("public/missing", "x", "a/b/c"))
        topic = self._segment(self.topics)
        roll = r.random()
        if roll < 0.4:
            self.endpoint = "producer"
            path = f"/ws/v2/producer/{domain}/{ns}/{topic}"
            query = self._query(_PRODUCER_PARAMS)
        elif roll < 0.7:
            self.endpoint = "consumer"
            sub = self._segment(self.subscriptions)
            path = f"/ws/v2/consumer/{domain}/{ns}/{topic}/{sub}"
            query = self._query(_CONSUMER_PARAMS)
        elif roll < 0.85:
            self.endpoint = "reader"
            path = f"/ws/v2/reader/{domain}/{ns}/{topic}"
            query = self._query(_READER_PARAMS)
        elif roll < 0.92:
            self.endpoint = "consumer"
            sub = self._segment(self.subscriptions)
            which = "topicsPattern" if r.random() < 0.5 else "topics"
            value = (
                r.choice(_PATTERNS)
                if which == "topicsPattern"
                else ",".join(r.choice(self.topics) for _ in range(r.randrange(1, 4)))
            )
            query = f"{which}={quote(value, safe='')}&" + self._query(_CONSUMER_PARAMS)
            path = f"/ws/v3/consumer/{sub}"
        elif roll < 0.96:
            self.endpoint = "pingpong"
            path, query = r.choice(("/ws/pingpong", "/ws/v2/pingpong")), ""
        else:
            self.endpoint = "none"
            path = r.choice(("/ws/v2/producer", "/ws/v2/consumer/persistent", "/ws/", "/ws/v9/x"))
            query = self._query(_CONSUMER_PARAMS)
        target = path + ("?" + query if query else "")
        key = base64.b64encode(r.randbytes(16)).decode()
        headers = [
            f"GET {target} HTTP/1.1",
            f"Host: {host}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
        ]
        if r.random() < 0.05:  # a broken upgrade: one header wrong or missing
            i = r.randrange(2, len(headers))
            headers[i] = r.choice(
                ("", "Sec-WebSocket-Version: 8", "Upgrade: h2c", "X: " + "y" * 9000)
            )
            headers = [h for h in headers if h]
        if r.random() < 0.03:
            headers.append("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits")
        return ("\r\n".join(headers) + "\r\n\r\n").encode("utf-8", "surrogateescape")

    # -- frames ----------------------------------------------------------------------------

    def next_frames(self) -> bytes:
        """The next input: one frame (a fragmented message is several, counted as one)."""
        r = self.rng
        if r.random() >= self.wildness:
            return encode_frame(TEXT, self.message())
        if r.random() < 0.3:
            return encode_frame(TEXT, self.not_json())
        steps: tuple[Callable[[], bytes], ...] = (
            lambda: encode_frame(BINARY, self.message()),
            lambda: encode_frame(
                TEXT, r.choice((b"\xff\xfe", b'{"a":"\xc3\x28"}', b"\xed\xa0\x80"))
            ),
            self.fragmented,
            lambda: encode_frame(PING, r.randbytes(r.choice((0, 5, 125)))),
            lambda: encode_frame(PONG, r.randbytes(r.randrange(0, 20))),
            lambda: encode_frame(PING, r.randbytes(126)),  # control frame too long
            lambda: encode_frame(PING, b"x", fin=False),  # fragmented control frame
            lambda: encode_frame(TEXT, self.message(), rsv=r.randrange(1, 8)),
            lambda: encode_frame(r.choice((3, 4, 5, 6, 7, 0xB, 0xF)), b"x"),
            lambda: encode_frame(CONTINUATION, b"orphan"),
            lambda: encode_frame(TEXT, self.message(), masked=False),
            lambda: encode_frame(TEXT, b"{}", wide=True),
            lambda: encode_frame(TEXT, b"{}", lie=r.choice((2**63, 2**40, 70_000))),
        )
        return r.choice(steps)()

    def message(self) -> bytes:
        """A JSON object of the shape this endpoint reads, fields hostile."""
        r = self.rng
        if self.endpoint == "producer":
            obj: dict[str, Any] = {}
            if r.random() < 0.9:
                obj["payload"] = base64.b64encode(r.randbytes(r.randrange(0, 100))).decode()
            for name in (
                "payload",
                "properties",
                "context",
                "key",
                "replicationClusters",
                "eventTime",
                "sequenceId",
                "deliverAt",
                "deliverAfterMs",
                "disableReplication",
            ):
                if r.random() < 0.2:
                    obj[name] = _json_value(r, self.hostile)
            if r.random() < 0.2:
                obj["properties"] = {self.hostile.text()[:50]: _json_value(r, self.hostile)}
        else:
            obj = {}
            kind = r.choice(
                (
                    "",
                    "ack",
                    "negativeAcknowledge",
                    "cumulativeAcknowledge",
                    "permit",
                    "unsubscribe",
                    "isEndOfTopic",
                    "other",
                )
            )
            if kind:
                obj["type"] = kind if kind != "other" else _json_value(r, self.hostile)
            if self.delivered and r.random() < 0.6:
                obj["messageId"] = r.choice(self.delivered)
            elif r.random() < 0.8:
                obj["messageId"] = r.choice(
                    (
                        base64.b64encode(r.randbytes(r.randrange(0, 30))).decode(),
                        "CAESAAYAAA==",
                        "CP//////////ARD//////////wE=",
                        "!!",
                        _json_value(r, self.hostile),
                    )
                )
            if kind == "permit" or r.random() < 0.1:
                obj["permitMessages"] = (
                    r.randrange(1, 100) if r.random() < 0.5 else _json_value(r, self.hostile)
                )
        return json.dumps(obj).encode()

    def not_json(self) -> bytes:
        r = self.rng
        return r.choice(
            (
                lambda: b"",
                lambda: b"null",
                lambda: b"[1,2,3]",
                lambda: b"42",
                lambda: b'"text"',
                lambda: b"{",
                lambda: b'{"payload": "AA==",}',
                lambda: b"[" * 100_000 + b"]" * 100_000,
                lambda: b'{"a":' * 5000 + b"1" + b"}" * 5000,
                lambda: b'{"sequenceId": 1' + b"0" * 5000 + b"}",
                lambda: b'{"deliverAt": 1e999}',
                lambda: b'{"payload": NaN}',
                lambda: self.hostile.text().encode(),
            )
        )()

    def fragmented(self) -> bytes:
        """One message in pieces, maybe with a ping between them, maybe never finished."""
        r = self.rng
        data = self.message()
        cuts = sorted(r.sample(range(1, max(2, len(data))), min(len(data) - 1, r.randrange(1, 4))))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        out = bytearray()
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            if last and r.random() < 0.1:
                break  # never finished: the next data frame is a protocol error
            out += encode_frame(TEXT if i == 0 else CONTINUATION, piece, fin=last)
            if r.random() < 0.2:
                out += encode_frame(PING, b"between")
        return bytes(out)

    def closing(self) -> bytes:
        r = self.rng
        code = r.choice((1000, 1001, 1002, 1003, 1005, 1006, 1015, 999, 2999, 3000, 4999, 5000))
        reason = r.choice((b"", b"bye", b"\xff\xfe", b"x" * 200))
        payload = struct.pack(">H", code) + reason if r.random() < 0.9 else b"x"
        return encode_frame(CLOSE, payload)


# -- playing a session ----------------------------------------------------------------------


async def _read_upgrade(
    reader: asyncio.StreamReader, session: WebSocketSession
) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"sec-websocket-extensions" and b"permessage-deflate" in value:
            session.inflate = zlib.decompressobj(-15)
    body = await reader.readexactly(length) if length and status != 101 else b""
    return status, body


async def _read_frames(
    reader: asyncio.StreamReader, session: WebSocketSession, stats: SessionStats
) -> None:
    """Read the gateway's frames until it closes: text frames must be JSON."""
    try:
        while True:
            b0, b1 = await reader.readexactly(2)
            length = b1 & 0x7F
            if length == 126:
                (length,) = struct.unpack(">H", await reader.readexactly(2))
            elif length == 127:
                (length,) = struct.unpack(">Q", await reader.readexactly(8))
            if b1 & 0x80:  # a server must not mask (RFC 6455 5.1)
                stats.malformed_answers += 1
                stats.samples.append(f"masked frame from the gateway: {b0:02x} {b1:02x}")
                return
            data = await reader.readexactly(length)
            opcode = b0 & 0x0F
            if b0 & 0x40 and session.inflate is not None:  # RSV1: permessage-deflate
                data = session.inflate.decompress(data + b"\x00\x00\xff\xff")
            if opcode == TEXT:
                try:
                    obj = json.loads(data)
                except ValueError:
                    stats.malformed_answers += 1
                    stats.samples.append(f"text frame that is not JSON: {data[:200]!r}")
                    return
                name = "ws:" + str(obj.get("result", "message" if "messageId" in obj else "other"))
                stats.answers[name] = stats.answers.get(name, 0) + 1
                pushed = "payload" in obj and isinstance(obj.get("messageId"), str)
                if pushed and len(session.delivered) < 200:
                    session.delivered.append(obj["messageId"])
            elif opcode == CLOSE:
                code = struct.unpack(">H", data[:2])[0] if len(data) >= 2 else 1005
                stats.close_codes[code] = stats.close_codes.get(code, 0) + 1
                return
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        return


async def run_websocket_session(
    host: str,
    port: int,
    rng: random.Random,
    topics: tuple[str, ...],
    subscriptions: tuple[str, ...],
    max_inputs: int,
) -> SessionStats:
    """Play one session of at most ``max_inputs`` inputs; what it saw."""
    stats = SessionStats(sessions=1)
    session = WebSocketSession(rng, topics, subscriptions)
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    reading: asyncio.Task[None] | None = None
    try:
        request = session.upgrade_request(f"{host}:{port}")
        writer.write(request)
        stats.inputs += 1
        try:
            status, _ = await asyncio.wait_for(_read_upgrade(reader, session), 10)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, ValueError):
            stats.closed_by_gateway += 1
            return stats
        stats.statuses[status] = stats.statuses.get(status, 0) + 1
        if status >= 500:
            stats.server_errors += 1
            stats.samples.append(f"upgrade answered {status}: {request[:300]!r}")
        if status != 101:
            return stats
        reading = asyncio.create_task(_read_frames(reader, session, stats))
        while stats.inputs < max_inputs and not reading.done():
            writer.write(session.next_frames())
            stats.inputs += 1
            await writer.drain()
            if rng.random() < 0.3:
                await asyncio.sleep(0.001)
        if reading.done():
            stats.closed_by_gateway += 1
        elif rng.random() < 0.7:
            writer.write(session.closing())
            await writer.drain()
            await asyncio.wait([reading], timeout=1.0)
    except (ConnectionError, OSError):
        stats.closed_by_gateway += 1
    finally:
        if reading is not None and not reading.done():
            reading.cancel()
        writer.transport.abort()
    return stats
