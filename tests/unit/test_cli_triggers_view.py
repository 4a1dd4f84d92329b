"""How ``dhub triggers`` shows a trigger to people: a webhook by its URL, any other type by
the rule its config holds and its next fire when the server sends one (schedules arrive
after this view: it must need no change for them), a stopped one with its reason."""

from __future__ import annotations

from dhub.cli.triggers import status_of, where


def test_a_webhook_is_its_url_and_a_stopped_one_says_why() -> None:
    hook = {"type": "webhook", "config": {"type": "webhook"}, "status": "stopped",
            "stopped_reason": "disabled", "url": "http://h/hooks/trigger.1"}  # fmt: skip
    assert where(hook) == "http://h/hooks/trigger.1"
    assert status_of(hook) == "stopped: disabled"
    assert status_of({**hook, "status": "active", "stopped_reason": None}) == "active"


def test_a_schedule_is_its_rule_and_next_fire() -> None:
    tick = {"type": "schedule", "status": "active", "stopped_reason": None,
            "config": {"type": "schedule", "cron": "0 9 * * 1-5", "timezone": "Asia/Seoul",
                       "inputs": {"report": "daily"}, "missed": "skip"},
            "next_fires": ["2026-12-04T09:00:00+09:00", "2026-12-07T09:00:00+09:00"]}  # fmt: skip
    assert where(tick) == "cron=0 9 * * 1-5 timezone=Asia/Seoul; next 2026-12-04T09:00:00+09:00"
    every = {**tick, "config": {"type": "schedule", "every": 3600, "timezone": "UTC"}}
    assert where({k: v for k, v in every.items() if k != "next_fires"}) == "every=3600 timezone=UTC"
