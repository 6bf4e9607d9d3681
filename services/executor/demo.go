package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// DemoServer is the name of the built-in demo server.
const DemoServer = config.DemoServer

// demoMaxRead bounds what demo__read_file returns before the executor's own result limit applies.
const demoMaxRead = 1 << 20

// Demo is the built-in demo server for the quick start:
//
//   - demo__echo returns its arguments unchanged;
//   - demo__read_file {path} returns {"path", "content"} of a file in the sandbox;
//   - demo__write_file {path, content} writes (creating parent directories)
//     and returns {"path", "bytes"}.
//
// Paths are relative to the sandbox directory and cannot leave it: "..",
// absolute paths and symbolic links pointing outside are refused (os.Root).
type Demo struct {
	root *os.Root
	dir  string
}

// NewDemo opens (creating if needed) the sandbox directory.
func NewDemo(sandbox string) (*Demo, error) {
	if sandbox == "" {
		return nil, errors.New("demo tools need a sandbox directory: set executor.sandbox")
	}
	if err := os.MkdirAll(sandbox, 0o700); err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", sandbox, err)
	}
	root, err := os.OpenRoot(sandbox)
	if err != nil {
		return nil, fmt.Errorf("open sandbox %s: %w", sandbox, err)
	}
	return &Demo{root: root, dir: sandbox}, nil
}

// Tools implements Adapter.
func (d *Demo) Tools(context.Context) ([]string, error) {
	return []string{"echo", "read_file", "write_file"}, nil
}

// Call implements Adapter.
func (d *Demo) Call(ctx context.Context, req Request) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch req.Tool {
	case "echo":
		args := req.Arguments
		if args == nil {
			args = map[string]any{}
		}
		return json.Marshal(args)
	case "read_file":
		p, err := d.path(req.Arguments)
		if err != nil {
			return nil, err
		}
		f, err := d.openRegular(p, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, d.fsError("read", p, err)
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, demoMaxRead))
		if err != nil {
			return nil, d.fsError("read", p, err)
		}
		return json.Marshal(map[string]any{"path": p, "content": string(b)})
	case "write_file":
		p, content, err := d.writeArgs(req.Arguments)
		if err != nil {
			return nil, err
		}
		if dir := path.Dir(p); dir != "." {
			if err := d.root.MkdirAll(dir, 0o700); err != nil {
				return nil, d.fsError("create directory for", p, err)
			}
		}
		f, err := d.openRegular(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, d.fsError("write", p, err)
		}
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, d.fsError("write", p, err)
		}
		return json.Marshal(map[string]any{"path": p, "bytes": len(content)})
	}
	return nil, fmt.Errorf("demo server has no tool %q (it has echo, read_file, write_file): %w", req.Tool, ErrUnknownTool)
}

// writeArgs reads write_file's path and content.
func (d *Demo) writeArgs(args map[string]any) (p, content string, err error) {
	if p, err = d.path(args); err != nil {
		return "", "", err
	}
	content, ok := args["content"].(string)
	if !ok {
		return "", "", toolErrorf("write_file needs \"content\" as a string")
	}
	return p, content, nil
}

// path reads the "path" argument as a slash-separated path inside the sandbox.
func (d *Demo) path(args map[string]any) (string, error) {
	p, ok := args["path"].(string)
	if !ok || p == "" {
		return "", toolErrorf("\"path\" is required: a file path relative to the sandbox, e.g. \"notes/todo.txt\"")
	}
	clean := path.Clean(strings.ReplaceAll(p, "\\", "/"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", toolErrorf("path %q leaves the sandbox: use a path relative to it without \"..\"", p)
	}
	return clean, nil
}

// openRegular opens p in the sandbox only if it is a regular file (or,
// with O_CREATE, a new one). It opens without blocking, so a FIFO whose
// open would wait for a peer forever (holding a preview slot or an
// executor worker) is refused at once, like a device or a directory.
func (d *Demo) openRegular(p string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := d.root.OpenFile(p, flag|syscall.O_NONBLOCK, perm)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err // the caller says what a missing file means
	}
	if errors.Is(err, syscall.ENXIO) { // a FIFO opened for writing with nobody reading
		return nil, toolErrorf("%s is not a regular file of the sandbox", p)
	}
	if err != nil {
		return nil, d.fsError("open", p, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, toolErrorf("%s is not a regular file of the sandbox", p)
	}
	return f, nil
}

func (d *Demo) fsError(op, p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return toolErrorf("%s %s: no such file in the sandbox", op, p)
	case strings.Contains(err.Error(), "escapes from parent"), strings.Contains(err.Error(), "path escapes"):
		return toolErrorf("%s %s: the path leaves the sandbox", op, p)
	}
	return toolErrorf("%s %s: %v", op, p, err)
}

// Close implements Adapter.
func (d *Demo) Close() error { return d.root.Close() }
