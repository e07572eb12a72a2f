"""How the box reaches each notification service: one payload builder per channel kind, exactly
as the service documents it (the document is cited at each), the service's own error answers read,
and email over SMTP. Used by notify_onbox.py, which sits next to this file on the box.

Standard library only, Python 3.8 or newer; never imported by the server. A failure is a `Fail`
whose reason is short and names at most an environment variable: never a secret value or a URL."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import re
import smtplib
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from email.message import EmailMessage
from typing import IO, Any

TIMEOUT_S = 10.0  # the most any one network step may take
ANSWER_MAX = 64 * 1024
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_TAG = re.compile(r"^[A-Za-z0-9_+-]{1,40}$")
_NTFY_TOPIC = re.compile(r"^[-_A-Za-z0-9]{1,64}$")
_BOT_TOKEN = re.compile(r"^[0-9]{1,20}:[A-Za-z0-9_-]{10,200}$")
PRIORITY = {"crit": "5", "warn": "4", "info": "3"}  # ntfy: 5 urgent, 4 high, 3 default
NTFY_TAG = {"crit": "rotating_light", "warn": "warning", "info": "information_source"}
JSON_TYPE = {"Content-Type": "application/json; charset=utf-8"}


class Fail(Exception):
    """A channel failed; the reason is short and holds no secret and no URL."""


def deliver(ch: Mapping[str, Any], event: Mapping[str, Any], title: str, body: str, env: Mapping[str, str],
            timeout: float) -> None:
    """Send one rendered message through channel `ch`; raise `Fail` when it did not arrive."""
    kind = str(ch.get("kind") or "")
    if kind == "email":
        _email(ch, title, body, env, timeout)
        return
    build = BUILDERS.get(kind)
    if build is None:
        raise Fail(f"unknown channel kind (expected one of {', '.join(sorted(BUILDERS))}, email)")
    target, data, headers = build(ch, event, title, body, env)
    status, answer = post(target, data, headers, timeout)
    if not 200 <= status < 300:
        raise Fail(f"HTTP {status}")
    check = CHECKS.get(kind)
    if check is not None:
        check(answer)


def secret_value(ch: Mapping[str, Any], field: str, env: Mapping[str, str], required: bool = True) -> str | None:
    name = ch.get(field)
    if not name:
        if required:
            raise Fail(f"the channel names no {field}")
        return None
    if not _ENV_NAME.match(str(name)):
        raise Fail(f"{field} is not an environment variable name")
    value = env.get(str(name))
    if not value:
        raise Fail(f"missing env {name}")
    return value


def https_url(value: str | None, what: str) -> str:
    parts = urllib.parse.urlsplit(value or "")
    local = parts.scheme == "http" and parts.hostname in LOCAL_HOSTS
    if not (parts.scheme == "https" or local) or not parts.hostname or re.search(r"\s", value or ""):
        raise Fail(f"{what} is not an https URL")
    return value or ""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook that redirects is misconfigured; following it would re-send the message elsewhere."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: http.client.HTTPMessage, newurl: str) -> urllib.request.Request | None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect())


def post(target: str, data: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    request = urllib.request.Request(target, data=data, headers=headers, method="POST")
    try:
        with _OPENER.open(request, timeout=timeout) as answer:
            return int(answer.status), answer.read(ANSWER_MAX)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code), b""
    except urllib.error.URLError as exc:
        raise Fail(net_reason(exc.reason)) from None
    except (OSError, http.client.HTTPException) as exc:
        raise Fail(net_reason(exc)) from None


def net_reason(exc: object) -> str:
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, socket.gaierror):
        return "name not resolved (no DNS or no egress?)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "TLS certificate not trusted"
    if isinstance(exc, ssl.SSLError):
        return "TLS error"
    if isinstance(exc, http.client.HTTPException):
        return "bad HTTP answer"
    return f"network error ({type(exc).__name__})"


def _json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8")


def _webhook(ch: Mapping[str, Any], event: Mapping[str, Any], title: str, body: str,
             env: Mapping[str, str]) -> tuple[str, bytes, dict[str, str]]:
    payload = dict(event, message=title + "\n" + body)
    return https_url(secret_value(ch, "url_env", env), "url_env"), _json(payload), dict(JSON_TYPE)


def _ntfy(ch: Mapping[str, Any], event: Mapping[str, Any], title: str, body: str,
          env: Mapping[str, str]) -> tuple[str, bytes, dict[str, str]]:
    # https://docs.ntfy.sh/publish/ : POST <server>/<topic>, message as body, Title / Priority / Tags
    # headers, access tokens as "Authorization: Bearer"; non-ASCII header values RFC 2047-encoded
    # (https://docs.ntfy.sh/publish/#message-title).
    server = https_url(ch.get("server") or "https://ntfy.sh", "server")
    topic = str(ch.get("topic") or secret_value(ch, "topic_env", env))
    if not _NTFY_TOPIC.match(topic):
        raise Fail("topic is not an ntfy topic (letters, digits, - and _)")
    level = str(event.get("level") or "info")
    tags = [NTFY_TAG.get(level, "information_source")] + [str(t) for t in ch.get("tags") or () if _TAG.match(str(t))]
    headers = {"Title": _header(title), "Priority": PRIORITY.get(level, "3"), "Tags": ",".join(tags),
               "Content-Type": "text/plain; charset=utf-8"}
    token = secret_value(ch, "token_env", env, required=False)
    if token:
        headers["Authorization"] = "Bearer " + token
    return server.rstrip("/") + "/" + topic, body.encode("utf-8"), headers


def _header(text: str) -> str:
    if text.isascii():
        return text
    return "=?UTF-8?B?" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "?="


def _slack(ch: Mapping[str, Any], event: Mapping[str, Any], title: str, body: str,
           env: Mapping[str, str]) -> tuple[str, bytes, dict[str, str]]:
    # https://api.slack.com/messaging/webhooks : POST {"text": ...}; errors are HTTP statuses.
    # https://api.slack.com/reference/surfaces/formatting#escaping : &, <, > escaped, so box text
    # cannot become a link or an @channel mention.
    text = (title + "\n" + body).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return https_url(secret_value(ch, "url_env", env), "url_env"), _json({"text": text}), dict(JSON_TYPE)


def feishu_sign(secret: str, timestamp: str) -> str:
    """https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot (signature check):
    base64(HMAC-SHA256(key = timestamp + "\\n" + secret, message = empty))."""
    key = (timestamp + "\n" + secret).encode("utf-8")
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode("ascii")


def _feishu(ch: Mapping[str, Any], event: Mapping[str, Any], title: str, body: str,
            env: Mapping[str, str]) -> tuple[str, bytes, dict[str, str]]:
    # Same document: POST {"msg_type": "text", "content": {"text": ...}} plus "timestamp" (seconds)
    # and "sign" when the bot checks signatures. An <at ...> tag in text would mention people.
    text = (title + "\n" + body).replace("<", "\u2039")
    payload: dict[str, Any] = {"msg_type": "text", "content": {"text": text}}
    secret = secret_value(ch, "secret_env", env, required=False)
    if secret:
        payload["timestamp"] = str(int(time.time()))
        payload["sign"] = feishu_sign(secret, payload["timestamp"])
    return https_url(secret_value(ch, "url_env", env), "url_env"), _json(payload), dict(JSON_TYPE)


def dingtalk_sign(secret: str, timestamp_ms: str) -> str:
    """https://open.dingtalk.com/document/robots/customize-robot-security-settings (加签):
    urlencode(base64(HMAC-SHA256(key = secret, message = timestamp + "\\n" + secret)))."""
    digest = hmac.new(secret.encode("utf-8"), (timestamp_ms + "\n" + secret).encode("utf-8"), hashlib.sha256)
    return urllib.parse.quote_plus(base64.b64encode(digest.digest()).decode("ascii"))


def _dingtalk(ch: Mapping[str, Any], event: Mapping[str, Any], title: str, body: str,
              env: Mapping[str, str]) -> tuple[str, bytes, dict[str, str]]:
    # https://open.dingtalk.com/document/robots/custom-robot-access : POST {"msgtype": "text",
    # "text": {"content": ...}}; signing adds &timestamp=<ms>&sign=<...> to the webhook URL.
    target = https_url(secret_value(ch, "url_env", env), "url_env")
    secret = secret_value(ch, "secret_env", env, required=False)
    if secret:
        stamp = str(int(time.time() * 1000))
        sep = "&" if urllib.parse.urlsplit(target).query else "?"
        target += f"{sep}timestamp={stamp}&sign={dingtalk_sign(secret, stamp)}"
    return target, _json({"msgtype": "text", "text": {"content": title + "\n" + body}}), dict(JSON_TYPE)


def _wecom(ch: Mapping[str, Any], event: Mapping[str, Any], title: str, body: str,
           env: Mapping[str, str]) -> tuple[str, bytes, dict[str, str]]:
    # https://developer.work.weixin.qq.com/document/path/91770 : POST {"msgtype": "text",
    # "text": {"content": ...}} to the robot's webhook URL (its key is in the URL).
    payload = {"msgtype": "text", "text": {"content": title + "\n" + body}}
    return https_url(secret_value(ch, "url_env", env), "url_env"), _json(payload), dict(JSON_TYPE)


def _telegram(ch: Mapping[str, Any], event: Mapping[str, Any], title: str, body: str,
              env: Mapping[str, str]) -> tuple[str, bytes, dict[str, str]]:
    # https://core.telegram.org/bots/api#sendmessage : POST <api>/bot<token>/sendMessage with
    # {"chat_id", "text"}; no parse_mode, so the text is shown as plain text.
    token = str(secret_value(ch, "token_env", env))
    if not _BOT_TOKEN.match(token):
        raise Fail(f"env {ch.get('token_env')} does not hold a bot token (digits:letters)")
    api = https_url(ch.get("api_base") or "https://api.telegram.org", "api_base").rstrip("/")
    payload = {"chat_id": ch.get("chat_id"), "text": title + "\n" + body}
    return api + "/bot" + token + "/sendMessage", _json(payload), dict(JSON_TYPE)


def _answer(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        raise Fail("unexpected answer (not JSON)") from None
    if not isinstance(data, dict):
        raise Fail("unexpected answer (not a JSON object)")
    return data


def _code(value: Any) -> str:
    return str(value) if isinstance(value, int) else "?"


def _check_errcode(raw: bytes) -> None:
    # DingTalk and WeCom answer HTTP 200 with {"errcode": 0, "errmsg": "ok"}, or another errcode.
    code = _answer(raw).get("errcode", 0)
    if code != 0:
        raise Fail(f"errcode {_code(code)}")


def _check_feishu(raw: bytes) -> None:
    # Feishu/Lark answer {"code": 0, "msg": "success"} (older bots {"StatusCode": 0}).
    data = _answer(raw)
    code = data.get("code", data.get("StatusCode", 0))
    if code != 0:
        raise Fail(f"code {_code(code)}")


def _check_telegram(raw: bytes) -> None:
    # https://core.telegram.org/bots/api#making-requests : {"ok": true, ...} or
    # {"ok": false, "error_code": ..., "description": ...}.
    data = _answer(raw)
    if data.get("ok") is not True:
        raise Fail(f"error_code {_code(data.get('error_code'))}")


BUILDERS = {"webhook": _webhook, "ntfy": _ntfy, "slack": _slack, "feishu": _feishu, "lark": _feishu,
            "dingtalk": _dingtalk, "wecom": _wecom, "telegram": _telegram}
CHECKS = {"feishu": _check_feishu, "lark": _check_feishu, "dingtalk": _check_errcode, "wecom": _check_errcode,
          "telegram": _check_telegram}


def _email(ch: Mapping[str, Any], title: str, body: str, env: Mapping[str, str], timeout: float) -> None:
    host, port = str(ch.get("host") or ""), ch.get("port") or 587
    if not host or not isinstance(port, int):
        raise Fail("the channel needs an SMTP host and a whole-number port")
    starttls, user = ch.get("starttls", True) is not False, ch.get("user")
    password = secret_value(ch, "password_env", env, required=bool(user))
    if user and not starttls and host not in LOCAL_HOSTS:
        raise Fail("refusing to send the SMTP password without STARTTLS")
    to = [str(a) for a in ch.get("to") or ()]
    msg = EmailMessage()
    msg["Subject"], msg["From"], msg["To"] = title, str(ch.get("from_addr") or ""), ", ".join(to)
    msg.set_content(title + "\n\n" + body + "\n")
    stage = "connect"
    try:
        with smtplib.SMTP(host, port, timeout=timeout) as smtp:
            if starttls:
                stage = "STARTTLS"
                smtp.starttls(context=ssl.create_default_context())
            if user:
                stage = "AUTH"
                smtp.login(str(user), password or "")
            stage = "send"
            smtp.send_message(msg, from_addr=str(ch.get("from_addr") or ""), to_addrs=to)
    except smtplib.SMTPNotSupportedError:
        raise Fail(f"the SMTP server does not offer {stage}") from None
    except smtplib.SMTPRecipientsRefused:
        raise Fail("SMTP recipients refused") from None
    except smtplib.SMTPResponseException as exc:
        raise Fail(f"SMTP {stage} refused ({exc.smtp_code})") from None
    except smtplib.SMTPException:
        raise Fail(f"SMTP {stage} failed") from None
    except OSError as exc:
        raise Fail(net_reason(exc)) from None
