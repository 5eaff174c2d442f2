"""A fault-injecting HTTP proxy on loopback between ckpt's S3 client and the test server
(test_s3_faults.py). It forwards each request unchanged (the Host header too, so SigV4 signatures
still match) and, as the test's `decide(method, target, n)` says for the n-th request:
  "forward"  pass it on;
  "503"      answer 503 SlowDown without passing it on (a throttling store);
  "drop"     close the connection without an answer (a dropped connection);
  "cut"      pass it on, then send the answer's headers and half its body and close the
             connection (a connection dropped mid-download);
  a callable run it (kill the client, stop the server...), then drop the connection.
When the upstream server does not answer, the client's connection is dropped (a server that is
down). `upstream` may be changed while it runs (a restarted server on new ports)."""
import http.client
import http.server
import socketserver
import threading

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "expect"}


class Proxy:
    def __init__(self, upstream, decide=None):
        self.upstream = upstream  # "127.0.0.1:PORT"
        self.decide = decide or (lambda method, target, n: "forward")
        self.lock = threading.Lock()
        self.seen = []  # (method, target, action) of every request, in arrival order
        self.ranges = []  # (target, Range header, body bytes sent) of every ranged GET answered
        self.current = threading.local()  # .headers: those of the request `decide` is asked of
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one(self):
                n_body = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n_body) if n_body else b""
                proxy.current.headers = self.headers
                with proxy.lock:
                    n = len(proxy.seen)
                    action = proxy.decide(self.command, self.path, n)
                    proxy.seen.append((self.command, self.path,
                                       action if isinstance(action, str) else "call"))
                if callable(action):
                    action()
                    action = "drop"
                if action == "drop":
                    self.close_connection = True
                    return
                if action == "503":
                    msg = b"<Error><Code>SlowDown</Code><Message>injected</Message></Error>"
                    self.send_response_only(503, "Slow Down")
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                try:
                    conn = http.client.HTTPConnection(proxy.upstream, timeout=60)
                    conn.putrequest(self.command, self.path, skip_host=True,
                                    skip_accept_encoding=True)
                    for k, v in self.headers.items():
                        if k.lower() not in HOP:
                            conn.putheader(k, v)
                    conn.endheaders(body)
                    resp = conn.getresponse()
                    data = resp.read()
                    conn.close()
                except OSError:  # the server is down: so is the connection
                    self.close_connection = True
                    return
                self.send_response_only(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                length = resp.getheader("Content-Length")
                self.send_header("Content-Length",
                                 length if self.command == "HEAD" and length else str(len(data)))
                self.end_headers()
                if action == "cut":
                    data = data[:len(data) // 2]
                    self.close_connection = True
                if self.command != "HEAD":
                    self.wfile.write(data)
                    self.wfile.flush()
                if self.headers.get("Range"):
                    with proxy.lock:
                        proxy.ranges.append((self.path, self.headers["Range"], len(data)))

            def handle_guarded(self):
                try:
                    self.handle_one()
                except OSError:  # the client went away (a killed job)
                    self.close_connection = True

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_guarded

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def count(self, method, fragment, action=None):
        with self.lock:
            return sum(1 for m, t, a in self.seen
                       if m == method and fragment in t and (action is None or a == action))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
