#!/usr/bin/env python3
"""A minimal OTLP/HTTP JSON receiver for the scale bench's trace runs.

Every POST to /v1/traces is appended to FILE as one line; it answers 200 with `{}`.
Start it, then run `operon serve` (or the scale bench) with
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 and OTEL_EXPORTER_OTLP_PROTOCOL=http/json.

Usage: otlp_receiver.py FILE [PORT]
"""
import http.server
import sys

out = open(sys.argv[1], "ab")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        out.write(body.replace(b"\n", b" ") + b"\n")
        out.flush()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


port = int(sys.argv[2]) if len(sys.argv) > 2 else 4318
http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
