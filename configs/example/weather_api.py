"""A tiny local weather API for configs/example.yaml (standard library only).

Run it on its own with `python configs/example/weather_api.py [PORT]`; `demo.py` starts it in a
thread. Routes: `GET /weather?city=NAME`, `GET /openapi.yaml`.
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FORECASTS = {"paris": (14.0, "cloudy"), "lisbon": (21.5, "sunny"), "oslo": (3.0, "snow")}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path == "/weather":
            city = urllib.parse.parse_qs(query).get("city", [""])[0]
            found = FORECASTS.get(city.lower())
            if found is None:
                self._send(404, {"error": f"no forecast for {city!r}", "known": sorted(FORECASTS)})
                return
            self._send(200, {"city": city, "celsius": found[0], "sky": found[1]})
        elif path == "/openapi.yaml":
            body = (Path(__file__).parent / "weather_openapi.yaml").read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/yaml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._send(404, {"error": "not found"})

    def _send(self, status: int, value: object) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def start(port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Serve on 127.0.0.1 in a daemon thread; returns the server and its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


if __name__ == "__main__":
    srv, url = start(int(sys.argv[1]) if len(sys.argv) > 1 else 8765)
    print(f"weather API on {url}")
    threading.Event().wait()
