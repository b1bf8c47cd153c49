# boxd's code interpreter driver: runs inside a sandbox, started by boxd
# (runtime/interp.go) through the init's exec path as `python3 -I -c SOURCE`.
# It keeps one IPython kernel per named context (jupyter_client, ipc
# transport in a private directory) and speaks to boxd in frames on its
# stdin and stdout: a 4-byte big-endian length, then that many bytes of
# JSON. boxd trusts nothing it says: it bounds and checks every frame.
import json
import os
import queue
import re
import shutil
import struct
import sys
import tempfile
import threading
import time

MAX_FRAME = 1 << 20  # boxd refuses larger frames; stay well below
CHUNK = 256 << 10  # stream text is sent in pieces of at most this many bytes
MAX_CONTEXTS = 16
MIMES = ("text/plain", "text/html", "image/png", "image/svg+xml", "application/json", "text/markdown")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

_out = None
_out_lock = threading.Lock()
_cancel = threading.Event()
_running = [None]  # the id of the run in progress
_requests = queue.Queue()


def send(msg):
    b = json.dumps(msg, separators=(",", ":")).encode()
    if len(b) > MAX_FRAME - 64:
        raise ValueError("frame too big")
    with _out_lock:
        _out.write(struct.pack(">I", len(b)) + b)


def read_requests(pin):
    """Reads boxd's frames; a cancel interrupts the running cell at once."""
    while True:
        head = pin.read(4)
        if len(head) < 4:
            break
        (n,) = struct.unpack(">I", head)
        if n > 16 * MAX_FRAME:  # 1 MiB of code, JSON-escaped
            break
        body = pin.read(n)
        if len(body) < n:
            break
        req = json.loads(body)
        if req.get("op") == "cancel":
            if req.get("run") == _running[0]:  # a late cancel of an earlier run is dropped
                _cancel.set()
            continue
        if req.get("op") == "run":
            # boxd sends a run only after the last one's end: from here
            # on a cancel is this run's.
            _cancel.clear()
            _running[0] = req.get("id")
        _requests.put(req)
    _requests.put(None)


class Budget:
    """The output limit of one run: what is over it is dropped, and said."""

    def __init__(self, limit):
        self.left = limit if limit > 0 else 16 << 20
        self.truncated = False

    def take(self, n):
        if n > self.left:
            self.truncated = True
            self.left = 0
            return False
        self.left -= n
        return True


def bundle(data, budget):
    out = {}
    for mime in MIMES:
        if mime not in data:
            continue
        v = data[mime]
        if mime == "application/json":
            v = json.dumps(v)
        elif not isinstance(v, str):
            continue
        if len(v) > MAX_FRAME // 2 or not budget.take(len(v)):
            budget.truncated = True
            continue
        out[mime] = v
    return out


class Context:
    def __init__(self, name):
        from jupyter_client import KernelManager

        self.name = name
        self.dir = tempfile.mkdtemp(prefix="boxd-interp-")
        self.km = KernelManager(
            kernel_name="python3",
            transport="ipc",
            ip=os.path.join(self.dir, "k"),
            connection_file=os.path.join(self.dir, "kernel.json"),
        )
        env = dict(os.environ)
        env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        self.km.start_kernel(extra_arguments=["--HistoryManager.enabled=False"], env=env, cwd=os.getcwd())
        self.connect()

    def connect(self):
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.count = 0

    def restart(self):
        self.kc.stop_channels()
        self.km.restart_kernel(now=True)
        self.connect()

    def close(self):
        try:
            self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def drain_shell(self):
        while True:
            try:
                self.kc.get_shell_msg(timeout=0)
            except queue.Empty:
                return

    def run(self, rid, code, timeout, budget):
        self.drain_shell()
        msg_id = self.kc.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        start = time.monotonic()
        deadline = start + timeout if timeout > 0 else None
        grace = None
        res = {"t": "done", "id": rid, "timed_out": False, "interrupted": False, "restarted": False}
        while True:
            now = time.monotonic()
            if grace is None and ((deadline is not None and now >= deadline) or _cancel.is_set()):
                res["timed_out"] = deadline is not None and now >= deadline
                res["interrupted"] = True
                self.km.interrupt_kernel()
                grace = now + 3
            elif grace is not None and now >= grace:
                # The cell ignored SIGINT: the context starts over.
                self.restart()
                res["restarted"] = True
                break
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                if not self.km.is_alive():
                    send({"t": "error", "id": rid, "name": "KernelDied", "value": "the kernel exited", "traceback": []})
                    self.restart()
                    res["restarted"] = True
                    break
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if self.handle(rid, msg, budget):
                break
        res["truncated"] = budget.truncated
        res["count"] = self.count
        send(res)

    def handle(self, rid, msg, budget):
        """Sends what one iopub message carries; True once the cell is done."""
        typ, c = msg["msg_type"], msg["content"]
        if typ == "stream":
            raw = c.get("text", "").encode("utf-8", "replace")
            if len(raw) > budget.left:
                raw = raw[:budget.left]
                budget.truncated = True
            budget.left -= len(raw)
            for i in range(0, len(raw), CHUNK):
                # A piece cut inside a character loses it (never grows).
                send({"t": "out", "id": rid, "s": c.get("name", "stdout"), "b": raw[i:i + CHUNK].decode("utf-8", "ignore")})
        elif typ in ("display_data", "update_display_data", "execute_result"):
            data = bundle(c.get("data", {}), budget)
            if data:
                kind = "value" if typ == "execute_result" else "display"
                send({"t": kind, "id": rid, "data": data})
        elif typ == "execute_input":
            self.count = c.get("execution_count", self.count)
        elif typ == "error":
            tb = c.get("traceback", [])
            size = sum(len(x) for x in tb) + len(c.get("evalue", ""))
            if not budget.take(size):
                tb = tb[-1:] if tb and len(tb[-1]) < CHUNK else []
            send({"t": "error", "id": rid, "name": c.get("ename", "")[:256], "value": c.get("evalue", "")[:CHUNK], "traceback": tb})
        elif typ == "status" and c.get("execution_state") == "idle":
            return True
        return False


def serve():
    contexts = {}
    while True:
        req = _requests.get()
        if req is None:
            break
        rid, op, name = req.get("id", 0), req.get("op"), req.get("context", "default")
        try:
            if not isinstance(name, str) or not NAME_RE.match(name):
                raise ValueError("bad context name")
            if op == "run":
                ctx = contexts.get(name)
                if ctx is None:
                    if len(contexts) >= MAX_CONTEXTS:
                        send({"t": "fail", "id": rid, "code": "limit", "msg": "at most %d contexts" % MAX_CONTEXTS})
                        continue
                    ctx = contexts[name] = Context(name)
                ctx.run(rid, req.get("code", ""), float(req.get("timeout", 0)), Budget(int(req.get("limit", 0))))
            elif op == "restart":
                if name not in contexts:
                    send({"t": "fail", "id": rid, "code": "not_found", "msg": "no context " + name})
                    continue
                contexts[name].restart()
                send({"t": "ok", "id": rid})
            elif op == "delete":
                ctx = contexts.pop(name, None)
                if ctx is None:
                    send({"t": "fail", "id": rid, "code": "not_found", "msg": "no context " + name})
                    continue
                ctx.close()
                send({"t": "ok", "id": rid})
            elif op == "list":
                send({"t": "contexts", "id": rid, "contexts": [{"name": c.name, "count": c.count} for c in contexts.values()]})
            else:
                send({"t": "fail", "id": rid, "code": "invalid", "msg": "unknown op"})
        except Exception as e:  # the driver outlives one bad kernel
            send({"t": "fail", "id": rid, "code": "internal", "msg": ("%s: %s" % (type(e).__name__, e))[:4096]})
    for ctx in contexts.values():
        try:
            ctx.close()
        except Exception:
            pass


def main():
    global _out
    pin = os.fdopen(os.dup(0), "rb", buffering=0)
    _out = os.fdopen(os.dup(1), "wb", buffering=0)
    # Kernels and stray prints must not reach the channel, nor read it.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    missing = []
    for mod, pkg in (("ipykernel", "python3-ipykernel"), ("jupyter_client", "python3-jupyter-client")):
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    send({"t": "hello", "missing": missing})
    if missing:
        return
    threading.Thread(target=read_requests, args=(pin,), daemon=True).start()
    serve()


main()
