"""Topic name parsing, following Pulsar's ``TopicName`` (see
pulsar_gateway/core/model/topic_name.py)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pulsar_gateway.core.errors import GatewayError, InvalidTopicName
from pulsar_gateway.core.model import topic_name
from pulsar_gateway.core.model.topic_name import PARTITION_SUFFIX, TopicName, parse_topic_name

# -- valid names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("my-topic", "persistent://public/default/my-topic"),
        ("t", "persistent://public/default/t"),
        ("my.topic_1:x=y", "persistent://public/default/my.topic_1:x=y"),
        ("tenant/ns/topic", "persistent://tenant/ns/topic"),
        ("persistent://tenant/ns/topic", "persistent://tenant/ns/topic"),
        ("non-persistent://tenant/ns/topic", "non-persistent://tenant/ns/topic"),
        ("persistent://public/default/t-partition-3", "persistent://public/default/t-partition-3"),
    ],
)
def test_valid_names_expand(name: str, expected: str) -> None:
    assert str(parse_topic_name(name)) == expected


def test_short_name_fields() -> None:
    t = parse_topic_name("my-topic")
    assert t == TopicName("persistent", "public", "default", "my-topic")
    assert t.cluster is None
    assert t.namespace == "public/default"
    assert t.persistent


def test_three_part_short_name_fields() -> None:
    t = parse_topic_name("tenant/ns/topic")
    assert (t.domain, t.tenant, t.namespace_portion, t.local_name) == (
        "persistent",
        "tenant",
        "ns",
        "topic",
    )
    assert t.namespace == "tenant/ns"


def test_full_name_fields() -> None:
    t = parse_topic_name("non-persistent://my-tenant/my-ns/my-topic")
    assert t.domain == "non-persistent"
    assert not t.persistent
    assert t.tenant == "my-tenant"
    assert t.namespace_portion == "my-ns"
    assert t.namespace == "my-tenant/my-ns"
    assert t.local_name == "my-topic"
    assert t.cluster is None


def test_legacy_four_part_name() -> None:
    t = parse_topic_name("persistent://tenant/cluster/ns/topic")
    assert t.cluster == "cluster"
    assert t.tenant == "tenant"
    assert t.namespace_portion == "ns"
    assert t.local_name == "topic"
    assert t.namespace == "tenant/cluster/ns"
    assert str(t) == "persistent://tenant/cluster/ns/topic"


@pytest.mark.parametrize("local", ["a/b", "a/b/c", "a//b", "a/", "/a"])
def test_legacy_local_name_may_contain_slashes(local: str) -> None:
    name = f"persistent://tenant/cluster/ns/{local}"
    t = parse_topic_name(name)
    assert t.cluster == "cluster"
    assert t.namespace_portion == "ns"
    assert t.local_name == local
    assert str(t) == name


def test_four_slash_separated_parts_are_legacy_not_a_v2_local_name_with_slash() -> None:
    # Pulsar splits with limit 4: t/n/a/b is tenant t, cluster n, namespace a, topic b.
    t = parse_topic_name("persistent://t/n/a/b")
    assert (t.tenant, t.cluster, t.namespace_portion, t.local_name) == ("t", "n", "a", "b")


@pytest.mark.parametrize(
    "local",
    ["{braces}", "a}b{c", "100%", "%7B", "a:b:c", "ünïcödé", "with space", "q?x=1&y#z", "*"],
)
def test_local_name_is_free_text(local: str) -> None:
    t = parse_topic_name(f"persistent://public/default/{local}")
    assert t.local_name == local
    assert parse_topic_name(local).local_name == local


@pytest.mark.parametrize("entity", ["a", "A-Z_0.9", "x=y", "x:y", "-", "_", "..", "a" * 200])
def test_named_entity_characters(entity: str) -> None:
    t = parse_topic_name(f"persistent://{entity}/{entity}/t")
    assert (t.tenant, t.namespace_portion) == (entity, entity)
    t = parse_topic_name(f"persistent://{entity}/{entity}/{entity}/t")
    assert t.cluster == entity


def test_parse_is_idempotent_on_its_own_output() -> None:
    for name in ("t", "a/b/c", "non-persistent://a/b/c", "persistent://a/c/b/x/y"):
        t = parse_topic_name(name)
        assert parse_topic_name(str(t)) == t


# -- invalid names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a/b",
        "a/b/c/d",
        "/",
        "a/b/",
        "/b/c",
        "a//c",
        "foo://a/b/c",
        "http://a/b/c",
        "Persistent://a/b/c",
        "://a/b/c",
        "persistent://a/b",
        "persistent://a",
        "persistent://",
        "persistent://a/b/",
        "persistent://a/c/b/",
        "persistent:///b/c",
        "persistent://a//c",
        "persistent://bad tenant!/ns/t",
        "persistent://tenant/bad ns/t",
        "persistent://tenant/bad!cluster/ns/t",
        "persistent://tenant//ns/t",
        "persistent://ten/ant/ns/",
        "persistent://t/n/x\x00y",
        "t\x00",
        "persistent://a b/c/d",
    ],
)
def test_invalid_names_raise(name: str) -> None:
    with pytest.raises(InvalidTopicName):
        parse_topic_name(name)


@pytest.mark.parametrize("bad", [None, b"persistent://a/b/c", 5])
def test_non_string_raises_invalid_topic_name(bad: object) -> None:
    with pytest.raises(InvalidTopicName):
        parse_topic_name(bad)  # type: ignore[arg-type]


def test_invalid_topic_name_is_a_non_retriable_gateway_error() -> None:
    assert issubclass(InvalidTopicName, GatewayError)
    assert InvalidTopicName.retriable is False
    with pytest.raises(InvalidTopicName, match="foo"):
        parse_topic_name("foo://a/b/c")


@pytest.mark.parametrize("entity", ["tenant\n", "ns\n"])
def test_named_entity_with_trailing_newline_is_invalid(entity: str) -> None:
    # Pulsar's NamedEntity.checkName uses Matcher.matches(), which must consume the whole
    # string (Python's `$` would also match before a trailing newline).
    with pytest.raises(InvalidTopicName):
        parse_topic_name(f"persistent://{entity}/{entity}/t")


def test_named_entity_is_ascii_only_like_pulsar() -> None:
    # Java's \w is [a-zA-Z_0-9] (no UNICODE_CHARACTER_CLASS); the C++ client's checkName
    # is ASCII-only too (Python's default \w accepts any Unicode letter).
    with pytest.raises(InvalidTopicName):
        parse_topic_name("persistent://tenänt/ns/t")


# -- the cache -----------------------------------------------------------------------------


def test_names_past_the_bound_are_parsed_but_not_cached() -> None:
    """A fuzzer's valid 300 KB names are parsed at each call and never kept: the cache holds
    names of at most 512 characters."""
    cache = topic_name._parse_cached
    cache.cache_clear()
    prefix = "persistent://public/default/"
    at_bound = prefix + "x" * (topic_name._CACHED_NAME_MAX - len(prefix))
    assert str(parse_topic_name(at_bound)) == at_bound
    assert cache.cache_info().currsize == 1
    for name in (at_bound + "y", prefix + "z" * 300_000, "z" * 300_000):
        parsed = parse_topic_name(name)
        assert (parsed.tenant, parsed.namespace_portion) == ("public", "default")
        assert parsed.local_name == name.removeprefix(prefix)
        assert parse_topic_name(name) == parsed
    with pytest.raises(InvalidTopicName):
        parse_topic_name("persistent://a b/ns/" + "z" * 300_000)
    assert cache.cache_info().currsize == 1


# -- partitions ----------------------------------------------------------------------------


def test_partition_suffix() -> None:
    assert PARTITION_SUFFIX == "-partition-"


@pytest.mark.parametrize(
    ("name", "index", "base"),
    [
        ("persistent://a/b/t-partition-0", 0, "persistent://a/b/t"),
        ("persistent://a/b/t-partition-12", 12, "persistent://a/b/t"),
        ("t-partition-3", 3, "persistent://public/default/t"),
        ("persistent://a/b/x-partition-1-partition-2", 2, "persistent://a/b/x-partition-1"),
        ("persistent://a/c/b/x/y-partition-5", 5, "persistent://a/c/b/x/y"),
        ("non-persistent://a/b/t-partition-7", 7, "non-persistent://a/b/t"),
    ],
)
def test_partition_names(name: str, index: int, base: str) -> None:
    t = parse_topic_name(name)
    assert t.partition_index == index
    assert str(t.partitioned_topic_name) == base
    assert t.partitioned_topic_name.partition(index) == t


@pytest.mark.parametrize(
    "local",
    [
        "t",
        "t-partition-",
        "t-partition-x",
        "t-partition--1",
        "-partition-3",
        "t-partition-3a",
        "t-partition-3 ",
        "partition-3",
        "t_partition_3",
    ],
)
def test_non_partition_names(local: str) -> None:
    t = parse_topic_name(f"persistent://a/b/{local}")
    assert t.partition_index == -1
    assert t.partitioned_topic_name is t


def test_partition_with_trailing_newline_is_not_a_partition() -> None:
    # "t-partition-3\n" is its own topic (Pulsar: Integer.parseInt("3\n") fails -> -1), not
    # partition 3 of "t" with the newline dropped.
    t = parse_topic_name("persistent://a/b/t-partition-3\n")
    assert t.partition_index == -1
    assert t.partitioned_topic_name == t


@pytest.mark.parametrize(
    "suffix",
    ["01", "007", "2147483648", "99999999999"],
)
def test_partition_suffix_pulsar_does_not_read_as_an_index(suffix: str) -> None:
    # Pulsar's TopicName.getPartitionIndex: Integer.parseInt, then -1 for a negative value,
    # for leading zeros ("topic-partition-01") and on overflow (NumberFormatException).
    # BUG: the gateway's `\d+` reads these as partitions: "t-partition-01" becomes a second
    # name for partition 1 of "t", and an index beyond int32 cannot be encoded in
    # MessageIdData.partition (int32), which breaks delivery (see test_bad_input).
    t = parse_topic_name(f"persistent://a/b/t-partition-{suffix}")
    assert t.partition_index == -1
    assert t.partitioned_topic_name == t


def test_largest_int32_partition_index() -> None:
    t = parse_topic_name(f"persistent://a/b/t-partition-{2**31 - 1}")
    assert t.partition_index == 2**31 - 1


def test_partition_builds_partition_names() -> None:
    base = parse_topic_name("persistent://a/b/t")
    names = [str(base.partition(i)) for i in range(3)]
    assert names == [f"persistent://a/b/t-partition-{i}" for i in range(3)]
    for i, name in enumerate(names):
        p = parse_topic_name(name)
        assert p.partition_index == i
        assert p.partitioned_topic_name == base


def test_legacy_partition_keeps_the_cluster() -> None:
    t = parse_topic_name("persistent://a/c/b/t-partition-1")
    assert t.partitioned_topic_name.cluster == "c"
    assert t.partitioned_topic_name.partition(1) == t


# -- properties ----------------------------------------------------------------------------

local_names = st.text(min_size=1).filter(lambda s: "\x00" not in s)
entities = st.from_regex(r"\A[-=:.a-zA-Z0-9_]+\Z")


@given(tenant=entities, ns=entities, local=local_names.filter(lambda s: "/" not in s))
def test_full_names_round_trip(tenant: str, ns: str, local: str) -> None:
    name = f"persistent://{tenant}/{ns}/{local}"
    t = parse_topic_name(name)
    assert (t.tenant, t.namespace_portion, t.local_name, t.cluster) == (tenant, ns, local, None)
    assert str(t) == name
    assert parse_topic_name(str(t)) == t


@given(tenant=entities, cluster=entities, ns=entities, local=local_names)
def test_legacy_names_round_trip(tenant: str, cluster: str, ns: str, local: str) -> None:
    name = f"non-persistent://{tenant}/{cluster}/{ns}/{local}"
    t = parse_topic_name(name)
    assert (t.tenant, t.cluster, t.namespace_portion, t.local_name) == (tenant, cluster, ns, local)
    assert str(t) == name
    assert parse_topic_name(str(t)) == t


@given(local=local_names.filter(lambda s: "/" not in s))
def test_short_names_round_trip(local: str) -> None:
    t = parse_topic_name(local)
    assert t.local_name == local
    assert str(t) == f"persistent://public/default/{local}"


@given(
    base=local_names,
    suffix=st.one_of(st.text(max_size=4), st.from_regex(r"\A[0-9]{1,12}\n?\Z")),
)
def test_a_partition_is_exactly_what_partition_builds(base: str, suffix: str) -> None:
    # Whatever reads as partition i of B must be the name B.partition(i) spells: one name
    # per partition, and partitioned_topic_name never loses characters.
    try:
        t = parse_topic_name(f"persistent://a/b/{base}{PARTITION_SUFFIX}{suffix}")
    except InvalidTopicName:
        # e.g. base "/" makes a legacy 4-part name with an empty namespace
        assume(False)
        raise
    if t.partition_index >= 0:
        assert t.partition_index < 2**31
        assert t.partitioned_topic_name.partition(t.partition_index) == t
    else:
        assert t.partitioned_topic_name == t


@given(local=local_names, index=st.integers(0, 10_000))
def test_partition_round_trip(local: str, index: int) -> None:
    base = TopicName("persistent", "t", "n", local)
    p = base.partition(index)
    assert p.partition_index == index
    assert p.partitioned_topic_name.partition(index) == p
