package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Only reviewers see the calls in doubt and answer whether they happened:
// an auditor's session is refused the page and the form, with its CSRF
// token or not, before anything reaches the approval service.
func TestOnlyReviewersAnswerWhetherACallInDoubtHappened(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signIn("audrey")
	if p := b.get("/in-doubt"); p.Status != http.StatusForbidden {
		t.Errorf("an auditor opened the in-doubt page: %d", p.Status)
	}
	if p := b.submit("/calls/bot/call_1/in-doubt", url.Values{"happened": {"yes"}}); p.Status != http.StatusForbidden {
		t.Errorf("an auditor answered: %d", p.Status)
	}
	if p := b.get("/"); p.Status != http.StatusOK || strings.Contains(p.Body, `href="/in-doubt"`) {
		t.Errorf("an auditor's menu offers the in-doubt page (status %d)", p.Status)
	}
}
