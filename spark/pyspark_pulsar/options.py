"""The data source's options: names, defaults and validation (sans-I/O).

Names and meanings are the streamnative pulsar-spark connector's (its ``PulsarOptions.scala``
and README), so a job written for it reads the same here; see ``docs/spark.md`` for the
table. As there, keys are case-insensitive (Spark hands a case-insensitive map) and a key
this source does not know fails the query at ``load()``/``save()`` with a message naming it,
rather than being silently ignored.

Two options are this connector's own, because it reads Redis directly (docs/architecture.md
"Design decisions": Spark reads Redis directly from its executors): ``redis.url`` and
``redis.keyPrefix``. By default the driver asks the gateway where its Redis is
(``GET {admin.url}/admin/v2/brokers/internal-configuration``, Pulsar's way of telling tools
where the storage is) and every executor connects there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Final
from urllib.parse import urlsplit

from pulsar_gateway.core import InvalidTopicName, MessageId, TopicName, parse_topic_name
from pyspark_pulsar.offsets import decode_id_array

__all__ = [
    "AtTime",
    "Bound",
    "Edge",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "Spec",
    "TopicSelection",
    "parse_sink_options",
    "parse_source_options",
]

SERVICE_URL: Final = "service.url"
ADMIN_URL: Final = "admin.url"
TOPIC: Final = "topic"
TOPICS: Final = "topics"
TOPICS_PATTERN: Final = "topicspattern"
STARTING_OFFSETS: Final = "startingoffsets"
ENDING_OFFSETS: Final = "endingoffsets"
STARTING_TIME: Final = "startingtime"
ENDING_TIME: Final = "endingtime"
FAIL_ON_DATA_LOSS: Final = "failondataloss"
POLL_TIMEOUT_MS: Final = "polltimeoutms"
MAX_BYTES_PER_TRIGGER: Final = "maxbytespertrigger"
MAX_ENTRIES_PER_TRIGGER: Final = "maxentriespertrigger"
ALLOW_DIFFERENT_SCHEMAS: Final = "allowdifferenttopicschemas"
SUBSCRIPTION_PREFIX: Final = "subscriptionprefix"
REDIS_URL: Final = "redis.url"
REDIS_KEY_PREFIX: Final = "redis.keyprefix"
#: Pass-through prefixes, as the reference connector has them (its ``pulsar.client.*``
#: configure the Java client; here the ones that mean something for a gateway client:
#: ``authPluginClassName``/``authParams`` and ``operationTimeoutMs``).
CLIENT_PREFIX: Final = "pulsar.client."
READER_PREFIX: Final = "pulsar.reader."
PRODUCER_PREFIX: Final = "pulsar.producer."
#: The reference connector also takes these two without the ``pulsar.client.`` prefix.
AUTH_PLUGIN: Final = "authpluginclassname"
AUTH_PARAMS: Final = "authparams"

_COMMON: Final = frozenset(
    {
        SERVICE_URL,
        ADMIN_URL,
        TOPIC,
        TOPICS,
        TOPICS_PATTERN,
        POLL_TIMEOUT_MS,
        REDIS_URL,
        REDIS_KEY_PREFIX,
        AUTH_PLUGIN,
        AUTH_PARAMS,
        # Spark's own, passed to every source and sink: not ours to refuse
        "path",
        "checkpointlocation",
        "queryname",
    }
)
_SOURCE_ONLY: Final = frozenset(
    {
        STARTING_OFFSETS,
        ENDING_OFFSETS,
        STARTING_TIME,
        ENDING_TIME,
        FAIL_ON_DATA_LOSS,
        MAX_BYTES_PER_TRIGGER,
        MAX_ENTRIES_PER_TRIGGER,
        ALLOW_DIFFERENT_SCHEMAS,
        SUBSCRIPTION_PREFIX,
    }
)
ADMIN_PREFIX: Final = "pulsar.admin."
#: The configuration fields of the Java client's ``ClientConfigurationData``,
#: ``ProducerConfigurationData`` and ``ReaderConfigurationData`` (lower case), which the
#: reference connector accepts after its prefixes and rejects otherwise ("<key> not
#: supported by pulsar"). The few that mean something for this connector are read below;
#: the others configure the Java client's threads, caches and timers, which this one has not.
_CLIENT_KEYS: Final = frozenset(
    """serviceurl authpluginclassname authparams authparammap operationtimeoutms
    lookuptimeoutms statsintervalseconds numiothreads numlistenerthreads connectionsperbroker
    connectionmaxidleseconds usetcpnodelay usetls tlskeyfilepath tlscertificatefilepath
    tlstrustcertsfilepath tlsallowinsecureconnection tlshostnameverificationenable
    concurrentlookuprequest maxlookuprequest maxlookupredirects
    maxnumberofrejectedrequestperconnection keepaliveintervalseconds connectiontimeoutms
    requesttimeoutms readtimeoutms initialbackoffintervalnanos maxbackoffintervalnanos
    enablebusywait listenername usekeystoretls memorylimitbytes proxyserviceurl
    proxyprotocol enabletransaction dnslookupbindaddress dnslookupbindport socks5proxyaddress
    socks5proxyusername socks5proxypassword description""".split()  # noqa: SIM905 - reads as the Java field list
)
_PRODUCER_KEYS: Final = frozenset(
    """topicname producername sendtimeoutms blockifqueuefull maxpendingmessages
    maxpendingmessagesacrosspartitions messageroutingmode hashingscheme cryptofailureaction
    batchingmaxpublishdelaymicros batchingpartitionswitchfrequencybypublishdelay
    batchingmaxmessages batchingmaxbytes batchingenabled chunkingenabled chunkmaxmessagesize
    compressiontype initialsequenceid autoupdatepartitions autoupdatepartitionsintervalseconds
    multischema accessmode lazystartpartitionedproducers properties""".split()  # noqa: SIM905 - reads as the Java field list
)
_READER_KEYS: Final = frozenset(
    """topicnames startmessageid startmessagefromrollbackdurationinsec receiverqueuesize
    readername subscriptionroleprefix subscriptionname cryptofailureaction readcompacted
    resetincludehead keyhashranges poolmessages autoupdatepartitions
    autoupdatepartitionsintervalseconds expiretimeofincompletechunkedmessagemillis
    maxpendingchunkedmessage autoackoldestchunkedmessageonqueuefull""".split()  # noqa: SIM905 - reads as the Java field list
)
_PASS_THROUGH: Final[Mapping[str, frozenset[str]]] = {
    CLIENT_PREFIX: _CLIENT_KEYS,
    ADMIN_PREFIX: _CLIENT_KEYS,
    PRODUCER_PREFIX: _PRODUCER_KEYS,
    READER_PREFIX: _READER_KEYS,
}
_DEFAULT_POLL_TIMEOUT_MS: Final = 120_000
_DEFAULT_ADMIN_PORT: Final = 8080
#: Java's ``Long.MAX_VALUE``: the reference connector's "no limit" for per-trigger budgets.
_NO_LIMIT: Final = 2**63 - 1
_TOKEN_PLUGINS: Final = frozenset(
    {
        "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "AuthenticationToken",
        "token",
    }
)


class OptionError(ValueError):
    """An option is missing, unknown or malformed; the message names it."""


class Edge(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"


@dataclass(frozen=True, slots=True)
class AtTime:
    """The first entry appended at or after ``ms`` (``startingTime``/``endingTime``)."""

    ms: int


#: Where a read starts or ends in one topic partition.
Spec = Edge | AtTime | MessageId


@dataclass(frozen=True, slots=True)
class Bound:
    """``startingOffsets``/``startingTime`` (or the ending pair): a default for every topic
    partition and the ones a JSON value names."""

    default: Spec
    per_topic: Mapping[str, Spec] = field(default_factory=dict)
    #: the option the per-topic values came from (for messages)
    option: str = ""

    def for_topic(self, topic: str) -> Spec:
        return self.per_topic.get(topic, self.default)


@dataclass(frozen=True, slots=True)
class TopicSelection:
    """Which topics to read: a list of names, or a pattern over one namespace's topics.

    Pulsar matches a ``topicsPattern`` within the namespace its literal prefix names
    (``persistent://public/default/orders-.*``), as a regex subscription does.
    """

    topics: tuple[TopicName, ...] = ()
    pattern: re.Pattern[str] | None = None
    namespace: str = ""

    def describe(self) -> str:
        if self.pattern is not None:
            return f"topicsPattern {self.pattern.pattern!r}"
        return ", ".join(str(t) for t in self.topics)


@dataclass(frozen=True, slots=True)
class Auth:
    """A client's credentials: Pulsar's token authentication (``AuthenticationToken``)."""

    token: str | None = None


@dataclass(frozen=True, slots=True)
class SourceOptions:
    service_url: str
    admin_url: str
    selection: TopicSelection
    start: Bound
    end: Bound = Bound(Edge.LATEST)
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = _DEFAULT_POLL_TIMEOUT_MS
    max_entries_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    allow_different_schemas: bool = False
    redis_url: str | None = None
    key_prefix: str | None = None
    auth: Auth = Auth()


@dataclass(frozen=True, slots=True)
class SinkOptions:
    service_url: str
    admin_url: str
    #: the ``topic`` option; None when every row names its own in ``__topic``
    topic: TopicName | None
    auth: Auth = Auth()
    operation_timeout_ms: int = 30_000
    #: ``pulsar.producer.batchingMaxMessages``: rows per batch entry
    batching_max_messages: int = 1000
    #: ``pulsar.producer.compressionType``: NONE, LZ4, ZLIB, ZSTD, SNAPPY
    compression: str = "NONE"


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    lowered: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise OptionError(f"option {key!r}: keys and values must be strings")
        lowered[key.lower()] = value
    return lowered


def _check_known(options: Mapping[str, str], known: frozenset[str], direction: str) -> None:
    for key in options:
        if key in known:
            continue
        prefix = next((p for p in _PASS_THROUGH if key.startswith(p)), None)
        if prefix is not None:
            if key[len(prefix) :] not in _PASS_THROUGH[prefix]:
                raise OptionError(f"option {key!r}: {key[len(prefix) :]} not supported by pulsar")
            continue
        raise OptionError(
            f"unknown option {key!r} for a Pulsar {direction}; the options are "
            + ", ".join(sorted(known - {"path"}))
            + ", and pulsar.client.* / pulsar.admin.* / pulsar.reader.* / pulsar.producer.*"
        )


def _service_url(options: Mapping[str, str]) -> str:
    url = options.get(SERVICE_URL, "").strip()
    if not url:
        raise OptionError(f"option {SERVICE_URL!r} is required (e.g. pulsar://localhost:6650)")
    parts = urlsplit(url)
    if parts.scheme != "pulsar" or not parts.hostname:
        raise OptionError(
            f"option {SERVICE_URL!r}: expected pulsar://host:port, got {url!r}"
            + (" (TLS is not supported yet)" if parts.scheme == "pulsar+ssl" else "")
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise OptionError(f"option {SERVICE_URL!r}: bad port in {url!r}") from None
    return url


def _admin_url(options: Mapping[str, str], service_url: str) -> str:
    url = options.get(ADMIN_URL, "").strip()
    if not url:
        # the gateway serves HTTP beside the binary protocol, on Pulsar's default port
        return f"http://{urlsplit(service_url).hostname}:{_DEFAULT_ADMIN_PORT}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionError(f"option {ADMIN_URL!r}: expected http://host:port, got {url!r}")
    return url.rstrip("/")


def _topic(name: str, option: str) -> TopicName:
    try:
        topic = parse_topic_name(name.strip())
    except InvalidTopicName as exc:
        raise OptionError(f"option {option!r}: {exc}") from None
    return topic


def _selection(options: Mapping[str, str]) -> TopicSelection:
    given = [key for key in (TOPIC, TOPICS, TOPICS_PATTERN) if options.get(key, "").strip()]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options 'topic', 'topics' or 'topicsPattern' must be set"
            + (f" (got {', '.join(given)})" if given else "")
        )
    key = given[0]
    value = options[key]
    if key == TOPIC:
        return TopicSelection(topics=(_topic(value, "topic"),))
    if key == TOPICS:
        names = [name for name in value.split(",") if name.strip()]
        topics = tuple(dict.fromkeys(_topic(name, "topics") for name in names))
        return TopicSelection(topics=topics)
    return _pattern(value)


def _pattern(value: str) -> TopicSelection:
    # The namespace is the pattern's literal part: "[domain://]tenant/ns/<regex>".
    text = value.strip()
    full = text if "://" in text else f"persistent://{text}" if text.count("/") >= 2 else ""
    if not full:
        full = f"persistent://public/default/{text}"
    domain, _, rest = full.partition("://")
    parts = rest.split("/", 2)
    if len(parts) != 3 or not parts[2]:
        raise OptionError(
            f"option 'topicsPattern': {value!r} should be [persistent://]tenant/namespace/<regex>"
        )
    if domain != "persistent":
        raise OptionError(
            f"option 'topicsPattern': only persistent topics can be read, got {value!r}"
        )
    try:
        probe = parse_topic_name(f"persistent://{parts[0]}/{parts[1]}/x")
        pattern = re.compile(full)
    except (InvalidTopicName, re.error) as exc:
        raise OptionError(f"option 'topicsPattern': {value!r}: {exc}") from None
    return TopicSelection(pattern=pattern, namespace=probe.namespace)


def _bool(options: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"option {name!r}: expected true or false, got {value!r}")
    return lowered == "true"


def _positive(options: Mapping[str, str], key: str, name: str) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        raise OptionError(f"option {name!r}: expected a positive integer, got {value!r}") from None
    if number <= 0:
        raise OptionError(f"option {name!r}: expected a positive integer, got {value!r}")
    return None if number >= _NO_LIMIT else number


def _bound(
    options: Mapping[str, str], offsets_key: str, time_key: str, default: Edge, *, start: bool
) -> Bound:
    """Read ``startingOffsets``/``startingTime`` (``start``) or the ending pair.

    Offsets: ``earliest``, ``latest`` or JSON of topic -> message id bytes (the reference
    connector's form; its encodings of ``MessageId.earliest``/``latest`` too). Times: ms
    since the epoch, or JSON of topic -> ms, where -1 means earliest and -2 latest.
    """
    offsets_name = "startingOffsets" if start else "endingOffsets"
    time_name = "startingTime" if start else "endingTime"
    if offsets_key in options and time_key in options:
        raise OptionError(f"set only one of the options {offsets_name!r} and {time_name!r}")
    if offsets_key in options:
        name, text, per_value = offsets_name, options[offsets_key].strip(), _offset_spec
        if text.lower() in ("earliest", "latest"):
            return Bound(Edge(text.lower()), option=name)
    elif time_key in options:
        name, text, per_value = time_name, options[time_key].strip(), _time_spec
        if text.lstrip("-").isdigit():
            return Bound(_time_spec(int(text), f"option {name!r}"), option=name)
    else:
        return Bound(default)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(
            f"option {name!r}: expected "
            + (
                "earliest, latest or a JSON object of topic -> message id bytes"
                if per_value is _offset_spec
                else "milliseconds since the epoch or a JSON object of topic -> milliseconds"
            )
            + f", got {text[:200]!r}"
        )
    per_topic = {}
    for topic, value in parsed.items():
        full = str(_topic(topic, name))
        per_topic[full] = per_value(value, f"option {name!r}, topic {full!r}")
    return Bound(default, per_topic, name)


def _offset_spec(value: object, where: str) -> Spec:
    if isinstance(value, str) and value.lower() in ("earliest", "latest"):
        return Edge(value.lower())
    try:
        message_id = decode_id_array(value, where)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if message_id.is_earliest:
        return Edge.EARLIEST
    if message_id.is_latest:
        return Edge.LATEST
    return message_id


def _time_spec(value: object, where: str) -> Spec:
    if not isinstance(value, int) or isinstance(value, bool) or value < -2 or value == 0:
        raise OptionError(
            f"{where}: expected milliseconds since the epoch (or -1 earliest, -2 latest), "
            f"got {value!r}"
        )
    if value == -1:
        return Edge.EARLIEST
    if value == -2:
        return Edge.LATEST
    return AtTime(value)


def _auth(options: Mapping[str, str]) -> Auth:
    plugin = options.get(CLIENT_PREFIX + AUTH_PLUGIN.lower(), options.get(AUTH_PLUGIN, ""))
    params = options.get(CLIENT_PREFIX + AUTH_PARAMS.lower(), options.get(AUTH_PARAMS, ""))
    plugin, params = plugin.strip(), params.strip()
    if not plugin and not params:
        return Auth()
    if plugin not in _TOKEN_PLUGINS:
        raise OptionError(
            f"option 'pulsar.client.authPluginClassName': {plugin!r} is not supported; use "
            "org.apache.pulsar.client.impl.auth.AuthenticationToken"
        )
    # AuthenticationToken's parameters: "token:<jwt>", "file:///path", or {"token": "<jwt>"}
    token = params
    if params.startswith("{"):
        try:
            token = str(json.loads(params)["token"])
        except (ValueError, KeyError, TypeError):
            raise OptionError(
                'option \'pulsar.client.authParams\': expected token:<jwt> or {"token": "<jwt>"}'
            ) from None
    elif params.startswith("token:"):
        token = params[len("token:") :]
    elif params.startswith("file:"):
        path = urlsplit(params).path
        try:
            with open(path, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise OptionError(f"option 'pulsar.client.authParams': {exc}") from None
    if not token:
        raise OptionError("option 'pulsar.client.authParams': the token is empty")
    return Auth(token=token)


def parse_source_options(raw: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate the options of a read (``spark.read`` or ``readStream``; None: not known
    yet, at ``load()``, so only the rules of both are checked).

    Raises:
        OptionError: naming the first option that is missing, unknown or malformed.
    """
    options = _lower(raw)
    _check_known(options, _COMMON | _SOURCE_ONLY, "source")
    service_url = _service_url(options)
    # Streaming queries start at the latest data, batch queries at the earliest (the
    # reference connector's defaults); a batch query ends at the latest.
    start = _bound(
        options,
        STARTING_OFFSETS,
        STARTING_TIME,
        Edge.EARLIEST if streaming is False else Edge.LATEST,
        start=True,
    )
    if streaming and (ENDING_OFFSETS in options or ENDING_TIME in options):
        raise OptionError("the options 'endingOffsets' and 'endingTime' are for batch queries only")
    end = _bound(options, ENDING_OFFSETS, ENDING_TIME, Edge.LATEST, start=False)
    if streaming is False and Edge.LATEST in (start.default, *start.per_topic.values()):
        raise OptionError("option 'startingOffsets': 'latest' is not allowed for a batch query")
    if Edge.EARLIEST in (end.default, *end.per_topic.values()):
        raise OptionError("option 'endingOffsets': 'earliest' is not allowed for a batch query")
    poll = _positive(options, POLL_TIMEOUT_MS, "pollTimeoutMs")
    return SourceOptions(
        service_url=service_url,
        admin_url=_admin_url(options, service_url),
        selection=_selection(options),
        start=start,
        end=end,
        fail_on_data_loss=_bool(options, FAIL_ON_DATA_LOSS, "failOnDataLoss", True),
        poll_timeout_ms=poll if poll is not None else _DEFAULT_POLL_TIMEOUT_MS,
        max_entries_per_trigger=_positive(options, MAX_ENTRIES_PER_TRIGGER, "maxEntriesPerTrigger"),
        max_bytes_per_trigger=_positive(options, MAX_BYTES_PER_TRIGGER, "maxBytesPerTrigger"),
        allow_different_schemas=_bool(
            options, ALLOW_DIFFERENT_SCHEMAS, "allowDifferentTopicSchemas", False
        ),
        redis_url=_redis_url(options),
        key_prefix=options.get(REDIS_KEY_PREFIX) or None,
        auth=_auth(options),
    )


def _redis_url(options: Mapping[str, str]) -> str | None:
    url = options.get(REDIS_URL, "").strip()
    if not url:
        return None
    if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise OptionError(
            f"option 'redis.url': expected redis://host:port[/db], rediss:// or unix://, "
            f"got {url!r}"
        )
    return url


_COMPRESSIONS: Final = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    """Validate the options of a write (``df.write`` or ``writeStream``).

    Raises:
        OptionError: naming the first option that is missing, unknown or malformed.
    """
    options = _lower(raw)
    _check_known(options, _COMMON, "sink")
    if options.get(TOPICS, "").strip() or options.get(TOPICS_PATTERN, "").strip():
        raise OptionError(
            "a Pulsar sink writes to the 'topic' option or each row's __topic column; "
            "'topics' and 'topicsPattern' are for reading"
        )
    service_url = _service_url(options)
    topic = options.get(TOPIC, "").strip()
    batching = _positive(options, PRODUCER_PREFIX + "batchingmaxmessages", "batchingMaxMessages")
    compression = options.get(PRODUCER_PREFIX + "compressiontype", "NONE").strip().upper()
    if compression not in _COMPRESSIONS:
        raise OptionError(
            f"option 'pulsar.producer.compressionType': expected one of {', '.join(_COMPRESSIONS)}"
            f", got {compression!r}"
        )
    timeout = _positive(options, CLIENT_PREFIX + "operationtimeoutms", "operationTimeoutMs")
    return SinkOptions(
        service_url=service_url,
        admin_url=_admin_url(options, service_url),
        topic=_topic(topic, "topic") if topic else None,
        auth=_auth(options),
        operation_timeout_ms=timeout if timeout is not None else 30_000,
        batching_max_messages=batching if batching is not None else 1000,
        compression=compression,
    )
