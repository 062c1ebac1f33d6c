"""The lane's kind of Redis connection (``core/storage/connections.py``): what
``direct_connection`` returns is what its annotation says, for every connection class a pool
can have, and the lane's module derives nothing from redis-py."""

from __future__ import annotations

import inspect

import pytest
from redis.asyncio.connection import (
    Connection,
    ConnectionPool,
    SSLConnection,
    UnixDomainSocketConnection,
)

from pulsar_gateway.core.storage import lane
from pulsar_gateway.core.storage.connections import LaneConnection, direct_connection


@pytest.mark.parametrize(
    ("connection_class", "kwargs"),
    [
        (Connection, {"host": "localhost", "port": 6379, "db": 3}),
        (SSLConnection, {"host": "localhost", "port": 6380}),
        (UnixDomainSocketConnection, {"path": "/tmp/redis.sock"}),
    ],
)
def test_a_direct_connection_is_a_lane_connection_of_the_pools_class(
    connection_class: type[Connection], kwargs: dict[str, object]
) -> None:
    pool = ConnectionPool(connection_class=connection_class, **kwargs)
    conn = direct_connection(pool)
    # the annotation holds at run time: the class built for the pool derives from both
    assert isinstance(conn, LaneConnection)
    assert isinstance(conn, connection_class)
    assert type(conn).__name__ == f"Lane{connection_class.__name__}"
    # the pool's class comes before AbstractConnection: its connect, its repr pieces
    assert type(conn).connect is connection_class.connect
    assert conn.repr_pieces() == connection_class(**kwargs).repr_pieces()
    # one class per pool class, built once
    assert type(direct_connection(pool)) is type(conn)
    # not connected: nothing to write on
    assert conn.write_now(b"*1\r\n$4\r\nPING\r\n") is False


def test_the_lane_module_derives_no_class_from_a_third_party_one() -> None:
    own = [
        cls
        for _, cls in inspect.getmembers(lane, inspect.isclass)
        if cls.__module__ == lane.__name__
    ]
    assert own  # the check sees the lane's classes
    foreign = [
        f"{cls.__name__} <- {base.__module__}.{base.__qualname__}"
        for cls in own
        for base in cls.__mro__
        if base.__module__.split(".")[0] not in {"pulsar_gateway", "builtins", "typing"}
    ]
    assert foreign == []
