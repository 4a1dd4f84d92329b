"""Post a support ticket to the ticket-triage agent's webhook, signed, as a help desk would.

    export DHUB_WEBHOOK_URL=http://127.0.0.1:8000/hooks/trigger.…   # the trigger's "url"
    export DHUB_WEBHOOK_SECRET=whsec_…                              # shown once, when made
    .venv/bin/python examples/webhooks/send_ticket.py "Checkout page shows an error" acme

It prints the run the delivery started. The delivery id (here from the ticket's text) makes a
retry of the same ticket give the same run, never a second one. See docs/triggers.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import httpx

from dhub.client import sign_delivery


def main(argv: list[str]) -> int:
    url, secret = os.environ.get("DHUB_WEBHOOK_URL"), os.environ.get("DHUB_WEBHOOK_SECRET")
    if not url or not secret:
        print("Set DHUB_WEBHOOK_URL and DHUB_WEBHOOK_SECRET (docs/triggers.md).", file=sys.stderr)
        return 2
    ticket = argv[0] if argv else "Checkout page shows an error"
    customer = argv[1] if len(argv) > 1 else "anonymous"
    body = json.dumps({"ticket": ticket, "customer": customer}).encode()
    delivery = "ticket-" + hashlib.sha256(body).hexdigest()[:16]
    # Sign exactly the bytes that are sent: the signature covers them.
    headers = sign_delivery(secret, body, delivery=delivery)
    answer = httpx.post(url, content=body, headers=headers, timeout=30)
    if answer.is_error:
        print(f"refused ({answer.status_code}): {answer.text}", file=sys.stderr)
        return 1
    again = " (a retry: the first run)" if answer.status_code == 200 else ""
    print(f"run {answer.json()['run_id']}{again}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
