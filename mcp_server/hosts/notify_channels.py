"""Notification channels, configured once as `[notify.<name>]` tables in the inventory TOML: which
service, its settings that are not secret, and the NAMES of the environment variables that hold its
secrets (a webhook URL carries its token, so it is a secret too). `box_channels` turns them into the
dicts notify_onbox.py reads on the box and the secret names a launch passes on stdin."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from mcp_server.errors import ConfigError

ENV_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
EnvName = Annotated[str, Field(pattern=ENV_PATTERN, description="NAME of the environment variable holding a secret")]
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NtfyTag = Annotated[str, Field(pattern=r"^[A-Za-z0-9_+-]{1,40}$")]
Address = Annotated[str, Field(pattern=r"^[^@\s<>,;\"()]{1,64}@[A-Za-z0-9.-]{1,253}$")]
# A key that would put a secret in the file, and the *_env key that names its variable instead.
_SECRET_KEYS = {"url": "url_env", "webhook": "url_env", "webhook_url": "url_env", "token": "token_env",
                "secret": "secret_env", "password": "password_env", "passwd": "password_env"}
_NEXT = "fix the [notify.<name>] table in the inventory (RGT_CONFIG points at it)"


def https_url(value: str, field: str) -> str:
    """`value` when it is an https URL (http only to localhost) without credentials in it."""
    parts = urlsplit(value)
    local = parts.scheme == "http" and parts.hostname in LOCAL_HOSTS
    if not (parts.scheme == "https" or local) or not parts.hostname or re.search(r"\s", value):
        raise ValueError(f"{field} must be an https URL (plain http only to localhost)")
    if parts.username or parts.password:
        raise ValueError(f"{field} must not carry a user or password: name the token's variable with token_env")
    return value


class _Channel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=_NAME.pattern, description="the [notify.<name>] table's name")
    rate_per_hour: int = Field(default=12, ge=1, le=120, description="messages at most in any hour")
    timeout_s: float = Field(default=10.0, gt=0, le=10, description="network timeout of each step")


class WebhookChannel(_Channel):
    """A generic JSON webhook: a POST of the whole event plus its human `message`."""

    kind: Literal["webhook"]
    url_env: EnvName


class SlackChannel(_Channel):
    """A Slack incoming webhook."""

    kind: Literal["slack"]
    url_env: EnvName


class FeishuChannel(_Channel):
    """A Feishu or Lark custom bot; `secret_env` when the bot checks signatures."""

    kind: Literal["feishu", "lark"]
    url_env: EnvName
    secret_env: EnvName | None = None


class DingTalkChannel(_Channel):
    """A DingTalk group robot; `secret_env` when the robot signs (加签)."""

    kind: Literal["dingtalk"]
    url_env: EnvName
    secret_env: EnvName | None = None


class WeComChannel(_Channel):
    """A WeCom (企业微信) group robot."""

    kind: Literal["wecom"]
    url_env: EnvName


class NtfyChannel(_Channel):
    """An ntfy topic; on the public server the topic name is the password, so it may come from
    `topic_env` instead."""

    kind: Literal["ntfy"]
    server: str = "https://ntfy.sh"
    topic: str | None = Field(default=None, pattern=r"^[-_A-Za-z0-9]{1,64}$")
    topic_env: EnvName | None = None
    token_env: EnvName | None = None
    tags: list[NtfyTag] = Field(default_factory=list, max_length=8)

    @field_validator("server")
    @classmethod
    def _server(cls, v: str) -> str:
        return https_url(v, "server")

    @model_validator(mode="after")
    def _one_topic(self) -> NtfyChannel:
        if (self.topic is None) == (self.topic_env is None):
            raise ValueError("give exactly one of topic and topic_env")
        return self


class TelegramChannel(_Channel):
    """A Telegram bot writing to one chat; `api_base` only to point at another Bot API server."""

    kind: Literal["telegram"]
    token_env: EnvName
    chat_id: str = Field(pattern=r"^(-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})$",
                         description="a numeric chat id or @channelusername")
    api_base: str = "https://api.telegram.org"

    @field_validator("chat_id", mode="before")
    @classmethod
    def _chat_id(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("api_base")
    @classmethod
    def _api_base(cls, v: str) -> str:
        return https_url(v, "api_base")


class EmailChannel(_Channel):
    """Email over SMTP; Subject is the event's title line."""

    kind: Literal["email"]
    host: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
    port: int = Field(default=587, ge=1, le=65535)
    starttls: bool = True
    user: str | None = Field(default=None, pattern=r"^\S{1,256}$")
    password_env: EnvName | None = None
    from_addr: Address
    to: list[Address] = Field(min_length=1, max_length=20)

    @model_validator(mode="after")
    def _login(self) -> EmailChannel:
        if (self.user is None) != (self.password_env is None):
            raise ValueError("give user and password_env together, or neither")
        if self.user and not self.starttls and self.host not in LOCAL_HOSTS:
            raise ValueError("starttls must be true when a password is sent (only a localhost relay may go without)")
        return self


Channel = Annotated[WebhookChannel | NtfyChannel | SlackChannel | FeishuChannel | DingTalkChannel | WeComChannel
                    | TelegramChannel | EmailChannel, Field(discriminator="kind")]
KINDS = ("webhook", "ntfy", "slack", "feishu", "lark", "dingtalk", "wecom", "telegram", "email")
_ADAPTER: TypeAdapter[Channel] = TypeAdapter(Channel)


def load_channels(data: Mapping[str, Any]) -> list[Channel]:
    """The channels of a parsed inventory TOML's `[notify.<name>]` tables (none when absent)."""
    table = data.get("notify")
    if table is None:
        return []
    if not isinstance(table, dict):
        raise ConfigError("notify must be a table of [notify.<name>] channel tables", next_step=_NEXT)
    channels = []
    for name, entry in table.items():
        if not _NAME.match(str(name)):
            raise ConfigError("a [notify.<name>] table name is not a safe name",
                              expected="letters, digits, '.', '_' and '-', at most 64", next_step=_NEXT)
        if not isinstance(entry, dict):
            raise ConfigError(f"notify.{name} must be a table (kind = ..., and its settings)", next_step=_NEXT)
        channels.append(_validate(str(name), entry))
    return channels


def _validate(name: str, entry: dict[str, Any]) -> Channel:
    try:
        return _ADAPTER.validate_python({**entry, "name": name})
    except ValidationError as exc:
        problem = _explain(exc)
    # Raised outside the except block: pydantic's own text quotes the input (maybe a secret), so it
    # must not ride along as the error's context either.
    raise ConfigError(f"notify.{name}: {problem}", next_step=_NEXT)


def _explain(exc: ValidationError) -> str:
    return "; ".join(_one_error(err) for err in exc.errors(include_input=False, include_url=False)[:3])


def _one_error(err: ErrorDetails) -> str:
    loc = [str(p) for p in err["loc"]]
    if loc and loc[0] in KINDS:  # a discriminated union puts the kind first
        loc = loc[1:]
    field = ".".join(loc)
    kind = err["type"]
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return f"kind must be one of {', '.join(KINDS)}"
    if kind == "extra_forbidden" and field in _SECRET_KEYS:
        return (f"field {field} would put a secret in the inventory: set an environment variable and "
                f"name it with {_SECRET_KEYS[field]}")
    if kind == "extra_forbidden":
        return f"unknown field {field}"
    if kind == "missing":
        return f"field {field} is missing"
    if kind == "string_pattern_mismatch" and field.endswith("_env"):
        return f"field {field} must be the NAME of an environment variable (letters, digits, _), not its value"
    message = err["msg"].removeprefix("Value error, ")
    return f"field {field}: {message}" if field else message


def box_channels(channels: Sequence[Channel]) -> tuple[list[dict[str, Any]], list[str]]:
    """The dicts notify_onbox.py reads, and the secret NAMES the launch must pass on stdin (its
    secret_env), never in argv or a file."""
    names = [c.name for c in channels]
    if len(set(names)) != len(names):
        raise ConfigError("two notification channels have the same name", next_step=_NEXT)
    dicts = [c.model_dump(mode="json", exclude_none=True) for c in channels]
    secrets = sorted({str(v) for d in dicts for k, v in d.items() if k.endswith("_env")})
    return dicts, secrets
