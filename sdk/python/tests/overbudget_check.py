"""An agent over its budget is told so at once (tests/python_sdk_test.go's
TestPythonClientOverBudget runs this file alone, against an `airlock dev` whose
agents may have one call decided a minute: it is not named test_*.py).

Environment: AIRLOCK_URL, AIRLOCK_TOKEN (an agent token of AIRLOCK_TEST_AGENT).
"""

import os
import unittest

import airlock

AGENT = os.environ.get("AIRLOCK_TEST_AGENT", "")


class OverBudgetTest(unittest.TestCase):
    def test_a_call_over_the_budget_raises_over_budget_with_when_to_retry(self):
        c = airlock.Client()
        # A call the default policy denies: decided at once, nothing runs.
        with self.assertRaises(airlock.Denied):
            c.do("fs__delete_file", {"path": "/etc/passwd"}, call_id="py-within", timeout=10)
        # The minute's one refusal, then a dropped request: both answered.
        for call_id in ("py-refused", "py-dropped"):
            with self.assertRaises(airlock.OverBudget, msg=f"call {call_id} over the budget") as caught:
                c.do("fs__delete_file", {"path": "/etc/passwd"}, call_id=call_id, timeout=10)
            err = caught.exception
            self.assertEqual(err.call_id, call_id)
            self.assertEqual(err.calls_per_minute, 1)
            self.assertGreaterEqual(err.retry_after, 1)
            self.assertIn(f"agent {AGENT} is over its budget of 1 calls a minute", str(err))
            self.assertIn("retry after about", str(err))

    def test_b_a_notice_about_revision_2_answers_no_wait_on_revision_1(self):
        c = airlock.Client()
        # Past the minute's one refusal: revision 2 is dropped, and the agent told.
        with self.assertRaises(airlock.OverBudget) as caught:
            c.do("fs__delete_file", {"path": "/etc/passwd"}, call_id="py-revised", revision=2, timeout=10)
        self.assertEqual(caught.exception.revision, 2)
        out = c.wait("py-revised", timeout=2, revision=1)
        self.assertEqual(out.status, "pending", "a wait on revision 1 is not answered by the notice about revision 2")
        with self.assertRaises(airlock.OverBudget, msg="a wait naming no revision is about the newest request") as caught:
            c.wait("py-revised", timeout=10)
        self.assertEqual(caught.exception.revision, 2)


if __name__ == "__main__":
    unittest.main()
