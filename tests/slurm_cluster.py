"""A real one-node SLURM cluster for the tests: Debian's slurm-wlm with slurmdbd accounting on MariaDB.

``SlurmCluster(folder).start()`` writes slurm.conf, slurmdbd.conf, cgroup-free plugin settings and a
munge key into ``folder``, starts munged, mariadbd, slurmdbd, slurmctld and slurmd on 127.0.0.1
(ports chosen free), registers the cluster, an account and the user in the accounting database,
and waits until the node is idle; ``stop()`` ends every daemon it started. Every command the
tests run against it takes ``cluster.env`` (SLURM_CONF points at the folder's slurm.conf), so
nothing outside the folder is read or written. ``install()`` installs the Debian packages when
they are absent (as root, with apt-get) and says why when it cannot.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ["slurm-wlm", "slurmdbd", "mariadb-server", "munge"]
BINARIES = ["slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "mariadb-install-db", "sbatch", "sacct"]
ACCOUNT = "cotdyn"
# The node: the machine's own CPUs, so that what a job asks for is checked against what the node
# really has (a grouped job sized past it would pend for ever); its memory as declared
# (SlurmdParameters=config_overrides).
NODE_CPUS = os.cpu_count() or 1
NODE_MEMORY_MB = 16000
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]


def install() -> str | None:
    """Install slurm-wlm, slurmdbd, MariaDB and munge with apt-get when absent; None when they are
    there, else the reason they could not be installed."""
    if not missing_binaries():
        return None
    if os.geteuid() != 0:
        return f"slurm-wlm is not installed ({', '.join(missing_binaries())} missing) and the tests are not root"
    if shutil.which("apt-get") is None:
        return "slurm-wlm is not installed and there is no apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            return f"{' '.join(cmd)} failed: {(done.stdout + done.stderr)[-1500:]}"
    return None if not missing_binaries() else f"installed, but still missing: {missing_binaries()}"


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _sbin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class SlurmCluster:
    def __init__(self, folder: Path, partitions: dict[str, str] | None = None):
        self.folder = Path(folder)
        self.host = socket.gethostname().split(".")[0]
        self.partitions = partitions or {"cpu": "Default=YES PriorityTier=1"}
        self.procs: dict[str, subprocess.Popen] = {}
        self.account = ACCOUNT
        self.conf = self.folder / "slurm.conf"
        # bin/srun (written by _write_configs) first on the PATH that sbatch carries into the jobs
        self.bin = self.folder / "bin"
        self.paused = self.folder / "paused"  # a file per rule whose jobs wait (pause, resume)
        path = os.pathsep.join([str(self.bin), os.environ.get("PATH", "")])
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PATH": path}
        for key in [k for k in self.env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del self.env[key]

    # -- configuration -------------------------------------------------------------------------
    def _write_configs(self) -> None:
        f = self.folder
        for sub in ("state", "spool", "log", "munge", "db", "run"):
            (f / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(f / "munge", 0o700)
        # The jobstep plugin (0.6.1) removes SLURM_CONF from the environment of the srun it runs
        # inside each job, and a srun without it reads /etc/slurm/slurm.conf where there is one (any
        # login node), before the configless node's copy: it then asks that cluster's controller
        # ("Unable to contact slurm controller"). This srun puts the test cluster's back.
        self.bin.mkdir(parents=True, exist_ok=True)
        self.paused.mkdir(parents=True, exist_ok=True)
        shim = self.bin / "srun"
        shim.write_text(
            f"""#!/bin/sh
export SLURM_CONF={self.conf}
# pause(rule): a job of that rule waits here, RUNNING in SLURM's eyes, until resume(rule)
if [ -n "$SLURM_JOB_ID" ] && [ -n "$(ls -A {self.paused})" ]; then
    rule=$(scontrol show job "$SLURM_JOB_ID" -o | sed -n 's/.* Comment=\\(rule_[^ ]*\\)_wildcards.*/\\1/p')
    while [ -n "$rule" ] && [ -e "{self.paused}/$rule" ]; do
        # the job ended while held (scancel): end what it started, as a node's cgroup would
        scontrol show job "$SLURM_JOB_ID" -o | grep -q "JobState=RUNNING" || kill -KILL 0
        sleep 0.2
    done
fi
exec {shutil.which("srun") or "/usr/bin/srun"} "$@"
"""
        )
        shim.chmod(0o755)
        key = f / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        # Slurm 22.05's clients reach munged at its default socket whatever AuthInfo says (sacctmgr
        # ignores it), so the cluster's munged listens there, unless one already answers there.
        self.munge_socket = MUNGE_SOCKET
        ctld, slurmd, dbd, db = free_ports(4)
        self.ctld_port = ctld
        self.db_port = db
        # cred_expire (default 120 s) is also how long a requeued job waits before it may start
        # again; 10 s keeps the preemption test at seconds, not minutes (docs/cluster.md).
        auth = f"AuthInfo=socket={self.munge_socket},cred_expire=10"
        partitions = "\n".join(
            f"PartitionName={name} Nodes={self.host} MaxTime=INFINITE State=UP {extra}"
            for name, extra in self.partitions.items()
        )
        self.conf.write_text(
            f"""ClusterName=cotdyn
SlurmctldHost={self.host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
CredType=cred/munge
{auth}
StateSaveLocation={f / "state"}
SlurmdSpoolDir={f / "spool"}
SlurmctldPidFile={f / "run" / "slurmctld.pid"}
SlurmdPidFile={f / "run" / "slurmd.pid"}
SlurmctldLogFile={f / "log" / "slurmctld.log"}
SlurmdLogFile={f / "log" / "slurmd.log"}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={dbd}
AccountingStorageEnforce=associations
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SlurmctldParameters=enable_configless
MinJobAge=300
KillWait=5
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} State=UNKNOWN
{partitions}
"""
        )
        dbd_conf = f / "slurmdbd.conf"
        dbd_conf.write_text(
            f"""{auth}
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd}
SlurmUser=root
PidFile={f / "run" / "slurmdbd.pid"}
LogFile={f / "log" / "slurmdbd.log"}
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db}
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
"""
        )
        os.chmod(dbd_conf, 0o600)

    # -- daemons -------------------------------------------------------------------------------
    def _spawn(self, name: str, cmd: list[str], env: dict | None = None) -> None:
        log = open(self.folder / "log" / f"{name}.out", "ab")
        self.procs[name] = subprocess.Popen(
            cmd, env=env or self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def _wait(self, what: str, ready, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}) waiting for {what}: {self.logs()}")
            if ready():
                return
            time.sleep(0.3)
        raise RuntimeError(f"timed out waiting for {what}: {self.logs()}")

    def run(self, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stdout}{done.stderr}")
        return done

    def _ok(self, *cmd: str) -> bool:
        try:
            return self.run(*cmd, check=False, timeout=15).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def start(self) -> SlurmCluster:
        self._write_configs()
        f = self.folder
        if not self._munge_answers():
            self.munge_socket.parent.mkdir(parents=True, exist_ok=True)
            self.munge_socket.unlink(missing_ok=True)
            self._spawn(
                "munged",
                [
                    _sbin("munged"),
                    "-F",
                    "--force",
                    f"--key-file={f / 'munge' / 'munge.key'}",
                    f"--socket={self.munge_socket}",
                    f"--pid-file={f / 'munge' / 'munged.pid'}",
                    f"--log-file={f / 'log' / 'munged.log'}",
                    f"--seed-file={f / 'munge' / 'munged.seed'}",
                ],
            )
            self._wait("munged", self._munge_answers)
        db_socket = f / "run" / "mariadb.sock"
        install_db = subprocess.run(
            [shutil.which("mariadb-install-db") or "mariadb-install-db", f"--datadir={f / 'db'}", "--user=root",
             "--auth-root-authentication-method=socket", "--skip-test-db"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if install_db.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {install_db.stdout}{install_db.stderr}")
        self._spawn(
            "mariadbd",
            [
                _sbin("mariadbd"),
                "--no-defaults",
                f"--datadir={f / 'db'}",
                f"--socket={db_socket}",
                f"--port={self.db_port}",
                "--bind-address=127.0.0.1",
                "--user=root",
                f"--pid-file={f / 'run' / 'mariadb.pid'}",
                "--innodb-buffer-pool-size=64M",
                "--innodb-log-file-size=16M",
                "--skip-log-bin",
            ],
        )
        mariadb = [shutil.which("mariadb") or "mariadb", f"--socket={db_socket}", "-uroot"]
        self._wait("mariadbd", lambda: self._ok(*mariadb, "-e", "select 1"), timeout=120)
        self.run(
            *mariadb,
            "-e",
            "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';"
            "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;",
        )
        self._spawn("slurmdbd", [_sbin("slurmdbd"), "-D"])
        self._wait("slurmdbd", lambda: self._ok("sacctmgr", "-n", "list", "cluster"), timeout=120)
        user = getpass.getuser()
        for args in (
            ("add", "cluster", "cotdyn"),
            ("add", "account", ACCOUNT, "Description=tests", "Organization=cotdyn"),
            ("add", "user", user, f"Account={ACCOUNT}", f"DefaultAccount={ACCOUNT}"),
        ):
            self.run("sacctmgr", "-i", *args)
        self.start_controller()
        # Configless slurmd (it fetches slurm.conf from slurmctld and keeps it in /run/slurm/conf),
        # so that the node needs no file of its own; the jobs' srun finds the test cluster's
        # slurm.conf through bin/srun (_write_configs).
        self._spawn(
            "slurmd",
            [_sbin("slurmd"), "-D", "-N", self.host, "--conf-server", f"127.0.0.1:{self.ctld_port}"],
            env={k: v for k, v in self.env.items() if k != "SLURM_CONF"},
        )
        self._wait("an idle node", lambda: "idle" in self.run("sinfo", "-h", "-o", "%T", check=False).stdout)
        return self

    def _munge_answers(self) -> bool:
        try:
            cred = subprocess.run(["munge", "-n", "-S", str(self.munge_socket)], capture_output=True, timeout=10)
            if cred.returncode != 0:
                return False
            check = ["unmunge", "-S", str(self.munge_socket)]
            return subprocess.run(check, input=cred.stdout, capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    def start_controller(self) -> None:
        self._spawn("slurmctld", [_sbin("slurmctld"), "-D", "-i"])
        self._wait("slurmctld", lambda: self._ok("scontrol", "ping"))

    def stop(self) -> None:
        """End every daemon this cluster started, the Slurm ones first (their jobs with them)."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--user", getpass.getuser(), check=False, timeout=15)
        for name in ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

        # the configless node's link to its cached configuration, where it points into this folder
        link = Path("/run/slurm/conf")
        if link.is_symlink() and str(os.readlink(link)).startswith(str(self.folder)):
            link.unlink()

    def logs(self) -> str:
        parts = []
        for log in sorted((self.folder / "log").glob("*")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}")
        return "\n".join(parts)

    # -- holding a rule's jobs -------------------------------------------------------------------
    def pause(self, rule: str) -> None:
        """From now on a job of ``rule`` (its comment, e.g. rule_continuations) that starts waits in
        bin/srun before its step: RUNNING for SLURM, doing nothing, so a test acts on a running job
        without racing it."""
        (self.paused / rule).touch()

    def resume(self, rule: str) -> None:
        (self.paused / rule).unlink(missing_ok=True)

    # -- queries -------------------------------------------------------------------------------
    def job_step_conf(self) -> list[str]:
        """Inside a job of this cluster: the srun a job finds on its PATH, then what a step that srun
        starts in the environment the jobstep plugin gives it (every SLURM_ variable but the job's
        identity dropped) has as SLURM_CONF, or srun's error."""
        out = self.folder / "log" / "job_step_conf.out"
        out.unlink(missing_ok=True)
        keep = "SLURM_JOB_ID|SLURM_JOBID|SLURM_CLUSTER_NAME|SLURM_SUBMIT_DIR|SLURM_SUBMIT_HOST"
        dropped = f"$(env | cut -d= -f1 | grep -E '^(SLURM|SRUN|SBATCH)_' | grep -vxE '{keep}' | sed 's/^/-u /')"
        wrap = f"command -v srun; env {dropped} srun -n1 printenv SLURM_CONF 2>&1"
        self.run("sbatch", "--wait", "-A", self.account, "-o", str(out), "--wrap", wrap, check=False, timeout=120)
        return out.read_text(errors="replace").splitlines() if out.exists() else ["(no output)"]

    def jobs(self) -> list[dict]:
        """The queue (squeue, every state still listed): id, name, state, comment per job."""
        out = self.run("squeue", "-h", "--states=all", "-o", "%i|%j|%T|%k").stdout
        return [dict(zip(("id", "name", "state", "comment"), line.split("|", 3))) for line in out.splitlines() if line]

    def accounting_states(self) -> dict[str, str]:
        """Every job's last state as slurmdbd recorded it (sacct), by job id."""
        out = self.run("sacct", "-X", "-n", "--parsable2", "-o", "JobIdRaw,State").stdout
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def accounting_requests(self) -> dict[str, dict]:
        """Every job's CPUs and memory asked for (e.g. 8000M) and comment (the rule) as slurmdbd recorded
        them (sacct; squeue forgets a finished job after MinJobAge), by job id."""
        out = self.run("sacct", "-X", "-n", "--parsable2", "-o", "JobIdRaw,ReqCPUS,ReqMem,Comment").stdout
        rows = [line.split("|", 3) for line in out.splitlines() if line.count("|") >= 3]
        return {job_id: {"cpus": int(cpus), "mem": mem, "comment": comment} for job_id, cpus, mem, comment in rows}

    def accounting_history(self, job_id: str) -> list[str]:
        """A job's states over its requeues (sacct --duplicates lists each run)."""
        out = self.run("sacct", "-X", "-n", "--duplicates", "--parsable2", "-o", "State", "-j", job_id).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]
