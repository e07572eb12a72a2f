"""A private OpenSSH sshd on 127.0.0.1 (recipe: shared/recipes/sshd.md).

Own host key, client key, authorized_keys, config and random port; sessions get a temp
HOME and a PATH whose first entry is `fakebin` (fake nvidia-smi/dmesg live there).
Never touches the system sshd, port 22 or /etc/ssh."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from tests.support.wait import until_sync

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
BANNER_TIMEOUT_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


class Sshd:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.home = root / "home"
        self.fakebin = root / "fakebin"
        for d in (self.home, self.fakebin):
            d.mkdir(parents=True, exist_ok=True)
        self.hostkey = root / "hostkey"
        self.clientkey = root / "clientkey"
        keygen(self.hostkey)
        keygen(self.clientkey)
        (root / "authorized_keys").write_text((root / "clientkey.pub").read_text())
        self.known_hosts = root / "user_known_hosts"
        self.known_hosts.write_text(self.known_hosts_line() + "\n")
        self.log = root / "sshd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.path_env = f"{self.fakebin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        self._write_config()

    def known_hosts_line(self, key: Path | None = None) -> str:
        pub = (key or self.root / "hostkey.pub").read_text().split()
        return f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}"

    def _write_config(self) -> None:
        (self.root / "sshd_config").write_text(f"""\
Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.hostkey}
PidFile {self.root}/sshd.pid
AuthorizedKeysFile {self.root}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PrintMotd no
UseDNS no
SetEnv HOME={self.home} PATH={self.path_env}
Subsystem sftp internal-sftp
""")

    def client_config(self, alias: str = "testbox", known_hosts: Path | None = None) -> str:
        return f"""\
Host {alias}
  HostName 127.0.0.1
  Port {self.port}
  User root
  IdentityFile {self.clientkey}
  IdentitiesOnly yes
  UserKnownHostsFile {known_hosts or self.known_hosts}
"""

    def start(self) -> None:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
                                         stdout=log, stderr=log)
        until_sync(self._answers, timeout=BANNER_TIMEOUT_S, what="sshd to answer with its banner")

    def _answers(self) -> bool:
        """sshd accepts a connection and sends its banner; an sshd that exited is an error."""
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {self.log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                return s.recv(64).startswith(b"SSH-2.0")
        except OSError:
            return False

    def session_pids(self) -> list[int]:
        if self.proc is None:
            return []
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def drop_sessions(self) -> None:
        """Simulate a network drop: end every established session process."""
        for pid in self.session_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.drop_sessions()
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def replace_host_key(self) -> None:
        """The box was rebuilt: a new host key on the same host:port."""
        for f in (self.hostkey, Path(str(self.hostkey) + ".pub")):
            f.unlink()
        keygen(self.hostkey)
        self.restart()
