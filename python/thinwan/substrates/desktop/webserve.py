"""The web benchmark's server: serves the generated pages from the remote desktop's side
(the browser and this server share the server namespace, so page loads never cross the
emulated WAN; only the display of the result does, as in Lai and Nieh's setup).

Every response carries ``Cache-Control: max-age=86400`` so the second pass loads every
page and image from the browser's cache without asking (no revalidation round trips);
each request is logged as ``<epoch s> <status> <path>`` so the driver can check
that the first pass fetched everything and the second fetched nothing.

It exits when its parent (the shell that became the browser) does, so stopping the
browser stops it too. Run by Debian's /usr/bin/python3 (it imports nothing of thinwan), like app.py:
``python3 webserve.py DIR PORT LOG``; prints ``ready`` to LOG once listening.
"""

import http.server
import os
import sys
import threading
import time
from functools import partial


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection for a page and its images

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "max-age=86400")
        super().end_headers()

    def do_POST(self) -> None:  # noqa: N802 (the base class's naming)
        """The pages' load beacons: logged, answered with nothing."""
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_request(self, code="-", size="-") -> None:  # noqa: ANN001 (the base class's signature)
        self.server.log.write(f"{time.time():.6f} {code} {self.path}\n")
        self.server.log.flush()

    def log_message(self, format, *args) -> None:  # noqa: A002, ANN001
        pass


def _exit_with_parent() -> None:
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(0)


def main() -> None:
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    root, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), partial(Handler, directory=root))
    server.log = open(log, "a", buffering=1)  # noqa: SIM115 (open for the server's life)
    server.log.write(f"{time.time():.6f} ready\n")
    server.serve_forever()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
