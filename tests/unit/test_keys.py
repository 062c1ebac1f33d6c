"""The Redis key schema: one hash tag per topic, read whole by Redis, and no collisions."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_gateway.core.errors import InvalidTopicName
from pulsar_gateway.core.model.topic_name import TopicName, parse_topic_name
from pulsar_gateway.core.storage.keys import (
    KEY_SPECS,
    KeySchema,
    KeySpec,
    TopicKeys,
    hash_tag,
    render_key_table,
)


def redis_hash_tag(key: str) -> str | None:
    """What Redis Cluster hashes for ``key`` (``keyHashSlot`` in cluster.c).

    The substring between the first ``{`` and the first ``}`` after it, when that substring
    is not empty; otherwise (no ``{``, no ``}`` after it, or ``{}``) the whole key, which is
    reported here as None.
    """
    start = key.find("{")
    if start == -1:
        return None
    end = key.find("}", start + 1)
    if end == -1 or end == start + 1:
        return None
    return key[start + 1 : end]


def escaped(topic: str) -> str:
    return topic.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XModem), the one Redis Cluster uses for key slots."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key: str) -> int:
    tag = redis_hash_tag(key)
    return crc16((key if tag is None else tag).encode()) % 16384


def topic_keys(keys: TopicKeys, subscriptions: list[str]) -> list[str]:
    out = [keys.stream, keys.subscriptions, keys.notify_channel]
    out += [keys.maintenance_lock, keys.compacted, keys.compacting, keys.compaction]
    out = [keys.stream, keys.subscriptions, keys.notify_channel, keys.non_persistent_channel]
    for sub in subscriptions:
        out += keys.subscription(sub).all[2:]  # stream and subs hash are per topic
    return out


ADVERSARIAL_TOPICS = [
    "persistent://public/default/plain",
    "persistent://public/default/{braces}",
    "persistent://public/default/}{",
    "persistent://public/default/a}b",
    "persistent://public/default/a{b",
    "persistent://public/default/{}",
    "persistent://public/default/100%",
    "persistent://public/default/%7D",
    "persistent://public/default/%257D",
    "persistent://public/default/a:stream",
    "persistent://public/default/x}:stream",
    "persistent://ten:ant/n:s/a:b:c",
    "persistent://t/cluster/ns/a/b/c",
    "persistent://t/c/ns/{a}/b}/c{",
    "non-persistent://public/default/ünï{cödé}",
]

ADVERSARIAL_SUBS = [
    "a",
    "a:consumers",
    "a:consumer-info",
    "consumers:a",
    ":",
    "",
    "}",
    "{",
    "{x}",
    "%7D",
    "stream",
    "subs",
    "notify",
    "a:consumers:b",
]


def test_redis_hash_tag_rule() -> None:
    # Sanity checks of the rule implemented above (examples from the Redis Cluster spec).
    assert redis_hash_tag("{user1000}.following") == "user1000"
    assert redis_hash_tag("foo{}{bar}") is None
    assert redis_hash_tag("foo{{bar}}zap") == "{bar"
    assert redis_hash_tag("foo{bar}{zap}") == "bar"
    assert redis_hash_tag("nobraces") is None
    assert crc16(b"123456789") == 0x31C3


def test_hash_tag_shape() -> None:
    assert hash_tag("persistent://public/default/t") == "{persistent://public/default/t}"
    assert hash_tag("a{b}c%d") == "{a%7Bb%7Dc%25d}"


@pytest.mark.parametrize("topic", ADVERSARIAL_TOPICS)
def test_every_key_of_a_topic_carries_the_same_tag(topic: str) -> None:
    keys = KeySchema().topic(topic)
    tags = {redis_hash_tag(k) for k in topic_keys(keys, ADVERSARIAL_SUBS)}
    assert tags == {escaped(topic)}
    (tag,) = tags
    assert tag is not None
    assert "}" not in tag
    assert "{" not in tag
    assert unquote(tag) == topic
    assert len({key_slot(k) for k in topic_keys(keys, ADVERSARIAL_SUBS)}) == 1


@pytest.mark.parametrize("topic", ADVERSARIAL_TOPICS)
def test_keys_accept_a_topic_name_object(topic: str) -> None:
    schema = KeySchema("pfx")
    assert schema.topic(TopicName("persistent", "t", "n", "x{y}")) == schema.topic(
        "persistent://t/n/x{y}"
    )
    parsed = parse_topic_name(topic)
    assert schema.topic(parsed).stream == schema.topic(str(parsed)).stream


def test_key_spelling() -> None:
    keys = KeySchema("pgw").topic("persistent://public/default/t")
    tag = "{persistent://public/default/t}"
    assert keys.stream == f"pgw:{tag}:stream"
    assert keys.subscriptions == f"pgw:{tag}:subs"
    assert keys.notify_channel == f"pgw:{tag}:notify"
    assert keys.consumers("s") == f"pgw:{tag}:consumers:s"
    assert keys.consumer_info("s") == f"pgw:{tag}:consumer-info:s"
    schema = KeySchema()
    assert schema.prefix == "pgw"
    assert schema.namespace_topics("public/default") == "pgw:ns:{public/default}:topics"
    assert schema.namespace_partitioned("public/default") == "pgw:ns:{public/default}:partitioned"
    assert keys.non_persistent_channel == f"pgw:{tag}:np"
    assert keys.non_persistent_consumers("s") == f"pgw:{tag}:np-consumers:s"


def test_subscription_keys_never_collide() -> None:
    keys = KeySchema().topic("persistent://public/default/t")
    all_keys = topic_keys(keys, ADVERSARIAL_SUBS)
    assert len(all_keys) == len(set(all_keys))
    # The classic trap: the "a:consumers" subscription vs "a".
    assert keys.consumers("a:consumers") != keys.consumers("a")
    assert keys.consumer_info("a") != keys.consumers("a")


def test_keys_of_different_topics_never_collide() -> None:
    seen: dict[str, tuple[str, str]] = {}
    for topic in ADVERSARIAL_TOPICS:
        keys = KeySchema().topic(topic)
        for sub in ADVERSARIAL_SUBS:
            for kind, key in (
                ("consumers", keys.consumers(sub)),
                ("names", keys.consumer_info(sub)),
            ):
                assert key not in seen, (key, seen.get(key), (topic, sub))
                seen[key] = (topic, f"{kind}:{sub}")
        for key in (keys.stream, keys.subscriptions, keys.notify_channel):
            assert key not in seen
            seen[key] = (topic, key)


def test_topic_keys_differ_from_global_keys() -> None:
    schema = KeySchema()
    global_keys = {
        schema.namespace_topics("public/default"),
        schema.namespace_partitioned("public/default"),
    }
    for topic in ADVERSARIAL_TOPICS:
        assert not global_keys & set(topic_keys(schema.topic(topic), ADVERSARIAL_SUBS))


def test_prefixes_separate_deployments() -> None:
    a, b = KeySchema("a"), KeySchema("b")
    topic = "persistent://public/default/t"
    assert not set(topic_keys(a.topic(topic), ["s"])) & set(topic_keys(b.topic(topic), ["s"]))
    assert a.namespace_topics("public/default") != b.namespace_topics("public/default")


# -- properties ----------------------------------------------------------------------------

texts = st.text(min_size=1)
subscriptions = st.text()


@given(local=texts, subs=st.lists(subscriptions, max_size=5))
def test_tag_safety_for_arbitrary_local_names(local: str, subs: list[str]) -> None:
    topic = str(TopicName("persistent", "public", "default", local))
    keys = KeySchema().topic(topic)
    for key in topic_keys(keys, subs):
        tag = redis_hash_tag(key)
        assert tag == escaped(topic)
        assert tag is not None and "}" not in tag
        assert unquote(tag) == topic


@given(topic=st.text())
def test_hash_tag_is_read_whole_for_any_text(topic: str) -> None:
    tag = hash_tag(topic)
    assert tag.startswith("{") and tag.endswith("}")
    inner = tag[1:-1]
    assert "{" not in inner and "}" not in inner
    assert redis_hash_tag("pgw:" + tag + ":stream") == (inner or None)
    assert unquote(inner) == topic


@given(t1=texts, s1=subscriptions, t2=texts, s2=subscriptions)
def test_keys_are_injective(t1: str, s1: str, t2: str, s2: str) -> None:
    k1, k2 = KeySchema().topic(t1), KeySchema().topic(t2)
    for f1 in (k1.consumers, k1.consumer_info):
        for f2 in (k2.consumers, k2.consumer_info):
            same_input = (t1, s1, f1.__name__) == (t2, s2, f2.__name__)
            assert (f1(s1) == f2(s2)) == same_input
    assert (k1.stream == k2.stream) == (t1 == t2)
    assert k1.stream != k2.subscriptions
    assert k1.stream != k2.notify_channel


@given(local=texts)
def test_parsed_names_give_safe_tags(local: str) -> None:
    try:
        topic = parse_topic_name(f"persistent://tenant/ns/{local}")
    except InvalidTopicName:
        return
    for key in topic_keys(KeySchema().topic(topic), ["s"]):
        assert redis_hash_tag(key) == escaped(str(topic))


# -- the key table: one list of keys, checked against the builders and the docs ------------

_SAMPLES = {
    "P": "pgw",
    "{T}": hash_tag("persistent://tenant/ns/topic"),
    "{B}": hash_tag("persistent://tenant/ns/topic"),
    "<sub>": "sub",
    "{<tenant/ns>}": "{tenant/ns}",
    "<tenant/ns>": "tenant/ns",
    "<tenant>": "tenant",
    "<topic>": "persistent://tenant/ns/topic",
}


def _build(spec: KeySpec) -> str:
    owner, _, name = spec.builder.partition(".")
    schema = KeySchema("pgw")
    if owner == "TopicKeys":
        member = getattr(schema.topic("persistent://tenant/ns/topic"), name)
        return str(member("sub") if callable(member) else member)
    member = getattr(schema, name)
    if not callable(member):
        return str(member)
    argument = "persistent://tenant/ns/topic" if name == "topic_policies" else "tenant/ns"
    if name == "tenant_namespaces":
        argument = "tenant"
    return str(member(argument))


def _expected(spec: KeySpec) -> str:
    key = spec.key
    for placeholder in sorted(_SAMPLES, key=len, reverse=True):
        key = key.replace(placeholder, _SAMPLES[placeholder])
    return key


@pytest.mark.parametrize("spec", KEY_SPECS, ids=lambda spec: spec.key)
def test_every_listed_key_is_what_its_builder_spells(spec: KeySpec) -> None:
    assert _build(spec) == _expected(spec)


def test_every_key_builder_is_listed() -> None:
    listed = {spec.builder for spec in KEY_SPECS}
    builders = {
        f"{cls.__name__}.{name}"
        for cls in (TopicKeys, KeySchema)
        for name, member in vars(cls).items()
        if not name.startswith("_")
        and name not in ("topic", "subscription", "namespace_topics_pattern", "prefix")
        and (isinstance(member, property) or callable(member))
    }
    assert builders == listed
    assert len(listed) == len(KEY_SPECS)


def test_the_architecture_doc_carries_the_key_table() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    assert render_key_table() in doc
