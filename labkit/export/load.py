"""Serving under load: open-loop arrivals, static vs continuous batching, and vLLM's latency metrics (Lab 05).

A closed-loop benchmark (serve a batch, then the next) never queues. Users do: requests arrive
when they arrive. **Open loop**: arrival times are drawn up front (a Poisson process at ``rate``
requests/s, seeded), independent of how fast the server is, with mixed prompt and output
lengths. Two schedulers share one engine (``labkit.export.slots``) and differ only in admission:

- **static batching**: a new batch starts only when every row of the last one has finished; a
  row that finished early idles, and requests that arrive meanwhile wait. The batch is prefilled
  in **one padded call**, as a static server does (``engine.admit_batch``: prompts left-padded to
  the longest), and its first tokens leave together when that call ends. An engine without
  ``admit_batch`` prefills row by row and the first tokens leave after the last one (static TTFT
  then pessimistic by up to rows - 1 prefills);
- **continuous batching**: before every decode step, waiting requests take any free row
  (prefill of that row alone), and finished requests leave at once.

Time. The server is one loop; a request that arrives during a step is seen after it, as in a
real single-threaded server. The loop keeps a *virtual clock*: each engine call advances it by
its measured duration (``clock`` = ``time.perf_counter``; it includes copying the tokens to the
host), and when nothing is running the clock jumps to the next arrival instead of sleeping. So
a sweep of slow rates costs no idle wall time, and with a fake engine and a fake clock
(``FakeEngine``) every number can be computed by hand (tested). Outputs have fixed lengths (no
end-of-text), as vLLM's random dataset with ``--ignore-eos``; request parsing, tokenization
and the network are not in the clock.

Metrics, per request, with the definitions of vLLM's serving benchmark, ``vllm bench serve``
(vllm-project/vllm: ``calculate_metrics`` in ``vllm/benchmarks/serve.py``, per-request timing in
``vllm/benchmarks/lib/endpoint_request_func.py``; before the CLI it was the script
``benchmarks/benchmark_serving.py``): request sent at arrival ``a``, token i received at ``t_i``:

- **TTFT** = t_1 - a (queueing + prefill + first token);
- **ITL** = t_{i+1} - t_i, every gap of every request pooled;
- **TPOT** = (e2e - TTFT) / (n - 1), time per output token *excluding the first*, over requests
  with n > 1 (a 1-token request counts as TPOT 0 for goodput, as in vLLM);
- **E2E** = t_n - a (vLLM calls it E2EL, end-to-end latency);
- percentiles with ``np.percentile`` (linear), as vLLM; throughput = output tokens / duration,
  duration = start (first arrival, 0) to the last token;
- **goodput** = requests/s that meet *every* given SLO (metric <= threshold), vLLM's
  ``--goodput ttft:ms tpot:ms e2el:ms``.
"""

from __future__ import annotations

import math
import numbers
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

POLICIES = ("static", "continuous")
PERCENTILES = (50, 95, 99)
METRICS = ("ttft", "tpot", "itl", "e2e")


@dataclass(frozen=True)
class Request:
    """One request: arrival (s from the start), prompt token ids (L,), tokens to generate (Lab 05)."""

    id: int
    arrival_s: float
    prompt: np.ndarray
    output_len: int


def alone(requests: Sequence[Request], gap_s: float = 1e6) -> list[Request]:
    """(Lab 05) The same requests arriving ``gap_s`` apart: each one meets an idle server."""
    return [Request(r.id, gap_s * i, r.prompt, r.output_len) for i, r in enumerate(requests)]


def _is_int(x: Any) -> bool:
    """A whole number, Python or numpy (np.int64 from a sweep counts); bool is not a count."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_real(x: Any) -> bool:
    """A real number, Python or numpy (np.float32 counts); bool is not a number here."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _lengths(name: str, span: tuple[int, int]) -> tuple[int, int]:
    if not (isinstance(span, (tuple, list)) and len(span) == 2 and all(_is_int(x) for x in span)
            and 1 <= span[0] <= span[1]):
        raise ValueError(f"{name} must be (lo, hi) integers with 1 <= lo <= hi, got {span!r}; "
                         f"for one fixed length n pass (n, n)")
    return int(span[0]), int(span[1])


def poisson_requests(n: int, rate: float, prompt_len: tuple[int, int], output_len: tuple[int, int],
                     vocab_size: int, seed: int = 0) -> list[Request]:
    """n requests arriving as a Poisson process at `rate` req/s (math.inf: all at 0), seeded (Lab 05)."""
    if not _is_real(rate) or math.isnan(rate) or rate <= 0:
        raise ValueError(f"rate must be > 0 requests/s (math.inf: all at once), got {rate!r}")
    if not _is_int(n) or n < 1:
        raise ValueError(f"n must be a positive integer (requests), got {n!r}")
    if not _is_int(vocab_size) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive integer (token ids 0..vocab_size-1), got {vocab_size!r}")
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be a whole number >= 0 (numpy's generators take no negative seed), got {seed!r}")
    n, rate = int(n), float(rate)
    (p_lo, p_hi), (o_lo, o_hi) = _lengths("prompt_len", prompt_len), _lengths("output_len", output_len)
    rng = np.random.default_rng(seed)
    # Exponential gaps of mean 1 scaled by 1/rate: the same seed gives the same requests at every
    # rate, only closer together. The first is sent at once, as vLLM's get_request does.
    gaps = rng.exponential(1.0, n - 1) / rate if math.isfinite(rate) else np.zeros(n - 1)
    arrivals = np.concatenate([[0.0], np.cumsum(gaps)])
    p_lens, o_lens = rng.integers(p_lo, p_hi + 1, n), rng.integers(o_lo, o_hi + 1, n)
    return [Request(i, float(arrivals[i]), rng.integers(0, vocab_size, int(p_lens[i])), int(o_lens[i]))
            for i in range(n)]


@dataclass(frozen=True)
class SLO:
    """Latency objectives in seconds (None: not constrained); goodput counts requests meeting all (Lab 05)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            x = getattr(self, name)
            if x is not None and not (_is_real(x) and x >= 0 and math.isfinite(x)):
                raise ValueError(f"SLO {name} must be a finite number of seconds >= 0 or None, got {x!r}")

    def describe(self) -> str:
        """e.g. "TTFT <= 200 ms, TPOT <= 50 ms", or "no SLO" (Lab 05)."""
        parts = [f"{name} <= {x * 1e3:.3g} ms" for name, x in
                 (("TTFT", self.ttft_s), ("TPOT", self.tpot_s), ("E2E", self.e2e_s)) if x is not None]
        return ", ".join(parts) or "no SLO"

    def met(self, trace: "Trace") -> bool:
        """Does the request meet every objective? (metric <= threshold, as vLLM) (Lab 05)."""
        tpot = trace.tpot_s if trace.tpot_s is not None else 0.0  # vLLM: a 1-token request has TPOT 0
        pairs = ((self.ttft_s, trace.ttft_s), (self.tpot_s, tpot), (self.e2e_s, trace.e2e_s))
        return all(slo is None or value <= slo for slo, value in pairs)


@dataclass(frozen=True)
class Trace:
    """What one request saw: arrival and the time each token reached the host, seconds (Lab 05)."""

    id: int
    arrival_s: float
    prompt_len: int
    token_s: tuple[float, ...]
    tokens: tuple[int, ...]

    def __post_init__(self) -> None:
        t = self.token_s
        if len(t) == 0:
            raise ValueError(f"trace {self.id}: no token times; a served request has at least one token")
        if t[0] < self.arrival_s or any(b < a for a, b in zip(t, t[1:])):
            raise ValueError(f"trace {self.id}: token times must be >= its arrival ({self.arrival_s}) and "
                             f"non-decreasing, got {t[:4]}; a token cannot leave before its request came")

    @property
    def ttft_s(self) -> float:
        """Time to first token: first token - arrival (Lab 05)."""
        return self.token_s[0] - self.arrival_s

    @property
    def e2e_s(self) -> float:
        """End-to-end latency: last token - arrival (Lab 05)."""
        return self.token_s[-1] - self.arrival_s

    @property
    def itl_s(self) -> tuple[float, ...]:
        """Inter-token latencies: the gaps between consecutive tokens (n - 1 of them) (Lab 05)."""
        return tuple(b - a for a, b in zip(self.token_s, self.token_s[1:]))

    @property
    def tpot_s(self) -> float | None:
        """Time per output token excluding the first: (e2e - ttft) / (n - 1); None if n == 1 (Lab 05)."""
        n = len(self.token_s)
        return (self.e2e_s - self.ttft_s) / (n - 1) if n > 1 else None


def check_requests(requests: Sequence[Request], max_tokens: int | None = None) -> None:
    """Refuse an empty list, bad lengths or arrivals, and requests longer than the context (Lab 05)."""
    if len(requests) == 0:
        raise ValueError("no requests: pass at least one")
    if len({r.id for r in requests}) != len(requests):
        raise ValueError("request ids must be unique")
    for r in requests:
        n_prompt = np.asarray(r.prompt).size
        if not (math.isfinite(r.arrival_s) and r.arrival_s >= 0):
            raise ValueError(f"request {r.id}: arrival_s must be a finite time >= 0, got {r.arrival_s!r}")
        if n_prompt == 0 or not isinstance(r.output_len, (int, np.integer)) or r.output_len < 1:
            raise ValueError(f"request {r.id}: needs a non-empty prompt and output_len >= 1, "
                             f"got {n_prompt} prompt tokens and output_len={r.output_len!r}")
        if max_tokens is not None and n_prompt + r.output_len > max_tokens:
            raise ValueError(f"request {r.id} needs {n_prompt} prompt + {r.output_len} output = "
                             f"{n_prompt + r.output_len} positions; the model's context holds {max_tokens}")


def serve_open_loop(requests: Sequence[Request], engine: Any, policy: str = "continuous",
                    clock: Callable[[], float] = time.perf_counter) -> list[Trace]:
    """Serve arrivals with static or continuous batching on `engine`; one Trace per request (Lab 05)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    slots = getattr(engine, "slots", None)
    if not _is_int(slots) or slots < 1:  # with no row to admit into, the loop would wait forever
        raise ValueError(f"engine.slots must be a positive integer (rows served at once), got {slots!r}")
    check_requests(requests, getattr(engine, "max_tokens", None))
    pending = sorted(requests, key=lambda r: (r.arrival_s, r.id))
    waiting: deque[Request] = deque()
    running: dict[int, Request] = {}  # row -> request
    free = list(range(engine.slots))
    times: dict[int, list[float]] = {r.id: [] for r in requests}
    toks: dict[int, list[int]] = {r.id: [] for r in requests}
    now, nxt, done = 0.0, 0, 0

    def timed(call: Callable[..., Any], *args: Any) -> Any:
        nonlocal now
        c0 = clock()
        out = call(*args)
        now += clock() - c0  # seconds this call held the server
        return out

    def arrive() -> None:
        nonlocal nxt
        while nxt < len(pending) and pending[nxt].arrival_s <= now:
            waiting.append(pending[nxt])
            nxt += 1

    def emit(r: Request, token: int) -> bool:  # True when the request is complete
        times[r.id].append(now)
        toks[r.id].append(int(token))
        return len(times[r.id]) == r.output_len

    def prefill(r: Request) -> tuple[Request, int, int]:
        row = free.pop(0)
        return r, row, timed(engine.admit, row, r.prompt)  # (request, its row, its first token)

    def start(r: Request, row: int, first: int) -> None:
        nonlocal done
        if emit(r, first):  # a 1-token request is done at prefill
            engine.release(row)
            free.insert(0, row)
            done += 1
        else:
            running[row] = r

    while done < len(requests):
        arrive()
        if not running and not waiting:
            now = max(now, pending[nxt].arrival_s)  # idle: jump to the next arrival
            continue
        if policy == "static" and not running:  # a new batch only when the last is done; it is fixed now
            batch = [waiting.popleft() for _ in range(min(len(free), len(waiting)))]
            if callable(getattr(engine, "admit_batch", None)):  # one padded prefill call for the batch
                rows = [free.pop(0) for _ in batch]
                firsts = timed(engine.admit_batch, rows, [r.prompt for r in batch])
                started = list(zip(batch, rows, firsts))
            else:  # row by row; the first tokens still leave together, after the last prefill
                started = [prefill(r) for r in batch]
            for r, row, first in started:
                start(r, row, first)
        elif policy == "continuous":
            while free and waiting:
                start(*prefill(waiting.popleft()))  # a newcomer's first token leaves at once
                arrive()  # requests that came during this prefill may take the next free row
        if running:
            out = timed(engine.step)  # (slots,) next token of every row
            for row, r in list(running.items()):
                if emit(r, out[row]):
                    del running[row]
                    engine.release(row)
                    free.append(row)
                    done += 1
            free.sort()
    return [Trace(r.id, r.arrival_s, int(np.asarray(r.prompt).size), tuple(times[r.id]), tuple(toks[r.id]))
            for r in sorted(requests, key=lambda r: r.id)]


@dataclass(frozen=True)
class LoadStats:
    """One (policy, rate) point: throughput, goodput and latency percentiles in ms (Lab 05)."""

    policy: str
    rate: float  # offered requests/s
    completed: int
    duration_s: float
    request_throughput: float  # requests/s
    output_throughput: float  # generated tokens/s
    goodput: float  # requests/s meeting the SLO
    slo: SLO
    latency_ms: dict[str, float] = field(default_factory=dict)  # "ttft_p99" -> ms, for METRICS x PERCENTILES
    arrival_rate: float = float("nan")  # requests/s as they arrived: (n - 1) / (last - first arrival)

    def ms(self, metric: str, q: int) -> float:
        """Latency percentile q of metric ("ttft", "tpot", "itl", "e2e"), ms (Lab 05)."""
        return self.latency_ms[f"{metric}_p{q}"]

    def kept_up(self) -> bool:
        """No queue built: p50 TTFT within the SLO's TTFT (where Lab 05 checks head-of-line blocking)."""
        return self.slo.ttft_s is not None and self.ms("ttft", 50) <= self.slo.ttft_s * 1e3

    def row(self) -> dict[str, Any]:
        """A flat dict for tables and JSON: latency keys become e.g. "ttft_p99_ms" (Lab 05)."""
        d = {k: v for k, v in asdict(self).items() if k not in ("latency_ms", "slo")}
        d.update({f"slo_{k}": v for k, v in asdict(self.slo).items()})
        d.update({f"{k}_ms": v for k, v in self.latency_ms.items()})
        return d


def load_stats(traces: Sequence[Trace], slo: SLO, policy: str = "", rate: float = float("nan")) -> LoadStats:
    """vLLM's serving metrics of one run: percentiles, throughput and goodput under `slo` (Lab 05)."""
    if len(traces) == 0:
        raise ValueError("no traces: serve at least one request")
    if not isinstance(slo, SLO):
        raise TypeError(f"slo must be an SLO (SLO() for none), got {slo!r}")
    duration = max(t.token_s[-1] for t in traces)  # from the start (t = 0) to the last token
    if duration <= 0:
        raise ValueError(f"the run took {duration} s: the clock did not advance")
    values = {"ttft": [t.ttft_s for t in traces], "e2e": [t.e2e_s for t in traces],
              "tpot": [t.tpot_s for t in traces if t.tpot_s is not None],
              "itl": [g for t in traces for g in t.itl_s]}
    # vLLM reports 0 for a metric with no samples (np.percentile(xs or 0)); NaN says "none" plainly
    lat = {f"{m}_p{q}": float(np.percentile(values[m], q) * 1e3) if values[m] else float("nan")
           for m in METRICS for q in PERCENTILES}
    n_out = sum(len(t.token_s) for t in traces)
    good = sum(slo.met(t) for t in traces)
    # A Poisson draw of n requests arrives at its nominal rate only on average: report what arrived.
    span = max(t.arrival_s for t in traces) - min(t.arrival_s for t in traces)
    arrived = (len(traces) - 1) / span if len(traces) > 1 and span > 0 else float("nan")
    return LoadStats(policy, float(rate), len(traces), duration, len(traces) / duration, n_out / duration,
                     good / duration, slo, lat, arrived)


def sweep_rates(engine: Any, rates: Sequence[float], n: int, prompt_len: tuple[int, int],
                output_len: tuple[int, int], slo: SLO, policies: Sequence[str] = POLICIES, seed: int = 0,
                clock: Callable[[], float] = time.perf_counter) -> list[LoadStats]:
    """The open-loop benchmark: every policy at every rate, the same seeded requests (Lab 05)."""
    for name, seq in (("policies", policies), ("rates", rates)):
        if isinstance(seq, (str, numbers.Number)):  # "static" would be served as 's', 't', ...
            raise TypeError(f"{name} must be a list, got {seq!r}: pass [{seq!r}]")
    if len(rates) == 0:
        raise ValueError("no rates: pass at least one request rate")
    vocab = engine.cfg.vocab_size if hasattr(engine, "cfg") else 256
    out = []
    for rate in rates:
        reqs = poisson_requests(n, rate, prompt_len, output_len, vocab, seed)
        for p in policies:
            out.append(load_stats(serve_open_loop(reqs, engine, p, clock), slo, p, rate))
    return out


class FakeClock:
    """A clock that only moves when told: seconds (Lab 05)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeEngine:
    """A deterministic engine on a FakeClock: prefill p0 + p1*L s (batch: L*rows), step s0 + s1*busy rows (Lab 05)."""

    def __init__(self, slots: int, clock: FakeClock, prefill_s: tuple[float, float] = (1.0, 0.0),
                 step_s: tuple[float, float] = (1.0, 0.0), max_tokens: int | None = None) -> None:
        if not _is_int(slots) or slots < 1:
            raise ValueError(f"slots must be a positive integer (rows served at once), got {slots!r}")
        self.slots, self.clock, self.max_tokens = int(slots), clock, max_tokens
        self.prefill_s, self.step_s = prefill_s, step_s
        self.last = np.zeros(slots, dtype=np.int64)
        self.busy: set[int] = set()
        self.steps = 0

    def admit(self, slot: int, prompt: np.ndarray) -> int:
        """Costs p0 + p1 * len(prompt); first token = last prompt token + 1 (Lab 05)."""
        self.clock.now += self.prefill_s[0] + self.prefill_s[1] * np.asarray(prompt).size
        self.busy.add(slot)
        self.last[slot] = int(np.asarray(prompt)[-1]) + 1
        return int(self.last[slot])

    def admit_batch(self, rows: Sequence[int], prompts: Sequence[np.ndarray]) -> list[int]:
        """One padded call: costs p0 + p1 * rows * longest prompt; first tokens as admit's (Lab 05)."""
        longest = max(np.asarray(p).size for p in prompts)
        self.clock.now += self.prefill_s[0] + self.prefill_s[1] * len(rows) * longest
        self.busy.update(rows)
        for row, p in zip(rows, prompts):
            self.last[row] = int(np.asarray(p)[-1]) + 1
        return [int(self.last[row]) for row in rows]

    def step(self) -> np.ndarray:
        """Costs s0 + s1 * busy rows; every row's token goes up by one (Lab 05)."""
        self.clock.now += self.step_s[0] + self.step_s[1] * len(self.busy)
        self.steps += 1
        self.last = self.last + 1
        return self.last.copy()

    def release(self, slot: int) -> None:
        """Row `slot` is free (Lab 05)."""
        self.busy.discard(slot)
