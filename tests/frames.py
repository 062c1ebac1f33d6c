"""Building Pulsar commands field by field, for tests (no sockets, no Redis)."""

from __future__ import annotations

from typing import Any

from pulsar_gateway.proto import PulsarApi_pb2 as pb


def command(type_: int, **fields: Any) -> pb.BaseCommand:
    """A BaseCommand of ``type_`` whose sub-message (field number == type) gets ``fields``."""
    cmd = pb.BaseCommand(type=type_)  # type: ignore[arg-type]
    sub = getattr(cmd, cmd.DESCRIPTOR.fields_by_number[type_].name)
    sub.SetInParent()
    for name, value in fields.items():
        setattr(sub, name, value)
    return cmd
