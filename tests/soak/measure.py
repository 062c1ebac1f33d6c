"""What a soak scenario measures besides the floods' own counts:

* :class:`RssSampler`: the gateway process's resident memory (``VmRSS`` of
  ``/proc/<pid>/status``) every 0.1 s in a thread of its own, with a cap past which it
  raises a flag (the scenario then stops its floods: "aborted at cap");
* :class:`HealthProber` and :class:`ConnectProber`: threads timing, every 50 and 100 ms,
  ``GET /admin/v2/brokers/health`` and a fresh binary client's CONNECT -> CONNECTED;
* :class:`Latency`: p50/p99/max of a list of durations.

Threads, with blocking sockets, so that what they time is the gateway and not how busy the
harness's event loop (which runs the floods) happens to be.
"""

from __future__ import annotations

import bisect
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.soak.binary import connect_frame, take_frame
from tests.soak.floods import MIB
from tests.soak.gateway import HEALTH_PATH


@dataclass(frozen=True)
class Latency:
    """A summary of durations, in milliseconds."""

    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        if not seconds:
            return cls(0, 0.0, 0.0, 0.0)
        ordered = sorted(seconds)

        def rank(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

        return cls(len(ordered), rank(0.50), rank(0.99), ordered[-1] * 1000)

    def __str__(self) -> str:
        if not self.count:
            return "-"
        return f"p50 {self.p50_ms:.1f} / p99 {self.p99_ms:.1f} / max {self.max_ms:.1f} ms"


@dataclass(frozen=True)
class RssFigures:
    """The gateway's resident memory over a scenario, MiB."""

    #: just before the floods started
    baseline_mib: float
    #: the highest sample from the floods' start to the scenario's end
    peak_mib: float
    #: the last sample (floods over, hostile clients gone, the workload drained)
    end_mib: float
    cap_mib: float
    #: the floods were stopped because the RSS passed ``cap_mib``
    aborted_at_cap: bool

    @property
    def growth_mib(self) -> float:
        return self.peak_mib - self.baseline_mib


def read_rss(pid: int) -> int:
    """``VmRSS`` of process ``pid``, bytes (0 for a process that is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssSampler(threading.Thread):
    """Samples the RSS of ``pid`` every ``interval`` s until :meth:`stop`; sets
    :attr:`over_cap` once a sample passes ``cap_mib``."""

    def __init__(self, pid: int, cap_mib: float, interval: float = 0.1) -> None:
        super().__init__(name=f"rss of {pid}", daemon=True)
        self.pid = pid
        self.cap_mib = cap_mib
        self.interval = interval
        #: (time.monotonic(), bytes)
        self.samples: list[tuple[float, int]] = []
        self.over_cap = threading.Event()
        self._stopping = threading.Event()

    def run(self) -> None:
        while not self._stopping.is_set():
            rss = read_rss(self.pid)
            self.samples.append((time.monotonic(), rss))
            if rss > self.cap_mib * MIB:
                self.over_cap.set()
            self._stopping.wait(self.interval)

    def stop(self) -> None:
        self._stopping.set()
        self.join()

    def figures(self, flood_start: float) -> RssFigures:
        """Baseline: the last sample before ``flood_start``; peak: the highest since."""
        before = [rss for t, rss in self.samples if t < flood_start] or [0]
        since = [rss for t, rss in self.samples if t >= flood_start] or before[-1:]
        return RssFigures(
            baseline_mib=before[-1] / MIB,
            peak_mib=max(since) / MIB,
            end_mib=self.samples[-1][1] / MIB if self.samples else 0.0,
            cap_mib=self.cap_mib,
            aborted_at_cap=self.over_cap.is_set(),
        )

    def timeline(self, start: float, every: float = 10.0) -> list[tuple[float, float]]:
        """(seconds since ``start``, MiB) at ``start``, ``start + every``, ...: the last
        sample at or before each mark."""
        times = [t for t, _rss in self.samples]
        marks: list[tuple[float, float]] = []
        mark = start
        while times and mark <= times[-1]:
            index = bisect.bisect_right(times, mark) - 1
            if index >= 0:
                marks.append((mark - start, self.samples[index][1] / MIB))
            mark += every
        return marks


class Prober(threading.Thread):
    """Times :meth:`probe` every ``interval`` s (back to back when one takes longer) until
    :meth:`stop`; a probe that raises is counted by error, not timed."""

    def __init__(self, name: str, interval: float, timeout: float = 10.0) -> None:
        super().__init__(name=name, daemon=True)
        self.interval = interval
        self.timeout = timeout
        self.seconds: list[float] = []
        self.failures: Counter[str] = Counter()
        self._stopping = threading.Event()

    def probe(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        next_at = time.monotonic()
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self.probe()
                self.seconds.append(time.monotonic() - started)
            except urllib.error.HTTPError as exc:
                self.failures[f"HTTP {exc.code}"] += 1
            except (OSError, EOFError) as exc:
                self.failures[type(exc).__name__] += 1
            next_at = max(next_at + self.interval, time.monotonic())
            self._stopping.wait(next_at - time.monotonic())

    def stop(self) -> Latency:
        self._stopping.set()
        self.join()
        return self.latency()

    def latency(self) -> Latency:
        return Latency.of(self.seconds)


class HealthProber(Prober):
    """``GET /admin/v2/brokers/health`` on a new connection, which must answer 200."""

    def __init__(self, http_url: str, interval: float = 0.05) -> None:
        super().__init__("health prober", interval)
        self.url = http_url + HEALTH_PATH

    def probe(self) -> None:
        with urllib.request.urlopen(self.url, timeout=self.timeout) as answer:
            answer.read()


class ConnectProber(Prober):
    """A fresh binary client: TCP connect, CONNECT, until CONNECTED arrives."""

    def __init__(self, address: tuple[str, int], interval: float = 0.1) -> None:
        super().__init__("connect prober", interval)
        self.address = address

    def probe(self) -> None:
        with socket.create_connection(self.address, timeout=self.timeout) as sock:
            sock.sendall(connect_frame())
            buffer = bytearray()
            while (cmd := take_frame(buffer)) is None:
                data = sock.recv(4096)
                if not data:
                    raise EOFError("closed before CONNECTED")
                buffer += data
            if cmd.type != pb.BaseCommand.CONNECTED:
                raise EOFError(f"answered {pb.BaseCommand.Type.Name(cmd.type)}")
