"""Per-launch statistics: dynamic instruction counts per class and per opcode, memory traffic.

The hot loop only bumps one integer per executed instruction (indexed by the instruction's slot in
the kernel program) and memory ops add their byte counts to a shared list; classes and opcode
totals are derived after the launch.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# indices into the per-launch byte counters list
C_VLOAD, C_VSTORE, C_SLOAD, C_LDS_READ, C_LDS_WRITE = range(5)
N_COUNTERS = 5

CLASSES = ("SALU", "VALU", "MFMA", "VMEM", "SMEM", "LDS", "BRANCH", "WAITCNT/NOP", "BARRIER", "OTHER")


def classify(fmt: str, name: str) -> str:
    """Instruction class used in the statistics table."""
    if name in ("s_waitcnt", "s_nop", "s_setprio", "s_sleep"):
        return "WAITCNT/NOP"
    if name == "s_barrier":
        return "BARRIER"
    if name.startswith("s_cbranch") or name in ("s_branch", "s_setpc_b64", "s_swappc_b64", "s_call_b64"):
        return "BRANCH"
    if fmt in ("SOP1", "SOP2", "SOPK", "SOPC", "SOPP"):
        return "SALU"
    if "mfma" in name or "smfmac" in name:
        return "MFMA"
    if fmt in ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3B", "VOP3C", "VOP3P"):
        return "VALU"
    if fmt in ("GLOBAL", "FLAT", "MUBUF", "SCRATCH"):
        return "VMEM"
    if fmt == "SMEM":
        return "SMEM"
    if fmt == "DS":
        return "LDS"
    return "OTHER"


@dataclass
class LaunchStats:
    """What one launch executed. ``str(stats)`` prints the table."""

    kernel: str = ""
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    waves: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # process CPU time: robust against other load on the machine
    per_opcode: Counter = field(default_factory=Counter)
    per_class: Counter = field(default_factory=Counter)
    vmem_bytes_loaded: int = 0
    vmem_bytes_stored: int = 0
    smem_bytes_loaded: int = 0
    lds_bytes_read: int = 0
    lds_bytes_written: int = 0

    @property
    def instructions(self) -> int:
        return sum(self.per_class.values())

    @property
    def instructions_per_second(self) -> float:
        return self.instructions / self.seconds if self.seconds > 0 else 0.0

    def merge_counts(self, insts, counts, counters) -> None:
        for inst, n in zip(insts, counts):
            if n:
                self.per_opcode[inst.name] += n
                self.per_class[classify(inst.fmt, inst.name)] += n
        self.vmem_bytes_loaded += counters[C_VLOAD]
        self.vmem_bytes_stored += counters[C_VSTORE]
        self.smem_bytes_loaded += counters[C_SLOAD]
        self.lds_bytes_read += counters[C_LDS_READ]
        self.lds_bytes_written += counters[C_LDS_WRITE]

    def table(self, top: int = 25) -> str:
        total = self.instructions or 1
        lines = [f"kernel {self.kernel}  grid={self.grid} block={self.block} waves={self.waves}",
                 f"{self.instructions} instructions in {self.seconds:.3f} s ({self.cpu_seconds:.3f} s CPU) "
                 f"({self.instructions_per_second:,.0f} inst/s)",
                 f"{'class':<14}{'count':>12}{'share':>8}"]
        for c in CLASSES:
            if self.per_class.get(c):
                lines.append(f"{c:<14}{self.per_class[c]:>12}{100 * self.per_class[c] / total:>7.1f}%")
        lines.append(f"vector memory: {self.vmem_bytes_loaded} B loaded, {self.vmem_bytes_stored} B stored; "
                     f"scalar memory: {self.smem_bytes_loaded} B loaded; "
                     f"LDS: {self.lds_bytes_read} B read, {self.lds_bytes_written} B written")
        lines.append(f"{'opcode':<40}{'count':>12}")
        for name, n in self.per_opcode.most_common(top):
            lines.append(f"{name:<40}{n:>12}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()
