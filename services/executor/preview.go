package executor

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

// errNoPreview: the tool declares no preview.
var errNoPreview = errors.New("the tool declares no preview")

// ReasonPrecondition is the reason of a call that was not run because the
// world it was approved against changed (or could not be checked).
const ReasonPrecondition = "precondition_failed"

// Preview says what req would do and the state of the world it says it
// against, bounded by maxBytes and ctx: the demo write_file diffs its
// content against the file as it is now, an MCP tool with a preview_tool
// calls that dry-run tool, a webhook tool with a preview_url asks it. It
// changes nothing. A tool without one gives an error wrapping errNoPreview.
func (r *Registry) Preview(ctx context.Context, req Request, maxBytes int) (*airlockv1.Preview, error) {
	p, err := r.draft(ctx, req, maxBytes)
	if err != nil {
		return nil, err
	}
	return preview.Finish(p, maxBytes), nil
}

// Precondition is the precondition Preview would give req now, with the
// same errors, computed without the rest of the preview where the tool
// can: the demo write_file hashes the file and diffs nothing. A dry-run
// tool's or a preview endpoint's precondition is its answer, so that is
// asked for as for a preview (and neither cut, stamped nor digested).
func (r *Registry) Precondition(ctx context.Context, req Request) (string, error) {
	if d, ok := r.servers[req.Server].adapter.(*Demo); ok {
		return d.precondition(ctx, req)
	}
	p, err := r.draft(ctx, req, 0)
	if err != nil {
		return "", err
	}
	return p.GetPrecondition(), nil
}

// draft is req's preview as its tool makes it, before Finish bounds,
// stamps and digests it (maxBytes bounds only a diff as it is made).
func (r *Registry) draft(ctx context.Context, req Request, maxBytes int) (*airlockv1.Preview, error) {
	reg, ok := r.servers[req.Server]
	if !ok {
		return nil, fmt.Errorf("no server %s in the registry", req.Server)
	}
	switch a := reg.adapter.(type) {
	case *Demo:
		return a.preview(ctx, req, maxBytes)
	case *MCP:
		dry := reg.entry.Tools[req.Tool].PreviewTool
		if dry == "" {
			return nil, errNoPreview
		}
		return a.preview(ctx, req, dry)
	case *Webhook:
		return a.preview(ctx, req)
	}
	return nil, errNoPreview
}

// previewOf is the endpoint's answer for call: a preview, or one that says
// why there is none. It never fails: a reviewer then sees "no preview".
func (r *Registry) previewOf(ctx context.Context, call *airlockv1.ToolCall, timeout time.Duration, maxBytes int) *airlockv1.Preview {
	server, tool := call.GetServer(), call.GetTool()
	if server == "" {
		server, tool, _ = strings.Cut(tool, "__")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := r.Preview(ctx, Request{Server: server, Tool: tool, Arguments: call.GetArguments().AsMap(), CallID: call.GetCallId(), Revision: call.GetRevision()}, maxBytes)
	switch {
	case err == nil:
		return p
	case errors.Is(err, errNoPreview):
		return preview.Unavailable(errNoPreview.Error())
	case ctx.Err() != nil:
		return preview.Unavailable(fmt.Sprintf("the preview did not finish within %s", timeout))
	}
	return preview.Unavailable("the preview failed: " + err.Error())
}

// worldChanged checks, just before an approved call first runs, that the
// precondition its reviewers saw still holds, by computing the
// precondition again (not the whole preview: only it is compared).
// It returns why the call must not run, or "".
func (s *Service) worldChanged(ctx context.Context, x *execution) string {
	if x.precondition == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, s.deps.Config.Executor.PreviewTimeout)
	defer cancel()
	now, err := s.reg.Precondition(ctx, Request{Server: x.call.Server, Tool: x.call.Tool, Arguments: x.call.Arguments.AsMap(), CallID: x.call.CallId, Revision: x.call.Revision})
	if err != nil {
		return fmt.Sprintf("the executor could not check that the world is still as the reviewer saw it in the preview (%v), so the call was not run: submit it again, and a reviewer can approve it on a new preview", err)
	}
	if now != x.precondition {
		return fmt.Sprintf("the world changed since the reviewer looked: the preview they approved was made against %s, which is now %s, so the call was not run — submit it again, and a reviewer can approve it on the new preview",
			describeState(x.precondition), describeState(now))
	}
	return ""
}

// describeState names a precondition for a person.
func describeState(pre string) string {
	switch {
	case pre == preview.Absent:
		return "no file"
	case strings.HasPrefix(pre, "sha256:"):
		return fmt.Sprintf("a file with sha256 %.12s…", strings.TrimPrefix(pre, "sha256:"))
	case strings.HasPrefix(pre, "preview:"):
		return fmt.Sprintf("a dry run answering %.12s…", strings.TrimPrefix(pre, "preview:"))
	}
	return fmt.Sprintf("%q", pre)
}

// preview implements the demo write_file's preview: the diff of its
// content against the file as it is now, and the file's state as the
// precondition.
func (d *Demo) preview(ctx context.Context, req Request, maxBytes int) (*airlockv1.Preview, error) {
	w, err := d.writeNow(ctx, req, demoMaxRead)
	if err != nil {
		return nil, err
	}
	if w.size > demoMaxRead {
		return &airlockv1.Preview{Kind: preview.KindText, Precondition: w.state,
			Text: fmt.Sprintf("%s is %d bytes, too large to diff: the call replaces its content with %d bytes", w.path, w.size, len(w.content))}, nil
	}
	diff, cut := preview.Diff(w.path, string(w.head), w.content, w.exists, maxBytes)
	return &airlockv1.Preview{Kind: preview.KindDiff, Text: diff, Truncated: cut, Precondition: w.state}, nil
}

// precondition is the demo write_file's precondition for req: the state
// of its file alone, read and hashed but neither kept nor diffed.
func (d *Demo) precondition(ctx context.Context, req Request) (string, error) {
	w, err := d.writeNow(ctx, req, 0)
	return w.state, err
}

// pendingWrite is a demo write_file call and its file as it is now.
type pendingWrite struct {
	path, content string
	head          []byte // the file's first bytes, as many as were asked for
	size          int64
	exists        bool
	state         string // preview.FileState of the whole file
}

// writeNow reads req as a demo write_file and its file as it is now (the
// first keep bytes kept, all of it hashed), within ctx: a huge file is
// given up at the deadline rather than hashed for minutes. The other demo
// tools change nothing and have no preview (errNoPreview).
func (d *Demo) writeNow(ctx context.Context, req Request, keep int) (pendingWrite, error) {
	if req.Tool != "write_file" {
		return pendingWrite{}, errNoPreview
	}
	p, content, err := d.writeArgs(req.Arguments)
	if err != nil {
		return pendingWrite{}, err
	}
	w := pendingWrite{path: p, content: content, state: preview.Absent}
	f, err := d.openRegular(p, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return w, nil
	}
	if err != nil {
		return pendingWrite{}, err
	}
	defer f.Close()
	h := sha256.New()
	buf := &capped{max: keep}
	size, err := io.Copy(io.MultiWriter(h, buf), ctxReader{ctx, f})
	if err != nil {
		if ctx.Err() != nil {
			return pendingWrite{}, fmt.Errorf("read %s: %w", p, ctx.Err())
		}
		return pendingWrite{}, d.fsError("read", p, err)
	}
	w.head, w.size, w.exists, w.state = buf.b, size, true, preview.FileDigest(h.Sum(nil))
	return w, nil
}

// ctxReader stops reading once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// capped keeps the first max bytes written to it.
type capped struct {
	b   []byte
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// preview calls the MCP server's dry-run tool dry with req's arguments:
// its text is the preview, and the preview itself the precondition. The
// text is read from the result as the SDK decoded it (a result without
// content is its JSON): encoding the result again to read it back was
// most of the executor's own CPU for a dry run.
func (m *MCP) preview(ctx context.Context, req Request, dry string) (*airlockv1.Preview, error) {
	res, err := m.result(ctx, Request{Server: req.Server, Tool: dry, Arguments: req.Arguments, CallID: req.CallID, Revision: req.Revision})
	if err != nil {
		return nil, fmt.Errorf("dry-run tool %s: %w", dry, err)
	}
	text := strings.Join(textParts(res), "\n")
	if len(res.Content) == 0 {
		raw, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("dry-run tool %s: %w", dry, err)
		}
		text = string(raw)
	}
	return &airlockv1.Preview{Kind: preview.KindText, Text: text, Precondition: preview.OfText(text)}, nil
}

// preview asks the tool's preview endpoint: a JSON object with "preview"
// (and optionally "precondition", a token of the state it describes), or
// any other answer as the preview's text. Without a precondition of its
// own, the preview itself is the precondition.
func (w *Webhook) preview(ctx context.Context, req Request) (*airlockv1.Preview, error) {
	url, ok := w.o.PreviewURLs[req.Tool]
	if !ok {
		return nil, errNoPreview
	}
	raw, err := w.post(ctx, url, req, map[string]string{HeaderPreview: "1"})
	if err != nil {
		return nil, err
	}
	var res struct {
		Preview      *string `json:"preview"`
		Precondition string  `json:"precondition"`
	}
	text := string(raw)
	if json.Unmarshal(raw, &res) == nil && res.Preview != nil {
		text = *res.Preview
	} else {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			text = s
		}
		res.Precondition = ""
	}
	pre := res.Precondition
	if pre == "" {
		pre = preview.OfText(text)
	}
	return &airlockv1.Preview{Kind: preview.KindText, Text: text, Precondition: pre}, nil
}

// servePreview answers airlock.api.executor.preview.
func (t *toolsAPI) preview(ctx context.Context, req *airlockv1.PreviewRequest) (*airlockv1.PreviewResponse, error) {
	if req.GetCall() == nil {
		return nil, apierr.New(apierr.InvalidRequest, "a preview request names the call to preview")
	}
	agent := req.GetCall().GetAgentId()
	if !t.previewing.Take(agent) {
		return &airlockv1.PreviewResponse{Preview: preview.Unavailable(fmt.Sprintf(
			"agent %s already has %d previews being made on this executor, so this call has none", agent, maxPreviewsPerAgent))}, nil
	}
	defer t.previewing.Give(agent)
	return &airlockv1.PreviewResponse{Preview: t.reg.previewOf(ctx, req.GetCall(), t.cfg.PreviewTimeout, t.cfg.MaxPreviewBytes)}, nil
}

// maxPreviewsPerAgent bounds the previews one agent has made at once on
// one executor: a quarter of maxPreviews, so one agent's slow previews
// never hold every slot and with them every other agent's previews.
const maxPreviewsPerAgent = maxPreviews / 4
