"""The Python client against a real `airlock dev` (tests/python_sdk_test.go starts it).

Environment: AIRLOCK_URL, AIRLOCK_TOKEN (an agent token of AIRLOCK_TEST_AGENT),
AIRLOCK_TEST_ADMIN_TOKEN (a reviewer's token, to decide calls),
AIRLOCK_TEST_OTHER_TOKEN (another agent's token). The dev
configuration denies demo__write_file on paths under secret/.
"""

import json
import os
import threading
import time
import unittest
import urllib.error
import urllib.request
import uuid

import airlock

AGENT = os.environ.get("AIRLOCK_TEST_AGENT", "")


def admin(method, path, body=None):
    """A reviewer's request to the REST API."""
    req = urllib.request.Request(os.environ["AIRLOCK_URL"] + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + os.environ["AIRLOCK_TEST_ADMIN_TOKEN"],
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as e:
        raise AssertionError("%s %s: %s %s" % (method, path, e.code, e.read().decode())) from None
    return json.loads(raw) if raw else {}


def pending(match, within=30.0):
    """The first pending record of the test agent that match accepts, waiting for it."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for rec in admin("GET", "/api/v1/approvals?agent=" + AGENT)["records"]:
            if match(rec):
                return rec
        time.sleep(0.05)
    raise AssertionError("no such pending call within %ss" % within)


def pending_call(call_id):
    return pending(lambda r: r["call"]["call_id"] == call_id)


def decide(rec, verb, **body):
    call = rec["call"]
    admin("POST", "/api/v1/approvals/%s/%s/%s" % (call["agent_id"], call["call_id"], verb), body)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for var in ("AIRLOCK_URL", "AIRLOCK_TOKEN", "AIRLOCK_TEST_ADMIN_TOKEN", "AIRLOCK_TEST_AGENT", "AIRLOCK_TEST_OTHER_TOKEN",
                    "AIRLOCK_TEST_MAX_REQUEST_BYTES"):
            if not os.environ.get(var):
                raise unittest.SkipTest("set %s (go test -run TestPythonClient ./tests/ starts airlock dev and sets it)" % var)
        cls.client = airlock.Client()

    def test_do_returns_the_result_of_an_allowed_call(self):
        out = self.client.do("demo__echo", {"text": "hello from python"})
        self.assertEqual(out.status, "completed")
        self.assertEqual(out.decided_by, "policy")
        self.assertIn("hello from python", json.dumps(out.result))

    def test_a_denied_call_raises_denied_with_a_sentence(self):
        with self.assertRaises(airlock.Denied) as ctx:
            self.client.do("demo__write_file", {"path": "secret/key.txt", "content": "x"})
        msg = str(ctx.exception)
        self.assertIn("denied this call to demo__write_file", msg)
        self.assertTrue(msg.endswith("."), msg)
        self.assertEqual(ctx.exception.outcome.status, "denied")

    def test_an_approved_call_runs_and_await_survives_a_new_client(self):
        call_id = self.client.submit("demo__write_file", {"path": "py-approved.txt", "content": "approved"})
        decide(pending_call(call_id), "approve", reason="fine")
        # A new client (as after a restart) awaits the same call by its id.
        out = airlock.Client().wait(call_id, timeout=30)
        self.assertEqual(out.raise_for_status().status, "completed")
        self.assertEqual(out.decided_by, "admin")

    def test_a_rejected_call_raises_rejected_with_the_reason(self):
        call_id = self.client.submit("demo__write_file", {"path": "py-rejected.txt", "content": "no"})
        decide(pending_call(call_id), "reject", reason="not this file")
        with self.assertRaises(airlock.Rejected) as ctx:
            self.client.wait(call_id, timeout=30).raise_for_status("demo__write_file")
        self.assertIn("admin rejected this call to demo__write_file: not this file.", str(ctx.exception))

    def test_changes_requested_carries_the_feedback(self):
        call_id = self.client.submit("demo__write_file", {"path": "py-changes.txt", "content": "draft"})
        decide(pending_call(call_id), "changes", feedback="write it to notes/ instead")
        with self.assertRaises(airlock.ChangesRequested) as ctx:
            self.client.wait(call_id, timeout=30).raise_for_status("demo__write_file")
        self.assertEqual(ctx.exception.feedback, "write it to notes/ instead")
        self.assertIn("Submit it again", str(ctx.exception))

    def test_cancel_withdraws_a_pending_call_and_leaves_an_ended_one_as_it_is(self):
        call_id = self.client.submit("demo__write_file", {"path": "py-canceled.txt", "content": "never"})
        pending_call(call_id)
        self.client.cancel(call_id, "the user changed their mind")
        with self.assertRaises(airlock.Canceled) as ctx:
            self.client.wait(call_id, timeout=30).raise_for_status("demo__write_file")
        self.assertIn("the user changed their mind", str(ctx.exception))
        self.assertEqual(self.client.cancel(call_id), "canceled")
        approved = self.client.submit("demo__write_file", {"path": "py-cancel-late.txt", "content": "ran"})
        decide(pending_call(approved), "approve", reason="fine")
        self.client.wait(approved, timeout=30).raise_for_status()
        # The approval record learns of the end a moment after the agent does:
        # until then a cancel answers "approved", and never withdraws the call.
        deadline = time.monotonic() + 10
        state = self.client.cancel(approved)
        while state != "completed" and time.monotonic() < deadline:
            self.assertIn(state, ("approved", "running"))
            time.sleep(0.05)
            state = self.client.cancel(approved)
        self.assertEqual(state, "completed")
        done = self.client.do("demo__echo", {"text": "done"})
        with self.assertRaises(airlock.APIError) as ctx:
            self.client.cancel(done.call_id)
        self.assertEqual(ctx.exception.status, 404)
        self.assertIn("calls that policy allowed or denied have none", str(ctx.exception))

    def test_another_agent_can_neither_cancel_nor_report_nor_await_the_call(self):
        call_id = self.client.submit("demo__write_file", {"path": "py-others.txt", "content": "mine"})
        pending_call(call_id)
        intruder = airlock.Client(token=os.environ["AIRLOCK_TEST_OTHER_TOKEN"])
        for attempt in (lambda: intruder.cancel(call_id), lambda: intruder.wait(call_id, timeout=1),
                        lambda: intruder.report(call_id, result={"forged": True})):
            with self.assertRaises(airlock.APIError) as ctx:
                attempt()
            self.assertEqual(ctx.exception.status, 404, str(ctx.exception))
        self.assertEqual(pending_call(call_id)["call"]["agent_id"], AGENT)
        self.assertEqual(self.client.cancel(call_id), "canceled")

    def test_a_wait_that_times_out_says_the_call_is_pending(self):
        call_id = self.client.submit("demo__write_file", {"path": "py-slow.txt", "content": "later"})
        out = self.client.wait(call_id, timeout=0.5)
        self.assertEqual(out.status, "pending")
        with self.assertRaises(airlock.TimedOut) as ctx:
            out.raise_for_status()
        self.assertIn(call_id, str(ctx.exception))
        self.client.cancel(call_id)

    def test_the_api_refuses_a_malformed_call_with_a_sentence(self):
        with self.assertRaises(airlock.APIError) as ctx:
            self.client.submit("demo__echo", {"text": "x"}, call_id="not a valid id!")
        self.assertEqual(ctx.exception.status, 400)
        self.assertEqual(ctx.exception.code, "invalid_request")
        self.assertIn("call id", str(ctx.exception))

    def test_a_request_over_the_size_limit_is_refused_unsent_and_the_client_works_on(self):
        limit = os.environ["AIRLOCK_TEST_MAX_REQUEST_BYTES"]
        # 300 KiB: over airlock's limit, which the console would answer (HTTP
        # 400); 2 MiB: over what the console reads of a request body.
        for kib in (300, 2048):
            with self.subTest(kib=kib), self.assertRaises(airlock.APIError) as ctx:
                self.client.submit("demo__echo", {"text": "x" * (kib << 10)})
            self.assertEqual(ctx.exception.status, 0, "refused before it was sent")
            self.assertEqual(ctx.exception.code, "invalid_request")
            self.assertRegex(str(ctx.exception), r"^request is \d+ bytes, over the %s-byte limit: pass large inputs by reference$" % limit)
        self.assertEqual(self.client.do("demo__echo", {"text": "still here"}).status, "completed")

    def test_the_default_size_limit_is_airlocks(self):
        self.assertEqual(airlock.DEFAULT_MAX_REQUEST_BYTES, int(os.environ["AIRLOCK_TEST_MAX_REQUEST_BYTES"]))

    def test_a_bad_token_is_an_api_error_that_says_so(self):
        with self.assertRaises(airlock.APIError) as ctx:
            airlock.Client(token="not-a-token").do("demo__echo", {"text": "x"})
        self.assertEqual(ctx.exception.status, 401)

    def test_gated_runs_the_function_once_approved_and_reports_its_result(self):
        ran = []
        tag = uuid.uuid4().hex

        @self.client.gated(tool="local__note", timeout=60)
        def note(text, tag):
            ran.append((text, tag))
            return {"noted": text}

        result = {}
        t = threading.Thread(target=lambda: result.update(value=note("original", tag)), daemon=True)
        t.start()
        rec = pending(lambda r: r["call"].get("arguments", {}).get("tag") == tag)
        self.assertEqual(ran, [], "the function ran before it was approved")
        decide(rec, "approve", reason="ok")
        t.join(30)
        self.assertEqual(ran, [("original", tag)])
        self.assertEqual(result.get("value"), {"noted": "original"})
        # The report reaches the call's record a moment after it is stored.
        deadline = time.monotonic() + 15
        out = self.client.wait(rec["call"]["call_id"], timeout=30)
        while not out.agent_ran and time.monotonic() < deadline:
            time.sleep(0.05)
            out = self.client.wait(rec["call"]["call_id"], timeout=30)
        self.assertTrue(out.agent_ran, out)
        self.assertEqual(out.result, {"noted": "original"})

    def test_gated_does_not_run_a_rejected_call(self):
        ran = []
        tag = uuid.uuid4().hex

        @self.client.gated(tool="local__note", timeout=60)
        def note(text, tag):
            ran.append(text)

        errors = []

        def call():
            try:
                note("never", tag)
            except airlock.Rejected as e:
                errors.append(e)

        t = threading.Thread(target=call, daemon=True)
        t.start()
        decide(pending(lambda r: r["call"].get("arguments", {}).get("tag") == tag), "reject", reason="no notes today")
        t.join(30)
        self.assertEqual(ran, [])
        self.assertEqual(len(errors), 1)
        self.assertIn("no notes today", str(errors[0]))


if __name__ == "__main__":
    unittest.main()


class TLSTest(unittest.TestCase):
    """The console over https with a private CA's certificate: tests/python_sdk_test.go puts a
    TLS-terminating proxy in front of airlock dev (AIRLOCK_TEST_HTTPS_URL) and gives its CA
    (AIRLOCK_TEST_TLS_CA) and a CA that signed nothing (AIRLOCK_TEST_TLS_OTHER_CA)."""

    @classmethod
    def setUpClass(cls):
        for var in ("AIRLOCK_TOKEN", "AIRLOCK_TEST_HTTPS_URL", "AIRLOCK_TEST_TLS_CA", "AIRLOCK_TEST_TLS_OTHER_CA"):
            if not os.environ.get(var):
                raise unittest.SkipTest("set %s (go test -run TestPythonClient ./tests/ sets it)" % var)
        cls.url = os.environ["AIRLOCK_TEST_HTTPS_URL"]

    def test_ca_file_verifies_the_console_and_a_call_completes(self):
        out = airlock.Client(self.url, ca_file=os.environ["AIRLOCK_TEST_TLS_CA"]).do("demo__echo", {"text": "over https"})
        self.assertEqual(out.status, "completed")
        self.assertIn("over https", json.dumps(out.result))

    def test_the_ca_file_can_come_from_the_environment(self):
        os.environ["AIRLOCK_CA_FILE"] = os.environ["AIRLOCK_TEST_TLS_CA"]
        try:
            client = airlock.Client(self.url)
        finally:
            del os.environ["AIRLOCK_CA_FILE"]
        self.assertEqual(client.do("demo__echo", {"text": "ca from env"}).status, "completed")

    def test_a_console_no_trusted_ca_signed_is_refused_with_a_sentence(self):
        for name, ca_file in (("system CAs", None), ("another CA", os.environ["AIRLOCK_TEST_TLS_OTHER_CA"])):
            with self.subTest(name):
                with self.assertRaises(airlock.AirlockError) as ctx:
                    airlock.Client(self.url, ca_file=ca_file).submit("demo__echo", {"text": "never sent"})
                self.assertIn("presents a certificate this client cannot verify", str(ctx.exception))
                self.assertIn("pass ca_file= or set AIRLOCK_CA_FILE", str(ctx.exception))

    def test_a_ca_file_that_is_not_pem_is_refused_at_once(self):
        with self.assertRaises(ValueError) as ctx:
            airlock.Client(self.url, ca_file=__file__)
        self.assertIn("cannot be read as PEM", str(ctx.exception))
