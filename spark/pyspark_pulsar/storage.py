"""Reading topic partitions straight from Redis, on the driver (planning) and the executors.

Like Pulsar SQL, which reads ledgers from BookKeeper instead of going through brokers, the
executors read each topic partition's Redis stream by id range (docs/architecture.md "Design
decisions": Spark reads Redis directly from its executors): no second hop through a gateway, and
a range fixed on the driver reads the same entries however often Spark replays it. Key names
come from the gateway's own key schema (``pulsar_gateway.core.storage.keys``) and entries are
decoded by the gateway's own stored-entry code, never re-derived here.

The reader holds no subscription: nothing is left behind when a query stops (the reference
connector's durable per-query subscriptions are its users' "leftover subscriptions and
phantom backlog"), and, as for any Pulsar reader, retention and TTL are what keep data
readable. Data they removed behind a query's position is detected exactly: retention trims a
stream's head only (``XTRIM MINID``, or ``XDEL`` of its oldest entries), and Redis counts the
entries a stream has ever received (``entries-added``, Redis 7), so with *a* the count up to
position *p* (kept in the offset, :class:`pyspark_pulsar.offsets.Position`), entries after *p*
were lost iff more than *a* entries are gone (``entries-added - length``). Where the count is
not known (a user's starting offset or time, Redis 6.2), ``XDEL`` past *p* is still caught by
Redis's ``max-deleted-entry-id``.

On a Redis Cluster (the URL names any node; ``INFO cluster`` says ``cluster_enabled:1``)
the reads go through redis-py's cluster client, which routes each command to the master of
its key's slot and follows ``MOVED``/``ASK``: every key of a topic partition shares one hash
tag, so each partition is read from its master. The cluster client's pipelines refuse
scripts, so the one-key Lua scripts run per master on that node's own pipeline
(:func:`_per_master`).

A read hands its entries over a page (one ``XRANGE`` reply) at a time, as Redis sends them:
``(stream id, [field, value, ...])`` (:data:`RawEntry`). On a single Redis the client leaves
``XRANGE`` replies as they are (:func:`_connect`): redis-py's own reply callback makes a tuple
and a dict per entry, which costs more than the RESP parsing itself (about 1.1 µs against
0.6 µs an entry, measured with hiredis), and the reader only looks fields up by name once.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import ClusterDownError, RedisClusterException

from pulsar_gateway.core import (
    PARTITION_SUFFIX,
    SchemaData,
    StoredEntry,
    TopicName,
)
from pulsar_gateway.core.model.entry import BLOB
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.scripts import SCRIPTS
from pyspark_pulsar.offsets import BEGINNING, Position
from pyspark_pulsar.options import Auth, TopicSelection

__all__ = [
    "DataLossError",
    "RawEntry",
    "StorageLocation",
    "StorageUnavailable",
    "TopicStore",
    "TopicUnavailable",
    "locate_storage",
]

log = logging.getLogger(__name__)

#: Entries per ``XRANGE`` round trip on the executors. Bigger pages cost Redis nothing more
#: but the client more: a page's reply is a few thousand container objects alive at once,
#: and the garbage collector's passes over them grow with the page (0.54 µs an entry at
#: 1,024, 0.77 µs at 4,096, hiredis, raw replies).
READ_CHUNK: Final = 1024
#: Entries per ``XREVRANGE`` round trip looking for a chunked message's earlier chunks, and
#: at most how many entries back they are looked for (chunks of concurrent producers
#: interleave, but a message's chunks are sent back to back).
_CHUNK_PAGE: Final = 64
_CHUNK_SCAN_LIMIT: Final = 100_000

#: How the executors report lost data (the reference connector's wording, for Redis).
FAIL_ON_DATA_LOSS_TRUE: Final = (
    "Some data may have been lost because they are not available in Redis any more; either "
    "the data was removed by retention or TTL or the topic was deleted before all the data in "
    "the topic was processed. If you don't want your streaming query to fail on such cases, "
    'set the source option "failOnDataLoss" to "false".'
)
FAIL_ON_DATA_LOSS_FALSE: Final = (
    "Some data may have been lost because they are not available in Redis any more; either "
    "the data was removed by retention or TTL or the topic was deleted before all the data in "
    "the topic was processed. If you want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "true".'
)

# Admission control in one round trip per topic partition: walk at most `max_entries`
# entries after the start without sending them to the driver, stop before the one that
# would pass `max_bytes` (always admitting one, so a query progresses past a large entry).
# KEYS[1] the stream; ARGV start (XRANGE form), bound id, max entries, max bytes (0: none),
# the blob field. Returns {last id walked or false, entries walked, their bytes,
# entries-added or false (Redis 6.2), length}.
_ADVANCE_LUA: Final = """
local start, bound = ARGV[1], ARGV[2]
local left, budget, blob = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local last, n, bytes = false, 0, 0
local added, length = false, redis.call('XLEN', KEYS[1])
if length > 0 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'entries-added' then added = info[i + 1] end
  end
end
while left > 0 do
  local batch = redis.call('XRANGE', KEYS[1], start, bound, 'COUNT', math.min(left, 512))
  if #batch == 0 then break end
  for _, entry in ipairs(batch) do
    local size, fields = 0, entry[2]
    for i = 1, #fields, 2 do
      if fields[i] == blob then size = #fields[i + 1] end
    end
    if budget > 0 and n > 0 and bytes + size > budget then
      return {last, n, bytes, added, length}
    end
    last, n, bytes, left = entry[1], n + 1, bytes + size, left - 1
    if left == 0 then break end
  end
  start = '(' .. last
end
return {last, n, bytes, added, length}
"""

# Where a stream ends, in one round trip per topic partition: KEYS[1] the stream. Returns
# {the id of its last entry ever (also once retention emptied it; "0-0" for none),
# entries-added or false (Redis 6.2)}, or {false, false} when there is no stream.
_LAST_LUA: Final = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {false, false} end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local last, added = false, false
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then last = info[i + 1]
  elseif info[i] == 'entries-added' then added = info[i + 1] end
end
return {last, added}
"""

# What retention removed from a stream: KEYS[1] the stream. Returns {max-deleted-entry-id
# or false, entries-added or false, length, first entry id or false} (the *-added and
# max-deleted fields are Redis 7's), or {} when there is no stream.
_REMOVED_LUA: Final = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local deleted, added, length, first = false, false, 0, false
for i = 1, #info, 2 do
  local name, value = info[i], info[i + 1]
  if name == 'max-deleted-entry-id' then deleted = value
  elseif name == 'entries-added' then added = value
  elseif name == 'length' then length = value
  elseif name == 'first-entry' and value then first = value[1] end
end
return {deleted, added, length, first}
"""


class StorageUnavailable(RuntimeError):
    """Redis (or the gateway asked where it is) cannot be reached."""


class TopicUnavailable(RuntimeError):
    """A topic does not exist (or no longer does)."""


class DataLossError(RuntimeError):
    """Entries a query had not read yet were removed (``failOnDataLoss``)."""


@dataclass(frozen=True, slots=True)
class StorageLocation:
    """Where the gateways keep their state: the Redis URL and the key prefix."""

    url: str
    key_prefix: str = "pgw"


def locate_storage(
    admin_url: str, auth: Auth, redis_url: str | None, key_prefix: str | None, timeout: float
) -> StorageLocation:
    """The Redis the executors read: ``redis.url`` when given, else what the gateway reports.

    The gateway answers Pulsar's ``GET /admin/v2/brokers/internal-configuration``
    (``InternalConfigurationData``: ``metadataStoreUrl`` names its Redis, ``ledgersRootPath``
    its key prefix); with authentication on, that needs a superuser token, as in Pulsar.

    Raises:
        StorageUnavailable: the gateway cannot be asked.
    """
    if redis_url is not None:
        return StorageLocation(redis_url, key_prefix or "pgw")
    url = f"{admin_url}/admin/v2/brokers/internal-configuration"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if auth.token is not None:
        request.add_header("Authorization", f"Bearer {auth.token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.load(response)
    except urllib.error.HTTPError as exc:
        raise StorageUnavailable(
            f"cannot learn where Redis is from {url}: HTTP {exc.code} {exc.reason}; set the "
            "option 'redis.url' (and 'redis.keyPrefix'), or 'admin.url' to a gateway"
        ) from None
    except (OSError, ValueError) as failure:
        raise StorageUnavailable(
            f"cannot learn where Redis is from {url}: {failure}; set the option 'redis.url' (and "
            "'redis.keyPrefix'), or 'admin.url' to a gateway's HTTP address"
        ) from None
    return StorageLocation(
        str(data["metadataStoreUrl"]), key_prefix or str(data.get("ledgersRootPath") or "pgw")
    )


#: A single Redis, or a Redis Cluster (the cluster client routes each command by its key).
Client: TypeAlias = redis.Redis | RedisCluster

#: A stream entry as ``XRANGE`` sends it: its id and its fields, flat (name, value, ...).
RawEntry: TypeAlias = tuple[bytes, list[bytes]]

#: What a read that cannot reach Redis raises (the cluster client's own errors when no node
#: answers, or while a failover leaves a slot without a master).
_UNREACHABLE: Final = (
    redis.ConnectionError,
    redis.TimeoutError,
    ClusterDownError,
    RedisClusterException,
)

# One client per Redis per Python process: Spark reuses its Python workers across tasks,
# so an executor connects once, not once per task.
_CLIENTS: dict[tuple[str, float], Client] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(url: str, timeout: float) -> Client:
    with _CLIENTS_LOCK:
        client = _CLIENTS.get((url, timeout))
        if client is None:
            client = _connect(url, timeout)
            _CLIENTS[(url, timeout)] = client
        return client


def _connect(url: str, timeout: float) -> Client:
    """A client of the Redis at ``url``: the cluster client when it names a node of a Redis
    Cluster (asked once, with ``INFO cluster``, as the gateway asks), else ``redis.Redis``."""
    node = redis.Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=min(timeout, 10.0)
    )
    try:
        info = node.info("cluster")
    except redis.ResponseError as exc:  # INFO refused (ACLs): read it as the one Redis
        log.debug("INFO cluster refused by %s (%s): reading it as a single Redis", url, exc)
        return node
    except BaseException:
        node.close()
        raise
    if not int(info.get("cluster_enabled", 0)):
        # XRANGE replies as Redis sends them (see the module docstring); this module's
        # reads are the client's only XRANGE calls
        node.set_response_callback("XRANGE", _as_sent)
        return node
    node.close()
    log.info("%s is a node of a Redis Cluster: reading each topic partition from its master", url)
    return RedisCluster.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=min(timeout, 10.0)
    )


def _as_sent(response: Any, **options: Any) -> Any:
    return response


def _per_master(
    client: RedisCluster,
    script: Script,
    keys: Sequence[str],
    args: Sequence[Sequence[Any]] | None = None,
) -> list[Any]:
    """``script`` (of one key) run on each of ``keys`` (with ``args[i]`` for ``keys[i]``),
    one pipelined round trip per master.

    redis-py's ``ClusterPipeline`` refuses scripts (``EVALSHA`` is "blocked when running
    redis in cluster mode"), so the keys are grouped by their slot's master and the scripts
    pipelined on that node's own client. A key the node does not serve any more (``MOVED``,
    ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN``), or a node that cannot be reached, is run again
    through the cluster client, which follows the redirection or finds the new master: the
    scripts only read, so running one twice is harmless.
    """
    replies: list[Any] = [None] * len(keys)
    again: list[int] = []
    by_node: dict[str, tuple[redis.Redis, list[int]]] = {}
    for i, key in enumerate(keys):
        node = client.get_node_from_key(key)  # type: ignore[no-untyped-call]
        connection = node.redis_connection if node is not None else None
        if connection is None:
            again.append(i)
        else:
            by_node.setdefault(node.name, (connection, []))[1].append(i)
    for connection, indexes in by_node.values():
        pipe = connection.pipeline(transaction=False)
        for i in indexes:
            script(keys=[keys[i]], args=args[i] if args else None, client=pipe)
        try:
            results = pipe.execute(raise_on_error=False)
        except (redis.ConnectionError, redis.TimeoutError):
            again += indexes
            continue
        for i, result in zip(indexes, results, strict=True):
            if isinstance(result, redis.ResponseError):
                again.append(i)
            else:
                replies[i] = result
    for i in sorted(again):
        replies[i] = script(keys=[keys[i]], args=args[i] if args else None, client=client)
    return replies


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class TopicStore:
    """Read access to the topics of one gateway fleet's Redis.

    Picklable: it carries only the location; the connection is made where it is used.
    """

    def __init__(self, location: StorageLocation, timeout_ms: int) -> None:
        self.location = location
        self.timeout_ms = timeout_ms
        self.keys = KeySchema(location.key_prefix)

    def __getstate__(self) -> dict[str, Any]:
        return {"location": self.location, "timeout_ms": self.timeout_ms}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["location"], state["timeout_ms"])  # type: ignore[misc]

    @property
    def redis(self) -> Client:
        """The process's client of this Redis (a cluster client on a Redis Cluster).

        Raises:
            StorageUnavailable: Redis cannot be reached to connect.
        """
        try:
            return _client(self.location.url, self.timeout_ms / 1000)
        except _UNREACHABLE as exc:
            raise self._unavailable("connect", exc) from None

    def _unavailable(self, what: str, exc: Exception) -> StorageUnavailable:
        return StorageUnavailable(
            f"cannot reach Redis at {self.location.url} to {what}: {exc} (the option "
            "'redis.url' says where the executors read)"
        )

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except _UNREACHABLE as exc:
            raise self._unavailable(what, exc) from None

    def _per_key(
        self,
        what: str,
        source: str,
        keys: Sequence[str],
        args: Sequence[Sequence[Any]] | None = None,
    ) -> list[Any]:
        """The one-key Lua script ``source`` run on each of ``keys`` (with ``args[i]`` for
        ``keys[i]``), pipelined (on a Redis Cluster, one pipeline per master:
        :func:`_per_master`)."""
        client = self.redis
        script = client.register_script(source)
        if isinstance(client, RedisCluster):
            return list(self._call(what, _per_master, client, script, keys, args))
        pipe = client.pipeline(transaction=False)
        for i, key in enumerate(keys):
            script(keys=[key], args=args[i] if args else None, client=pipe)
        return list(self._call(what, pipe.execute))

    # -- topics ------------------------------------------------------------------------

    def topic_partitions(self, selection: TopicSelection, *, must_exist: bool) -> list[str]:
        """The topic partitions (streams) the selection names now, in name order.

        Raises:
            TopicUnavailable: a named topic does not exist (when ``must_exist``).
        """
        if selection.pattern is not None:
            return self._pattern_partitions(selection)
        counts = self._partition_counts([str(t) for t in selection.topics])
        out: list[str] = []
        for topic in selection.topics:
            name = str(topic)
            count = counts.get(name)
            if count:
                out += [f"{name}{PARTITION_SUFFIX}{i}" for i in range(count)]
                continue
            if must_exist and not self._exists(topic):
                raise TopicUnavailable(f"Topic {name} does not exist")
            out.append(name)
        return sorted(out)

    def _partition_counts(self, topics: Sequence[str]) -> dict[str, int]:
        by_namespace: dict[str, list[str]] = {}
        for name in topics:
            namespace = name.split("://", 1)[1].rsplit("/", 1)[0]
            by_namespace.setdefault(namespace, []).append(name)
        counts: dict[str, int] = {}
        for namespace, names in by_namespace.items():
            values = self._call(
                "read partition counts",
                self.redis.hmget,
                self.keys.namespace_partitioned(namespace),
                names,
            )
            for name, value in zip(names, values, strict=True):
                if value is not None and int(value) > 0:
                    counts[name] = int(value)
        return counts

    def _exists(self, topic: TopicName) -> bool:
        if not topic.persistent:
            raise TopicUnavailable(
                f"Topic {topic} is non-persistent: only persistent topics can be read"
            )
        pipe = self.redis.pipeline(transaction=False)
        pipe.sismember(self.keys.namespace_topics(topic.namespace), str(topic))
        pipe.exists(self.keys.topic(topic).stream)
        member, stream = self._call("look up a topic", pipe.execute)
        return bool(member) or bool(stream)

    def _pattern_partitions(self, selection: TopicSelection) -> list[str]:
        assert selection.pattern is not None
        pipe = self.redis.pipeline(transaction=False)
        pipe.smembers(self.keys.namespace_topics(selection.namespace))
        pipe.hgetall(self.keys.namespace_partitioned(selection.namespace))
        members, partitioned = self._call("list the namespace's topics", pipe.execute)
        out: set[str] = set()
        for raw in members:
            name = _text(raw)
            base, sep, index = name.rpartition(PARTITION_SUFFIX)
            # partitions match by their partitioned topic's name, as Pulsar matches them
            candidate = base if sep and index.isdigit() else name
            if selection.pattern.fullmatch(candidate) and name.startswith("persistent://"):
                out.add(name)
        for raw_name, raw_count in partitioned.items():
            name = _text(raw_name)
            if selection.pattern.fullmatch(name):
                out.update(f"{name}{PARTITION_SUFFIX}{i}" for i in range(int(raw_count)))
                out.discard(name)
        return sorted(out)

    def missing(self, partitions: Iterable[str]) -> list[str]:
        """Which of these topic partitions are gone (deleted: neither listed nor stored)."""
        names = list(partitions)
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            namespace = name.split("://", 1)[1].rsplit("/", 1)[0]
            pipe.sismember(self.keys.namespace_topics(namespace), name)
            pipe.exists(self.keys.topic(name).stream)
        flags = self._call("look up topics", pipe.execute)
        return [name for i, name in enumerate(names) if not flags[2 * i] and not flags[2 * i + 1]]

    # -- positions ---------------------------------------------------------------------

    def last_positions(self, partitions: Sequence[str]) -> dict[str, Position]:
        """The position of each partition's last entry now, with the stream's entry count
        (``BEGINNING`` when it has none; an emptied stream keeps its last id)."""
        replies = self._per_key(
            "read the last entries",
            _LAST_LUA,
            [self.keys.topic(name).stream for name in partitions],
        )
        out = {}
        for name, (last, added) in zip(partitions, replies, strict=True):
            if not last:
                out[name] = BEGINNING
                continue
            position = Position.parse(_text(last))
            count = int(added) if added is not None else -1
            out[name] = Position(position.ms, position.seq, added=count)
        return out

    def positions_at_time(self, times: Mapping[str, int]) -> dict[str, Position]:
        """For each partition, the position just before its first entry stored at or after
        its time (ms): the entries' broker timestamps tell, not their ids
        (``position_at_time.lua``, the gateway's own script)."""
        names = list(times)
        replies = self._per_key(
            "find positions by time",
            SCRIPTS["position_at_time"].source,
            [self.keys.topic(name).stream for name in names],
            [[times[name]] for name in names],
        )
        return {
            name: BEGINNING if _text(reply) == "0" else Position.parse(_text(reply))
            for name, reply in zip(names, replies, strict=True)
        }

    def advance(
        self,
        partition: str,
        start: Position,
        bound: Position,
        max_entries: int | None,
        max_bytes: int | None,
    ) -> Position:
        """The furthest position after ``start`` (up to ``bound``) within the budgets."""
        if max_entries is None and max_bytes is None:
            return bound
        reply = self._call(
            "plan a micro-batch",
            self.redis.eval,
            _ADVANCE_LUA,
            1,
            self.keys.topic(partition).stream,
            start.range_start(),
            bound.stream_id,
            max_entries if max_entries is not None else 2**53,
            max_bytes or 0,
            BLOB,
        )
        last, walked, _, added, length = reply
        if not last:
            return start
        position = Position.parse(_text(last))
        if position.entry_key() == bound.entry_key():
            # a partly read end entry: its remaining messages are admitted too
            return bound
        return Position(
            position.ms, position.seq, added=_count_through(start, walked, added, length)
        )

    # -- reading -----------------------------------------------------------------------

    def lost_after(self, partition: str, position: Position) -> str | None:
        """Why entries after ``position`` may be gone, or None when none are (never for
        ``BEGINNING``: reading from the earliest entry is reading whatever is there)."""
        if position == BEGINNING:
            return None
        script = self.redis.register_script(_REMOVED_LUA)
        reply = self._call("check for removed entries", script, [self.keys.topic(partition).stream])
        if not reply:
            return f"topic {partition} was deleted"
        deleted, added, length, first = reply
        if position.added >= 0 and added is not None:
            # exact: the head is all retention removes, so the entries gone are the first
            # `removed` ever added; those through the position were read already
            removed = int(added) - int(length)
            read = position.added if position.whole else position.added - 1
            if removed > read:
                return (
                    f"{removed - read} entries of {partition} after {position.stream_id} "
                    "were removed"
                )
            return None
        if deleted is not None:
            # Redis 7 marks XDEL (not XTRIM) deletions
            removed_id = Position.parse(_text(deleted))
            if position.precedes(removed_id):
                return f"entries of {partition} up to {removed_id.stream_id} were removed"
            return None
        # Redis 6.2 has no deletion mark: an oldest entry past the position is the hint
        if first and position != BEGINNING:
            oldest = Position.parse(_text(first))
            if position.precedes(Position(oldest.ms, oldest.seq - 1) if oldest.seq else oldest):
                return f"entries of {partition} before {oldest.stream_id} were removed"
        return None

    def pages(self, partition: str, start: Position, end: Position) -> Iterator[list[RawEntry]]:
        """The entries after ``start`` up to and including ``end``'s entry, in id order, one
        ``XRANGE`` reply of up to ``READ_CHUNK`` entries at a time."""
        key = self.keys.topic(partition).stream
        low = start.range_start()
        while True:
            page = self._call(
                "read a topic", self.redis.xrange, key, low, end.stream_id, READ_CHUNK
            )
            if page and isinstance(page[0][1], dict):
                # a client with redis-py's reply callback (the cluster client's nodes)
                page = [(stream_id, _flat(fields)) for stream_id, fields in page]
            yield page
            if len(page) < READ_CHUNK:
                return
            low = "(" + _text(page[-1][0])

    def earlier_chunks(
        self, partition: str, last: StoredEntry, uuid: str, count: int
    ) -> list[StoredEntry]:
        """Chunks ``0..count-1`` of the chunked message ``uuid`` whose chunk ``count`` is
        ``last``, in chunk order, read backwards from it (chunks of other messages may sit
        between them); fewer when some were removed.
        """
        key = self.keys.topic(partition).stream
        wanted = {f"{i}:{uuid}".encode(): i for i in range(count)}
        found: dict[int, StoredEntry] = {}
        high = "(" + last.message_id.stream_id.decode()
        scanned = 0
        while len(found) < count and scanned < _CHUNK_SCAN_LIMIT:
            chunk = self._call(
                "read a chunked message", self.redis.xrevrange, key, high, "-", _CHUNK_PAGE
            )
            for stream_id, fields in chunk:
                entry = StoredEntry.parse(stream_id, _flat(fields), last.message_id.partition)
                index = wanted.get(entry.chunk) if entry.chunk is not None else None
                if index is not None and index not in found:  # the latest copy of a chunk
                    found[index] = entry
            scanned += len(chunk)
            if len(chunk) < _CHUNK_PAGE or 0 in found:
                break
            high = "(" + _text(chunk[-1][0])
        return [found[i] for i in range(count) if i in found]

    def schemas(self, topic: str) -> list[SchemaData]:
        """Every schema version of a (partitioned) topic, oldest first."""
        raw = self._call(
            "read the topic's schema", self.redis.lrange, self.keys.topic(topic).schemas, 0, -1
        )
        return [SchemaData.from_json(item) for item in raw]


def _count_through(start: Position, walked: int, added: int | None, length: int) -> int:
    """How many entries a stream had received up to the entry ``walked`` entries after
    ``start`` (-1 when that cannot be told): the entries removed from its head, then those
    still there up to it."""
    if added is None:
        return -1  # Redis 6.2
    removed = int(added) - int(length)
    if start == BEGINNING:
        before = 0
    elif start.added >= 0:
        before = start.added if start.whole else start.added - 1
    else:
        return -1
    return max(before, removed) + int(walked)


def _flat(fields: Mapping[bytes, bytes]) -> list[bytes]:
    flat: list[bytes] = []
    for name, value in fields.items():
        flat += (name, value)
    return flat
