"""What fuzzing sessions saw, summed over a campaign."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SessionStats:
    """What sessions saw, summed by the campaign."""

    inputs: int = 0
    sessions: int = 0
    #: wall time the sessions took, summed (they run side by side)
    seconds: float = 0.0
    #: sessions whose socket the gateway closed (a refusal, a protocol error)
    closed_by_gateway: int = 0
    #: frames the gateway sent that its own codec cannot decode: findings
    malformed_answers: int = 0
    #: answers by command type name
    answers: dict[str, int] = field(default_factory=dict)
    #: refusals (SEND_ERROR, ERROR, LOOKUP/PARTITIONED_METADATA errors) by ServerError name
    errors: dict[str, int] = field(default_factory=dict)
    #: WebSocket upgrade answers by status, close codes received (websocket sessions)
    statuses: dict[int, int] = field(default_factory=dict)
    close_codes: dict[int, int] = field(default_factory=dict)
    #: HTTP answers of 500 and above: findings
    server_errors: int = 0
    #: what the findings were (the first few of each session)
    samples: list[str] = field(default_factory=list)

    def add(self, other: SessionStats) -> None:
        self.inputs += other.inputs
        self.sessions += other.sessions
        self.seconds += other.seconds
        self.closed_by_gateway += other.closed_by_gateway
        self.malformed_answers += other.malformed_answers
        self.server_errors += other.server_errors
        self.samples += other.samples[: max(0, 50 - len(self.samples))]
        for mine, theirs in (
            (self.answers, other.answers),
            (self.errors, other.errors),
            (self.statuses, other.statuses),
            (self.close_codes, other.close_codes),
        ):
            for key, count in theirs.items():
                mine[key] = mine.get(key, 0) + count  # type: ignore[index,operator]
