"""Where the lab keeps things and how its network is laid out: one place for every name."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

# Cached across runs and clones (image, generated checkpoints): keyed, never edited in place.
DEFAULT_CACHE_DIR = "/var/cache/noderig"
# Per-lab runtime state (keys, overlays, pids, the lab record). Dropped by `lab down`.
DEFAULT_STATE_DIR = "/var/lib/noderig/lab"


@dataclass(frozen=True)
class LabLayout:
    """Paths and network names of one lab instance (one per state directory)."""

    state_dir: Path
    cache_dir: Path
    subnet: str = "10.231.0"  # a /24; .1 is the controller's end of the bridge
    name: str = "lab"  # several labs (a developer's, the tests') can run side by side

    @classmethod
    def from_env(cls, name: str | None = None) -> "LabLayout":
        """The lab named ``name`` (or $NODERIG_LAB, default "lab"); the test suite uses "test"."""
        name = name or os.environ.get("NODERIG_LAB", "lab")
        fixed = {"lab": 0, "test": 1}
        third = fixed.get(name, 2 + int(hashlib.sha256(name.encode()).hexdigest(), 16) % 200)
        default_subnet = f"10.231.{third}"
        return cls(
            state_dir=Path(os.environ.get("NODERIG_LAB_DIR", str(Path(DEFAULT_STATE_DIR).with_name(name)))),
            cache_dir=Path(os.environ.get("NODERIG_CACHE_DIR", DEFAULT_CACHE_DIR)),
            subnet=os.environ.get("NODERIG_LAB_SUBNET", default_subnet),
            name=name,
        )

    # Interface names are limited to 15 characters.
    @property
    def bridge(self) -> str:
        return f"nr{self.name[:8]}0"

    @property
    def services_netns(self) -> str:
        return f"nr{self.name}-svc"

    @property
    def services_veth(self) -> str:
        return f"nr{self.name[:8]}s0"

    @property
    def cgroup_name(self) -> str:
        return f"noderig-{self.name}"

    # network -------------------------------------------------------------------------
    @property
    def controller_ip(self) -> str:
        return f"{self.subnet}.1"

    @property
    def services_ip(self) -> str:
        return f"{self.subnet}.2"

    def host_ip(self, index: int) -> str:
        return f"{self.subnet}.{10 + index}"

    hub_port = 8080
    cdn_port = 8081
    packages_port = 8000

    @property
    def hub_url(self) -> str:
        return f"http://{self.services_ip}:{self.hub_port}"

    @property
    def packages_url(self) -> str:
        return f"http://{self.services_ip}:{self.packages_port}/"

    # files ---------------------------------------------------------------------------
    @property
    def record(self) -> Path:
        """JSON record of what this lab started (pids, hosts): the only things `down` ends."""
        return self.state_dir / "lab.json"

    @property
    def lock(self) -> Path:
        return self.state_dir / ".lock"

    @property
    def ssh_dir(self) -> Path:
        return self.state_dir / "ssh"

    @property
    def ssh_key(self) -> Path:
        return self.ssh_dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.ssh_dir / "known_hosts"

    @property
    def hub_tokens(self) -> Path:
        return self.state_dir / "hub" / "tokens"

    @property
    def hf_token_file(self) -> Path:
        """A valid lab Hub token in a 0600 file, as a user would keep theirs."""
        return self.state_dir / "hub" / "hf_token"

    @property
    def services_log(self) -> Path:
        return self.state_dir / "services.log"

    def host_dir(self, name: str) -> Path:
        return self.state_dir / "hosts" / name

    def host_root(self, name: str) -> Path:
        return self.host_dir(name) / "root"

    def host_log(self, name: str) -> Path:
        return self.host_dir(name) / "nspawn.log"

    def cgroup_dirs(self, name: str | None = None) -> list[Path]:
        # nspawn needs its own cgroup on both hierarchies of a hybrid setup, else every
        # container lands in /payload and the second one shares the first one's cgroup.
        roots = [Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified")]
        if not roots[0].is_dir():  # pure cgroup2 host
            roots = [Path("/sys/fs/cgroup")]
        base = [r / self.cgroup_name for r in roots]
        return base if name is None else [b / name for b in base]
