# A receiver for subscriptions with signature.scheme HMACSHA256Hex, with the standard library only:
# x-webhook-signature is sha256=<hex HMAC-SHA256 of "<x-webhook-timestamp>.<raw body>">. The key
# is the Secret's value as UTF-8 bytes (a whsec_<base64> value: its decoded bytes).
# Run: WEBHOOK_SECRET=... PORT=8000 python hmac_hex.py
import base64
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE_S = 5 * 60


def key_of(secret):
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[len("whsec_"):].strip())
    return secret.encode("utf-8")


def verify_hookline_hex(body, headers, secrets, now=None):
    """The helper: True when the request was signed by Hookline with one of `secrets` less than
    TOLERANCE_S ago. List the old and the new secret while you rotate (Hookline signs
    HMACSHA256Hex with the current one only). `headers` has lower-case names."""
    timestamp = headers.get("x-webhook-timestamp", "")
    signature = headers.get("x-webhook-signature", "")
    if not timestamp.isascii() or not timestamp.isdigit():
        return False
    # The timestamp is signed: an old request (captured, then sent again) is refused.
    if abs((time.time() if now is None else now) - int(timestamp)) > TOLERANCE_S:
        return False
    for secret in secrets:
        mac = hmac.new(key_of(secret), timestamp.encode("ascii") + b"." + body, hashlib.sha256).hexdigest()
        # Constant time: how much of a guess matches must not show in the time the answer takes.
        if hmac.compare_digest(signature.encode("utf-8"), ("sha256=" + mac).encode("ascii")):
            return True
    return False


secrets = [os.environ["WEBHOOK_SECRET"]] + ([os.environ["WEBHOOK_PREVIOUS_SECRET"]] if os.environ.get("WEBHOOK_PREVIOUS_SECRET") else [])
seen = set()  # processed x-webhook-id values (a database in production)


_log_lock = threading.Lock()


def log(record):
    # One write per line, under a lock: the server answers on several threads, and print()
    # writes the text and its newline separately, so two threads' lines could interleave.
    line = json.dumps(record) + "\n"
    with _log_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        # Verify the raw bytes as received: re-serialized JSON would not match the signature.
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        # 401 when unsigned, 403 when signed wrong or too long ago. Either (any 4xx but 408, 410,
        # 429) makes Hookline dead-letter it at once (PermanentFailure): fix the secret, then replay.
        if "x-webhook-signature" not in headers or "x-webhook-timestamp" not in headers:
            self.send_response(401)
            self.end_headers()
            log({"rejected": "no signature or timestamp"})
            return
        if not verify_hookline_hex(body, headers, secrets):
            self.send_response(403)
            self.end_headers()
            log({"rejected": "bad signature or timestamp"})
            return
        msg_id = headers["x-webhook-id"]
        if msg_id in seen:
            self.send_response(200)  # a duplicate: already processed, acknowledge it again
            self.end_headers()
            log({"duplicate": msg_id})
            return
        seen.add(msg_id)
        event = json.loads(body)
        self.send_response(204)
        self.end_headers()
        log({"received": msg_id, "type": event["type"], "data": event["data"]})

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8000"))), Handler)
log({"listening": True})
server.serve_forever()
