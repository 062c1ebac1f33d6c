"""Policies that decide whether a topic may be created or used, enforced against the
official client, a raw binary client, WebSocket and REST: ``autoTopicCreation`` and the
gateway's ``allowAutoTopicCreation*`` options, ``maxTopicsPerNamespace``,
``maxConsumersPerTopic``, a topic's ``maxMessageSize`` and ``encryptionRequired``."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulsar
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread
from tests.rawclient import raw
from tests.wsclient import connect, producer_url, refused

# The cluster pass of ./dev test runs this file on a Redis Cluster too: topic creation and
# limits: auto-creation, maxTopicsPerNamespace (topic_register.lua on the namespace's slot),
# maxConsumersPerTopic (topic_counts.lua over every subscription), maxMessageSize,
# encryptionRequired
pytestmark = pytest.mark.cluster

T = pb.BaseCommand.Type

NS = "/admin/v2/namespaces/public/default"
TOPICS = "/admin/v2/persistent/public/default"
TOO_MANY = "Exceed maximum number of topics in namespace."


def _new_namespace(gw: GatewayThread, name: str) -> str:
    status, body = admin("PUT", f"{gw.http_url}/admin/v2/namespaces/public/{name}")
    assert status == 204, body
    return f"/admin/v2/namespaces/public/{name}"


# -- auto topic creation ------------------------------------------------------------------------


def test_auto_topic_creation_off_refuses_unknown_topics(
    gateway: GatewayThread, client: Any
) -> None:
    base = gateway.http_url
    off = {"allowAutoTopicCreation": False, "topicType": "non-partitioned"}
    assert admin("POST", f"{base}{NS}/autoTopicCreation", off)[0] == 204
    assert admin("GET", f"{base}{NS}/autoTopicCreation")[1] == {**off, "defaultNumPartitions": None}
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://public/default/never-made")
    with pytest.raises(pulsar.TopicNotFound):
        client.subscribe("persistent://public/default/never-made", "s")
    with raw(gateway) as conn:  # Pulsar's ServerCnx answer, word for word
        conn.handshake()
        refused_subscribe = conn.request(
            T.SUBSCRIBE,
            T.ERROR,
            topic="persistent://public/default/never-made",
            subscription="s",
            subType=pb.CommandSubscribe.Exclusive,
            consumer_id=1,
        ).error
        assert (refused_subscribe.error, refused_subscribe.message) == (
            pb.TopicNotFound,
            "Topic does not exist",
        )
    assert "persistent://public/default/never-made" not in admin("GET", f"{base}{TOPICS}")[1]
    # a topic created with the admin API is served; a partition of a partitioned one too
    assert admin("PUT", f"{base}{TOPICS}/made")[0] == 204
    assert admin("PUT", f"{base}{TOPICS}/made-p/partitions", 2)[0] == 204
    producer = client.create_producer("persistent://public/default/made")
    consumer = client.subscribe("persistent://public/default/made", "s")
    producer.send(b"hello")
    assert consumer.receive(int(TIMEOUT * 1000)).data() == b"hello"
    client.create_producer("persistent://public/default/made-p").close()
    # removing the policy restores the gateway's default (on)
    assert admin("DELETE", f"{base}{NS}/autoTopicCreation")[0] == 204
    client.create_producer("persistent://public/default/never-made").close()


def test_auto_topic_creation_partitioned(gateway: GatewayThread, client: Any) -> None:
    base = gateway.http_url
    policy = {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3}
    assert admin("POST", f"{base}{NS}/autoTopicCreation", policy)[0] == 204
    topic = "persistent://public/default/auto-partitioned"
    producer = client.create_producer(topic)
    assert len(client.get_topic_partitions(topic)) == 3
    assert admin("GET", f"{base}{TOPICS}/auto-partitioned/partitions")[1]["partitions"] == 3
    consumer = client.subscribe(topic, "s")
    for i in range(6):
        producer.send(f"m{i}".encode(), partition_key=str(i))
    got = sorted(consumer.receive(int(TIMEOUT * 1000)).data() for _ in range(6))
    assert got == [f"m{i}".encode() for i in range(6)]


def test_gateway_options_set_the_broker_defaults(
    gateway_factory: Callable[..., GatewayThread], client_factory: Callable[..., Any]
) -> None:
    gw = gateway_factory(allow_auto_topic_creation_type="partitioned", default_num_partitions=2)
    client = client_factory(gw.url)
    client.create_producer("persistent://public/default/opt-partitioned").close()
    assert len(client.get_topic_partitions("persistent://public/default/opt-partitioned")) == 2
    status, config = admin("GET", f"{gw.http_url}/admin/v2/brokers/configuration/runtime")
    assert status == 200
    assert config["allowAutoTopicCreationType"] == "partitioned"
    assert config["defaultNumPartitions"] == "2"
    # a namespace override wins over the gateway's options
    own = {"allowAutoTopicCreation": False, "topicType": "non-partitioned"}
    assert admin("POST", f"{gw.http_url}{NS}/autoTopicCreation", own)[0] == 204
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://public/default/opt-refused")

    off = gateway_factory(allow_auto_topic_creation=False)
    with pytest.raises(pulsar.TopicNotFound):
        client_factory(off.url).create_producer("persistent://public/default/opt-off")


# -- maxTopicsPerNamespace ----------------------------------------------------------------------


def test_max_topics_per_namespace(gateway: GatewayThread, client: Any) -> None:
    base = gateway.http_url
    ns = _new_namespace(gateway, "few-topics")
    topics = "/admin/v2/persistent/public/few-topics"
    assert admin("POST", f"{base}{ns}/maxTopicsPerNamespace", 3)[0] == 204
    assert admin("GET", f"{base}{ns}/maxTopicsPerNamespace")[1] == 3
    assert admin("PUT", f"{base}{topics}/p/partitions", 2)[0] == 204  # two topics
    # a partitioned topic of two more would make four: 412, as Pulsar's admin answers
    status, body = admin("PUT", f"{base}{topics}/q/partitions", 2)
    assert (status, body) == (412, {"reason": TOO_MANY})
    client.create_producer("persistent://public/few-topics/third").close()  # the third
    status, body = admin("PUT", f"{base}{topics}/fourth")
    assert (status, body) == (412, {"reason": TOO_MANY})
    with pytest.raises(pulsar.NotAllowedError):
        client.create_producer("persistent://public/few-topics/fourth")
    with pytest.raises(pulsar.NotAllowedError):
        client.subscribe("persistent://public/few-topics/fourth", "s")
    # existing topics are still served
    client.create_producer("persistent://public/few-topics/third").close()
    client.create_producer("persistent://public/few-topics/p").close()
    # 0: no limit (the namespace's value wins over the gateway's)
    assert admin("POST", f"{base}{ns}/maxTopicsPerNamespace", 0)[0] == 204
    client.create_producer("persistent://public/few-topics/fourth").close()


def test_max_topics_per_namespace_gateway_option(
    gateway_factory: Callable[..., GatewayThread], client_factory: Callable[..., Any]
) -> None:
    gw = gateway_factory(max_topics_per_namespace=1)
    client = client_factory(gw.url)
    client.create_producer("persistent://public/default/only-one").close()
    with pytest.raises(pulsar.NotAllowedError):
        client.create_producer("persistent://public/default/one-too-many")
    # the namespace's policy overrides the gateway's option
    assert admin("POST", f"{gw.http_url}{NS}/maxTopicsPerNamespace", 2)[0] == 204
    client.create_producer("persistent://public/default/one-too-many").close()


# -- maxConsumersPerTopic -----------------------------------------------------------------------


def test_max_consumers_per_topic_counts_every_subscription(
    gateway: GatewayThread, client: Any
) -> None:
    base = gateway.http_url
    topic = "persistent://public/default/few-consumers"
    assert admin("PUT", f"{base}{TOPICS}/few-consumers")[0] == 204
    assert admin("POST", f"{base}{TOPICS}/few-consumers/maxConsumers", 2)[0] == 204
    shared = pulsar.ConsumerType.Shared
    first = client.subscribe(topic, "a", consumer_type=shared)
    client.subscribe(topic, "b", consumer_type=shared)
    for sub in ("a", "c"):  # a second consumer of a, or one of a new subscription
        with pytest.raises(pulsar.ConsumerBusy):
            client.subscribe(topic, sub, consumer_type=shared)
    first.close()
    client.subscribe(topic, "c", consumer_type=shared)  # room again
    # the namespace's value applies where the topic has none
    assert admin("DELETE", f"{base}{TOPICS}/few-consumers/maxConsumers")[0] == 204
    assert admin("POST", f"{base}{NS}/maxConsumersPerTopic", 3)[0] == 204
    client.subscribe(topic, "d", consumer_type=shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "e", consumer_type=shared)
    with raw(gateway) as conn:
        conn.handshake()
        error = conn.request(
            T.SUBSCRIBE,
            T.ERROR,
            topic=topic,
            subscription="f",
            subType=pb.CommandSubscribe.Shared,
            consumer_id=1,
        ).error
        assert (error.error, error.message) == (
            pb.ConsumerBusy,
            "Topic reached max consumers limit",
        )


# -- maxMessageSize -----------------------------------------------------------------------------


def test_topic_max_message_size_refuses_larger_messages_alone(
    gateway: GatewayThread, client: Any
) -> None:
    base = gateway.http_url
    topic = "persistent://public/default/small-messages"
    assert admin("PUT", f"{base}{TOPICS}/small-messages")[0] == 204
    assert admin("POST", f"{base}{TOPICS}/small-messages/maxMessageSize", 1000)[0] == 204
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"small")
    # The C++ client under the Python one fails a message alone only on ChecksumError
    # (docs/binary_protocol.md); the refusal's name and reason travel in its text.
    with pytest.raises(pulsar.ChecksumError):
        producer.send(b"x" * 2000)
    producer.send(b"after")
    assert consumer.receive(int(TIMEOUT * 1000)).data() == b"small"
    assert consumer.receive(int(TIMEOUT * 1000)).data() == b"after"
    # other clients get Pulsar's own answer
    with raw(gateway) as conn:
        conn.handshake()  # a client that is not C++-based
        conn.send_message(1, 0, conn.create_producer(topic), b"y" * 2000)
        error = conn.expect(T.SEND_ERROR).send_error
        assert (error.error, error.message) == (pb.NotAllowedError, "Exceed maximum message size")
    # WebSocket: an error reply for that message; REST: a per-message error
    big = base64.b64encode(b"z" * 2000).decode()

    async def over_websocket() -> dict[str, Any]:
        async with connect(producer_url(gateway, "small-messages")) as ws:
            await ws.send({"payload": big, "context": "big"})
            return dict(await ws.receive())

    reply = asyncio.run(over_websocket())
    assert reply["result"] != "ok" and "Exceed maximum message size" in reply["errorMsg"]
    status, body = admin(
        "POST",
        f"{base}/topics/persistent/public/default/small-messages",
        {"messages": [{"payload": big}]},
    )
    assert status == 200
    assert "Exceed maximum message size" in body["messagePublishResults"][0]["errorMsg"]
    # removed: the gateway's own limit again, once the producer has heard of the change
    # (policies reach live producers asynchronously, as Pulsar's topic policies do)
    assert admin("DELETE", f"{base}{TOPICS}/small-messages/maxMessageSize")[0] == 204
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            producer.send(b"x" * 2000)
            break
        except pulsar.ChecksumError:  # refused, nothing stored: try again
            assert time.monotonic() < deadline, "the limit was not lifted"
            time.sleep(0.2)
    assert consumer.receive(int(TIMEOUT * 1000)).data() == b"x" * 2000


# -- encryptionRequired -------------------------------------------------------------------------


def _key_pair(folder: Path) -> pulsar.CryptoKeyReader:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = folder / "private.pem"
    public = folder / "public.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pulsar.CryptoKeyReader(str(public), str(private))


def test_encryption_required(
    gateway: GatewayThread, client_factory: Callable[..., Any], tmp_path: Path
) -> None:
    base = gateway.http_url
    assert admin("POST", f"{base}{NS}/encryptionRequired", True)[0] == 204
    topic = "persistent://public/default/secret"
    # ERROR MetadataError, which the C++ client under the Python one retries until its
    # operation timeout (ResultUtils.h: not fatal), as it does against Pulsar
    client = client_factory(gateway.url, operation_timeout_seconds=2)
    with pytest.raises(pulsar.Timeout):
        client.create_producer(topic)
    with raw(gateway) as conn:
        conn.handshake()
        error = conn.request(T.PRODUCER, T.ERROR, topic=topic, producer_id=1).error
        assert (error.error, error.message) == (
            pb.MetadataError,
            f"Encryption is required in {topic}",
        )
        # an encrypting producer must send keys with every message
        name = conn.request(
            T.PRODUCER, T.PRODUCER_SUCCESS, topic=topic, producer_id=2, encrypted=True
        ).producer_success.producer_name
        conn.send_message(2, 0, name, b"plain")
        error = conn.expect(T.SEND_ERROR).send_error
        assert (error.error, error.message) == (pb.MetadataError, "Messages must be encrypted")
    status, body = asyncio.run(refused(producer_url(gateway, "secret")))
    assert status == 400
    assert "Encryption is required" in str(body)
    plain = {"messages": [{"payload": "eA=="}]}
    status, body = admin("POST", f"{base}/topics/persistent/public/default/secret", plain)
    assert status == 412 and "Encryption is required" in body["reason"]
    # an encrypting official client is served, and its consumer decrypts
    keys = _key_pair(tmp_path)
    consumer = client.subscribe(topic, "s", crypto_key_reader=keys)
    producer = client.create_producer(topic, encryption_key="app", crypto_key_reader=keys)
    producer.send(b"for your eyes only")
    assert consumer.receive(int(TIMEOUT * 1000)).data() == b"for your eyes only"
    assert admin("POST", f"{base}{NS}/encryptionRequired", False)[0] == 204
    client.create_producer(topic).close()
