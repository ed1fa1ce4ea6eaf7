"""The judging service's counters, in Prometheus' text format (``GET /metrics``)."""

from __future__ import annotations

import threading
from collections import Counter, deque

LATENCY_WINDOW = 10_000  # requests over which latency quantiles are computed


class Metrics:
    """Thread-safe counters of requests, programs and latencies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, int]] = Counter()  # (endpoint, HTTP status)
        self.verdicts: Counter[str] = Counter()  # programs judged, by verdict
        self.reused = 0  # retried ids answered without judging again
        self.latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.latency_sum, self.latency_count = 0.0, 0

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[endpoint, status] += 1
            if status == 200:
                self.latencies.append(seconds)
                self.latency_sum += seconds
                self.latency_count += 1

    def judged(self, verdict: str) -> None:
        with self._lock:
            self.verdicts[verdict] += 1

    def reuse(self, count: int = 1) -> None:
        with self._lock:
            self.reused += count

    @property
    def programs(self) -> int:
        with self._lock:
            return sum(self.verdicts.values())

    def quantile(self, q: float) -> float | None:
        with self._lock:
            ordered = sorted(self.latencies)
        if not ordered:
            return None
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def text(self, gauges: dict[str, float]) -> str:
        """The exposition: counters, ``gauges`` (in flight, capacity, ...), latency summary."""
        lines = [
            "# TYPE corebench_judge_requests_total counter",
            *(
                f'corebench_judge_requests_total{{endpoint="{e}",code="{c}"}} {n}'
                for (e, c), n in sorted(self.requests.items())
            ),
            "# TYPE corebench_judge_programs_total counter",
            *(
                f'corebench_judge_programs_total{{verdict="{v}"}} {n}'
                for v, n in sorted(self.verdicts.items())
            ),
            "# TYPE corebench_judge_reused_total counter",
            f"corebench_judge_reused_total {self.reused}",
        ]
        for name, value in gauges.items():
            lines += [f"# TYPE corebench_judge_{name} gauge", f"corebench_judge_{name} {value}"]
        lines.append("# TYPE corebench_judge_latency_seconds summary")
        for q in (0.5, 0.9, 0.99):
            value = self.quantile(q)
            if value is not None:
                lines.append(f'corebench_judge_latency_seconds{{quantile="{q}"}} {value:.6f}')
        lines += [
            f"corebench_judge_latency_seconds_sum {self.latency_sum:.6f}",
            f"corebench_judge_latency_seconds_count {self.latency_count}",
        ]
        return "\n".join(lines) + "\n"
