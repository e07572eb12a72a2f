"""Notification channels as the inventory declares them: validated models, errors that name the
field and never quote a secret, and the dicts the box's sender reads."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_server.errors import ConfigError
from mcp_server.hosts.notify_channels import box_channels, load_channels
from mcp_server.run.patrol import notify_onbox
from tests.support.receivers import HttpReceiver

INVENTORY = """
[hosts.gpu1]
destination = "local"

[notify.team]
kind = "slack"
url_env = "SLACK_URL"

[notify.phone]
kind = "ntfy"
server = "{url}"
topic = "rgt-alerts"
token_env = "NTFY_TOKEN"
tags = ["gpu"]

[notify.cn]
kind = "feishu"
url_env = "FEISHU_URL"
secret_env = "FEISHU_SECRET"

[notify.dd]
kind = "dingtalk"
url_env = "DD_URL"

[notify.wx]
kind = "wecom"
url_env = "WECOM_URL"
rate_per_hour = 6

[notify.tg]
kind = "telegram"
token_env = "TG_TOKEN"
chat_id = -100123
api_base = "{url}"

[notify.hook]
kind = "webhook"
url_env = "HOOK_URL"

[notify.mail]
kind = "email"
host = "smtp.lab.test"
user = "patrol"
password_env = "SMTP_PASSWORD"
from_addr = "box@lab.test"
to = ["me@lab.test"]
"""


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    r = HttpReceiver().start()
    yield r
    r.stop()


def test_every_kind_loads_from_its_inventory_table_and_names_its_secrets() -> None:
    channels = load_channels(tomllib.loads(INVENTORY.format(url="https://ntfy.lab.test")))
    dicts, secrets = box_channels(channels)
    assert [(d["name"], d["kind"]) for d in dicts] == [
        ("team", "slack"), ("phone", "ntfy"), ("cn", "feishu"), ("dd", "dingtalk"), ("wx", "wecom"),
        ("tg", "telegram"), ("hook", "webhook"), ("mail", "email")]
    assert secrets == ["DD_URL", "FEISHU_SECRET", "FEISHU_URL", "HOOK_URL", "NTFY_TOKEN", "SLACK_URL",
                       "SMTP_PASSWORD", "TG_TOKEN", "WECOM_URL"]
    assert dicts[5]["chat_id"] == "-100123" and dicts[4]["rate_per_hour"] == 6
    assert dicts[7] | {"port": 587, "starttls": True} == dicts[7]


def test_an_inventory_without_notify_tables_has_no_channels() -> None:
    assert load_channels(tomllib.loads('[hosts.a]\ndestination = "local"\n')) == []


def test_the_box_sender_reads_what_box_channels_gives(receiver: HttpReceiver, tmp_path: Path) -> None:
    receiver.answer("/bot1:abcdefghijklmnop/sendMessage", body={"ok": True})
    text = INVENTORY.format(url=receiver.url)
    dicts, _ = box_channels([c for c in load_channels(tomllib.loads(text)) if c.name in ("team", "phone", "tg")])
    env = {"SLACK_URL": f"{receiver.url}/slack/T1", "NTFY_TOKEN": "tk_abc", "TG_TOKEN": "1:abcdefghijklmnop"}
    event = {"key": "k", "kind": "test", "level": "info", "title": "test message", "host": "gpu1"}
    outcomes = notify_onbox.send(event, dicts, str(tmp_path), env)
    assert [o["status"] for o in outcomes] == ["sent", "sent", "sent"]
    assert sorted(r.path for r in receiver.requests) == ["/bot1:abcdefghijklmnop/sendMessage", "/rgt-alerts",
                                                         "/slack/T1"]


SECRET = "xoxb-SECRET-4f9a2c"


@pytest.mark.parametrize(("entry", "names"), [
    ({"kind": "slack", "url": f"https://hooks.slack.com/services/{SECRET}"}, ["field url", "url_env"]),
    ({"kind": "telegram", "token": SECRET, "chat_id": "1"}, ["field token", "token_env"]),
    ({"kind": "email", "host": "smtp.x", "user": "u", "password": SECRET, "from_addr": "a@b.c", "to": ["d@e.f"]},
     ["field password", "password_env"]),
    ({"kind": "dingtalk", "url_env": "DD", "secret": SECRET}, ["field secret", "secret_env"]),
    ({"kind": "slack", "url_env": f"https://hooks.slack.com/services/{SECRET}"}, ["field url_env", "NAME"]),
    ({"kind": "telegram", "token_env": "T", "chat_id": "1", "api_base": f"https://bot:{SECRET}@api.test"},
     ["field api_base", "token_env"]),
])
def test_a_secret_written_into_the_inventory_is_refused_without_quoting_it(entry: dict[str, Any],
                                                                           names: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        load_channels({"notify": {"team": entry}})
    text = str(caught.value)
    assert SECRET not in text and caught.value.__cause__ is None and caught.value.__context__ is None
    assert text.startswith("notify.team: ") and all(n in text for n in names), text


@pytest.mark.parametrize(("entry", "names"), [
    ({"kind": "pager"}, ["kind must be one of", "telegram"]),
    ({"kind": "slack"}, ["field url_env is missing"]),
    ({"kind": "ntfy", "topic": "t", "server": "http://ntfy.lab.test"}, ["field server", "https"]),
    ({"kind": "ntfy"}, ["topic and topic_env"]),
    ({"kind": "ntfy", "topic": "a/b"}, ["field topic"]),
    ({"kind": "telegram", "token_env": "T", "chat_id": "me; rm"}, ["field chat_id"]),
    ({"kind": "email", "host": "smtp.x", "from_addr": "a@b.c", "to": []}, ["field to"]),
    ({"kind": "email", "host": "smtp.x", "from_addr": "a@b.c", "to": ["not an address"]}, ["field to.0"]),
    ({"kind": "email", "host": "smtp.x", "user": "u", "from_addr": "a@b.c", "to": ["d@e.f"]},
     ["user and password_env"]),
    ({"kind": "email", "host": "smtp.x", "user": "u", "password_env": "P", "starttls": False, "from_addr": "a@b.c",
      "to": ["d@e.f"]}, ["starttls must be true"]),
    ({"kind": "slack", "url_env": "U", "rate_per_hour": 0}, ["field rate_per_hour"]),
    ({"kind": "slack", "url_env": "U", "timeout_s": 60}, ["field timeout_s"]),
    ({"kind": "slack", "url_env": "U", "colour": "red"}, ["unknown field colour"]),
])
def test_a_wrong_channel_is_refused_naming_the_field(entry: dict[str, Any], names: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        load_channels({"notify": {"team": entry}})
    assert all(n in str(caught.value) for n in names), str(caught.value)


def test_a_localhost_relay_may_take_a_password_without_starttls() -> None:
    (mail,) = load_channels({"notify": {"m": {"kind": "email", "host": "127.0.0.1", "port": 2525, "user": "u",
                                              "password_env": "P", "starttls": False, "from_addr": "a@b.c",
                                              "to": ["d@e.f"]}}})
    assert box_channels([mail])[1] == ["P"]


@pytest.mark.parametrize("table", [{"notify": "slack"}, {"notify": {"team": "slack"}},
                                   {"notify": {"bad name!": {"kind": "slack", "url_env": "U"}}}])
def test_a_notify_table_of_the_wrong_shape_is_refused(table: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        load_channels(table)
    assert "notify" in str(caught.value) and "bad name!" not in str(caught.value)


def test_two_channels_with_one_name_are_refused() -> None:
    (a,) = load_channels({"notify": {"team": {"kind": "slack", "url_env": "A"}}})
    with pytest.raises(ConfigError, match="same name"):
        box_channels([a, a])
