"""The seccomp filter every sandbox runs under: system calls that would let a function leave or
widen its sandbox are refused (DESIGN.md 5, docs/sandbox.md "Threat model").

bubblewrap loads it (``--seccomp FD``) as a compiled classic BPF program, the format libseccomp
exports. It is written out here by hand instead, so nothing beyond the standard library is
needed to build it on any machine: a small program with one branch per architecture (x86_64
and aarch64; any other system call ABI, such as 32-bit calls from a 64-bit process, ends the
process), then a list of refused call numbers. Everything not listed is allowed.

Refused with EPERM:

- namespaces: ``unshare`` (whatever its flags), ``clone`` with a namespace flag (above all
  ``CLONE_NEWUSER``, which gives a process every capability inside a namespace of its own),
  ``setns``;
- mounts: ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the new mount API;
- other processes: ``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd``, ``kcmp``,
  ``process_madvise``, and ``prlimit64`` on any process but the caller itself;
- the kernel's wider surface: keyrings (``add_key``, ``request_key``, ``keyctl``), ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``io_uring`` (its operations bypass this filter),
  modules, ``kexec``, ``reboot``, swap, accounting, quotas, ``syslog``, handles to host files
  (``open_by_handle_at``), clocks, port I/O;
- memory outside the memory limit: ``memfd_create`` (a memfd is memory in no mount and no
  address space), System V shared memory, semaphores and message queues and POSIX message
  queues (they outlive the process that made them).

``clone3`` answers ENOSYS: its flags live in memory a filter cannot read, and the C library
then falls back to ``clone``, whose flags it can.

Tools with ``require_browser`` run Chromium, which needs none of the calls above with its own
sandbox off (``--no-sandbox``: bubblewrap is the sandbox; it tries ``memfd_create`` for shared
memory and falls back to files in the sized ``/tmp``). Their filter refuses one more thing
instead: ``mmap`` of shared anonymous memory. Their memory limit is ``RLIMIT_DATA`` (V8 reserves
more address space than ``RLIMIT_AS`` could bound, browser.py), which counts private writable
memory only; shared anonymous memory is in no file and no data segment, so it would be
unbounded (``/dev/zero``, the other way to it, is not there for them: isolation.py).
"""

from __future__ import annotations

import errno
import struct
from dataclasses import dataclass

# Classic BPF opcodes (linux/filter.h) and seccomp's return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
# struct seccomp_data: nr, arch, instruction_pointer, args[6] (little-endian on both arches)
_NR, _ARCH, _ARG0_LOW = 0, 4, 16

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
_X32_BIT = 0x40000000  # x32 ABI calls on x86_64: refused whole

_NAMESPACE_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)

# Refused calls by name, with their numbers on (x86_64, aarch64); None: not on that arch.
_REFUSED: dict[str, tuple[int | None, int | None]] = {
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "kcmp": (312, 272),
    "process_madvise": (440, 440),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "syslog": (103, 116),
    "lookup_dcookie": (212, 18),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "fanotify_init": (300, 262),
    "vhangup": (153, 58),
    "nfsservctl": (180, 42),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "ioperm": (173, None),
    "iopl": (172, None),
    "uselib": (134, None),
    "_sysctl": (156, None),
    "memfd_create": (319, 279),
    "shmget": (29, 194),
    "semget": (64, 190),
    "msgget": (68, 186),
    "mq_open": (240, 180),
}
_CLONE = (56, 220)
_CLONE3 = (435, 435)
_UNSHARE = (272, 97)
_PRLIMIT64 = (302, 261)
_MMAP = (9, 222)
_ARG3_LOW = _ARG0_LOW + 3 * 8  # mmap's flags
_MAP_SHARED = 0x01  # also set in MAP_SHARED_VALIDATE (0x03)
_MAP_ANONYMOUS = 0x20


@dataclass
class _Op:
    code: int
    k: int
    jt: str | int = 0  # a label, or 0 for the next instruction
    jf: str | int = 0


def _ret(value: int) -> _Op:
    return _Op(_RET_K, value)


def _arch_block(which: int, browser: bool) -> list[tuple[str | None, _Op]]:
    """The checks of one architecture (``which``: 0 x86_64, 1 aarch64), entered with the
    system call number loaded."""
    ops: list[tuple[str | None, _Op]] = []
    if which == 0:
        ops.append((None, _Op(_JGE_K, _X32_BIT, "deny")))
    if browser:
        ops.append((None, _Op(_JEQ_K, _MMAP[which], "mmap")))
    ops.append((None, _Op(_JEQ_K, _CLONE[which], "clone")))
    # unshare whatever its flags: besides namespaces it only splits what a process shares
    # with its threads, which no function needs.
    ops.append((None, _Op(_JEQ_K, _UNSHARE[which], "deny")))
    ops.append((None, _Op(_JEQ_K, _CLONE3[which], "nosys")))
    ops.append((None, _Op(_JEQ_K, _PRLIMIT64[which], "prlimit")))
    for numbers in _REFUSED.values():
        number = numbers[which]
        if number is not None:
            ops.append((None, _Op(_JEQ_K, number, "deny")))
    ops.append((None, _ret(_RET_ALLOW)))
    return ops


def program(browser: bool = False) -> bytes:
    """The filter as bubblewrap reads it: an array of ``struct sock_filter``; ``browser``: the
    variant for tools with ``require_browser`` (see above)."""
    ops: list[tuple[str | None, _Op]] = [
        (None, _Op(_LD_W_ABS, _ARCH)),
        (None, _Op(_JEQ_K, AUDIT_ARCH_X86_64, "x86_64")),
        (None, _Op(_JEQ_K, AUDIT_ARCH_AARCH64, "aarch64")),
        (None, _ret(_RET_KILL_PROCESS)),
        ("x86_64", _Op(_LD_W_ABS, _NR)),
        *_arch_block(0, browser),
        ("aarch64", _Op(_LD_W_ABS, _NR)),
        *_arch_block(1, browser),
        # clone: refused with a namespace flag, allowed otherwise (threads, fork).
        ("clone", _Op(_LD_W_ABS, _ARG0_LOW)),
        (None, _Op(_JSET_K, _NAMESPACE_FLAGS, "deny")),
        (None, _ret(_RET_ALLOW)),
        # prlimit64: the caller's own limits (pid 0, as setrlimit asks) only.
        ("prlimit", _Op(_LD_W_ABS, _ARG0_LOW)),
        (None, _Op(_JEQ_K, 0, "allow", "deny")),
        *(_shared_anonymous() if browser else []),
        ("allow", _ret(_RET_ALLOW)),
        ("deny", _ret(_RET_ERRNO | errno.EPERM)),
        ("nosys", _ret(_RET_ERRNO | errno.ENOSYS)),
    ]
    return _assemble(ops)


def _shared_anonymous() -> list[tuple[str | None, _Op]]:
    """mmap: refused when both shared and anonymous, allowed otherwise."""
    return [
        ("mmap", _Op(_LD_W_ABS, _ARG3_LOW)),
        (None, _Op(_JSET_K, _MAP_ANONYMOUS, 0, "allow")),
        (None, _Op(_JSET_K, _MAP_SHARED, "deny", "allow")),
    ]


def _assemble(ops: list[tuple[str | None, _Op]]) -> bytes:
    where = {label: index for index, (label, _) in enumerate(ops) if label}

    def offset(target: str | int, index: int) -> int:
        if isinstance(target, int):
            return target
        jump = where[target] - index - 1
        if not 0 <= jump <= 255:  # classic BPF jumps forward, by at most 255
            raise ValueError(f"seccomp filter: jump to {target} out of range")
        return jump

    out = b""
    for index, (_, op) in enumerate(ops):
        out += struct.pack("<HBBI", op.code, offset(op.jt, index), offset(op.jf, index), op.k)
    return out
