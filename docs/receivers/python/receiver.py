# A Hookline receiver in Python with the Standard Webhooks library (PyPI: standardwebhooks).
# Run: pip install standardwebhooks && WEBHOOK_SECRET=whsec_... PORT=8000 python receiver.py
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

# The same value as in the subscription's Secret (whsec_<base64>). While a subscription rotates,
# requests carry two signatures and either secret verifies.
webhook = Webhook(os.environ["WEBHOOK_SECRET"])

# Hookline sends each event at least once, with the same webhook-id on every retry and replay.
seen = {}
DAY = 24 * 60 * 60


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
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            # Checks the signature and that webhook-timestamp is within 5 minutes of now.
            event = webhook.verify(body, headers)
        except WebhookVerificationError as err:
            # 401 when unsigned, 403 when signed wrong or too long ago. Any 4xx but 408, 410 and 429
            # dead-letters at once (PermanentFailure): fix the secret, then replay.
            self.send_response(401 if "webhook-signature" not in headers else 403)
            self.end_headers()
            log({"rejected": str(err)})
            return
        msg_id = headers["webhook-id"]
        now = time.time()
        for k in [k for k, at in seen.items() if now - at > DAY]:
            del seen[k]
        if msg_id in seen:
            self.send_response(200)  # a duplicate: already processed, acknowledge it again
            self.end_headers()
            log({"duplicate": msg_id})
            return
        seen[msg_id] = now
        self.send_response(204)  # answer quickly; do slow work afterwards
        self.end_headers()
        log({"received": msg_id, "type": event["type"], "data": event["data"]})

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8000"))), Handler)
log({"listening": True})
server.serve_forever()
