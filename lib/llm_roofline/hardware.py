"""Accelerator specs: memory, bandwidth and dense peak compute per precision, with sources.

The figures live in ``data/accelerators.json`` (human units: GiB of memory, GB/s, TFLOPS);
this module turns them into base units (bytes, bytes/s, FLOP/s) and computes what follows from
them, such as the ridge point and the time of a collective over the interconnect. Peaks are
dense: never the 2:4-sparsity figure. Memory capacity
is binary: vendors write "80GB" for 80 GiB (2**30 bytes) of HBM, so ``memory_bytes`` is
``memory_gib * 2**30``; bandwidths are decimal (1e9 bytes/s per GB/s).

>>> h100 = get_accelerator("h100-sxm")
>>> round(h100.ridge("bf16"), 1)
295.3
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from importlib import resources

import numpy as np

from . import dtypes, validate

_TERA = Decimal(10) ** 12
_GIGA = Decimal(10) ** 9
_GIB = Decimal(2) ** 30


@dataclass(frozen=True)
class Accelerator:
    """One chip. Units: bytes, bytes/s, FLOP/s (OP/s for integer math)."""

    name: str
    vendor: str
    architecture: str
    memory_bytes: float  # capacity: the vendor's "GB" figure read as GiB, times 2**30
    memory_type: str
    bandwidth: float  # memory bandwidth, bytes/s
    peaks: dict[str, float] = field(hash=False)  # dense tensor math: "bf16" -> FLOP/s
    interconnect: str | None  # scale-up link, e.g. "NVLink 4"; None for a lone chip
    interconnect_bandwidth: float | None  # bytes/s per chip, both directions together
    sources: dict[str, str] = field(hash=False)  # field -> document and date
    notes: str = ""
    link_bandwidth: float | None = None  # bytes/s of one link of a mesh; None: a switch
    collective_latency_s: float = 0.0  # fixed time of one collective inside the domain, s
    domain_size: int = 1  # chips one scale-up interconnect joins (an HGX node: 8)
    network: str | None = None  # scale-out link beyond the domain; None: none in the data
    network_bandwidth: float | None = None  # bytes/s per chip, both directions together
    network_latency_s: float = 0.0  # fixed time a collective adds when it crosses the network, s
    in_switch_reduction: bool = False  # the switch sums an all-reduce (NVLink SHARP)

    def nodes(self, n_gpus: int) -> int:
        """How many scale-up domains (nodes) ``n_gpus`` chips fill: ``ceil(n_gpus / domain_size)``.

        Raises when they span more than one domain and the data has no network to join them.
        """
        n_gpus = validate.integer("n_gpus", n_gpus)
        nodes = -(-n_gpus // self.domain_size)
        if n_gpus > 1 and self.interconnect_bandwidth is None:
            raise ValueError(
                f"{self.name} has no interconnect in the data for tensor parallelism; "
                f"n_gpus must be 1, got {n_gpus}"
            )
        if nodes > 1 and self.network_bandwidth is None:
            raise ValueError(
                f"n_gpus = {n_gpus} spans {nodes} nodes of {self.domain_size} {self.name}, "
                f"and the data has no network between nodes; n_gpus must be at most {self.domain_size}"
            )
        return nodes

    def allreduce_s(self, n_gpus: int, message_bytes):
        """Time of one all-reduce of ``message_bytes`` (per GPU, arrays welcome) over ``n_gpus``.

        Inside one domain: a ring moves ``2*(n-1)/n * m`` bytes each way per chip over half its
        (bidirectional) group bandwidth, plus ``collective_latency_s``. Across ``k`` nodes of
        ``d`` chips: the hierarchical all-reduce engines use: reduce-scatter and all-gather
        inside each node (the ring's bytes over the interconnect), and an all-reduce of each
        chip's ``m/d`` shard across the nodes over the network, ``2*(k-1)/k * m/d`` each way,
        plus both latencies. This is the time of the ring algorithms NCCL uses by default, one
        collective after another; it is not the least possible: a switch that reduces in the
        network moves fewer bytes, and an engine can overlap a collective with other work
        (``allreduce_floor``).
        """
        nodes = self.nodes(n_gpus)
        m = np.asarray(message_bytes, dtype=float)
        if n_gpus == 1:
            return np.zeros(m.shape) if m.ndim else 0.0
        inside = min(n_gpus, self.domain_size)
        time = 0.0
        if inside > 1:
            time = (2 * (inside - 1) / inside * m / (self.group_bandwidth(inside) / 2)
                    + self.collective_latency_s)
        if nodes > 1:
            time = time + (2 * (nodes - 1) / nodes * m / inside / (self.network_bandwidth / 2)
                           + self.network_latency_s)
        return time

    def allreduce_floor(self, n_gpus: int, message_bytes) -> tuple:
        """The least one all-reduce of ``message_bytes`` over ``n_gpus`` costs, by resource.

        Returns ``(interconnect_s, network_s, latency_s)``: the seconds the scale-up link is
        busy with the bytes each chip must send (and receive) at the least, the seconds the
        network is, and the fixed latency. Inside a domain the least is a ring's
        ``2*(d-1)/d * m`` each way, except behind a switch that reduces in the network
        (``in_switch_reduction``, NVLink SHARP): there each chip sends its ``m`` bytes once
        and receives the sum once, ``m`` each way. Across ``k`` nodes the network carries each
        chip's ``2*(k-1)/k * m/d`` each way (the hierarchical all-reduce). The three are
        separate resources: an engine can keep them busy at once, or overlap them with math.
        """
        nodes = self.nodes(n_gpus)
        m = np.asarray(message_bytes, dtype=float)
        zero = np.zeros(m.shape) if m.ndim else 0.0
        if n_gpus == 1:
            return zero, zero, 0.0
        inside = min(n_gpus, self.domain_size)
        link = network = zero
        latency = 0.0
        if inside > 1:
            each_way = m if self.in_switch_reduction else 2 * (inside - 1) / inside * m
            link = each_way / (self.group_bandwidth(inside) / 2)
            latency += self.collective_latency_s
        if nodes > 1:
            network = 2 * (nodes - 1) / nodes * m / inside / (self.network_bandwidth / 2)
            latency += self.network_latency_s
        return link, network, latency

    def allgather_s(self, n_gpus: int, total_bytes):
        """Time of one all-gather that leaves ``total_bytes`` on every one of ``n_gpus`` chips.

        Each chip holds ``1/n`` of it and must receive the rest: inside a domain of ``d``
        chips a ring moves ``(d-1)/d`` of it each way over half the group bandwidth, plus
        ``collective_latency_s``; across ``k`` nodes the network brings each node the other
        nodes' ``(k-1)/k`` of it over its ``d`` NICs, ``(k-1)/k * total/d`` per chip, plus the
        network's latency (the hierarchical all-gather). What each chip receives is
        the least any algorithm moves (a switch cannot reduce a gather), so this time is also
        its floor's bandwidth term (``allgather_floor``).
        """
        link, network, latency = self.allgather_floor(n_gpus, total_bytes)
        return link + network + latency

    def allgather_floor(self, n_gpus: int, total_bytes) -> tuple:
        """``(interconnect_s, network_s, latency_s)`` of one all-gather (``allgather_s``)."""
        nodes = self.nodes(n_gpus)
        m = np.asarray(total_bytes, dtype=float)
        zero = np.zeros(m.shape) if m.ndim else 0.0
        if n_gpus == 1:
            return zero, zero, 0.0
        inside = min(n_gpus, self.domain_size)
        link = network = zero
        latency = 0.0
        if inside > 1:
            link = (inside - 1) / inside * m / (self.group_bandwidth(inside) / 2)
            latency += self.collective_latency_s
        if nodes > 1:
            network = (nodes - 1) / nodes * m / inside / (self.network_bandwidth / 2)
            latency += self.network_latency_s
        return link, network, latency

    def send_s(self, message_bytes, *, across_nodes: bool):
        """Time of one point-to-point transfer of ``message_bytes`` (pipeline stages, KV handoff).

        Over one link of the interconnect inside a node (a switch: half the chip's
        bidirectional bandwidth each way), over the network across nodes; plus the latency.
        """
        m = np.asarray(message_bytes, dtype=float)
        if across_nodes:
            if self.network_bandwidth is None:
                raise ValueError(f"{self.name} has no network between nodes in the data")
            return m / (self.network_bandwidth / 2) + self.network_latency_s
        if self.interconnect_bandwidth is None:
            raise ValueError(f"{self.name} has no interconnect in the data")
        one_way = (self.link_bandwidth or self.interconnect_bandwidth) / 2
        return m / one_way + self.collective_latency_s

    def group_bandwidth(self, n_gpus: int) -> float | None:
        """Interconnect bytes/s (both directions) one chip can use in a group of ``n_gpus``.

        Behind a switch (NVLink) every chip has its whole ``interconnect_bandwidth`` in any
        group; in a point-to-point mesh (MI300X's Infinity Fabric) a chip reaches each of its
        ``n_gpus - 1`` peers over one link, so it has ``min(total, (n_gpus - 1) * link)``.
        ``None`` when the chip has no interconnect in the data.
        """
        if self.interconnect_bandwidth is None:
            return None
        if self.link_bandwidth is None:
            return self.interconnect_bandwidth
        return min(self.interconnect_bandwidth, max(n_gpus - 1, 1) * self.link_bandwidth)

    @property
    def precisions(self) -> tuple[str, ...]:
        """The precisions with a peak in the data, e.g. ("bf16", "fp16", "fp8", "int8")."""
        return tuple(self.peaks)

    def has(self, dtype: str) -> bool:
        """Whether the data has a peak for ``dtype`` (an unknown dtype name raises)."""
        return _peak_key(dtype) in self.peaks

    def peak(self, dtype: str = "bf16") -> float:
        """Dense peak of tensor math in ``dtype``, FLOP/s; both fp8 variants share "fp8"."""
        key = _peak_key(dtype)
        if key not in self.peaks:
            raise ValueError(
                f"{self.name} has no {dtype!r} peak in the data; "
                f"its tensor math: {', '.join(self.precisions)}"
            )
        return self.peaks[key]

    def ridge(self, dtype: str = "bf16") -> float:
        """Ridge point I_ridge = P_peak / B_mem, FLOPs per byte."""
        return self.peak(dtype) / self.bandwidth


def _peak_key(dtype: str) -> str:
    """The key of ``dtype`` in ``Accelerator.peaks``: its canonical name, "fp8" for both fp8s."""
    key = dtypes.canonical(dtype)
    return "fp8" if key.startswith("fp8") else key


def _normalise(name: str) -> str:
    """'H100 SXM5' -> 'h100sxm5': lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _from_record(record: dict) -> Accelerator:
    link, net = record["interconnect"], record.get("network")
    return Accelerator(
        name=record["name"],
        vendor=record["vendor"],
        architecture=record["architecture"],
        memory_bytes=float(Decimal(record["memory_gib"]) * _GIB),
        memory_type=record["memory_type"],
        bandwidth=float(Decimal(record["bandwidth_gb_s"]) * _GIGA),
        peaks={k: float(Decimal(v) * _TERA) for k, v in record["peak_tflops"].items()},
        interconnect=link["name"] if link else None,
        interconnect_bandwidth=float(Decimal(link["bandwidth_gb_s"]) * _GIGA) if link else None,
        sources=dict(record["sources"]),
        notes=record.get("notes", ""),
        link_bandwidth=float(Decimal(link["link_gb_s"]) * _GIGA)
        if link and "link_gb_s" in link else None,
        collective_latency_s=float(Decimal(link["latency_us"]) / 10**6) if link else 0.0,
        domain_size=int(link["domain_size"]) if link else 1,
        network=net["name"] if net else None,
        network_bandwidth=float(Decimal(net["bandwidth_gb_s"]) * _GIGA) if net else None,
        network_latency_s=float(Decimal(net["latency_us"]) / 10**6) if net else 0.0,
        in_switch_reduction=bool(link.get("in_switch_reduction", False)) if link else False,
    )


def load_accelerators(path) -> list[Accelerator]:
    """The accelerators of a JSON file in the schema of ``data/accelerators.json``.

    For example the reader's own machine, measured and saved by
    ``llm_roofline.machine.save_accelerator``; the command line reads such a file with
    ``--gpu-file``. A missing or malformed file raises ``ValueError`` naming it.
    """
    from pathlib import Path

    path = Path(path)
    try:
        records = json.loads(path.read_text(), parse_float=Decimal)["accelerators"]
        return [_from_record(r) for r in records]
    except OSError as err:
        raise ValueError(f"cannot read accelerator file {str(path)!r}: {err.strerror}") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, ArithmeticError,
            UnicodeDecodeError) as err:
        raise ValueError(
            f"{str(path)!r} is not an accelerator data file ({type(err).__name__}: {err})"
        ) from None


@cache
def _catalogue() -> tuple[tuple[Accelerator, ...], dict[str, Accelerator]]:
    """All accelerators in file order, and a map from each normalised name or alias to one."""
    text = resources.files("llm_roofline").joinpath("data/accelerators.json").read_text()
    records = json.loads(text, parse_float=Decimal, parse_int=Decimal)["accelerators"]
    chips, index = [], {}
    for record in records:
        chip = _from_record(record)
        chips.append(chip)
        vendor = _normalise(chip.vendor)
        for alias in [record["name"], *record["aliases"]]:
            key = _normalise(alias).removeprefix(vendor)
            for k in (key, vendor + key):  # with and without the vendor's name
                if index.get(k, chip) is not chip:
                    raise ValueError(f"alias {alias!r} names both {index[k].name} and {chip.name}")
                index[k] = chip
    return tuple(chips), index


def list_accelerators() -> list[str]:
    """Names of all accelerators in the data, in file order (each is a valid lookup)."""
    return [chip.name for chip in _catalogue()[0]]


def aliases(name: str | Accelerator) -> list[str]:
    """The other names that ``get_accelerator`` accepts for this chip, as the data lists them."""
    chip = get_accelerator(name)
    text = resources.files("llm_roofline").joinpath("data/accelerators.json").read_text()
    for record in json.loads(text)["accelerators"]:
        if record["name"] == chip.name:
            return list(record["aliases"])
    return []


def get_accelerator(name: str | Accelerator) -> Accelerator:
    """Look an accelerator up by name or alias, forgiving case and punctuation.

    An ``Accelerator`` is returned as is. An unknown name raises ``ValueError`` with the
    closest known names. The bare "H100" means the H100 SXM (the article's chip); the slower
    H100 PCIe card is not in the data.
    """
    if isinstance(name, Accelerator):
        return name
    if not isinstance(name, str):
        raise ValueError(f"accelerator must be a name such as 'H100', got {name!r}")
    chips, index = _catalogue()
    key = _normalise(name)
    if key in index:
        return index[key]
    close = difflib.get_close_matches(key, index, n=3, cutoff=0.5)
    suggestions = list(dict.fromkeys(index[k].name for k in close))
    hint = f"did you mean {' or '.join(map(repr, suggestions))}? " if suggestions else ""
    raise ValueError(
        f"unknown accelerator {name!r}; {hint}known: {', '.join(c.name for c in chips)}"
    )


def table(
    precisions: tuple[str, ...] = ("bf16", "fp8"), names: list[str] | None = None
) -> list[dict]:
    """One row per accelerator for a notebook table: memory, bandwidth, peaks and ridges.

    Units are in the column names (memory in GiB, bandwidth in GB/s); a chip without a
    precision gets ``None`` there.
    """
    rows = []
    for chip in map(get_accelerator, names or list_accelerators()):
        row = {
            "accelerator": chip.name,
            "architecture": chip.architecture,
            "memory (GiB)": chip.memory_bytes / 2**30,
            "memory type": chip.memory_type,
            "bandwidth (GB/s)": chip.bandwidth / 1e9,
        }
        for dtype in precisions:
            has = chip.has(dtype)
            row[f"{dtype} peak (TFLOPS)"] = chip.peak(dtype) / 1e12 if has else None
            row[f"{dtype} ridge (FLOPs/byte)"] = chip.ridge(dtype) if has else None
        rows.append(row)
    return rows


def growth(
    baseline: str = "A100", dtype: str = "bf16", names: list[str] | None = None
) -> list[dict]:
    """Each chip's compute, bandwidth and ridge relative to ``baseline`` (ratios, unitless)."""
    base = get_accelerator(baseline)
    rows = []
    for chip in map(get_accelerator, names or list_accelerators()):
        if not chip.has(dtype):
            continue
        rows.append(
            {
                "accelerator": chip.name,
                "compute ratio": chip.peak(dtype) / base.peak(dtype),
                "bandwidth ratio": chip.bandwidth / base.bandwidth,
                "ridge (FLOPs/byte)": chip.ridge(dtype),
            }
        )
    return rows

