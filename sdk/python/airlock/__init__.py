"""airlock: gate an agent's tool calls through airlock's REST API.

Standard library only (Python 3.9+). An agent authenticates with an agent
token (the console's Tokens page, or POST /api/v1/tokens with
{"kind": "agent", "agent_id": ...}); every call it submits is that agent's,
acting for the person the token is bound to.

    import airlock
    client = airlock.Client("http://127.0.0.1:8080", token)   # or AIRLOCK_URL, AIRLOCK_TOKEN
    out = client.do("demo__echo", {"text": "hi"})              # airlock runs it; raises if it did not run
    print(out.result)

    @client.gated(tool="local__delete_branch")                 # your code runs it, once allowed or approved
    def delete_branch(name):
        ...

Every refusal is a typed exception (Denied, Rejected, ChangesRequested,
Expired, Canceled, Invalid, Failed) whose message is a sentence that says
what happened and what to do.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Callable, Dict, Optional, Union

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES", "Client", "Outcome", "AirlockError", "APIError", "Denied", "Rejected", "ChangesRequested",
    "Expired", "Canceled", "Invalid", "Failed", "TimedOut", "OverBudget",
]


# The largest request airlock accepts by default: its limits.max_request_bytes
# (services/shared/config's default, which the Go SDK reads; the tests check
# the two are equal). A larger call is refused before it is sent.
DEFAULT_MAX_REQUEST_BYTES = 262144


class AirlockError(Exception):
    """A call did not give what was asked; ``outcome`` is its Outcome (if any)."""

    def __init__(self, message: str, outcome: Optional["Outcome"] = None):
        super().__init__(message)
        self.outcome = outcome


class APIError(AirlockError):
    """The REST API refused the request: ``status`` (HTTP; 0 when refused before it was sent) and ``code`` (airlock's error code)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code = status, code


class OverBudget(APIError):
    """airlock did not decide or record the call's ``revision``: the agent sent more than its budget of calls
    (``calls_per_minute``, limits.agent_calls_per_minute) or request bytes a minute. Submit it again,
    same call id and revision, after about ``retry_after`` seconds, or send fewer calls a minute."""

    def __init__(self, status: int, code: str, message: str, notice: Dict[str, Any]):
        super().__init__(status, code, message)
        self.call_id = str(notice.get("call_id", ""))
        # A policy service from before notices named a revision names none: 1.
        self.revision = max(1, int(notice.get("revision") or 1))
        self.calls_per_minute = int(notice.get("calls_per_minute") or 0)
        self.request_bytes_per_minute = int(notice.get("request_bytes_per_minute") or 0)
        self.retry_after = max(1, int(notice.get("retry_after_seconds") or 1))


class Denied(AirlockError):
    """airlock's policy denied the call; it will be denied again if made the same way."""


class Rejected(AirlockError):
    """A reviewer rejected the call."""


class ChangesRequested(AirlockError):
    """A reviewer asked for changes: ``feedback`` says which; submit a new revision."""

    def __init__(self, message: str, outcome: "Outcome"):
        super().__init__(message, outcome)
        self.feedback = outcome.feedback


class Expired(AirlockError):
    """Nobody decided the call before its deadline; it did not run."""


class Canceled(AirlockError):
    """The call was withdrawn before it was decided; it did not run."""


class Invalid(AirlockError):
    """airlock refused the call as malformed; fix it and submit again."""


class Failed(AirlockError):
    """The tool ran and failed; ``outcome.failure_outcome`` says whether it may have taken effect."""


class TimedOut(AirlockError):
    """The call has no outcome yet; await it again (its call_id is in the message)."""


@dataclasses.dataclass
class Outcome:
    """How a call ended, as GET /api/v1/calls/{id} answers it."""

    call_id: str
    status: str
    revision: int = 0
    result: Any = None
    truncated: bool = False
    reason: str = ""
    feedback: str = ""
    failure_outcome: str = ""
    decided_by: str = ""
    agent_ran: bool = False
    raw: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, body: Dict[str, Any]) -> "Outcome":
        return cls(
            call_id=body.get("call_id", ""), status=body.get("status", ""), revision=body.get("revision", 0),
            result=body.get("result"), truncated=body.get("truncated", False), reason=body.get("reason", ""),
            feedback=body.get("feedback", ""), failure_outcome=body.get("failure_outcome", ""),
            decided_by=body.get("decided_by", ""), agent_ran=body.get("agent_ran", False),
            raw=body,
        )

    @property
    def may_run(self) -> bool:
        """A gate-only call may run: the policy allowed it or a person approved it."""
        return self.status in ("allowed", "approved")

    def raise_for_status(self, tool: str = "the tool") -> "Outcome":
        """Return self if the call completed (or, gate-only, may run); else raise its typed error."""
        if self.status in ("completed", "allowed", "approved"):
            return self
        who = self.decided_by or "A reviewer"
        why = (self.reason or "no reason given").rstrip(".")
        if self.status == "denied":
            raise Denied(f"airlock's policy denied this call to {tool}: {why}. It will be denied again if made the same way; do something else or ask the user.", self)
        if self.status == "rejected":
            raise Rejected(f"{who} rejected this call to {tool}: {why}. Do not make it again the same way; ask the user how to proceed.", self)
        if self.status == "changes_requested":
            raise ChangesRequested(f"{who} asked for changes before this call to {tool} can run: {(self.feedback or why).rstrip('.')}. Submit it again with the arguments changed accordingly.", self)
        if self.status == "expired":
            raise Expired(f"Nobody approved this call to {tool} before its deadline, so it did not run. Ask the user before making it again.", self)
        if self.status == "canceled":
            raise Canceled(f"This call to {tool} was canceled and did not run: {why}.", self)
        if self.status == "invalid":
            raise Invalid(f"airlock refused this call to {tool} as malformed: {why}. Fix the arguments and submit it again.", self)
        if self.status == "failed":
            extra = " It may or may not have taken effect: check before making it again." if self.failure_outcome == "indeterminate" else ""
            raise Failed(f"{tool} failed: {why}.{extra}", self)
        if self.status == "pending":
            raise TimedOut(f"Call {self.call_id} to {tool} has no outcome yet: await it again with client.wait({self.call_id!r}).", self)
        raise AirlockError(f"This call to {tool} ended {self.status}: {why}.", self)


class Client:
    """An agent's client of airlock's REST API.

    ``url`` and ``token`` default to the environment variables AIRLOCK_URL
    and AIRLOCK_TOKEN. ``ca_file`` (default AIRLOCK_CA_FILE) is a PEM file of
    the CA that signed an https URL's certificate, for a private CA: the
    server is then verified against it alone; without it, against the
    system's CAs. Verification is never skipped. ``max_request_bytes`` is
    airlock's limits.max_request_bytes when it is not the default. Every
    method raises APIError when the API refuses a request (a bad token, a
    malformed call) with the API's own sentence.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, request_timeout: float = 60.0,
                 ca_file: Optional[str] = None, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES):
        url = url or os.environ.get("AIRLOCK_URL", "")
        token = token or os.environ.get("AIRLOCK_TOKEN", "")
        ca_file = ca_file or os.environ.get("AIRLOCK_CA_FILE", "")
        if not url:
            raise ValueError("airlock needs the console's URL: pass url= or set AIRLOCK_URL (airlock dev prints it, e.g. http://127.0.0.1:8080).")
        if not token:
            raise ValueError("airlock needs an agent token: pass token= or set AIRLOCK_TOKEN (create one on the console's Tokens page, kind agent).")
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = request_timeout
        self._max_request_bytes = max_request_bytes
        try:
            self._tls = ssl.create_default_context(cafile=ca_file or None)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"airlock's CA file {ca_file} cannot be read as PEM ({e}): pass ca_file= or set AIRLOCK_CA_FILE to the CA certificate that signed the console's.") from None

    # --- the REST API ---

    def submit(self, tool: str, arguments: Optional[Dict[str, Any]] = None, *, server: str = "", call_id: Optional[str] = None,
               revision: int = 0, thread_id: str = "", reason: str = "", idempotency_key: str = "", agent_runs: bool = False) -> str:
        """Submit a call of ``tool`` ("server__tool", or ``server`` and ``tool``) and return its call id.

        Submitting the same call again under its call id is harmless; another
        call under a used call id raises APIError (409). ``agent_runs`` makes it a
        gate-only call: airlock decides, your code runs the tool and reports.
        A call over ``max_request_bytes`` (as sent) raises APIError with
        status 0, unsent.
        """
        body = {"call_id": call_id or "py-" + uuid.uuid4().hex, "tool": tool, "arguments": arguments or {}}
        for k, v in (("server", server), ("revision", revision), ("thread_id", thread_id), ("reason", reason),
                     ("idempotency_key", idempotency_key), ("agent_runs", agent_runs)):
            if v:
                body[k] = v
        data = _encode(body)
        if len(data) > self._max_request_bytes:
            raise APIError(0, "invalid_request", f"request is {len(data)} bytes, over the {self._max_request_bytes}-byte limit: pass large inputs by reference")
        return self._request("POST", "/api/v1/calls", data)["call_id"]

    def wait(self, call_id: str, timeout: Optional[float] = None, revision: int = 0) -> Outcome:
        """Await the call's outcome (``await`` is a keyword in Python): of ``revision``
        (default 0: the newest), or of a later revision that ends first.

        Long-polls in steps of at most 30 s; with ``timeout`` (seconds) it
        returns an Outcome with status "pending" once that passes. It never
        raises for how the call ended: use raise_for_status(), or do(). A
        request airlock did not decide because the agent is over its budget
        raises OverBudget (nothing of it is recorded: submit it again after
        ``retry_after`` seconds) when it asked for the revision awaited and
        that revision is not recorded; without ``revision``, when it was the
        agent's newest request (a revision newer than any recorded).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        path = "/api/v1/calls/" + urllib.parse.quote(call_id, safe="")
        rev = f"&rev={revision}" if revision else ""
        while True:
            step = 30.0 if deadline is None else max(0.0, min(30.0, deadline - time.monotonic()))
            body = self._request("GET", f"{path}?wait={step:.3f}s{rev}", None, timeout=step + self._timeout)
            out = Outcome.from_json(body)
            if out.status != "pending" or (deadline is not None and time.monotonic() >= deadline):
                return out

    def do(self, tool: str, arguments: Optional[Dict[str, Any]] = None, *, timeout: Optional[float] = None, **submit_options: Any) -> Outcome:
        """Submit and await a call airlock runs; return its Outcome once completed, else raise its typed error."""
        call_id = self.submit(tool, arguments, **submit_options)
        return self.wait(call_id, timeout, max(int(submit_options.get("revision") or 0), 1)).raise_for_status(tool)

    def cancel(self, call_id: str, reason: str = "", revision: int = 0) -> str:
        """Withdraw a call still waiting for a decision; return its state then.

        "canceled" when it was withdrawn (now or before), including a call
        still waiting for the policy, which then never runs (name its
        revision when it is not the first); a call a person decided already
        is left as it is, and its state ("approved", "completed",
        "rejected" ...) is returned. A call the policy decided at once has
        nothing to cancel: APIError with status 404; status 503 says to
        cancel again in a moment (the policy is deciding the call).
        """
        body = self._request("POST", "/api/v1/calls/" + urllib.parse.quote(call_id, safe="") + "/cancel",
                             {"reason": reason, "revision": revision})
        return body.get("state", "")

    def report(self, call_id: str, *, result: Any = None, error: str = "", failed: bool = False, revision: int = 0, latency_ms: int = 0) -> None:
        """Report how a gate-only call your code ran ended (only the first report counts)."""
        body: Dict[str, Any] = {"failed": failed or bool(error)}
        if result is not None:
            body["result"] = result
        for k, v in (("error", error), ("revision", revision), ("latency_ms", latency_ms)):
            if v:
                body[k] = v
        self._request("POST", "/api/v1/calls/" + urllib.parse.quote(call_id, safe="") + "/report", body)

    def gated(self, tool: str, *, timeout: Optional[float] = None, reason: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorate a function so that it runs only when airlock allows or a person approves it.

        Each call of the function is a gate-only call of ``tool`` whose
        arguments are the function's arguments by name (JSON values; a
        reviewer cannot edit a gate-only call's arguments, so what runs is
        what was approved). Its return value (or exception) is reported to
        airlock as the call's result; a refusal raises the typed error and the
        function does not run.
        """

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            sig = inspect.signature(fn)

            @functools.wraps(fn)
            def run(*args: Any, **kwargs: Any) -> Any:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                arguments = dict(bound.arguments)
                call_id = self.submit(tool, arguments, agent_runs=True, reason=reason)
                out = self.wait(call_id, timeout, 1).raise_for_status(tool)
                started = time.monotonic()
                try:
                    value = fn(*bound.args, **bound.kwargs)
                except Exception as exc:
                    self.report(call_id, error=f"{type(exc).__name__}: {exc}", revision=out.revision,
                                latency_ms=int((time.monotonic() - started) * 1000))
                    raise
                self.report(call_id, result=_jsonable(value), revision=out.revision,
                            latency_ms=int((time.monotonic() - started) * 1000))
                return value

            return run

        return decorate

    # --- plumbing ---

    def _request(self, method: str, path: str, body: Union[None, bytes, Dict[str, Any]], timeout: Optional[float] = None) -> Dict[str, Any]:
        data = body if body is None or isinstance(body, bytes) else _encode(body)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": "Bearer " + self._token, "Accept": "application/json",
            **({"Content-Type": "application/json"} if data is not None else {}),
        })
        try:
            with urllib.request.urlopen(req, timeout=timeout or self._timeout, context=self._tls) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)
            except ValueError:
                err = {}
            message = err.get("message") or f"airlock answered {method} {path} with HTTP {e.code}: {raw[:200]!r}"
            if isinstance(err.get("over_budget"), dict):
                # The policy's notice, the shape every SDK reads.
                raise OverBudget(e.code, err.get("code", ""), message, err["over_budget"]) from None
            raise APIError(e.code, err.get("code", ""), message) from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, ssl.SSLCertVerificationError):
                raise AirlockError(f"airlock at {self.url} presents a certificate this client cannot verify ({e.reason.verify_message}): "
                                   "if a private CA signed it, pass ca_file= or set AIRLOCK_CA_FILE to that CA's PEM file.") from None
            raise AirlockError(f"airlock at {self.url} cannot be reached ({e.reason}): is it running, and is AIRLOCK_URL right?") from None
        return json.loads(raw) if raw else {}


def _encode(body: Dict[str, Any]) -> bytes:
    """The JSON a request sends: compact UTF-8, so that its size is what the content needs."""
    # surrogatepass: a lone surrogate reaches airlock as U+FFFD, as its \\u escape did.
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def _jsonable(v: Any) -> Any:
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return repr(v)
