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

__all__ = [
    "LIMITS", "Accelerator", "aliases", "get_accelerator", "growth", "list_accelerators",
    "load_accelerators", "table",
]

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

    def __post_init__(self) -> None:
        """Every field checked as the built-in data is (ranges in :data:`LIMITS`)."""
        def put(name, value):
            object.__setattr__(self, name, value)

        put("name", validate.text("Accelerator.name", self.name, limit=100))
        for key in ("vendor", "architecture", "memory_type"):
            put(key, validate.text(f"Accelerator.{key}", getattr(self, key)))
        put("notes", validate.text("Accelerator.notes", self.notes, limit=4000, empty=True))
        put("memory_bytes", _base("Accelerator.memory_bytes", self.memory_bytes, "memory_gib"))
        put("bandwidth", _base("Accelerator.bandwidth", self.bandwidth, "bandwidth_gb_s"))
        if not isinstance(self.peaks, dict) or not self.peaks:
            raise ValueError(f"Accelerator.peaks must be a non-empty dict of precision to FLOP/s, "
                             f"got {validate.shorten(self.peaks)}")
        peaks = {}
        for key, value in self.peaks.items():
            if not isinstance(key, str) or _peak_key(key) != key:
                raise ValueError(f"Accelerator.peaks keys must be precisions such as 'bf16', "
                                 f"'fp8', 'int8', got {validate.shorten(key)}")
            peaks[key] = _base(f"Accelerator.peaks[{key!r}]", value, "peak_tflops")
        put("peaks", peaks)
        if not isinstance(self.sources, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.sources.items()):
            raise ValueError(f"Accelerator.sources must be a dict of field to source (strings), "
                             f"got {validate.shorten(self.sources)}")
        put("sources", dict(self.sources))
        for link, bandwidth in (("interconnect", "interconnect_bandwidth"),
                                ("network", "network_bandwidth")):
            if (getattr(self, link) is None) != (getattr(self, bandwidth) is None):
                raise ValueError(f"Accelerator.{link} and {bandwidth} must both be given or both "
                                 f"be None, got {validate.shorten(getattr(self, link))} and "
                                 f"{validate.shorten(getattr(self, bandwidth))}")
            if getattr(self, link) is not None:
                put(link, validate.text(f"Accelerator.{link}", getattr(self, link)))
                put(bandwidth, _base(f"Accelerator.{bandwidth}", getattr(self, bandwidth),
                                     "bandwidth_gb_s"))
        if self.link_bandwidth is not None:
            if self.interconnect is None:
                raise ValueError("Accelerator.link_bandwidth needs an interconnect")
            put("link_bandwidth", _base("Accelerator.link_bandwidth", self.link_bandwidth,
                                        "bandwidth_gb_s"))
        for key in ("collective_latency_s", "network_latency_s"):
            put(key, _base(f"Accelerator.{key}", getattr(self, key), "latency_us"))
        put("domain_size", validate.integer("Accelerator.domain_size", self.domain_size,
                                            maximum=LIMITS["domain_size"][1]))
        put("in_switch_reduction", validate.boolean("Accelerator.in_switch_reduction",
                                                    self.in_switch_reduction))
        if self.in_switch_reduction and self.interconnect is None:
            raise ValueError("Accelerator.in_switch_reduction needs an interconnect")

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
        n_gpus = int(n_gpus)
        m = np.asarray(_message(message_bytes))
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
        m = _message(message_bytes)
        if validate.boolean("across_nodes", across_nodes):
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
        n_gpus = validate.integer("n_gpus", n_gpus)
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
        """Dense peak of tensor math in ``dtype``, FLOP/s; both fp8 variants and MXFP8 share
        "fp8", NVFP4 and MXFP4 share "fp4", MXFP6 "fp6". A chip without that math in the data
        (an H100 has no FP4 tensor cores) raises: 4-bit weights on it run at a 16-bit or
        8-bit peak (W4A16, W4A8), which ``deployment.setup`` chooses."""
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


LIMITS = {
    "memory_gib": (2.0**-10, 2.0**30), "bandwidth_gb_s": (1e-3, 1e7), "peak_tflops": (1e-6, 1e7),
    "latency_us": (0.0, 1e6), "domain_size": (1, 2**20),
}
"""What an accelerator's figures may be, in the human units of ``data/accelerators.json``:
memory 1 MiB to 1 EiB, bandwidths 1 MB/s to 10 PB/s, peaks 1 MFLOP/s to 10 EFLOP/s, latencies
0 to 1 s, a scale-up domain of 1 to 1,048,576 chips. Within them every time the calculator
derives stays finite and positive."""

_SCALE = {"memory_gib": 2.0**30, "bandwidth_gb_s": 1e9, "peak_tflops": 1e12, "latency_us": 1e-6}
_UNITS = {"memory_gib": "GiB", "bandwidth_gb_s": "GB/s", "peak_tflops": "TFLOP/s",
          "latency_us": "microseconds"}


def _base(name: str, value, kind: str) -> float:
    """A figure in base units (bytes, bytes/s, FLOP/s, s) within ``LIMITS[kind]`` scaled."""
    lo, hi = LIMITS[kind]
    scale = _SCALE[kind]
    try:
        return validate.real(name, value, minimum=lo * scale, maximum=hi * scale)
    except ValueError:
        raise ValueError(f"{name} must be a finite number from {lo * scale:g} to {hi * scale:g} "
                         f"({lo:g} to {hi:g} {_UNITS[kind]}), got {validate.shorten(value)}") from None


def _message(message_bytes):
    """Bytes of a message (a number or an array): finite, non-negative, at most 2**60."""
    return validate.reals("message_bytes", message_bytes, maximum=2.0**60, unit="bytes")


def _peak_key(dtype: str) -> str:
    """The key of ``dtype`` in ``Accelerator.peaks``: its canonical name; "fp8" for both fp8s
    and MXFP8, "fp6" for MXFP6, "fp4" for NVFP4 and MXFP4 (``dtypes.math_class``)."""
    return dtypes.math_class(dtype)


def _normalise(name: str) -> str:
    """'H100 SXM5' -> 'h100sxm5': lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


_RECORD_KEYS = ("name", "aliases", "vendor", "architecture", "memory_gib", "memory_type",
                "bandwidth_gb_s", "peak_tflops", "interconnect", "network", "sources", "notes")
_REQUIRED = ("name", "vendor", "architecture", "memory_gib", "memory_type", "bandwidth_gb_s",
             "peak_tflops", "interconnect", "sources")
_LINK_KEYS = ("name", "bandwidth_gb_s", "link_gb_s", "latency_us", "domain_size",
              "in_switch_reduction")
_NETWORK_KEYS = ("name", "bandwidth_gb_s", "latency_us")


def _object(where: str, value, keys: tuple[str, ...], required: tuple[str, ...]) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a JSON object, got {validate.shorten(value)}")
    validate.options(where, value, keys)
    for key in required:
        if key not in value or value[key] is None and key != "interconnect":
            raise ValueError(f"{where} lacks the required field {key!r}")
    return value


_EXACT_SCALE = {"memory_gib": _GIB, "bandwidth_gb_s": _GIGA, "peak_tflops": _TERA,
                "latency_us": Decimal(10) ** -6}


def _human(where: str, value, kind: str) -> float:
    """A human figure (GiB, GB/s, TFLOP/s, us) in base units, checked against ``LIMITS``."""
    lo, hi = LIMITS[kind]
    ok = isinstance(value, int | float | Decimal) and not isinstance(value, bool)
    if ok:
        exact = value if isinstance(value, Decimal) else Decimal(value)
        ok = exact.is_finite() and Decimal(repr(lo)) <= exact <= Decimal(repr(hi))
    if not ok:
        shown = str(value) if isinstance(value, Decimal) else validate.shorten(value)
        raise ValueError(f"{where} must be a finite number of {_UNITS[kind]} from {lo:g} to "
                         f"{hi:g}, got {shown}")
    return float(exact * _EXACT_SCALE[kind])


def _plain(value):
    """A JSON number read as ``Decimal`` shown and checked as the float it is."""
    return float(value) if isinstance(value, Decimal) else value


def _figure(where: str, record: dict, key: str, kind: str | None = None) -> float:
    """The figure ``key`` of ``record`` in base units, checked against ``LIMITS``."""
    return _human(f"{where} {key}", record[key], kind or key)


def _from_record(record: dict, where: str = "accelerator record") -> Accelerator:
    """One record of ``data/accelerators.json`` as an ``Accelerator``, every field checked."""
    record = _object(where, record, _RECORD_KEYS, _REQUIRED)
    name = validate.text(f"{where} name", record["name"], limit=100)
    where = f"{where} ({validate.shorten(name, 40)})"
    aliases = record.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise ValueError(f"{where} aliases must be a list of names, got {validate.shorten(aliases)}")
    for alias in aliases:
        validate.text(f"{where} alias", alias, limit=100)
    peaks = record["peak_tflops"]
    if not isinstance(peaks, dict) or not peaks:
        raise ValueError(f"{where} peak_tflops must be an object of precision to TFLOP/s, got "
                         f"{validate.shorten(peaks)}")
    for key in peaks:
        if not isinstance(key, str) or key not in (*dtypes.list_dtypes(), "fp8", "fp6", "fp4") or (
                _peak_key(key) != key):
            raise ValueError(f"{where} peak_tflops: {validate.shorten(key)} is not a precision "
                             f"such as 'bf16', 'fp16', 'fp8', 'fp6', 'fp4', 'int8'")
    link = record["interconnect"]
    if link is not None:
        link = _object(f"{where} interconnect", link, _LINK_KEYS,
                       ("name", "bandwidth_gb_s", "latency_us", "domain_size"))
    net = record.get("network")
    if net is not None:
        net = _object(f"{where} network", net, _NETWORK_KEYS, _NETWORK_KEYS)
    sources = record["sources"]
    if not isinstance(sources, dict):
        raise ValueError(f"{where} sources must be an object of field to source, got "
                         f"{validate.shorten(sources)}")
    lw, nw = f"{where} interconnect", f"{where} network"
    try:
        return Accelerator(
            name=name,
            vendor=record["vendor"],
            architecture=record["architecture"],
            memory_bytes=_figure(where, record, "memory_gib"),
            memory_type=record["memory_type"],
            bandwidth=_figure(where, record, "bandwidth_gb_s"),
            peaks={k: _human(f"{where} peak_tflops {k}", v, "peak_tflops")
                   for k, v in peaks.items()},
            interconnect=link["name"] if link else None,
            interconnect_bandwidth=_figure(lw, link, "bandwidth_gb_s") if link else None,
            sources=dict(sources),
            notes=record.get("notes", ""),
            link_bandwidth=_figure(lw, link, "link_gb_s", "bandwidth_gb_s")
            if link and "link_gb_s" in link else None,
            collective_latency_s=_figure(lw, link, "latency_us") if link else 0.0,
            domain_size=validate.integer(f"{lw} domain_size", _plain(link["domain_size"]),
                                         maximum=LIMITS["domain_size"][1]) if link else 1,
            network=net["name"] if net else None,
            network_bandwidth=_figure(nw, net, "bandwidth_gb_s") if net else None,
            network_latency_s=_figure(nw, net, "latency_us") if net else 0.0,
            in_switch_reduction=validate.boolean(f"{lw} in_switch_reduction",
                                                 link.get("in_switch_reduction", False))
            if link else False,
        )
    except ValueError as err:
        message = str(err)
        raise ValueError(message if message.startswith(where) else f"{where}: {message}") from None


def _index(chips, records) -> dict[str, Accelerator]:
    """A map from each normalised name or alias (with and without the vendor) to its chip."""
    index = {}
    for chip, record in zip(chips, records, strict=True):
        vendor = _normalise(chip.vendor)
        for alias in [chip.name, *record.get("aliases", [])]:
            key = _normalise(alias).removeprefix(vendor)
            for k in (key, vendor + key):  # with and without the vendor's name
                if index.get(k, chip) is not chip:
                    raise ValueError(f"alias {alias!r} names both {index[k].name} and {chip.name}")
                index[k] = chip
    return index


def _read_records(path) -> tuple[list[Accelerator], list[dict]]:
    shown = validate._shown(path)
    data = validate.read_json("accelerator file", path, parse_float=Decimal)
    what = f"accelerator file {shown}"
    if not isinstance(data, dict) or not isinstance(data.get("accelerators"), list) or not (
            data["accelerators"]):
        raise ValueError(f"{shown} is not an accelerator data file: it must hold an object with a "
                         f"non-empty list \"accelerators\"")
    records = data["accelerators"]
    if len(records) > 10_000:
        raise ValueError(f"{what} lists {len(records):,} accelerators; at most 10,000")
    try:
        chips = [_from_record(r, f"record {i}") for i, r in enumerate(records, 1)]
    except ValueError as err:
        raise ValueError(f"{shown} is not an accelerator data file: {err}") from None
    names = [c.name for c in chips]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"{what} names {validate.shorten(name, 40)} twice")
    _index_checked(chips, records, what)
    return chips, records


def _index_checked(chips, records, what):
    try:
        return _index(chips, records)
    except ValueError as err:
        raise ValueError(f"{what}: {err}") from None


def load_accelerators(path) -> list[Accelerator]:
    """The accelerators of a JSON file in the schema of ``data/accelerators.json``.

    For example the reader's own machine, measured and saved by
    ``llm_roofline.machine.save_accelerator``; the command line reads such a file with
    ``--gpu-file``. Every field is checked as the built-in data is (:data:`LIMITS`); a missing,
    oversized or malformed file, or a bad field, raises one-line ``ValueError`` naming it.
    """
    return _read_records(path)[0]


def find_accelerator(name: str | Accelerator, path) -> Accelerator:
    """The chip ``name`` (its name or one of its aliases, forgiving case and punctuation, as
    :func:`get_accelerator`) among the accelerators of the file ``path``."""
    if isinstance(name, Accelerator):
        return name
    chips, records = _read_records(path)
    where = f"accelerator in {validate._shown(path)}"
    return _lookup(name, chips, _index(chips, records), where)


def _lookup(name, chips, index, what: str = "accelerator") -> Accelerator:
    if not isinstance(name, str):
        raise ValueError(f"{what} must be a name such as 'H100', got {validate.shorten(name)}")
    key = _normalise(name[:1000])
    if key in index:
        return index[key]
    close = difflib.get_close_matches(key, index, n=3, cutoff=0.5)
    raise validate.unknown(what, name, [c.name for c in chips], [index[k].name for k in close])


@cache
def _catalogue() -> tuple[tuple[Accelerator, ...], dict[str, Accelerator]]:
    """All accelerators in file order, and a map from each normalised name or alias to one."""
    text = resources.files("llm_roofline").joinpath("data/accelerators.json").read_text()
    records = json.loads(text, parse_float=Decimal)["accelerators"]
    chips = [_from_record(record) for record in records]
    return tuple(chips), _index(chips, records)


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
    chips, index = _catalogue()
    return _lookup(name, chips, index)


def table(
    precisions: tuple[str, ...] = ("bf16", "fp8"), names: list[str] | None = None
) -> list[dict]:
    """One row per accelerator for a notebook table: memory, bandwidth, peaks and ridges.

    Units are in the column names (memory in GiB, bandwidth in GB/s); a chip without a
    precision gets ``None`` there.
    """
    precisions = validate.names("precisions", precisions)
    for dtype in precisions:
        _peak_key(dtype)  # an unknown precision is refused, not a column of None
    names = list_accelerators() if names is None else validate.sequence("names", names,
                                                                        what="accelerators")
    rows = []
    for chip in map(get_accelerator, names):
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
    _peak_key(dtype)
    names = list_accelerators() if names is None else validate.sequence("names", names,
                                                                        what="accelerators")
    rows = []
    for chip in map(get_accelerator, names):
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

