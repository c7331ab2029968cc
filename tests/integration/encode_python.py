# SPDX-License-Identifier: BSD-3-Clause
"""Every request kind of a session, encoded by the Python protobuf runtime.

    encode_python.py SOCKET PROTO_DIR WORK_DIR

Generates rlock_pb2 from PROTO_DIR/rlock.proto with protoc into WORK_DIR,
opens a session on the daemon's unix socket SOCKET and sends Hello, Acquire,
Extend, Ping, Stats, Cancel, ServerInfo, ListSessions, ListLocks,
ForceRelease, KillSession, Release and Goodbye, each with the fields an
application would set, as this second, independent encoder writes them.
Prints one line per request and exits 0 only when every answer is the one
the request deserves (never INVALID for how it was encoded).
"""
import socket
import struct
import subprocess
import sys


def main():
    sock_path, proto_dir, work = sys.argv[1:4]
    subprocess.run(["protoc", "--python_out=" + work, "-I", proto_dir, "rlock.proto"],
                   check=True)
    sys.path.insert(0, work)
    import rlock_pb2 as pb  # noqa: E402  (generated just above)

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    buf = b""
    next_id = [0]

    def read_exact(n):
        nonlocal buf
        while len(buf) < n:
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("the daemon closed the connection")
            buf += chunk
        out, buf = buf[:n], buf[n:]
        return out

    def call(field, body):
        next_id[0] += 1
        req = pb.Request(id=next_id[0])
        getattr(req, field).CopyFrom(body)
        data = req.SerializeToString()
        s.sendall(struct.pack(">I", len(data)) + data)
        while True:
            (n,) = struct.unpack(">I", read_exact(4))
            msg = pb.ServerMessage()
            msg.ParseFromString(read_exact(n))
            if msg.WhichOneof("body") == "response" and msg.response.id == next_id[0]:
                return msg.response

    failures = 0

    def expect(field, body, status, what=None):
        nonlocal failures
        r = call(field, body)
        name = pb.Status.Name(r.status)
        ok = name == "STATUS_" + status
        print("python: %-13s %s%s" % (what or field, name, "" if ok else
                                     " (want STATUS_%s: %s)" % (status, r.message)))
        failures += 0 if ok else 1
        return r

    r = expect("hello", pb.Hello(client_name="python-encoder", protocol_version=1,
                                 session_timeout_ms=10000), "OK")
    if r.status != pb.STATUS_OK:
        return 1
    g = expect("acquire", pb.Acquire(resource="python/r", ttl_ms=5000, wait_ms=1000, owner=7,
                                     no_reentry=True, max_hold_ms=60000, lock_delay_ms=100),
               "OK")
    expect("extend", pb.Extend(resource="python/r", ttl_ms=6000, token=g.acquire.token), "OK")
    expect("ping", pb.Ping(), "OK")
    expect("stats", pb.Stats(), "OK")
    expect("cancel", pb.Cancel(request_id=12345), "OK")
    expect("server_info", pb.ServerInfo(), "OK")
    expect("list_sessions", pb.ListSessions(limit=10), "OK")
    expect("list_locks", pb.ListLocks(limit=10, prefix="python/"), "OK")
    expect("force_release", pb.ForceRelease(resource="python/free"), "NOT_HELD")
    expect("kill_session", pb.KillSession(session_id="00000000-0000-4000-8000-000000000000"), "NOT_FOUND")
    expect("release", pb.Release(resource="python/r", token=g.acquire.token), "OK")
    expect("goodbye", pb.Goodbye(), "OK")
    print("python: %d of 13 answered as they should" % (13 - failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
