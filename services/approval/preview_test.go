package approval_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/preview"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// servePreview stands in for the executor's preview endpoint, answering p.
func (w *world) servePreview(p *airlockv1.Preview) {
	w.t.Helper()
	w.servePreviewBy(func(context.Context) *airlockv1.Preview { return p })
}

// servePreviewBy stands in for the executor's preview endpoint, answering
// each request with what answer returns.
func (w *world) servePreviewBy(answer func(context.Context) *airlockv1.Preview) {
	w.t.Helper()
	nc, _ := testenv.Connect(w.t, w.nats.URL())
	srv, err := micro.AddService(nc, micro.Config{Name: executorapi.Service, Version: "0.0.1"})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = srv.Stop() })
	h := rpc.Handle(slog.Default(), func() *airlockv1.PreviewRequest { return &airlockv1.PreviewRequest{} },
		func(ctx context.Context, _ *airlockv1.PreviewRequest) (*airlockv1.PreviewResponse, error) {
			return &airlockv1.PreviewResponse{Preview: answer(ctx)}, nil
		})
	if err := srv.AddEndpoint(executorapi.EndpointPreview, h, micro.WithEndpointSubject(executorapi.Preview)); err != nil {
		w.t.Fatal(err)
	}
	testenv.Subscribed(w.t, nc)
}

func TestAPendingCallKeepsABoundedPreviewAndItsApprovalNamesIt(t *testing.T) {
	t.Run("an_oversized_preview_is_cut_and_digested_over_what_is_stored", func(t *testing.T) {
		w := newWorld(t, func(c *config.Config) { c.Executor.MaxPreviewBytes = 2048 })
		w.servePreview(&airlockv1.Preview{Kind: preview.KindText, Text: strings.Repeat("é", 10_000), Precondition: "sha256:abc", Digest: "forged"})
		w.start()
		rec := w.pending(&airlockv1.ToolCall{CallId: "big"}, nil)
		p := rec.GetPreview()
		if len(p.GetText()) > 2048 || !p.GetTruncated() || p.GetDigest() != preview.Digest(p) || p.GetPrecondition() != "sha256:abc" {
			t.Fatalf("stored preview: %d bytes, truncated %v, digest %q (want %q), precondition %q",
				len(p.GetText()), p.GetTruncated(), p.GetDigest(), preview.Digest(p), p.GetPrecondition())
		}
		list, err := w.api.List(context.Background(), &airlockv1.ListRequest{})
		if err != nil || len(list.GetRecords()) != 1 || list.GetRecords()[0].GetPreview().GetText() != "" || list.GetRecords()[0].GetPreview().GetDigest() != p.GetDigest() {
			t.Fatalf("a list carries the preview %v (%v), want its digest without its text", list.GetRecords(), err)
		}
		if _, err := w.approve("big", "alice"); err != nil {
			t.Fatal(err)
		}
		w.waitState("big", 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)
		ev := w.events("bot", "big", subject.Approved)
		if len(ev) != 1 || ev[0].GetApproved().GetPreviewDigest() != p.GetDigest() || ev[0].GetApproved().GetPrecondition() != "sha256:abc" {
			t.Fatalf("approved events %v, want one naming preview %s against sha256:abc", ev, p.GetDigest())
		}
	})
	t.Run("without_an_executor_the_call_waits_with_no_preview_and_an_approval_names_none", func(t *testing.T) {
		w := newWorld(t)
		w.start()
		rec := w.pending(&airlockv1.ToolCall{CallId: "none"}, nil)
		if preview.Has(rec.GetPreview()) || !strings.Contains(preview.Summary(rec.GetPreview()), "no preview (") {
			t.Fatalf("preview %v, want none and why", rec.GetPreview())
		}
		if _, err := w.approve("none", "alice"); err != nil {
			t.Fatal(err)
		}
		w.waitState("none", 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)
		if ev := w.events("bot", "none", subject.Approved); len(ev) != 1 || ev[0].GetApproved().GetPreviewDigest() != "" || ev[0].GetApproved().GetPrecondition() != "" {
			t.Fatalf("approved events %v", ev)
		}
	})
}
