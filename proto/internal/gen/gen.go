// Package gen compiles the airlock .proto files and produces their Go code
// exactly as protoc-gen-go would (paths=source_relative).
package gen

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

// Generate compiles every .proto under root/airlock and returns the generated
// Go files keyed by path relative to root.
func Generate(ctx context.Context, root string) (map[string][]byte, error) {
	var names []string
	err := filepath.WalkDir(filepath.Join(root, "airlock"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".proto") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find .proto files: %w", err)
	}
	sort.Strings(names)

	compiler := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := compiler.Compile(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("compile protos: %w", err)
	}

	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: names, Parameter: strPtr("paths=source_relative")}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range compiled {
		add(f.(linker.File))
	}

	plugin, err := protogen.Options{}.New(req)
	if err != nil {
		return nil, fmt.Errorf("set up generator: %w", err)
	}
	for _, f := range plugin.Files {
		if f.Generate {
			internal_gengo.GenerateFile(plugin, f)
		}
	}
	resp := plugin.Response()
	if resp.Error != nil {
		return nil, fmt.Errorf("generate: %s", resp.GetError())
	}
	out := make(map[string][]byte, len(resp.File))
	for _, f := range resp.File {
		out[filepath.Join(root, filepath.FromSlash(f.GetName()))] = []byte(f.GetContent())
	}
	return out, nil
}

func strPtr(s string) *string { return &s }
