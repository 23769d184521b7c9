"""A campaign's pacing with a made-up clock: the calling window, calls per minute, retries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from agent.campaign.pacing import Pacer, window_opens
from dialplan.campaign import CampaignOptions, parse_window

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)  # a Wednesday, 13:00 in Berlin, 06:00 in Chicago


@dataclass
class Row:
    tz: str = "UTC"
    attempts: int = 0
    next_attempt_at: datetime | None = None
    name: str = ""


def test_window_in_the_callees_zone():
    window = parse_window("09:00-18:00")
    assert window_opens(window, "Europe/Berlin", T0) == T0  # 13:00 there
    # 06:00 in Chicago: opens at 09:00 CST = 15:00 UTC, the same day.
    assert window_opens(window, "America/Chicago", T0) == datetime(2026, 12, 2, 15, 0, tzinfo=UTC)
    # 21:00 in Tokyo: tomorrow 09:00 JST = 00:00 UTC on the 3rd.
    assert window_opens(window, "Asia/Tokyo", T0) == datetime(2026, 12, 3, 0, 0, tzinfo=UTC)
    assert window_opens(None, "Asia/Tokyo", T0) == T0


def test_a_window_over_midnight_and_its_end_is_open():
    night = parse_window("22:00-06:00")
    assert window_opens(night, "UTC", T0.replace(hour=23)) == T0.replace(hour=23)
    assert window_opens(night, "UTC", T0.replace(hour=5, minute=59)) == T0.replace(hour=5,
                                                                                  minute=59)
    assert window_opens(night, "UTC", T0.replace(hour=6)) == T0.replace(hour=22)
    day = parse_window("09:00-18:00")
    assert window_opens(day, "UTC", T0.replace(hour=18)) == T0.replace(hour=9) + timedelta(1)


def test_across_a_dst_change_the_window_is_local_wall_time():
    # Berlin leaves summer time on 2026-10-25: 09:00 local is 07:00 UTC before, 08:00 after.
    before = datetime(2026, 10, 24, 20, 0, tzinfo=UTC)
    assert window_opens(parse_window("09:00-18:00"), "Europe/Berlin", before) == datetime(
        2026, 10, 25, 8, 0, tzinfo=UTC)


def test_pick_takes_rows_in_order_and_skips_those_outside_their_window():
    pacer = Pacer(CampaignOptions(window="09:00-18:00"))
    tokyo, berlin = Row("Asia/Tokyo", name="tokyo"), Row("Europe/Berlin", name="berlin")
    pick = pacer.pick([tokyo, berlin], T0)
    assert pick.row is berlin and pick.wake_at == T0
    pick = pacer.pick([tokyo], T0)
    assert pick.row is None and pick.wake_at == datetime(2026, 12, 3, 0, 0, tzinfo=UTC)
    assert pacer.pick([], T0).wake_at is None  # nothing pending: the campaign is done


def test_calls_per_minute_spaces_starts_evenly():
    pacer = Pacer(CampaignOptions(calls_per_minute=4))  # one start every 15 s
    rows = [Row(name=str(i)) for i in range(3)]
    now, starts = T0, []
    while len(starts) < 3 and now < T0 + timedelta(minutes=2):
        pick = pacer.pick(rows[len(starts):], now)
        if pick.row is not None:
            pacer.started(now)
            starts.append((now - T0).total_seconds())
            continue
        now = pick.wake_at
    assert starts == [0.0, 15.0, 30.0]
    # With no limit, every due row may start at once.
    free = Pacer(CampaignOptions())
    free.started(T0)
    assert free.pick(rows, T0).row is rows[0]


def test_rate_limit_and_retry_time_together_wake_at_the_later():
    pacer = Pacer(CampaignOptions(calls_per_minute=1))
    pacer.started(T0)
    later = Row(next_attempt_at=T0 + timedelta(seconds=90))
    assert pacer.pick([later], T0 + timedelta(seconds=10)).wake_at == T0 + timedelta(seconds=90)
    soon = Row(next_attempt_at=T0 + timedelta(seconds=5))
    assert pacer.pick([soon], T0 + timedelta(seconds=10)).wake_at == T0 + timedelta(seconds=60)


def test_retry_schedule_only_for_no_answer_and_busy_and_only_as_often_as_set():
    pacer = Pacer(CampaignOptions(retries=2, retry_delay_s=600))
    assert pacer.retry_at("busy", 1, T0) == T0 + timedelta(minutes=10)
    assert pacer.retry_at("no-answer", 2, T0) == T0 + timedelta(minutes=10)
    assert pacer.retry_at("no-answer", 3, T0) is None  # three calls made: done
    for outcome in ("answered", "voicemail", "failed", "refused"):
        assert pacer.retry_at(outcome, 1, T0) is None
    assert Pacer(CampaignOptions()).retry_at("busy", 1, T0) is None


def test_a_retry_waits_for_its_time_and_then_for_the_window():
    pacer = Pacer(CampaignOptions(window="09:00-18:00", retries=1, retry_delay_s=600))
    row = Row("UTC", attempts=1, next_attempt_at=T0.replace(hour=17, minute=55) +
              timedelta(minutes=10))  # due 18:05: the window has closed
    assert pacer.due_at(row, T0.replace(hour=17, minute=56)) == T0.replace(hour=9) + timedelta(1)
