"""What CTranslate2 computes with on this CPU: its GEMM backends, its ISA, and whether int8 has VNNI.

CTranslate2 picks its matrix-multiply library when it loads: Intel MKL on Intel CPUs, oneDNN
elsewhere (``CT2_USE_MKL=1`` or ``0`` overrides). The choice changes what int8 is:

- MKL, and oneDNN on a CPU with VNNI (AVX512-VNNI, AVX-VNNI or AMX): int8 products are summed
  exactly in 32 bits; int8 is the quantized model and nothing coarser.
- oneDNN without VNNI (an AVX2-only CPU, or ``ONEDNN_MAX_CPU_ISA=AVX2``): the u8×s8 products
  are summed in pairs into saturating 16-bit lanes (vpmaddubsw), so large activations clip.
  On the tests' tiny model the int8 log-probs drift ~2 nats from float32's there against ~0.27
  with VNNI, and int8 is no faster than float32 (docs/rollouts-and-engines.md, "int8 by CPU":
  ``benchmarks/int8.py``).

CTranslate2 says which backends it chose only in its log, once per process, when its first
model loads. A child process asks it (a load of a missing model logs the CPU's configuration,
then fails at once: ~0.5 s, once per process), so what is recorded is CTranslate2's own word.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

# oneDNN's ISA names, lowest first (ONEDNN_MAX_CPU_ISA caps what it dispatches to). The
# first with int8 dot products summed in 32 bits: AVX2_VNNI (AVX-VNNI), then AVX512_CORE_VNNI.
_ONEDNN_ISAS = ["SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI",
                "AVX512_CORE_BF16", "AVX10_1_512", "AVX512_CORE_FP16", "AVX10_1_512_AMX", "AVX512_CORE_AMX",
                "AVX10_1_512_AMX_FP16", "AVX512_CORE_AMX_FP16", "ALL", "DEFAULT"]
_VNNI_FLAGS = {"avx512_vnni", "avx_vnni", "amx_int8"}
_LIBRARIES = {"DNNL": "oneDNN"}  # CTranslate2's log names oneDNN by its old name


@dataclass(frozen=True)
class CT2Backend:
    """CTranslate2's CPU configuration in this process's environment, as its own log states it."""

    cpu: str  # the vendor CTranslate2 read: GenuineIntel, AuthenticAMD, ...
    isa: str  # the ISA of CTranslate2's own kernels (softmax, layer norm, ...): AVX2, AVX512, ...
    mkl: bool  # Intel MKL in use
    sgemm: str  # float32 matrix products: MKL, DNNL (oneDNN), ...
    gemm_s8: str  # int8 matrix products
    int8_vnni: bool  # int8 products summed in 32 bits (MKL, or oneDNN on a CPU with VNNI)

    def summary(self) -> str:
        """One line for a run's record and a note, e.g.
        'float32 on oneDNN, int8 on oneDNN without VNNI (AuthenticAMD, AVX2)'."""
        int8 = _LIBRARIES.get(self.gemm_s8, self.gemm_s8)
        vnni = "" if int8 == "MKL" else (" with VNNI" if self.int8_vnni else " without VNNI")
        float32 = _LIBRARIES.get(self.sgemm, self.sgemm)
        return f"float32 on {float32}, int8 on {int8}{vnni} ({self.cpu}, {self.isa})"

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def int8_coarse(self) -> bool:
        """int8 here sums products in saturating 16-bit lanes: coarser than the quantization itself."""
        return self.gemm_s8 == "DNNL" and not self.int8_vnni


_PROBE = "import ctranslate2, sys\ntry:\n    ctranslate2.Generator(sys.argv[1])\nexcept Exception:\n    pass\n"


def parse_log(log: str) -> dict:
    """The fields of CTranslate2's CPU configuration lines (CT2_VERBOSE=1) that it printed."""
    found = {}
    patterns = {
        "cpu": r"\bCPU: (\S+)",
        "isa": r"Selected ISA: (\S+)",
        "mkl": r"Use Intel MKL: (\S+)",
        "sgemm": r"SGEMM backend: (\S+)",
        "gemm_s8": r"GEMM_S8 backend: (\S+)",
    }
    for field, pattern in patterns.items():
        match = re.search(pattern, log)
        if match:
            found[field] = match.group(1)
    if "mkl" in found:
        found["mkl"] = found["mkl"] == "true"
    return found


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def onednn_has_vnni(flags: set[str], max_isa: str | None) -> bool:
    """oneDNN dispatches int8 to VNNI kernels when the CPU has them and ONEDNN_MAX_CPU_ISA allows them."""
    if not flags & _VNNI_FLAGS:
        return False
    cap = (max_isa or "ALL").upper()
    if cap not in _ONEDNN_ISAS:
        return True  # a cap oneDNN does not know: it ignores it
    return _ONEDNN_ISAS.index(cap) >= _ONEDNN_ISAS.index("AVX2_VNNI" if "avx_vnni" in flags else "AVX512_CORE_VNNI")


@functools.cache
def ct2_backend() -> CT2Backend | None:
    """This process's CTranslate2 CPU configuration (the environment's CT2_* and ONEDNN_* apply), or None when
    CTranslate2 is missing or did not say."""
    env = {**os.environ, "CT2_VERBOSE": "1"}
    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE, os.devnull], env=env, capture_output=True, text=True,
                               timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    fields = parse_log(probe.stdout + probe.stderr)
    if set(fields) != {"cpu", "isa", "mkl", "sgemm", "gemm_s8"}:
        return None
    vnni = fields["gemm_s8"] == "MKL" or onednn_has_vnni(cpu_flags(), os.environ.get("ONEDNN_MAX_CPU_ISA"))
    return CT2Backend(**fields, int8_vnni=vnni)
