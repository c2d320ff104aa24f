"""A warm interpreter: `python warm_interpreter.py SOCKET MODULE...` imports
the modules once, then forks a child for each program a client asks it to
run (tests/script_runner.py is the client). The child is a process of its
own, as `python <args>` would start: its own pid, argv, environment,
working folder, standard streams (the client's file descriptors, passed
over the socket) and exit status; only the imports are shared.

Protocol, one connection per program: the client sends 8 bytes (the JSON
request's length) with three file descriptors (stdin, stdout, stderr),
then the request ({"args", "env", "cwd"}); the server answers the child's
pid (8 bytes), then its exit status (8 bytes: a code, or -N after signal
N) when it ends. The server ends when its stdin (the client's lifeline)
closes, killing the children still running.
"""

import atexit
import gc
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import tempfile
import traceback

# The protocol's numbers: a request's length, a pid, an exit status.
WORD = struct.Struct("q")


def receive_word(conn):
    """One number of the protocol from a socket."""
    return WORD.unpack(receive_exactly(conn, WORD.size))[0]


def receive_exactly(conn, size):
    """size bytes from a socket, or EOFError if it closes first."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError("the connection closed mid-message")
        data += chunk
    return data


def _run_program(request):
    """In the child: `python <args>` as the request says; returns the exit
    code, as the interpreter would set it."""
    args = request["args"]
    os.environ.clear()
    os.environ.update(request["env"])
    # Read from the environment once, when first used: the program's own.
    tempfile.tempdir = None
    os.chdir(request["cwd"])
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(
        2,
        "w",
        encoding="utf-8",
        errors="backslashreplace",
        closefd=False,
        buffering=1,
    )
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path[0] = ""
    else:
        sys.argv = list(args)
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
    extra = request["env"].get("PYTHONPATH", "").split(os.pathsep)
    sys.path[1:1] = [p for p in extra if p and p not in sys.path]
    code = 0
    try:
        if args[0] == "-c":
            main = {"__name__": "__main__", "__builtins__": __builtins__}
            exec(compile(args[1], "<string>", "exec"), main)
        else:
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as e:
        code = e.code
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def _serve(path):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    os.set_blocking(wake_read, False)
    signal.set_wakeup_fd(wake_write)
    # A Python handler: SIGCHLD then writes to the wake-up pipe.
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children = {}  # pid -> the connection waiting for its exit status
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "request")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    selector.register(sys.stdin, selectors.EVENT_READ, "lifeline")
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "lifeline" and not os.read(sys.stdin.fileno(), 1):
                for pid in children:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                return
            if key.data == "child":
                try:
                    os.read(wake_read, 1024)
                except BlockingIOError:
                    pass
                while children:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                    if pid == 0:
                        break
                    conn = children.pop(pid, None)
                    if conn is not None:
                        code = os.waitstatus_to_exitcode(status)
                        try:
                            conn.sendall(WORD.pack(code))
                        except OSError:
                            pass
                        conn.close()
            if key.data == "request":
                conn, _ = listener.accept()
                header, fds, _, _ = socket.recv_fds(conn, WORD.size, 3)
                (size,) = WORD.unpack(header)
                request = json.loads(receive_exactly(conn, size))
                pid = os.fork()
                if pid == 0:
                    code = 1
                    try:
                        selector.close()
                        listener.close()
                        conn.close()
                        for other in children.values():
                            other.close()
                        signal.set_wakeup_fd(-1)
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        os.close(wake_read)
                        os.close(wake_write)
                        for target, fd in enumerate(fds):
                            os.dup2(fd, target)
                            os.close(fd)
                        code = _run_program(request)
                    except BaseException:
                        traceback.print_exc()
                    finally:
                        os._exit(code)
                for fd in fds:
                    os.close(fd)
                conn.sendall(WORD.pack(pid))
                children[pid] = conn


if __name__ == "__main__":
    for module in sys.argv[2:]:
        __import__(module)
    # What the imports made lives as long as every child: the children's
    # full garbage collections need not walk it (nor touch its pages).
    gc.freeze()
    _serve(sys.argv[1])
