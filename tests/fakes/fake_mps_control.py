#!/usr/bin/env python3
"""A stand-in for nvidia-cuda-mps-control, for CI machines without a GPU.

It speaks the same interface as the real control program:
  fake_mps_control.py -d | -f     start the control daemon (background | foreground) for the pipe
                                  directory in CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps)
  fake_mps_control.py             read commands on stdin, one per line, send each to the daemon of
                                  CUDA_MPS_PIPE_DIRECTORY, print its answer; exit 1 if none runs

and records, for tests, everything it was told in <pipe dir>/commands.log (one line per command,
"<command>") and its start environment in <pipe dir>/daemon.json.

Like MPS, a process is a client of this daemon when it "attached": here, when its environment has
CUDA_MPS_PIPE_DIRECTORY equal to the daemon's pipe directory (a process whose variable is missing
or misspelled is not a client, exactly the fail-open case a runtime must catch). The first client
starts a "server" (a child process that lives until the daemon quits), as the real daemon does.

Commands: get_server_list, get_client_list PID, get_device_client_list [PID],
set_default_active_thread_percentage P, set_active_thread_percentage PID P,
set_default_device_pinned_mem_limit DEV V, set_device_pinned_mem_limit PID DEV V,
terminate_client SERVER CLIENT, quit.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

PIPE_DIR = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
LOG_DIR = os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps")
SOCKET = os.path.join(PIPE_DIR, "control")
ME = os.path.abspath(__file__)


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def clients(exclude):
    """PIDs whose environment points at our pipe directory (ours and control invocations aside)."""
    want = ("CUDA_MPS_PIPE_DIRECTORY=" + PIPE_DIR).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in exclude:
            continue
        if ME.encode() in read("/proc/%s/cmdline" % name):
            continue  # a control invocation or our own server
        stat = read("/proc/%s/stat" % name)
        if b") Z" in stat:
            continue
        if want in read("/proc/%s/environ" % name).split(b"\0"):
            found.append(int(name))
    return sorted(found)


class Daemon:
    def __init__(self):
        self.server = None
        self.settings = []
        self.uuid = os.environ.get("CUDA_VISIBLE_DEVICES", "all")

    def refresh(self):
        if self.server is not None and self.server.poll() is not None:
            self.server = None
        exclude = {os.getpid()} | ({self.server.pid} if self.server else set())
        found = clients(exclude)
        if found and self.server is None:
            self.server = subprocess.Popen([sys.executable, ME, "--server"])
        return found

    def handle(self, line):
        words = line.split()
        if not words:
            return ""
        cmd, args = words[0], words[1:]
        found = self.refresh()
        server_pids = [self.server.pid] if self.server else []
        if cmd == "get_server_list":
            return "".join("%d\n" % p for p in server_pids)
        if cmd == "get_client_list":
            if len(args) != 1 or not args[0].isdigit():
                return "usage: get_client_list PID\n"
            return "".join("%d\n" % p for p in found) if int(args[0]) in server_pids else ""
        if cmd == "get_device_client_list":
            if args and (not args[0].isdigit() or int(args[0]) not in server_pids):
                return ""
            # The real daemon's layout (driver 580): a device line, then "PID.N" per client.
            return "[0] 00:00.0, %s\n" % self.uuid + "".join("%d.1\n" % p for p in found)
        if cmd in ("set_default_active_thread_percentage", "set_active_thread_percentage",
                   "set_default_device_pinned_mem_limit", "set_device_pinned_mem_limit",
                   "terminate_client"):
            self.settings.append(line)
            return ""
        if cmd == "quit":
            return ""
        return "Unrecognized command: %s\n" % cmd

    def stop(self):
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            self.server.wait()
        try:
            os.unlink(SOCKET)
        except OSError:
            pass

    def serve(self, ready_fd=None):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(SOCKET)
        listener.listen(16)
        with open(os.path.join(PIPE_DIR, "daemon.json"), "w") as f:
            json.dump({"pid": os.getpid(), "CUDA_VISIBLE_DEVICES": self.uuid,
                       "CUDA_MPS_LOG_DIRECTORY": LOG_DIR}, f)
        os.makedirs(LOG_DIR, exist_ok=True)
        with open(os.path.join(LOG_DIR, "control.log"), "a") as log:
            log.write("fake control daemon %d started for %s\n" % (os.getpid(), self.uuid))
        if ready_fd is not None:
            os.write(ready_fd, b"1")
            os.close(ready_fd)
        signal.signal(signal.SIGTERM, lambda *_: (self.stop(), os._exit(0)))
        while True:
            conn, _ = listener.accept()
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            line = data.decode().strip()
            with open(os.path.join(PIPE_DIR, "commands.log"), "a") as log:
                log.write(line + "\n")
            conn.sendall(self.handle(line).encode())
            conn.close()
            if line == "quit":
                self.stop()
                return


def run_daemon(background):
    os.makedirs(PIPE_DIR, exist_ok=True)
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(SOCKET)
        sys.stderr.write("An instance of this daemon is already running\n")
        return 1
    except OSError:
        pass
    if os.path.exists(SOCKET):
        os.unlink(SOCKET)
    if not background:
        Daemon().serve()
        return 0
    r, w = os.pipe()
    if os.fork() > 0:
        os.close(w)
        return 0 if os.read(r, 1) == b"1" else 1
    os.close(r)
    os.setsid()
    Daemon().serve(w)
    os._exit(0)


def run_server():
    # Lives until its daemon goes (the real server outlives neither its daemon nor a quit).
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.2)
    return 0


def run_client():
    status = 0
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(SOCKET)
        except OSError:
            sys.stderr.write("Cannot find MPS control daemon process\n")
            return 1
        s.sendall((line + "\n").encode())
        reply = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        sys.stdout.write(reply.decode())
        sys.stdout.flush()
    return status


if __name__ == "__main__":
    if "-d" in sys.argv[1:]:
        sys.exit(run_daemon(background=True))
    if "-f" in sys.argv[1:]:
        sys.exit(run_daemon(background=False))
    if "--server" in sys.argv[1:]:
        sys.exit(run_server())
    sys.exit(run_client())
