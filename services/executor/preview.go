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
	reg, ok := r.servers[req.Server]
	if !ok {
		return nil, fmt.Errorf("no server %s in the registry", req.Server)
	}
	var p *airlockv1.Preview
	var err error
	switch a := reg.adapter.(type) {
	case *Demo:
		p, err = a.preview(ctx, req, maxBytes)
	case *MCP:
		dry := reg.entry.Tools[req.Tool].PreviewTool
		if dry == "" {
			return nil, errNoPreview
		}
		p, err = a.preview(ctx, req, dry)
	case *Webhook:
		p, err = a.preview(ctx, req)
	default:
		return nil, errNoPreview
	}
	if err != nil {
		return nil, err
	}
	return preview.Finish(p, maxBytes), nil
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
// precondition its reviewers saw still holds, by making its preview again.
// It returns why the call must not run, or "".
func (s *Service) worldChanged(ctx context.Context, x *execution) string {
	if x.precondition == "" {
		return ""
	}
	cfg := s.deps.Config.Executor
	ctx, cancel := context.WithTimeout(ctx, cfg.PreviewTimeout)
	defer cancel()
	p, err := s.reg.Preview(ctx, Request{Server: x.call.Server, Tool: x.call.Tool, Arguments: x.call.Arguments.AsMap(), CallID: x.call.CallId, Revision: x.call.Revision}, cfg.MaxPreviewBytes)
	if err != nil {
		return fmt.Sprintf("the executor could not check that the world is still as the reviewer saw it in the preview (%v), so the call was not run: submit it again, and a reviewer can approve it on a new preview", err)
	}
	if p.GetPrecondition() != x.precondition {
		return fmt.Sprintf("the world changed since the reviewer looked: the preview they approved was made against %s, which is now %s, so the call was not run — submit it again, and a reviewer can approve it on the new preview",
			describeState(x.precondition), describeState(p.GetPrecondition()))
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
// precondition. The other demo tools change nothing and have none.
func (d *Demo) preview(ctx context.Context, req Request, maxBytes int) (*airlockv1.Preview, error) {
	if req.Tool != "write_file" {
		return nil, errNoPreview
	}
	p, content, err := d.writeArgs(req.Arguments)
	if err != nil {
		return nil, err
	}
	old, size, exists, state, err := d.current(ctx, p)
	if err != nil {
		return nil, err
	}
	if size > demoMaxRead {
		return &airlockv1.Preview{Kind: preview.KindText, Precondition: state,
			Text: fmt.Sprintf("%s is %d bytes, too large to diff: the call replaces its content with %d bytes", p, size, len(content))}, nil
	}
	diff, cut := preview.Diff(p, string(old), content, exists, maxBytes)
	return &airlockv1.Preview{Kind: preview.KindDiff, Text: diff, Truncated: cut, Precondition: state}, nil
}

// current reads the file at p (its first demoMaxRead bytes), its size and
// its state (preview.FileState over the whole file), within ctx: a huge
// file is given up at the deadline rather than hashed for minutes.
func (d *Demo) current(ctx context.Context, p string) (head []byte, size int64, exists bool, state string, err error) {
	f, err := d.openRegular(p, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, false, preview.Absent, nil
	}
	if err != nil {
		return nil, 0, false, "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := &capped{max: demoMaxRead}
	size, err = io.Copy(io.MultiWriter(h, buf), ctxReader{ctx, f})
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, false, "", fmt.Errorf("read %s: %w", p, ctx.Err())
		}
		return nil, 0, false, "", d.fsError("read", p, err)
	}
	return buf.b, size, true, preview.FileDigest(h.Sum(nil)), nil
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
// its text is the preview, and the preview itself the precondition.
func (m *MCP) preview(ctx context.Context, req Request, dry string) (*airlockv1.Preview, error) {
	raw, err := m.Call(ctx, Request{Server: req.Server, Tool: dry, Arguments: req.Arguments, CallID: req.CallID, Revision: req.Revision})
	if err != nil {
		return nil, fmt.Errorf("dry-run tool %s: %w", dry, err)
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	text := string(raw)
	if json.Unmarshal(raw, &res) == nil && len(res.Content) > 0 {
		var parts []string
		for _, c := range res.Content {
			if c.Type == "text" {
				parts = append(parts, c.Text)
			}
		}
		text = strings.Join(parts, "\n")
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
