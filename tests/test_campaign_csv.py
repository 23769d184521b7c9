"""A campaign's CSV and options: numbers to URIs, time zones, variables, errors naming the place."""

from __future__ import annotations

import dataclasses

import pytest

from agent.campaign.runner import row_profile
from dialplan import ConfigError, parse_config
from dialplan.campaign import (
    CampaignError,
    CampaignOptions,
    fill,
    parse_window,
    placeholders,
    read_rows,
    sip_uri,
)

pytestmark = pytest.mark.unit


def write(tmp_path, text: str):
    path = tmp_path / "list.csv"
    path.write_text(text)
    return path


def test_rows_have_uris_zones_and_variables(tmp_path):
    path = write(tmp_path, "number,name,tz,book\n"
                 "sip:alice@127.0.0.1:5090,Alice,Europe/Berlin,Dune\n"
                 "+1 (555) 010-0200,Bob,,Emma\n"
                 "\n")
    rows = read_rows(path, CampaignOptions(domain="pbx.example.com", timezone="America/Chicago"))
    assert [(r.index, r.uri, r.tz) for r in rows] == [
        (2, "sip:alice@127.0.0.1:5090", "Europe/Berlin"),
        (3, "sip:+15550100200@pbx.example.com", "America/Chicago")]
    assert rows[0].variables == {"name": "Alice", "book": "Dune"}
    assert rows[1].number == "+1 (555) 010-0200"


def test_a_spreadsheets_bom_and_spaces_in_the_header_are_not_names(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffnumber , name\nsip:a@h,Ann\n".encode())
    (row,) = read_rows(path, CampaignOptions())
    assert row.uri == "sip:a@h" and row.variables == {"name": "Ann"}


@pytest.mark.parametrize(("text", "message"), [
    ("name\nAnn\n", "no 'number' column (columns: name)"),
    ("", "empty"),
    ("number\n", "no rows under the header"),
    ("number,name\nsip:a@h,Ann\n5550100,Bob\n", "row 3, column 'number': '5550100' is a phone "
     "number and [campaigns].domain (--domain) is empty"),
    ("number\nhello there\n", "row 2, column 'number': 'hello there' is neither a SIP URI"),
    ("number,tz\nsip:a@h,Mars/Olympus\n", "row 2, column 'tz': unknown time zone 'Mars/Olympus'"),
    ("number\nsip:a@h\nsip:b@h\nsip:a@h\n", "row 4: sip:a@h is also row 2"),
    ("number,name\nsip:a@h,Ann,extra\n", "row 2: more fields than the header's 2"),
])
def test_bad_files_fail_naming_row_and_column(tmp_path, text, message):
    with pytest.raises(CampaignError) as e:
        read_rows(write(tmp_path, text), CampaignOptions())
    assert message in str(e.value)


def test_a_missing_file_fails_with_its_name(tmp_path):
    with pytest.raises(CampaignError, match="nope.csv"):
        read_rows(tmp_path / "nope.csv", CampaignOptions())


def test_sip_uri_keeps_uris_and_sends_numbers_to_the_domain():
    assert sip_uri("sips:bob@example.com", "") == "sips:bob@example.com"
    assert sip_uri(" 0049 30 1234-56 ", "pbx") == "sip:004930123456@pbx"
    with pytest.raises(CampaignError, match="not a SIP URI"):
        sip_uri("sip:", "")


def test_fill_puts_the_rows_values_in_and_names_a_missing_column(tmp_path):
    (row,) = read_rows(write(tmp_path, "number,name,day\nsip:a@h,Ann,\n"), CampaignOptions())
    assert fill("Hello {name}, {not a var} {}", row) == "Hello Ann, {not a var} {}"
    assert placeholders("{name} {day} {name}") == ["name", "day"]
    with pytest.raises(CampaignError) as e:
        fill("Hi {first_name}", row, "greeting")
    assert str(e.value) == ("row 2: no column 'first_name' (the greeting uses {first_name}; "
                            "columns: name, day)")
    with pytest.raises(CampaignError, match="row 2: column 'day' is empty"):
        fill("See you {day}", row)


def test_row_profile_fills_greeting_and_voicemail_message(tmp_path):
    config = parse_config({"profiles": {"out": {
        "greeting": "Hello {name}, the library here.",
        "voicemail_message": "Hello {name}, your book {book} is ready."}}})
    (row,) = read_rows(write(tmp_path, "number,name,book\nsip:a@h,Ann,Dune\n"),
                       CampaignOptions())
    p = row_profile(config.profiles["out"], row)
    assert (p.greeting, p.voicemail_message) == ("Hello Ann, the library here.",
                                                 "Hello Ann, your book Dune is ready.")
    bare = dataclasses.replace(row, variables={"name": "Ann"})
    with pytest.raises(CampaignError, match="profiles.out.voicemail_message uses {book}"):
        row_profile(config.profiles["out"], bare)


def test_windows_parse_and_bad_ones_fail():
    assert [t.strftime("%H:%M") for t in parse_window("9:00-18:30")] == ["09:00", "18:30"]
    for bad in ("9-5", "25:00-26:00", "10:00-10:00"):
        with pytest.raises(CampaignError):
            parse_window(bad)


def test_campaigns_table_is_checked_like_the_rest():
    opts = parse_config({"campaigns": {"concurrency": 2, "calls_per_minute": 6,
                                       "window": "09:00-18:00", "retries": 2,
                                       "retry_delay_s": 600, "timezone": "Europe/Berlin"}})
    assert opts.campaigns == CampaignOptions(concurrency=2, calls_per_minute=6.0,
                                             window="09:00-18:00", retries=2,
                                             retry_delay_s=600.0, timezone="Europe/Berlin")
    assert parse_config({}).campaigns == CampaignOptions()
    for table, message in [
        ({"concurency": 2}, "unknown key 'campaigns.concurency'"),
        ({"concurrency": 0}, "campaigns.concurrency = 0: must be 1 or more"),
        ({"retries": "2"}, "campaigns.retries: expected int, got '2'"),
        ({"window": "9-5"}, "campaigns.window = '9-5': expected HH:MM-HH:MM"),
        ({"timezone": "Nowhere"}, "campaigns.timezone = 'Nowhere': unknown time zone"),
        ({"ring_timeout_s": 0}, "campaigns.ring_timeout_s = 0.0: must be more than 0"),
    ]:
        with pytest.raises(ConfigError) as e:
            parse_config({"campaigns": table})
        assert message in str(e.value), (table, str(e.value))


def test_the_command_fails_before_any_model_or_call_naming_row_and_column(tmp_path, capsys):
    from agent.cli.main import main

    config = tmp_path / "config.toml"
    config.write_text(f'[db]\nurl = "sqlite:///{tmp_path / "calls.db"}"\n'
                      '[profiles.out]\ngreeting = "Hello {first_name}."\n')
    csv = write(tmp_path, "number,name\nsip:a@h,Ann\n")
    assert main(["campaign", str(csv), "--config", str(config), "--profile", "out"]) == 2
    assert capsys.readouterr().err.strip() == (
        "callagent: row 2: no column 'first_name' (the profiles.out.greeting uses "
        "{first_name}; columns: name)")
    assert not (tmp_path / "calls.db").exists()  # nothing was started
    config.write_text(config.read_text().replace("{first_name}", "{name}")
                      + 'system_prompt = "You call {name}."\n')
    assert main(["campaign", str(csv), "--config", str(config), "--profile", "out"]) == 2
    assert "system_prompt uses {name}" in capsys.readouterr().err
