"""An in-memory storage lane for unit tests of the core's services (no Redis, no sockets).

:class:`FakeLane` stands in for :class:`pulsar_gateway.core.storage.lane.Lane`: a subclass
overriding what the core calls (``call``, ``eval``, ``notify``, ``flush_now``, ``ping``,
``drain``), so it is a ``Lane`` where one is annotated, which a build compiled with mypyc
checks at run time (setup.py); the real lane's connection state is never set up. It
records every request in ``calls``, answers scripts and commands from handlers the test
registers, and resolves each future on the next loop iteration, as the real lane does when
the tick's pipeline is answered. A script's or command's raw reply goes through the
typed call's ``decode`` as in :func:`pulsar_gateway.core.storage.lane._resolve`, so a
test's raw replies, written in the shapes the ``.lua`` headers document, exercise the
decoding too.

Usage::

    lane = FakeLane()
    lane.on_script("release_consumer", lambda keys, args: 2)
    lane.fail_next("dispatch", StorageError("connection lost"))
    ...
    await lane.drain()
    assert lane.named("release_consumer")[0].args == ("sub", "gw-0")
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import SCRIPTS, Script

__all__ = ["Call", "FakeLane", "replies"]

#: Answers a script: ``(KEYS, ARGV) -> raw reply``.
ScriptHandler = Callable[[list[str], list[Any]], Any]
#: Answers a command: ``(arguments after the command name) -> raw reply``.
CommandHandler = Callable[[list[Any]], Any]


@dataclass(frozen=True, slots=True)
class Call:
    """One request made to the lane.

    ``name`` is the command (``"XADD"``), the script's name (``"dispatch"``) or, for
    ``notify``, the channel. ``args`` are a command's arguments after its name, or ARGV.
    """

    kind: Literal["call", "eval", "notify"]
    name: str
    keys: tuple[str, ...] = ()
    args: tuple[Any, ...] = ()


def replies(*raw: Any) -> Callable[..., Any]:
    """A handler answering ``raw`` replies in turn, then the last one again."""
    queue = deque(raw)

    def answer(*_: Any) -> Any:
        return queue.popleft() if len(queue) > 1 else queue[0]

    return answer


def _check_args(name: str, args: Sequence[Any]) -> None:
    # The real lane packs only these (pack_commands); None would fail there.
    for value in args:
        if not isinstance(value, bytes | str | int | float):
            raise TypeError(f"{name}: argument {value!r} cannot be sent to Redis")


class FakeLane(Lane):
    """Records requests and answers them from registered handlers, one tick later."""

    def __init__(self) -> None:  # no super().__init__(): no Redis client, no connection
        self.calls: list[Call] = []
        #: channels actually published: once per channel per tick, as the real lane does
        self.published: list[str] = []
        self.flushes = 0
        self._scripts: dict[str, ScriptHandler] = {}
        self._commands: dict[str, CommandHandler] = {
            "XADD": self._xadd,
            "XACK": lambda args: len(args) - 2,  # stream, group, ids...
            "HDEL": lambda args: len(args) - 1,  # key, fields...
        }
        self._failures: defaultdict[str, deque[BaseException]] = defaultdict(deque)
        self._next_seq = 0
        self._pending = 0
        self._to_publish: set[str] = set()

    # -- the test's side -------------------------------------------------------------

    def on_script(self, name: str, handler: ScriptHandler) -> None:
        """Answer script ``name`` with ``handler(KEYS, ARGV)``, a raw Lua reply."""
        if name not in SCRIPTS:
            raise KeyError(f"no script named {name!r}")
        self._scripts[name] = handler

    def on_command(self, name: str, handler: CommandHandler) -> None:
        """Answer command ``name`` with ``handler(arguments)``, a raw Redis reply."""
        self._commands[name.upper()] = handler

    def fail_next(self, name: str, error: BaseException) -> None:
        """Fail the next request named ``name`` (command or script) with ``error``; its
        handler is not run, as Redis never answered it."""
        self._failures[name].append(error)

    def named(self, name: str) -> list[Call]:
        """The requests made with ``name`` (command, script or channel), in order."""
        return [call for call in self.calls if call.name == name]

    @property
    def notified(self) -> list[str]:
        """Every channel passed to ``notify``, repeats included."""
        return [call.name for call in self.calls if call.kind == "notify"]

    async def drain(self) -> None:
        """Run the loop until every reply and publish is delivered and what they set off
        (callbacks, tasks awaiting them) has settled."""
        quiet = 0
        for _ in range(1000):
            await asyncio.sleep(0)
            quiet = quiet + 1 if not self._pending and not self._to_publish else 0
            if quiet >= 3:
                return
        raise AssertionError("FakeLane: replies still pending after 1000 ticks")

    # -- the Lane interface ----------------------------------------------------------

    def call(self, *args: Any, decode: Callable[[Any], Any] | None = None) -> asyncio.Future[Any]:
        """Queue one Redis command; the future resolves with ``decode(raw reply)``, or the
        raw reply without ``decode`` (the typed commands of ``core/storage``)."""
        name, rest = str(args[0]).upper(), list(args[1:])
        _check_args(name, rest)
        self.calls.append(Call("call", name, (), tuple(rest)))
        handler = self._commands.get(name)
        return self._answer(name, None if handler is None else lambda: handler(rest), decode)

    def eval(
        self,
        script: Script,
        keys: Sequence[str | bytes],
        args: Sequence[Any],
        decode: Callable[[Any], Any] | None = None,
    ) -> asyncio.Future[Any]:
        """Queue a script call; the future resolves with ``decode(raw reply)``."""
        if SCRIPTS.get(script.name) is not script:
            raise AssertionError(f"{script.name!r} is not one of the loaded scripts")
        _check_args(script.name, [*keys, *args])
        keys_, args_ = [k if isinstance(k, str) else k.decode() for k in keys], list(args)
        self.calls.append(Call("eval", script.name, tuple(keys_), tuple(args_)))
        handler = self._scripts.get(script.name)
        return self._answer(
            script.name, None if handler is None else lambda: handler(keys_, args_), decode
        )

    def notify(self, channel: str) -> None:
        """Publish on ``channel`` after this tick (once, however often it is asked)."""
        self.calls.append(Call("notify", channel))
        if not self._to_publish:
            asyncio.get_running_loop().call_soon(self._publish)
        self._to_publish.add(channel)

    def flush_now(self) -> None:
        self.flushes += 1

    async def ping(self) -> None:
        self.calls.append(Call("call", "PING"))
        if self._failures["PING"]:
            raise self._failures["PING"].popleft()

    # -- inside ----------------------------------------------------------------------

    def _answer(
        self,
        name: str,
        handler: Callable[[], Any] | None,
        decode: Callable[[Any], Any] | None,
    ) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        failures = self._failures[name]
        if failures:
            error: BaseException | None = failures.popleft()
            raw = None
        elif handler is None:
            raise LookupError(f"FakeLane: nothing answers {name!r}; register a handler")
        else:
            error, raw = None, handler()  # run now: Redis runs commands in send order
        self._pending += 1
        loop.call_soon(self._resolve, fut, error, raw, decode)
        return fut

    def _resolve(
        self,
        fut: asyncio.Future[Any],
        error: BaseException | None,
        raw: Any,
        decode: Callable[[Any], Any] | None,
    ) -> None:
        self._pending -= 1
        if fut.done():
            return
        if error is not None:
            fut.set_exception(error)
            return
        if decode is None:
            fut.set_result(raw)
            return
        try:
            value = decode(raw)
        except Exception as exc:  # as the real lane: a reply the contract does not allow
            fut.set_exception(exc)
        else:
            fut.set_result(value)

    def _publish(self) -> None:
        self.published += sorted(self._to_publish)
        self._to_publish.clear()

    def _xadd(self, args: list[Any]) -> bytes:
        stream_id = b"1000-%d" % self._next_seq
        self._next_seq += 1
        return stream_id
