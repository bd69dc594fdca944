"""Hosts on one machine: a network namespace each, joined by a bridge the harness makes.

Every host has one address on a private subnet that exists only inside namespaces made
here; the bridge itself has no address, so nothing reaches the machine's own network and
nothing leaves it. Faults are routes and queues inside those namespaces:

- a cut between two hosts is a blackhole route for the other's address on each side:
  packets are dropped before they leave, established TCP connections hang as they do
  when a cable is pulled (no reset, no error until a timeout), new ones never connect;
- a degraded link is `tc netem` delay and loss on a host's interface when the kernel has
  netem; without it (a kernel built without CONFIG_NET_SCH_NETEM) the link is slowed
  with `tbf` and loses packets through an nftables rule when `nft` is installed, and the
  run says which it used.

Names carry a token of the run, and the run's pid is written under /run/seedline-hosts:
a later run removes what a killed one left.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

IP = "/usr/sbin/ip" if Path("/usr/sbin/ip").exists() else (shutil.which("ip") or "ip")
TC = "/usr/sbin/tc" if Path("/usr/sbin/tc").exists() else (shutil.which("tc") or "tc")
SUBNET = "10.77.0"
REGISTRY = Path("/run/seedline-hosts")


def why_not() -> str | None:
    """Why hosts cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "the fault harness needs root (network namespaces, routes, queues)"
    if not Path(IP).exists() and not shutil.which("ip"):
        return "the fault harness needs `ip` (Debian's iproute2)"
    probe = f"slprobe{os.getpid()}"
    made = subprocess.run([IP, "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"network namespaces cannot be made here: {made.stderr.strip()}"
    subprocess.run([IP, "netns", "del", probe], capture_output=True)
    return None


def _run(*argv: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(list(argv), capture_output=True, text=True, input=stdin)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done


@dataclass(frozen=True)
class Host:
    name: str
    address: str


@dataclass
class Network:
    """The namespaces, the bridge and the faults in force."""

    hosts: dict[str, Host]
    token: str = field(default_factory=lambda: secrets.token_hex(2))
    cuts: set[frozenset[str]] = field(default_factory=set)
    degraded: str | None = None  # how links are degraded now: "netem", "tbf+nft", "tbf"

    @classmethod
    def of(cls, names: Iterable[str], numbers: dict[str, int]) -> "Network":
        return cls({n: Host(n, f"{SUBNET}.{numbers[n]}") for n in names})

    def namespace(self, host: str) -> str:
        return f"sl-{self.token}-{host}"

    def _veth(self, host: str) -> str:
        return f"sl{self.token}{host}"[:15]

    @property
    def _bridge(self) -> str:
        return f"sl{self.token}br"

    def exec_argv(self, host: str, argv: list[str]) -> list[str]:
        """A command run on a host (`ip netns exec` replaces itself with it: same pid)."""
        return [IP, "netns", "exec", self.namespace(host), *argv]

    # -- making and removing ---------------------------------------------------------

    def create(self) -> None:
        remove_left_behind()
        REGISTRY.mkdir(parents=True, exist_ok=True)
        (REGISTRY / self.token).write_text(str(os.getpid()))
        _run(IP, "link", "add", self._bridge, "type", "bridge")
        _run(IP, "link", "set", self._bridge, "up")
        for host in self.hosts.values():
            ns, veth = self.namespace(host.name), self._veth(host.name)
            _run(IP, "netns", "add", ns)
            _run(IP, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run(IP, "link", "set", veth, "master", self._bridge)
            _run(IP, "link", "set", veth, "up")
            _run(IP, "-n", ns, "link", "set", "lo", "up")
            _run(IP, "-n", ns, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _run(IP, "-n", ns, "link", "set", "eth0", "up")

    def remove(self) -> None:
        remove_token(self.token)

    # -- faults ---------------------------------------------------------------------

    def cut(self, pairs: Iterable[tuple[str, str]]) -> None:
        """No packet between each pair, either way, until healed."""
        for a, b in pairs:
            pair = frozenset((a, b))
            if a == b or pair in self.cuts:
                continue
            self.cuts.add(pair)
            for here, there in ((a, b), (b, a)):
                _run(IP, "-n", self.namespace(here), "route", "add", "blackhole",
                     f"{self.hosts[there].address}/32")

    def degrade(self, delay_ms: int, loss_percent: float) -> str:
        """Every host's link slowed and lossy; returns how (netem when the kernel has it)."""
        how = None
        for host in self.hosts:
            ns = self.namespace(host)
            netem = _run(IP, "netns", "exec", ns, TC, "qdisc", "replace", "dev", "eth0", "root",
                         "netem", "delay", f"{delay_ms}ms", f"{max(1, delay_ms // 4)}ms",
                         "loss", f"{loss_percent}%", check=False)
            if netem.returncode == 0:
                how = "netem"
                continue
            # No netem: a token bucket slows the link (queueing delay under load) ...
            _run(IP, "netns", "exec", ns, TC, "qdisc", "replace", "dev", "eth0", "root", "tbf",
                 "rate", "4mbit", "burst", "16kb", "latency", f"{max(delay_ms, 20) * 4}ms")
            how = "tbf"
            nft = shutil.which("nft") or ("/usr/sbin/nft" if Path("/usr/sbin/nft").exists()
                                          else None)
            if nft and loss_percent > 0:  # ... and nftables drops a share of what leaves
                rules = (f"table inet slloss {{\n chain out {{\n"
                         f"  type filter hook output priority 0;\n"
                         f"  numgen random mod 1000 < {int(loss_percent * 10)} drop\n }}\n}}\n")
                _run(IP, "netns", "exec", ns, nft, "-f", "-", stdin=rules)
                how = "tbf+nft"
        self.degraded = how
        return how or "none"

    def heal(self) -> None:
        """Every cut and every degraded link undone."""
        for host in self.hosts:
            ns = self.namespace(host)
            _run(IP, "-n", ns, "route", "flush", "type", "blackhole", check=False)
            if self.degraded:
                _run(IP, "netns", "exec", ns, TC, "qdisc", "del", "dev", "eth0", "root",
                     check=False)
                if "nft" in self.degraded:
                    nft = shutil.which("nft") or "/usr/sbin/nft"
                    _run(IP, "netns", "exec", ns, nft, "delete", "table", "inet", "slloss",
                         check=False)
        self.cuts.clear()
        self.degraded = None


def remove_token(token: str) -> None:
    listed = _run(IP, "netns", "list", check=False).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"sl-{token}-"):
            _run(IP, "netns", "del", name, check=False)
    _run(IP, "link", "del", f"sl{token}br", check=False)
    (REGISTRY / token).unlink(missing_ok=True)


def remove_left_behind() -> None:
    """What runs that no longer live left: their namespaces and bridges."""
    if not REGISTRY.is_dir():
        return
    for entry in REGISTRY.iterdir():
        try:
            pid = int(entry.read_text().strip())
        except (OSError, ValueError):
            pid = 0
        if pid and Path(f"/proc/{pid}").exists():
            continue
        remove_token(entry.name)
