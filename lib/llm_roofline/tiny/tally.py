"""A tally of the FLOPs, bytes and wall time of each operation, per phase, as a model runs."""

from __future__ import annotations

from time import perf_counter

from ..counts import Cost, total
from ..formulas import OPS
from ..validate import shorten

__all__ = ["PHASES", "Tally"]

PHASES = ("prefill", "decode")


class Tally:
    """FLOPs, bytes read, bytes written and seconds of every operation of :data:`~llm_roofline.formulas.OPS`.

    A model calls :meth:`begin` at the start of a forward pass, :meth:`add` after each
    operation and :meth:`end` at the end. An operation's time is the wall time since the
    previous mark, so the Python between operations is charged to the operation that follows.

    What the model adds is computed, not observed: FLOPs and bytes come from the shapes and
    element sizes of the arrays the operation actually read and wrote, by the conventions of
    :mod:`llm_roofline.formulas` (``2*m*k*n`` per matrix product, 6 per softmax score, ...).
    No instruction or memory access is counted. Agreement with ``counts.op_costs``
    therefore confirms the shapes, the passes and which (query, key) pairs were computed,
    not the conventions; only the measured seconds relate the counts to the machine.

    Read it back as :class:`~llm_roofline.counts.Cost` (:meth:`costs`, :meth:`total`), as plain rows
    (:meth:`rows`, for plotting), per pass (``passes``) or as a table (``print(tally)``).
    """

    def __init__(self) -> None:
        # phase -> op -> [flops, bytes_read, bytes_written, seconds, calls]
        self._acc = {p: {op: [0, 0, 0, 0.0, 0] for op in OPS} for p in PHASES}
        self.passes: list[dict] = []  # one per forward pass: phase, batch, n_new, n_past, seconds
        self._phase = None
        self._start = self._mark = 0.0

    def begin(self, phase: str, batch: int, n_new: int, n_past: int) -> None:
        """Start a forward pass of ``batch`` x ``n_new`` new tokens after ``n_past`` cached ones."""
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {shorten(phase)}")
        self._phase = phase
        self.passes.append({"phase": phase, "batch": batch, "n_new": n_new, "n_past": n_past})
        self._start = self._mark = perf_counter()

    def add(self, op: str, flops: int, bytes_read: int, bytes_written: int) -> None:
        """Record one operation of the current pass."""
        now = perf_counter()
        row = self._acc[self._phase][op]
        row[0] += flops
        row[1] += bytes_read
        row[2] += bytes_written
        row[3] += now - self._mark
        row[4] += 1
        self._mark = now

    def end(self) -> None:
        """Close the current pass and record its wall time."""
        self.passes[-1]["seconds"] = perf_counter() - self._start
        self._phase = None

    def costs(self, phase: str) -> dict[str, Cost]:
        """The cost of each operation in ``phase``, summed over its passes."""
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {shorten(phase)}")
        return {op: Cost(*(int(x) for x in r[:3])) for op, r in self._acc[phase].items()}

    def total(self, phase: str | None = None) -> Cost:
        """Total cost of one phase, or of both when ``phase`` is None."""
        phases = PHASES if phase is None else (phase,)
        return total(total(self.costs(p)) for p in phases)

    def seconds(self, phase: str | None = None) -> float:
        """Wall time of the passes of one phase, or of all passes, in seconds."""
        if phase is not None and phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES} or None, got {shorten(phase)}")
        return sum(p["seconds"] for p in self.passes if phase in (None, p["phase"]))

    def rows(self) -> list[dict]:
        """Plain data: one dict per (phase, operation) that ran, in pass order."""
        return [
            dict(phase=p, op=op, flops=r[0], bytes_read=r[1], bytes_written=r[2], seconds=r[3],
                 calls=r[4])
            for p in PHASES
            for op, r in self._acc[p].items()
            if r[4]
        ]

    def table(self) -> str:
        """A text table: per phase and operation, FLOPs, bytes, intensity, time and its share."""
        cols = ("phase", "op", "GFLOP", "MB read", "MB written", "FLOP/B", "ms", "%time")
        widths = (8, 12, 10, 10, 10, 8, 9, 6)
        head = " ".join(f"{c:<{w}}" if i < 2 else f"{c:>{w}}"
                        for i, (c, w) in enumerate(zip(cols, widths, strict=True)))
        lines = [head, "-" * len(head)]
        wall = {p: sum(r["seconds"] for r in self.rows() if r["phase"] == p) or 1.0 for p in PHASES}

        def line(phase, op, c, seconds, tail):
            return (
                f"{phase:<8} {op:<12} {c.flops / 1e9:>10.4f} {c.bytes_read / 1e6:>10.3f} "
                f"{c.bytes_written / 1e6:>10.3f} {c.intensity if c.bytes else 0:>8.2f} "
                f"{seconds * 1e3:>9.3f} {tail}"
            )

        for r in self.rows():
            c = Cost(r["flops"], r["bytes_read"], r["bytes_written"])
            share = 100 * r["seconds"] / wall[r["phase"]]
            lines.append(line(r["phase"], r["op"], c, r["seconds"], f"{share:>6.1f}"))
        for p in PHASES:
            n = sum(1 for x in self.passes if x["phase"] == p)
            if n:
                passes = f"  ({n} pass{'es' if n > 1 else ''})"
                lines.append(line(p, "TOTAL", self.total(p), self.seconds(p), passes))
        return "\n".join(lines)

    __str__ = table
