"""Where a capacity estimate missed: an engine timed under load, term by term (Lab 05).

``estimate_terms`` predicts the requests/s a server sustains from an idle server's p50
TTFT (one prefill) and TPOT (one decode step): per request, one prefill plus ``output_len - 1``
decode tokens, made ``slots`` at a time. A loaded run's cost per request is, exactly,

    duration / n = mean prefill + decode tokens x mean step / mean rows per step + idle / n

with "rows per step" the rows that carried a request (an engine steps all ``slots`` rows every
time, busy or not, so the step's shape does not change with load) and "idle" the server time
outside engine calls (waiting for arrivals). ``TimedEngine`` wraps any engine of the contract of
``labkit.export.load`` and times its calls; ``Terms`` holds the four terms, from the idle estimate
(``estimate_terms``) or from a loaded run (``loaded_terms``); ``explain`` says how much each term
moved the cost per request, in seconds, so the parts sum to the whole miss.

The estimate uses medians (an idle run's p50s); throughput pays the mean, so a few stalls of
several ms move a loaded run's mean step while its median stays put. ``loaded_terms`` returns means;
compare ``np.median(timed.step_s)`` with the idle TPOT to see whether the typical step changed:
``machine_or_load`` does, and says whether a slower machine or the load explains the miss.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from labkit.export.load import Request, Trace

TERMS = ("prefill", "decode step", "rows per step", "decode tokens", "idle")
BUSIER = 1.3  # typical (median) loaded step over the idle one above which the cores ran slower all run
STEADY = 0.15  # |mean / median - 1| of the loaded steps below which the whole run was slower, not a few stalls


@dataclass(frozen=True)
class Terms:
    """One request's cost in server time, by term: seconds, tokens, rows (Lab 05)."""

    prefill_s: float  # one admit: a prefill and the first token to the host
    step_s: float  # one decode step of every row
    decode_tokens: float  # tokens per request after the first (mean output_len - 1)
    rows: float  # requests a decode step carried, mean
    idle_s: float = 0.0  # server time outside engine calls, per request

    @property
    def per_request_s(self) -> float:
        """Seconds of server time per request: prefill + tokens x step / rows + idle (Lab 05)."""
        return self.prefill_s + self.decode_tokens * self.step_s / self.rows + self.idle_s

    @property
    def req_per_s(self) -> float:
        """The requests/s these terms sustain: 1 / per_request_s (Lab 05)."""
        return 1.0 / self.per_request_s


def estimate_terms(requests: Sequence[Request], ttft_s: float, tpot_s: float, slots: int) -> Terms:
    """(Lab 05) The capacity estimate's terms from an idle server's p50s: every row busy, no idle time; .req_per_s."""
    if len(requests) == 0 or not slots >= 1 or not (ttft_s >= 0 and tpot_s >= 0):
        raise ValueError(f"need requests, slots >= 1 and times >= 0 s; got {len(requests)} requests, "
                         f"slots={slots!r}, ttft_s={ttft_s!r}, tpot_s={tpot_s!r}")
    decode = float(np.mean([r.output_len - 1 for r in requests]))
    return Terms(float(ttft_s), float(tpot_s), decode, float(slots))


class TimedEngine:
    """An engine with every admit and step timed (s) and each step's busy rows counted (Lab 05)."""

    def __init__(self, engine: Any, clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine, self.clock = engine, clock
        self.admit_s: list[float] = []  # seconds per admit (prefill + first token)
        self.step_s: list[float] = []  # seconds per decode step
        self.rows: list[int] = []  # requests each decode step carried
        self._busy: set[int] = set()
        if not callable(getattr(engine, "admit_batch", None)):  # no one-call batch prefill: the scheduler
            self.admit_batch = None  # then admits row by row (load.serve_open_loop checks callable())

    def __getattr__(self, name: str) -> Any:  # slots, max_tokens, cfg, name: the engine's own
        if name == "engine":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.engine, name)

    def admit(self, slot: int, prompt: np.ndarray) -> int:
        """The engine's admit, timed; the row counts as busy until released (Lab 05)."""
        t0 = self.clock()
        first = self.engine.admit(slot, prompt)
        self.admit_s.append(self.clock() - t0)
        self._busy.add(slot)
        return first

    def admit_batch(self, rows: Sequence[int], prompts: Sequence[np.ndarray]) -> list[int]:
        """The engine's one-call prefill of several rows, timed; each request is charged an equal share (Lab 05)."""
        t0 = self.clock()
        firsts = self.engine.admit_batch(rows, prompts)
        share = (self.clock() - t0) / len(rows)
        self.admit_s.extend([share] * len(rows))  # so sum(admit_s) is still the server time spent admitting
        self._busy.update(rows)
        return firsts

    def step(self) -> np.ndarray:
        """The engine's decode step, timed, with the rows that carried a request (Lab 05)."""
        self.rows.append(len(self._busy))
        t0 = self.clock()
        out = self.engine.step()
        self.step_s.append(self.clock() - t0)
        return out

    def release(self, slot: int) -> None:
        """The engine's release; the row is free (Lab 05)."""
        self._busy.discard(slot)
        self.engine.release(slot)


def loaded_terms(timed: TimedEngine, traces: Sequence[Trace]) -> Terms:
    """Mean terms of one run served through `timed` (only that run): they add up to its duration (Lab 05)."""
    n = len(traces)
    if n == 0 or len(timed.admit_s) != n or not timed.step_s:
        raise ValueError(f"{n} traces but {len(timed.admit_s)} admits and {len(timed.step_s)} steps timed: "
                         "wrap the engine in a fresh TimedEngine for each run, and serve it through that")
    duration = max(t.token_s[-1] for t in traces)  # from the start (t = 0), as load.load_stats
    busy = sum(timed.admit_s) + sum(timed.step_s)
    decode = sum(len(t.token_s) - 1 for t in traces) / n
    return Terms(float(np.mean(timed.admit_s)), float(np.mean(timed.step_s)), decode,
                 float(np.mean(timed.rows)), (duration - busy) / n)


def explain(estimate: Terms, run: Terms) -> dict[str, float]:
    """Seconds per request each term added to the estimate's cost (< 0: saved); they sum to the miss (Lab 05)."""
    e, r = estimate, run
    # Swap one term at a time, estimate -> run, in TERMS order; each part is what that swap changed.
    parts = {"prefill": r.prefill_s - e.prefill_s,
             "decode step": e.decode_tokens * (r.step_s - e.step_s) / e.rows,
             "rows per step": e.decode_tokens * r.step_s * (1 / r.rows - 1 / e.rows),
             "decode tokens": (r.decode_tokens - e.decode_tokens) * r.step_s / r.rows,
             "idle": r.idle_s - e.idle_s}
    return {k: float(v) for k, v in parts.items()}


def describe(parts: dict[str, float]) -> str:
    """e.g. "decode step +0.200 ms (slower), rows per step +0.031 ms (fewer)": largest first, no zeros (Lab 05)."""
    words = {"prefill": ("slower", "faster"), "decode step": ("slower", "faster"),
             "rows per step": ("fewer", "more"), "decode tokens": ("more", "fewer"), "idle": ("more", "less")}
    ranked = sorted(parts.items(), key=lambda kv: -abs(kv[1]))
    ranked = [(k, v) for k, v in ranked if abs(v) >= 0.5e-6]  # s: less would print as 0.000 ms
    return ", ".join(f"{k} {v * 1e3:+.3f} ms ({words[k][v < 0]})" for k, v in ranked) or "no term moved"


@dataclass(frozen=True)
class Cause:
    """Whether a slower machine or the load explains a loaded run's steps (Lab 05)."""

    slow: float  # the typical (median) loaded step over the idle server's step
    spread: float  # the loaded steps' mean over their median: above 1, stalls that throughput pays

    @property
    def machine(self) -> bool:
        """True where the typical step ran over BUSIER x idle all run (mean near median): a busier machine (Lab 05)."""
        return self.slow > BUSIER and abs(self.spread - 1) < STEADY


def machine_or_load(step_s: Sequence[float], idle_step_s: float) -> Cause:
    """(Lab 05) Compare a loaded run's decode steps (s) with the idle step (s): .machine, .slow, .spread."""
    steps = np.asarray(step_s, dtype=float)
    if steps.size == 0 or not np.all(steps > 0) or not idle_step_s > 0:
        raise ValueError(f"need loaded steps > 0 s and an idle step > 0 s; got {steps.size} steps "
                         f"(smallest {steps.min() if steps.size else None!r}), idle_step_s={idle_step_s!r}: "
                         "pass TimedEngine.step_s of one run and the idle server's p50 TPOT")
    median = float(np.median(steps))
    return Cause(median / idle_step_s, float(steps.mean()) / median)
