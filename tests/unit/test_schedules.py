"""A schedule's tick arithmetic (domain/schedules.py): cron read in an IANA time zone, daylight
saving time both ways, ``every`` anchored at the creation, and the latest due tick after a
stop; properties checked by hypothesis over crons, zones and instants."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from dhub.domain.schedules import (
    CronRule,
    EveryRule,
    cron_problem,
    iso,
    latest_due,
    next_after,
    upcoming,
)

HOUR = 3_600_000


def ms(text: str, zone: str = "UTC") -> int:
    """'2027-03-13 12:00' in ``zone`` as epoch milliseconds."""
    local = datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone))
    return round(local.timestamp() * 1000)


def shown(ticks: list[int], zone: str) -> list[str]:
    return [iso(t, zone) for t in ticks]


def test_weekday_mornings_in_seoul() -> None:
    rule = CronRule("0 9 * * 1-5", "Asia/Seoul")
    friday_noon = ms("2027-01-08 12:00", "Asia/Seoul")
    assert shown(upcoming(rule, friday_noon, 3), "Asia/Seoul") == [
        "2027-01-11T09:00:00+09:00",  # Monday: the weekend has none
        "2027-01-12T09:00:00+09:00",
        "2027-01-13T09:00:00+09:00",
    ]
    assert next_after(rule, friday_noon) == ms("2027-01-11 00:00")  # 09:00 KST is 00:00 UTC


def test_a_time_the_clocks_skip_fires_once_at_the_jump() -> None:
    """New York, 14 March 2027: 02:00 jumps to 03:00; 02:30 fires once, at 03:00 EDT."""
    zone = "America/New_York"
    daily = upcoming(CronRule("30 2 * * *", zone), ms("2027-03-12 12:00", zone), 3)
    assert shown(daily, zone) == [
        "2027-03-13T02:30:00-05:00",
        "2027-03-14T03:00:00-04:00",
        "2027-03-15T02:30:00-04:00",
    ]
    twice_that_night = upcoming(CronRule("15,45 2 * * *", zone), ms("2027-03-14 00:00", zone), 2)
    assert shown(twice_that_night, zone) == [
        "2027-03-14T03:00:00-04:00",  # both skipped times, once
        "2027-03-15T02:15:00-04:00",
    ]


def test_a_time_the_clocks_show_twice_fires_once() -> None:
    """New York, 7 November 2027: 02:00 goes back to 01:00; 01:30 fires at its first showing."""
    zone = "America/New_York"
    daily = upcoming(CronRule("30 1 * * *", zone), ms("2027-11-06 12:00", zone), 2)
    assert shown(daily, zone) == ["2027-11-07T01:30:00-04:00", "2027-11-08T01:30:00-05:00"]
    berlin = "Europe/Berlin"  # 31 October 2027: 03:00 goes back to 02:00
    assert shown(upcoming(CronRule("30 2 * * *", berlin), ms("2027-10-30 12:00", berlin), 2),
                 berlin) == ["2027-10-31T02:30:00+02:00", "2027-11-01T02:30:00+01:00"]  # fmt: skip


def test_every_hour_keeps_firing_every_real_hour_through_fall_back() -> None:
    zone = "America/New_York"
    ticks = upcoming(CronRule("0,30 * * * *", zone), ms("2027-11-07 00:45", zone), 5)
    assert shown(ticks, zone) == [
        "2027-11-07T01:00:00-04:00",
        "2027-11-07T01:30:00-04:00",
        "2027-11-07T01:00:00-05:00",
        "2027-11-07T01:30:00-05:00",
        "2027-11-07T02:00:00-05:00",
    ]
    assert all(b - a == HOUR // 2 for a, b in itertools.pairwise(ticks))


def test_every_counts_from_the_anchor() -> None:
    rule = EveryRule(90, anchor=1_000_000)
    assert next_after(rule, 0) == 1_000_000
    assert next_after(rule, 1_000_000) == 1_090_000
    assert next_after(rule, 1_089_999) == 1_090_000
    assert latest_due(rule, 1_000_000, 1_300_000) == 1_270_000


def test_the_latest_due_tick_after_a_long_stop() -> None:
    rule = CronRule("* * * * *", "UTC")
    first = ms("2026-01-01 00:00")
    year_later = ms("2027-01-01 10:00") + 30_000
    assert latest_due(rule, first, year_later) == ms("2027-01-01 10:00")
    yearly = CronRule("0 0 1 1 *", "Asia/Seoul")
    first = ms("2026-01-01 00:00", "Asia/Seoul")
    assert latest_due(yearly, first, ms("2028-06-01 00:00")) == ms("2028-01-01 00:00", "Asia/Seoul")


def test_cron_problems_name_what_is_wrong() -> None:
    assert cron_problem("0 9 * * 1-5") is None
    assert cron_problem("*/15 8-18 * jan-jun mon-fri") is None
    assert "five fields" in str(cron_problem("* * *"))
    assert "five fields" in str(cron_problem("0 0 9 * * 1-5"))  # seconds: not ours
    assert "five fields" in str(cron_problem("@daily"))
    assert "croniter" in str(cron_problem("61 * * * *"))
    assert "never fires" in str(cron_problem("0 0 30 2 *"))  # 30 February never comes


ZONES = st.sampled_from(
    ["UTC", "Asia/Seoul", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe",
     "America/Santiago", "Asia/Kolkata"]
)  # fmt: skip
FIELD_MINUTE = st.sampled_from(["0", "30", "*/15", "5,35", "59", "*"])
FIELD_HOUR = st.sampled_from(["*", "0", "1", "2", "3", "1-3", "*/6", "9"])
FIELD_DAY = st.sampled_from(["*", "1", "15", "L"])
FIELD_WEEKDAY = st.sampled_from(["*", "1-5", "0", "6"])
INSTANTS = st.integers(min_value=ms("2024-01-01 00:00"), max_value=ms("2032-01-01 00:00"))


@st.composite
def cron_rules(draw: st.DrawFn) -> CronRule:
    fields = [draw(FIELD_MINUTE), draw(FIELD_HOUR), draw(FIELD_DAY), "*", draw(FIELD_WEEKDAY)]
    return CronRule(" ".join(fields), draw(ZONES))


@settings(max_examples=150, deadline=None)
@given(cron_rules(), INSTANTS)
def test_cron_ticks_come_in_order_and_none_is_passed_over(rule: CronRule, start: int) -> None:
    ticks = upcoming(rule, start, 6)
    assert start < ticks[0] and all(a < b for a, b in itertools.pairwise(ticks))
    for a, b in itertools.pairwise([start, *ticks]):
        for inside in (a + 1, (a + b) // 2, b - 1):  # nothing fires between two ticks
            if a <= inside < b:
                assert next_after(rule, inside) == b
    zone = ZoneInfo(rule.timezone)
    walls = [datetime.fromtimestamp(t / 1000, zone).replace(tzinfo=None) for t in ticks]
    if rule.expression.split()[1] != "*":  # a wall-clock time fires once
        assert len(set(walls)) == len(walls)
    assert all(t % 60_000 == 0 for t in ticks)


@settings(max_examples=100, deadline=None)
@given(cron_rules(), INSTANTS, st.integers(min_value=0, max_value=40 * 86_400_000))
def test_the_latest_due_tick_is_the_last_at_or_before_now(
    rule: CronRule, start: int, later: int
) -> None:
    first = next_after(rule, start)
    now = first + later
    latest = latest_due(rule, first, now)
    assert first <= latest <= now < next_after(rule, latest)
    assert next_after(rule, latest - 1) == latest  # a tick


@given(
    st.integers(min_value=60, max_value=366 * 86400),
    st.integers(min_value=0, max_value=2**41),
    st.integers(min_value=0, max_value=2**41),
)
def test_every_ticks_are_whole_steps_from_the_anchor(seconds: int, anchor: int, at: int) -> None:
    rule = EveryRule(seconds, anchor // 1000 * 1000)
    tick = next_after(rule, at)
    assert tick > at and (tick - rule.anchor) % (seconds * 1000) == 0
    assert tick == rule.anchor or tick - seconds * 1000 <= at
    if at >= rule.anchor:
        latest = latest_due(rule, rule.anchor, at)
        assert latest <= at < next_after(rule, latest)


def test_instants_are_shown_with_their_offset() -> None:
    assert iso(ms("2027-01-11 00:00"), "Asia/Seoul") == "2027-01-11T09:00:00+09:00"
    assert iso(0, "UTC") == datetime(1970, 1, 1, tzinfo=UTC).isoformat()
