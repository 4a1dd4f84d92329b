"""When a schedule's ticks fall (issue 21, docs/triggers.md "Schedules"): pure arithmetic on
instants in epoch milliseconds, the unit of ``triggers.next_fire_at``.

- ``cron``: five fields (minute hour day-of-month month day-of-week) read by croniter as the
  wall clock of the schedule's IANA ``timezone`` shows them. Daylight saving time:

  - *spring forward*: a time the clocks skip (02:30 when 02:00 jumps to 03:00) fires once,
    at the jump (03:00 local): croniter's rule with zoneinfo. Several skipped times of one
    night (02:15 and 02:45) fire once between them, at 03:00.
  - *fall back*: a time the clocks show twice (01:30 when 02:00 goes back to 01:00) fires
    once, at its first occurrence, unless the hour field is ``*``: those ticks are a real
    hour apart and all fire (what Vixie cron does too).

- ``every``: so many seconds apart, anchored at the schedule's creation (``anchor``, in whole
  seconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, CroniterError, croniter

_SEARCH = 1000  # croniter answers skipped for DST before giving up (a handful is plenty)
_WINDOWS_MS = (3_600_000, 2 * 86_400_000)  # where the latest due tick is looked for first


@dataclass(frozen=True)
class CronRule:
    expression: str
    timezone: str


@dataclass(frozen=True)
class EveryRule:
    seconds: int
    anchor: int  # ms: the schedule's creation; ticks are anchor + k * seconds


Rule = CronRule | EveryRule


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` is no five-field cron that ever fires, or None."""
    if len(expression.split()) != 5:
        return (
            "should be five fields (minute hour day-of-month month day-of-week), e.g. '0 9 * * 1-5'"
        )
    try:
        croniter(expression, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterBadDateError:
        return "never fires: no date matches it (30 February, say)"
    except CroniterError as exc:
        return f"is not a cron expression croniter reads: {exc}"
    except ValueError as exc:
        return f"is not a cron expression: {exc}"
    return None


def next_after(rule: Rule, after: int) -> int:
    """The first tick strictly after ``after``."""
    if isinstance(rule, EveryRule):
        step = rule.seconds * 1000
        if after < rule.anchor:
            return rule.anchor
        return rule.anchor + ((after - rule.anchor) // step + 1) * step
    zone = ZoneInfo(rule.timezone)
    every_hour = rule.expression.split()[1] == "*"
    ticks = croniter(rule.expression, datetime.fromtimestamp(after / 1000, zone))
    for _ in range(_SEARCH):
        local: datetime = ticks.get_next(datetime)
        at = round(local.timestamp() * 1000)
        if at <= after:
            continue  # skipped times mapped onto the jump already fired
        if not every_hour and datetime.fromtimestamp(at / 1000, zone).fold == 1:
            continue  # the second showing of a wall-clock time fired at its first
        return at
    raise ValueError(f"the cron '{rule.expression}' gave no tick after {after}")


def upcoming(rule: Rule, after: int, count: int) -> list[int]:
    """The ``count`` ticks after ``after``."""
    found: list[int] = []
    at = after
    for _ in range(count):
        at = next_after(rule, at)
        found.append(at)
    return found


def latest_due(rule: Rule, first: int, now: int) -> int:
    """The last tick at or before ``now``, ``first`` being one (the earliest not handled).

    After a long stop a frequent cron has very many ticks behind it: they are not walked
    one by one from ``first``, only from an hour (then two days) before ``now``."""
    if isinstance(rule, EveryRule):
        step = rule.seconds * 1000
        return max(first, rule.anchor + (now - rule.anchor) // step * step)
    for window in (*_WINDOWS_MS, None):
        start = first if window is None else max(first, now - window)
        latest = first if start == first else None
        at = first if start == first else next_after(rule, start - 1)
        while at <= now:
            latest = at
            at = next_after(rule, at)
        if latest is not None:
            return latest
    return first  # unreachable: the last window starts at ``first``, which is due


def iso(at: int, timezone: str) -> str:
    """An instant as ISO 8601 with its offset in ``timezone``: '2027-01-04T09:00:00+09:00'."""
    return datetime.fromtimestamp(at / 1000, ZoneInfo(timezone)).isoformat(timespec="seconds")
