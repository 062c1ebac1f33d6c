"""The soak report: one table row per scenario (bytes offered and accepted, the gateway's
RSS, the normal workload's latency and losses), then each scenario's own figures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tests.soak.floods import MIB, FloodStats
from tests.soak.run import Figures

HEADER = (
    f"{'scenario':<24} {'secs':>5} {'offered':>9} {'accepted':>9} {'RSS base':>8} "
    f"{'peak':>7} {'growth':>7} {'end':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
    f"{'lost':>5} {'dup':>4}"
)
UNITS = (
    f"{'':<24} {'':>5} {'MiB':>9} {'MiB':>9} {'MiB':>8} {'MiB':>7} {'MiB':>7} {'MiB':>7}"
    f" {'(normal workload: send -> receive)':>35}"
)


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / MIB:.1f}"


def row(figures: Figures) -> str:
    rss, latency = figures.rss, figures.workload.latency
    growth = f"{rss.growth_mib:.1f}" + ("!" if rss.aborted_at_cap else "")
    return (
        f"{figures.scenario:<24} {figures.seconds:>5.0f} {_mib(figures.offered_bytes):>9} "
        f"{_mib(figures.accepted_bytes):>9} {rss.baseline_mib:>8.1f} {rss.peak_mib:>7.1f} "
        f"{growth:>7} {rss.end_mib:>7.1f} {latency.p50_ms:>8.1f} {latency.p99_ms:>8.1f} "
        f"{latency.max_ms:>8.1f} {figures.workload.lost:>5} {figures.workload.duplicates:>4}"
    )


def _flood_line(flood: FloodStats) -> str:
    accepted = (
        ""
        if flood.accepted is None
        else f", accepted {_mib(flood.accepted)} MiB ({flood.messages} messages)"
    )
    outcomes = f", {dict(Counter(flood.outcomes).most_common(6))}" if flood.outcomes else ""
    detail = f", {flood.detail}" if flood.detail else ""
    return (
        f"  {flood.name}: offered {_mib(flood.offered)} MiB{accepted}, "
        f"{flood.sessions} sessions, {flood.disconnects} ended by the gateway{outcomes}{detail}"
    )


def details(figures: Figures) -> list[str]:
    """The scenario's own figures, a line each."""
    lines = [f"{figures.scenario}:"]
    lines += [_flood_line(flood) for flood in figures.floods]
    for name, latency in figures.probes.items():
        lines.append(f"  {name} probe: {latency} ({latency.count} probes)")
    if figures.stall is not None:
        stall = figures.stall
        lines += [
            f"  Redis stopped {stall.seconds:.1f} s; normal messages sent meanwhile: "
            f"{stall.during}; sent after SIGCONT: {stall.after}",
            f"  after SIGCONT: {stall.received_after} of {stall.sent_after} normal messages "
            f"received, {stall.producer_receipts_after} fast-producer receipts",
        ]
    workload = figures.workload
    lines.append(
        f"  normal workload: {workload.sent} sent, {workload.receipted} receipted, "
        f"{workload.received} received, {workload.lost} lost, {workload.duplicates} duplicates"
        + (f", send errors {workload.send_errors}" if workload.send_errors else "")
        + (f", receive errors {workload.receive_errors}" if workload.receive_errors else "")
    )
    if len(figures.timeline) > 2:
        lines.append(
            "  RSS every 10 s (MiB): "
            + ", ".join(f"{t:.0f}s {mib:.0f}" for t, mib in figures.timeline)
        )
    lines += [f"  {note}" for note in figures.notes]
    return lines


def table(results: Sequence[Figures | tuple[str, str]]) -> str:
    """The whole report; a failed scenario is a (name, error) pair."""
    lines = [HEADER, UNITS]
    for result in results:
        if isinstance(result, Figures):
            lines.append(row(result))
        else:
            lines.append(f"{result[0]:<24} FAILED: {result[1].splitlines()[0]}")
    lines.append("  (growth = peak - baseline; '!': aborted at the RSS cap)")
    for result in results:
        lines.append("")
        lines += details(result) if isinstance(result, Figures) else list(result)
    return "\n".join(lines)
