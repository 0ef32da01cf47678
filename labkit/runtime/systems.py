"""Systems: chips joined by links, each figure with its source (Lab 03).

A torus of TPUs (ICI links to neighbours) or GPUs behind a switch (NVLink/NVSwitch in a node, a
network between nodes). ``labkit.sharding.topology`` prices collectives on these.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from labkit.runtime.hardware import H100_DATASHEET

@dataclass(frozen=True)
class Topology:
    """(Lab 03) A named system: chips on a torus or behind a switch, link figures with sources."""

    name: str
    chip: str                        # a CHIPS key
    kind: str                        # "torus" (ICI neighbours only) | "switch" (every GPU reaches every GPU)
    shape: tuple[int, ...]           # chips per torus axis; a switch node is (gpus per node,)
    wraparound: tuple[bool, ...]     # per axis: a closing link makes it a ring, else a line
    link_gbs: float                  # GB/s one way: per ICI link (torus), per GPU into the switch
    nodes: int = 1                   # switch nodes joined by a network (GPU clusters)
    network_gbs: float | None = None  # GB/s one way per chip between nodes
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def chips(self) -> int:
        """(Lab 03) Chips in the whole system."""
        n = self.nodes
        for s in self.shape:
            n *= s
        return n


_V5E_DOC = "Cloud TPU v5e docs (cloud.google.com/tpu/docs/v5e)"
_V5E_LINK = (_V5E_DOC + ": 'Bidirectional ICI bandwidth (per chip) 400 GBps' (older page: 'Interchip "
             "Interconnect BW 1600 Gbps' = 200 GB/s one way); 4 links per chip (2-D) -> 400/2/4 = 50 GB/s "
             "one way per link; How to Scale Your Model (jax-ml.github.io/scaling-book/tpus): v5e 5e10 B/s "
             "one way per link")
_V5E_WRAP = ("How to Scale Your Model (scaling-book/tpus): v5e/v6e have wraparound links only on a full "
             "axis of 16 ('no wraparound links for axes with fewer than 16 chips')")
_V5P_LINK = ("Cloud TPU v5p docs (docs.cloud.google.com/tpu/docs/v5p): 'Bidirectional ICI bandwidth per chip "
             "1200 GBps', 3-D torus, 6 links -> 1200/2/6 = 100 GB/s one way per link (scaling book: 1e11)")
_NVL = (H100_DATASHEET + ": NVLink 900 GB/s (both directions) -> 450 GB/s one way per GPU; NVIDIA Fabric Manager "
        "user guide: NVSwitch gives 'all-to-all GPU communication at the total NVLink speed'")
_IB = ("NVIDIA DGX H100 User Guide (docs.nvidia.com/dgx/dgxh100-user-guide), network modules: one "
       "ConnectX-7 port per GPU; InfiniBand NDR 400 Gb/s per port (docs.nvidia.com/networking, NDR "
       "transceivers) -> 50 GB/s one way per GPU")
TOPOLOGIES: dict[str, Topology] = {t.name: t for t in (
    Topology("TPU v5e-8", "TPU v5e", "torus", (2, 4), (False, False), 50.0, sources={
        "shape": _V5E_DOC + ": slice 2x4 = 8 chips, 1 host", "link": _V5E_LINK, "wraparound": _V5E_WRAP}),
    Topology("TPU v5e-256", "TPU v5e", "torus", (16, 16), (True, True), 50.0, sources={
        "shape": _V5E_DOC + ": slice 16x16 = 256 chips (a pod), '2D Torus'", "link": _V5E_LINK,
        "wraparound": _V5E_WRAP}),
    Topology("TPU v5p-512", "TPU v5p", "torus", (4, 8, 8), (True, True, True), 100.0, sources={
        # v5p slice names count TensorCores, 2 per chip: 256 chips is v5p-512 (v5p-8 is 4 chips)
        "shape": "Cloud TPU v5p docs: topology 4x8x8 = 256 chips", "link": _V5P_LINK,
        "wraparound": "Cloud TPU v5p docs: 'All 4x4x4 and larger slices (one cube) have full 3D torus'"}),
    Topology("8x H100 SXM", "NVIDIA H100 SXM", "switch", (8,), (False,), 450.0, sources={
        "shape": "NVIDIA DGX H100 / HGX H100 8-GPU baseboard: 8 GPUs, 4 NVSwitches", "link": _NVL}),
    Topology("256x H100 SXM", "NVIDIA H100 SXM", "switch", (8,), (False,), 450.0, nodes=32, network_gbs=50.0,
             sources={"shape": "32 DGX H100 nodes of 8 GPUs", "link": _NVL, "network": _IB}),
)}
