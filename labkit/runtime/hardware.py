"""One spec table of accelerator chips, each figure with its source (Lab 00).

Every lab reads chip figures from here. Peaks are *dense* (no structured sparsity) vendor
figures in TFLOP/s (TOP/s for int8); ``None`` means the chip has no native matrix path for
that dtype. An unknown chip is "unknown" -- never a silent default.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")
_FLOAT_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")  # int8 counts OP/s, not FLOP/s
UNKNOWN = "unknown"


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; valid dtypes are {', '.join(DTYPES)}")


@dataclass(frozen=True)
class ChipSpec:
    """Published figures for one accelerator chip (Lab 00)."""

    name: str                                  # canonical, e.g. "NVIDIA H100 SXM"
    kind: str                                  # "gpu" | "tpu"
    peak_tflops: Mapping[str, float | None]    # dense TFLOP/s (int8: TOP/s) per DTYPES key
    memory_gb: float                           # memory per chip in memory_unit, as the vendor states it
    bandwidth_gbs: float                       # HBM/GDDR GB/s (1e9 bytes/s) per chip
    matrix_unit: str                           # human text
    mxu_shape: tuple[int, int] | None          # systolic array R x C (TPU)
    mxu_count: int | None                      # MXUs per chip (TPU)
    sm_count: int | None                       # streaming multiprocessors (GPU)
    mma_shape: tuple[int, int, int] | None     # M, N, K of one 16-bit tensor-core instruction
    interconnect: str                          # e.g. "NVLink 4", "ICI 3D torus"
    link_gbs: float | None                     # per-chip bidirectional chip-to-chip GB/s
    sources: Mapping[str, str] = field(default_factory=dict)  # figure -> source text
    memory_unit: str = "GB"                    # "GB" (1e9 bytes) or "GiB" (2**30): Google's TPU docs use both

    def __post_init__(self) -> None:
        if self.memory_unit not in ("GB", "GiB"):
            raise ValueError(f"{self.name}: memory_unit must be 'GB' (1e9 bytes) or 'GiB' (2**30 bytes), "
                             f"as the memory source states it; got {self.memory_unit!r}")

    @property
    def memory_bytes(self) -> float:
        """(Lab 06) Memory per chip in bytes, from memory_gb in the unit its source states."""
        return self.memory_gb * {"GB": 1e9, "GiB": 2.0 ** 30}[self.memory_unit]

    def peak(self, dtype: str) -> float | None:
        """(Lab 00) Dense peak in FLOP/s (OP/s for int8) for dtype; None if not native."""
        _check_dtype(dtype)
        tflops = self.peak_tflops.get(dtype)
        return None if tflops is None else tflops * 1e12  # TFLOP/s -> FLOP/s

    def ridge_point(self, dtype: str) -> float | None:
        """(Lab 00) Roofline ridge in FLOP/byte: peak FLOP/s over memory bytes/s."""
        p = self.peak(dtype)
        return None if p is None else p / (self.bandwidth_gbs * 1e9)

    def supported(self) -> list[str]:
        """(Lab 04) The dtypes with a native peak on this chip, in DTYPES order."""
        return [d for d in DTYPES if self.peak_tflops.get(d) is not None]


def _peaks(fp32=None, tf32=None, bf16=None, fp16=None, fp8=None, int8=None) -> dict:
    return {"fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": fp16, "fp8": fp8, "int8": int8}


# --- sources ---------------------------------------------------------------------------
_PTX = ("mma shape: NVIDIA PTX ISA, warp-level mma / wgmma instructions "
        "(docs.nvidia.com/cuda/parallel-thread-execution)")
_PCIE = "PCIe x16 bidirectional: 3.0 = 32 GB/s, 4.0 = 64 GB/s, 5.0 = 128 GB/s (PCI-SIG spec)"
_A100_DS = ("NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/content/dam/en-zz/Solutions/"
            "Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)")
H100_DATASHEET = ("NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/"
                  "nvidia-tensor-core-gpu-datasheet)")  # runtime.systems cites it for NVLink too
_H200_DS = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)"
_HALF = "; tensor-core figures are the datasheet's with-sparsity figures / 2"
_HOPPER_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (Hopper), SM counts"
_TPU_FP32 = ("fp32/tf32/fp16/fp8 n/a: the MXU multiplies bf16 (fp32 matmuls run as several "
             "bf16 passes), so no native peak is given for them")
_TPU_ARCH = "MXUs: Cloud TPU system architecture (cloud.google.com/tpu/docs/system-architecture-tpu-vm)"


def _src(peak: str, memory: str, bandwidth: str, link: str, units: str, mma: str | None = _PTX,
         unit_key: str = "sm_count") -> dict[str, str]:
    s = {"peak_tflops": peak, "memory": memory, "bandwidth": bandwidth, "link": link, unit_key: units}
    if mma:
        s["mma_shape"] = mma
    return s


def _gpu(name, peaks, mem, bw, unit, sms, mma, ic, link, sources) -> ChipSpec:
    return ChipSpec(name, "gpu", peaks, mem, bw, unit, None, None, sms, mma, ic, link, sources)


def _tpu(name, peaks, mem, bw, mxu, count, ic, link, sources, cores=1, unit="GB") -> ChipSpec:
    tc = f"{cores} TensorCore{'s' if cores > 1 else ''}"
    mxus = f"{count} MXU {mxu[0]}x{mxu[1]} per chip ({tc} x {count // cores})"
    return ChipSpec(name, "tpu", peaks, mem, bw, mxus, mxu, count, None, None, ic, link, sources, unit)


_T4 = _gpu("NVIDIA T4", _peaks(fp32=8.1, fp16=65.0, int8=130.0), 16, 320,
           "tensor cores (Turing)", 40, (16, 8, 8), "PCIe 3.0 x16", 32.0, _src(
               "NVIDIA T4 datasheet (nvidia.com/en-us/data-center/tesla-t4): fp32 8.1, "
               "mixed fp16/fp32 65, int8 130 TOPS; no bf16/tf32/fp8 on Turing",
               "NVIDIA T4 datasheet: 16 GB GDDR6", "NVIDIA T4 datasheet: 320 GB/s",
               _PCIE, "NVIDIA Turing architecture whitepaper: T4 = TU104 with 40 SMs"))
_P100 = _gpu("NVIDIA P100 PCIe 16GB", _peaks(fp32=9.3, fp16=18.7), 16, 732,
             "no tensor cores (Pascal)", 56, None, "PCIe 3.0 x16", 32.0, _src(
                 "NVIDIA Tesla P100 PCIe datasheet (images.nvidia.com/content/tesla/pdf/"
                 "nvidia-tesla-p100-PCIe-datasheet.pdf): fp32 9.3, fp16 18.7 (CUDA cores)",
                 "NVIDIA P100 PCIe datasheet: 16 GB HBM2", "NVIDIA P100 PCIe datasheet: 732 GB/s",
                 _PCIE, "NVIDIA Tesla P100 whitepaper: GP100 with 56 SMs", mma=None))
_V100 = _gpu("NVIDIA V100 SXM2 16GB", _peaks(fp32=15.7, fp16=125.0), 16, 900,
             "tensor cores (Volta)", 80, (8, 8, 4), "NVLink 2", 300.0, _src(
                 "NVIDIA V100 datasheet (images.nvidia.com/content/technologies/volta/pdf/"
                 "volta-v100-datasheet-update-us-1165301-r5.pdf): fp32 15.7, tensor 125; "
                 "int8 not listed",
                 "NVIDIA V100 datasheet: 16 GB HBM2 (also sold with 32 GB)", "NVIDIA V100 datasheet: 900 GB/s",
                 "NVIDIA V100 datasheet: NVLink 300 GB/s", "NVIDIA Volta whitepaper: 80 SMs"))
_L4 = _gpu("NVIDIA L4", _peaks(fp32=30.3, tf32=60.0, bf16=121.0, fp16=121.0, fp8=242.5,
                               int8=242.5), 24, 300,
           "tensor cores (Ada)", 58, (16, 8, 16), "PCIe 4.0 x16", 64.0, _src(
               "NVIDIA L4 datasheet (nvidia.com/en-us/data-center/l4): fp32 30.3; tf32 120, "
               "bf16/fp16 242, fp8/int8 485 are with sparsity, halved here (check)",
               "NVIDIA L4 datasheet: 24 GB GDDR6", "NVIDIA L4 datasheet: 300 GB/s", _PCIE,
               "NVIDIA Ada GPU architecture: L4 = AD104 with 58 SMs (check)"))
_A100_40 = _gpu("NVIDIA A100 SXM 40GB", _peaks(fp32=19.5, tf32=156.0, bf16=312.0, fp16=312.0,
                                               int8=624.0), 40, 1555,
                "tensor cores (Ampere)", 108, (16, 8, 16), "NVLink 3", 600.0, _src(
                    _A100_DS + ": fp32 19.5, tf32 156, bf16/fp16 312, int8 624 dense; no fp8",
                    _A100_DS + ": 40 GB HBM2", _A100_DS + ": 1555 GB/s (40 GB)",
                    _A100_DS + ": NVLink 600 GB/s", "NVIDIA A100 whitepaper (Ampere): 108 SMs"))
_A100_80 = replace(_A100_40, name="NVIDIA A100 SXM 80GB", memory_gb=80, bandwidth_gbs=2039,
                   sources={**_A100_40.sources, "memory": _A100_DS + ": 80 GB HBM2e",
                            "bandwidth": _A100_DS + ": 2039 GB/s (80 GB SXM)"})
_A100_PCIE_80 = replace(
    _A100_80, name="NVIDIA A100 PCIe 80GB", bandwidth_gbs=1935, interconnect="PCIe 4.0 x16 "
    "(NVLink bridge for 2 GPUs optional, 600 GB/s)", link_gbs=64.0,
    sources={**_A100_80.sources, "bandwidth": _A100_DS + ": 1935 GB/s (80 GB PCIe)",
             "link": _PCIE + "; " + _A100_DS + ": optional NVLink bridge 600 GB/s"})
_A100_PCIE_40 = replace(
    _A100_PCIE_80, name="NVIDIA A100 PCIe 40GB", memory_gb=40, bandwidth_gbs=1555,
    sources={**_A100_PCIE_80.sources, "memory": "NVIDIA A100 PCIe 40GB product brief: 40 GB",
             "bandwidth": "NVIDIA A100 PCIe 40GB product brief: 1555 GB/s (check)"})
_H100_SXM = _gpu("NVIDIA H100 SXM", _peaks(fp32=67.0, tf32=494.5, bf16=989.0, fp16=989.0,
                                           fp8=1979.0, int8=1979.0), 80, 3350,
                 "tensor cores (Hopper)", 132, (64, 256, 16), "NVLink 4", 900.0, _src(
                     H100_DATASHEET + ": SXM fp32 67, tf32 989/2, bf16 1979/2 (989, as usually quoted), "
                     "fp8 3958/2" + _HALF, H100_DATASHEET + ": 80 GB HBM3", H100_DATASHEET + ": 3.35 TB/s",
                     H100_DATASHEET + ": NVLink 900 GB/s", _HOPPER_WP + ": H100 SXM5 132 SMs"))
_H100_PCIE = _gpu("NVIDIA H100 PCIe", _peaks(fp32=51.0, tf32=378.0, bf16=756.0, fp16=756.0,
                                             fp8=1513.0, int8=1513.0), 80, 2000,
                  "tensor cores (Hopper)", 114, (64, 256, 16),
                  "PCIe 5.0 x16 (NVLink bridge for 2 GPUs optional, 600 GB/s)", 128.0, _src(
                      H100_DATASHEET + ": PCIe fp32 51, tf32 756/2, bf16 1513/2, fp8 3026/2" + _HALF,
                      H100_DATASHEET + ": 80 GB HBM2e", H100_DATASHEET + ": 2 TB/s",
                      _PCIE + "; " + H100_DATASHEET + ": optional NVLink bridge 600 GB/s",
                      _HOPPER_WP + ": H100 PCIe 114 SMs"))
_H100_NVL = replace(
    _H100_PCIE, name="NVIDIA H100 NVL", memory_gb=94, bandwidth_gbs=3900, sm_count=132,
    peak_tflops=_peaks(fp32=60.0, tf32=417.5, bf16=835.5, fp16=835.5, fp8=1670.5, int8=1670.5),
    interconnect="NVLink bridge (600 GB/s) + PCIe 5.0 x16", link_gbs=600.0, sources=_src(
        H100_DATASHEET + ": NVL fp32 60, tf32 835/2, bf16 1671/2, fp8 3341/2 (check)" + _HALF,
        H100_DATASHEET + ": NVL 94 GB HBM3", H100_DATASHEET + ": NVL 3.9 TB/s", H100_DATASHEET + ": NVL NVLink bridge 600 GB/s",
        "H100 NVL uses the full SXM5 configuration, 132 SMs (check)"))
_H200 = replace(
    _H100_SXM, name="NVIDIA H200 SXM", memory_gb=141, bandwidth_gbs=4800, sources={**_H100_SXM.sources,
             "peak_tflops": _H200_DS + ": SXM compute equals H100 SXM" + _HALF,
             "memory": _H200_DS + ": 141 GB HBM3e", "bandwidth": _H200_DS + ": 4.8 TB/s",
             "link": _H200_DS + ": NVLink 900 GB/s", "sm_count": _HOPPER_WP + " (same GH100 SXM5)"})
_H200_NVL = replace(
    _H100_NVL, name="NVIDIA H200 NVL", memory_gb=141, bandwidth_gbs=4800, link_gbs=900.0,
    interconnect="NVLink bridge (900 GB/s) + PCIe 5.0 x16",
    sources={**_H100_NVL.sources, "peak_tflops": _H200_DS + ": NVL fp32 60, tf32 835/2, "
             "bf16 1671/2, fp8 3341/2 (check)" + _HALF, "memory": _H200_DS + ": NVL 141 GB HBM3e",
             "bandwidth": _H200_DS + ": NVL 4.8 TB/s", "link": _H200_DS + ": NVL NVLink bridge 900 GB/s"})


def _tsrc(peak: str, mem_bw: str, link: str, mxu: str) -> dict[str, str]:
    return _src(peak + "; " + _TPU_FP32, mem_bw, mem_bw, link, mxu + "; " + _TPU_ARCH,
                mma=None, unit_key="mxu")


_CACM = "Jouppi et al., 'A Domain-Specific Supercomputer for Training Deep Neural Networks', CACM 63(7), 2020"
_ICI = ("Cloud TPU docs 'Bidirectional ICI bandwidth (per chip)'; older pages gave {} Gbps, "
        "which /8 = {} GB/s (one direction); this table uses the bidirectional figure")
_TPUS = [
    _tpu("TPU v2", _peaks(bf16=46.0), 16, 700, (128, 128), 2, "ICI 2D torus", 496.0, _tsrc(
        _CACM + ": 46 TFLOP/s bf16 per chip", _CACM + ": 16 GiB HBM, 700 GB/s",
        _CACM + ": 4 ICI links x 496 Gbit/s per direction -> x2 directions /8 bits (check)",
        "2 TensorCores x 1 MXU 128x128"), cores=2, unit="GiB"),
    _tpu("TPU v3", _peaks(bf16=123.0), 32, 900, (128, 128), 4, "ICI 2D torus", 656.0, _tsrc(
        "Cloud TPU v3 docs (cloud.google.com/tpu/docs/v3): 123 TFLOP/s bf16 per chip",
        "Cloud TPU v3 docs: 32 GiB HBM2, 900 GBps",
        _CACM + ": 4 ICI links x 656 Gbit/s per direction -> x2 directions /8 bits (check)",
        "2 TensorCores x 2 MXU 128x128"), cores=2, unit="GiB"),
    _tpu("TPU v4", _peaks(bf16=275.0, int8=275.0), 32, 1200, (128, 128), 8,
         "ICI 3D torus (optical circuit switches)", 540.0, _tsrc(
             "Cloud TPU v4 docs (cloud.google.com/tpu/docs/v4): 275 TFLOP/s (bf16 or int8)",
             "Cloud TPU v4 docs: 32 GiB HBM2, 1200 GBps",
             "How to Scale Your Model (jax-ml.github.io/scaling-book/tpus): 9e10 B/s bidi per "
             "link x 6 links (check; not in Cloud docs)", "2 TensorCores x 4 MXU 128x128"),
         cores=2, unit="GiB"),
    _tpu("TPU v5e", _peaks(bf16=197.0, int8=393.0), 16, 819, (128, 128), 4, "ICI 2D torus",
         400.0, _tsrc(
             "Cloud TPU v5e docs (cloud.google.com/tpu/docs/v5e): 197 TFLOP/s bf16, "
             "393 TOP/s int8", "Cloud TPU v5e docs: 16 GB HBM2, 819 GBps",
             _ICI.format(1600, 200), "1 TensorCore x 4 MXU 128x128")),
    _tpu("TPU v5p", _peaks(bf16=459.0, int8=918.0), 95, 2765, (128, 128), 8, "ICI 3D torus",
         1200.0, _tsrc(
             "Cloud TPU v5p docs (cloud.google.com/tpu/docs/v5p): 459 TFLOP/s bf16 (the docs "
             "list fp8 at the same 459: no fp8 speed-up, so fp8 is None here); int8 918 from "
             "jax pallas tpu_info.py and the scaling book (check)",
             "Cloud TPU v5p docs (cloud.google.com/tpu/docs/v5p-training, key specifications: "
             "HBM2e capacity and bandwidth): 95GB, 2765 GBps",
             _ICI.format(4800, 600), "2 TensorCores x 4 MXU 128x128"), cores=2),
    _tpu("TPU v6e", _peaks(bf16=918.0, int8=1836.0), 32, 1640, (256, 256), 2, "ICI 2D torus",
         800.0, _tsrc(
             "Cloud TPU v6e docs (cloud.google.com/tpu/docs/v6e): 918 TFLOP/s bf16, "
             "1836 TOP/s int8 (jax pallas tpu_info.py lists fp8 at the bf16 rate: no fp8 "
             "speed-up, so fp8 is None here)",
             "Cloud TPU v6e docs: 32 GB HBM, 1640 GBps (current page: 1638)",
             _ICI.format(3584, 448), "Cloud TPU v6e docs: 1 TensorCore x 2 MXU 256x256; "
             "918e12 / (2 MXU x 256 x 256 x 2 FLOP) implies 3.5 GHz, so count and peak do "
             "not reconcile under one MAC per cell per cycle (check)")),
]

CHIPS: dict[str, ChipSpec] = {c.name: c for c in (
    _T4, _P100, _V100, replace(_V100, name="NVIDIA V100 SXM2 32GB", memory_gb=32, sources={
    **_V100.sources, "memory": "NVIDIA V100 datasheet: 32 GB HBM2"}), _L4,
    _A100_40, _A100_80, _A100_PCIE_40, _A100_PCIE_80, _H100_SXM, _H100_PCIE, _H100_NVL,
    _H200, _H200_NVL, *_TPUS)}

# What runtimes report (torch.cuda.get_device_name, nvidia-smi, jax Device.device_kind),
# after lower-casing and collapsing whitespace. Full matches only: "a10" is not "a100".
_NV = r"(?:nvidia\s)?(?:tesla\s)?"
_S = r"[-\s]"  # the separator vendors use
_PATTERNS: dict[str, str] = {
    "NVIDIA T4": _NV + r"t4",
    "NVIDIA P100 PCIe 16GB": _NV + rf"p100{_S}pcie{_S}16gb",
    "NVIDIA V100 SXM2 16GB": _NV + rf"v100{_S}sxm2{_S}16gb",
    "NVIDIA V100 SXM2 32GB": _NV + rf"v100{_S}sxm2{_S}32gb",
    "NVIDIA L4": _NV + r"l4",
    "NVIDIA A100 SXM 40GB": _NV + rf"a100{_S}sxm4?{_S}40gb",
    "NVIDIA A100 SXM 80GB": _NV + rf"a100{_S}sxm4?{_S}80gb",
    "NVIDIA A100 PCIe 40GB": _NV + rf"a100{_S}(?:pcie{_S}40gb|40gb{_S}pcie)",
    "NVIDIA A100 PCIe 80GB": _NV + rf"a100{_S}(?:pcie{_S}80gb|80gb{_S}pcie)",
    "NVIDIA H100 SXM": _NV + rf"h100(?:{_S}80gb{_S}hbm3|{_S}sxm5?(?:{_S}80gb)?)",
    "NVIDIA H100 PCIe": _NV + rf"h100(?:{_S}80gb)?{_S}pcie",
    "NVIDIA H100 NVL": _NV + rf"h100{_S}nvl",
    "NVIDIA H200 SXM": _NV + rf"h200(?:{_S}sxm5?)?(?:{_S}141gb)?",
    "NVIDIA H200 NVL": _NV + rf"h200{_S}nvl",
    "TPU v2": r"tpu\s?v2",
    "TPU v3": r"tpu\s?v3",
    "TPU v4": r"tpu\s?v4",                       # "TPU v4 lite" (v4i) stays unknown
    "TPU v5e": r"tpu\s?v5(?:e|\slite)",          # jax reports "TPU v5 lite"
    "TPU v5p": r"tpu\s?v5p?",                    # jax reports "TPU v5"
    "TPU v6e": r"tpu\s?v6(?:e|\slite)(?:\s\(trillium\))?|trillium",
}
_COMPILED = {name: re.compile(p) for name, p in _PATTERNS.items()}


def lookup(reported_name: str) -> ChipSpec | None:
    """(Lab 00) Map a runtime-reported chip name to its spec, None if unknown."""
    key = " ".join(str(reported_name).lower().split())
    for name, pattern in _COMPILED.items():
        if key == name.lower() or pattern.fullmatch(key):
            return CHIPS[name]
    return None


def describe(reported_name: str) -> str:
    """(Lab 00) The canonical chip name for a reported name, or "unknown"."""
    spec = lookup(reported_name)
    return UNKNOWN if spec is None else spec.name


class UnknownChipError(LookupError, ValueError):
    """(Lab 00) A chip name the table does not know: a lookup failure, and a bad argument value."""


def variants(reported_name: str) -> list[str]:
    """(Lab 00) Listed chips whose names hold ``reported_name``'s words: every H100 for "H100", none for a typo."""
    key = " ".join(str(reported_name).lower().split())
    return [n for n in CHIPS if key and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", n.lower())]


def unknown_chip(reported_name: str, fix: str) -> UnknownChipError:
    """(Lab 00) The error for a name lookup() does not know: its close matches (every H100 for "H100"), then fix."""
    key = " ".join(str(reported_name).lower().split())
    aliases = {a: n for n in CHIPS for a in (n.lower(), n.lower().removeprefix("nvidia "))}  # typed -> canonical
    hits = [repr(n) for n in variants(reported_name)]
    names = hits or list(dict.fromkeys(repr(aliases[c]) for c in difflib.get_close_matches(key, aliases, 4, 0.75)))
    said = f"chip {reported_name!r} is {'ambiguous' if len(hits) > 1 else 'not in labkit.runtime.hardware.CHIPS'}"
    listed = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)
    hint = f": did you mean {listed}? Pass the full name, or " if names else " (hardware.CHIPS lists the known ones); "
    return UnknownChipError(f"{said}{hint}{fix}")


class UnsupportedDtypeError(ValueError):
    """(Lab 04) A known chip has no native matrix path for the requested dtype."""


def peak_flops(reported_name: str, dtype: str, peak_tflops: float | None = None) -> float:
    """(Lab 02) Dense peak FLOP/s for dtype on this chip; peak_tflops=... overrides the table."""
    _check_dtype(dtype)
    if peak_tflops is not None:
        if isinstance(peak_tflops, (bool, str)) or not 0 < peak_tflops < float("inf"):  # NaN fails too
            raise ValueError(f"peak_tflops must be a finite TFLOP/s figure > 0 (e.g. 197.0), got {peak_tflops!r}")
        if peak_tflops > 1e6:  # no chip reaches an exaFLOP/s: this is a figure in FLOP/s
            raise ValueError(f"peak_tflops={peak_tflops:g} looks like FLOP/s; it is in TFLOP/s "
                             f"(e.g. {peak_tflops / 1e12:g} for {peak_tflops:g} FLOP/s)")
        return float(peak_tflops) * 1e12  # TFLOP/s -> FLOP/s
    spec = lookup(reported_name)
    if spec is None:
        raise unknown_chip(reported_name, f"pass its dense {dtype} peak explicitly, e.g. "
                                          f"peak_flops({reported_name!r}, {dtype!r}, peak_tflops=...)")
    p = spec.peak(dtype)
    if p is None:
        raise UnsupportedDtypeError(
            f"{spec.name} has no native {dtype} matrix path; it has "
            f"{', '.join(spec.supported())} (or pass peak_tflops=... for a measured figure)")
    return p


def _ridge_dtype(spec: ChipSpec) -> str | None:
    if spec.peak_tflops.get("bf16") is not None:
        return "bf16"
    floats = [d for d in _FLOAT_DTYPES if spec.peak_tflops.get(d) is not None]
    return max(floats, key=lambda d: spec.peak_tflops[d]) if floats else None


def _col(dtype: str) -> str:
    return "int8 TOP/s" if dtype == "int8" else f"{dtype} TFLOP/s"


def table(names: Sequence[str] | None = None) -> list[dict]:
    """(Lab 00) Rows (one dict per chip) for a pandas-free spec table in a notebook."""
    if isinstance(names, str):  # a str is a sequence too: "TPU v5e" would be looked up letter by letter
        raise TypeError(f"names must be a list of chip names, e.g. [{names!r}], got the str {names!r}")
    rows = []
    for n in (list(CHIPS) if names is None else names):
        spec = lookup(n)
        if spec is None:
            raise unknown_chip(n, "leave it out of names (a row needs the table's figures)")
        rd = _ridge_dtype(spec)
        rows.append({"name": spec.name,
                     **{_col(d): spec.peak_tflops.get(d) for d in DTYPES},
                     "memory GB": round(spec.memory_bytes / 1e9, 1), "bandwidth GB/s": spec.bandwidth_gbs,
                     "ridge FLOP/byte": None if rd is None else round(spec.ridge_point(rd), 1),
                     "ridge dtype": rd, "matrix unit": spec.matrix_unit})
    return rows


def learner_chips() -> list[str]:
    """(Lab 00) Canonical names of the chips learners meet on Colab and Kaggle, and the course's reference H100."""
    # Colab: T4, L4, A100, TPU v5e / v6e; Kaggle: T4 x2, P100, TPU v5e-8 (DESIGN.md's learner table). The
    # H100 is not a free runtime: it is the GPU the course's reference runs (benchmarks/) were measured on.
    return ["NVIDIA T4", "NVIDIA P100 PCIe 16GB", "NVIDIA L4", "NVIDIA A100 SXM 40GB", "NVIDIA H100 SXM",
            "TPU v5e", "TPU v6e"]
