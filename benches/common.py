"""Helpers shared by the benchmark scripts: the release binary, pinned processes, /proc readings."""
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "grpclab")
TICKS = os.sysconf("SC_CLK_TCK")


def build():
    """Builds the release binary (quietly)."""
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)


def cpu_seconds(pid):
    """utime+stime of a live process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_kib(pid):
    """(VmRSS, VmHWM) of a live process, in KiB."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    return values.get("VmRSS", 0), values.get("VmHWM", 0)


def socket_count(pid):
    """Sockets `pid` holds open."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def tcp_counters(port, names):
    """The kernel's per-socket TCP counters (`ss -ti`: bytes_sent, data_segs_in, ...) named in
    `names`, each summed over the established connections on the server's `port`."""
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return [sum(int(n) for n in re.findall(rf"\b{name}:(\d+)", out)) for name in names]


def free_port():
    """A loopback port free at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc):
    """Waits until `proc` accepts connections on loopback `port` (30 s at most)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited ({proc.returncode}) before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"the server did not listen on {port} within 30 s")


def start_server(impl_args, cpu="0", threads=1, binary=BIN):
    """Starts `binary serve` pinned to `cpu`; returns (process, "host:port") once it listens."""
    server = subprocess.Popen(
        ["taskset", "-c", cpu, binary, "serve", "--port", "0", "--threads", str(threads)] + impl_args,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in server.stderr:
        if "listening on " in line:
            return server, line.split("listening on ")[1].strip()
    sys.exit(f"the server {impl_args} did not start")


def stop_server(server):
    server.terminate()
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def server_stats(target):
    """The server's admin counters (grpclab stats)."""
    out = subprocess.run([BIN, "stats", "--insecure", target], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def run_client(argv, warmup, at_warmup_end=None):
    """Runs a client; at the end of `warmup` seconds calls `at_warmup_end()` (if given) and reads
    the client's CPU. Returns (stdout, client CPU seconds after the warmup, client peak RSS KiB)."""
    out = tempfile.TemporaryFile()
    # stderr to a file, not a pipe: a client that writes a lot there (the live view under
    # --tui) must never block on a full pipe nobody reads until the end.
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdout=out, stderr=err)
    time.sleep(warmup)
    try:
        client_cpu_at_warmup_end = cpu_seconds(proc.pid)
    except FileNotFoundError:
        client_cpu_at_warmup_end = 0.0
    if at_warmup_end:
        at_warmup_end()
    _, status, rusage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    err.seek(0)
    stderr = err.read().decode(errors="replace")
    out.seek(0)
    stdout = out.read().decode(errors="replace")
    if code != 0:
        sys.exit(f"client failed ({code}): {' '.join(argv)}\n{stderr}{stdout}")
    total_cpu = rusage.ru_utime + rusage.ru_stime
    return stdout, total_cpu - client_cpu_at_warmup_end, rusage.ru_maxrss


def fresh_server_window(impl_args, load_args, warmup):
    """A fresh `grpclab serve` (CPU 0) under one `grpclab load` window (CPU 1, `load_args` after
    the target, JSON output). Returns (report, server CPU s after the warmup, client CPU s)."""
    server, target = start_server(impl_args)
    try:
        marks = {}
        argv = ["taskset", "-c", "1", BIN, "load", target, "-O", "json"] + list(load_args)
        stdout, client_cpu, _ = run_client(argv, warmup,
                                           lambda: marks.update(cpu=cpu_seconds(server.pid)))
        server_cpu = cpu_seconds(server.pid) - marks["cpu"]
    finally:
        stop_server(server)
    return json.loads(stdout), server_cpu, client_cpu


def median(values):
    return statistics.median(values)


def measure_server(impl_args, load_args, duration, warmup, concurrency=1000, connections=50,
                   server_cpus="0", threads=1, client_cpus="1"):
    """One window against one fresh server (`threads` threads on `server_cpus`, by default 1 on
    CPU 0) driven by `grpclab load` (on `client_cpus`, by default CPU 1, one thread per CPU).
    Server figures are per call the server reports serving in the window (admin RPC)."""
    server, target = start_server(impl_args, cpu=server_cpus, threads=threads)
    try:
        marks = {}

        def at_warmup_end():
            marks["cpu"] = cpu_seconds(server.pid)
            marks["stats"] = server_stats(target)

        client_threads = len(client_cpus.split(","))
        argv = ["taskset", "-c", client_cpus, BIN, "load", target, "--insecure", "-c", str(concurrency),
                "--connections", str(connections), "-z", f"{duration}s", "--warmup", f"{warmup}s",
                "--cpus", str(client_threads), "-O", "json"] + load_args
        if not any(flag in load_args for flag in ("--scenario", "--proto", "--protoset")):
            # Since 2026-12-01 `load` asks the server by reflection when no schema flag is given.
            argv += ["--scenario", "complex_proto"]
        stdout, client_cpu, _ = run_client(argv, warmup, at_warmup_end)
        cpu = cpu_seconds(server.pid) - marks["cpu"]
        stats = server_stats(target)
        rss, hwm = memory_kib(server.pid)
    finally:
        stop_server(server)
    report = json.loads(stdout)
    calls = stats["calls"] - marks["stats"]["calls"]
    p = {point["percentage"]: point["latency"] for point in report.get("latencyPercentiles", report.get("latencyDistribution"))}
    return {
        "rps": report.get("measuredRps", report.get("rps")),
        "errors": report["count"] - report["statusCodeDistribution"].get("OK", 0),
        "p50_us": p[50.0] / 1e3,
        "p99_us": p[99.0] / 1e3,
        "server_us": cpu * 1e6 / max(calls, 1),
        "server_cpu_pct": 100 * cpu / duration,
        "allocs": (stats["allocations"] - marks["stats"]["allocations"]) / max(calls, 1),
        "bytes": (stats["allocated_bytes"] - marks["stats"]["allocated_bytes"]) / max(calls, 1),
        "rss_mib": rss / 1024,
        "peak_rss_mib": hwm / 1024,
        "client_us": client_cpu * 1e6 / max(report["count"], 1),
        "client_cpu_s": client_cpu,
        "server_cpu_s": cpu,
        "served": calls,
        "report": report,
    }


def make_certificates(folder):
    """A CA and a leaf it signs, valid for localhost and 127.0.0.1: (ca, cert, key) paths."""
    def run(*argv):
        subprocess.run(argv, check=True, capture_output=True, cwd=folder)
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("openssl", "req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=grpclab bench CA")
    run("openssl", "req", *curve, "-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=localhost")
    with open(os.path.join(folder, "ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run("openssl", "x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "cert.pem", "-days", "2", "-extfile", "ext")
    return [os.path.join(folder, name) for name in ("ca.pem", "cert.pem", "key.pem")]
