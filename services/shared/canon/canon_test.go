package canon

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDigestIgnoresKeyOrderButNotValues(t *testing.T) {
	a := mustStruct(t, map[string]any{"path": "/tmp/x", "mode": 1, "nested": map[string]any{"b": 2, "a": 1}})
	b := mustStruct(t, map[string]any{"nested": map[string]any{"a": 1, "b": 2}, "mode": 1.0, "path": "/tmp/x"})
	c := mustStruct(t, map[string]any{"path": "/tmp/y", "mode": 1, "nested": map[string]any{"a": 1, "b": 2}})
	da, _ := Digest(a)
	db, _ := Digest(b)
	dc, _ := Digest(c)
	if da != db {
		t.Fatalf("same arguments in another order digest differently: %s vs %s", da, db)
	}
	if da == dc {
		t.Fatal("different arguments have the same digest")
	}
}

func TestNilIsEmptyObject(t *testing.T) {
	b, err := JSON(nil)
	if err != nil || string(b) != "{}" {
		t.Fatalf("JSON(nil) = %q, %v", b, err)
	}
	d1, _ := Digest(nil)
	d2, _ := Digest(&structpb.Struct{})
	if d1 != d2 {
		t.Fatal("nil and empty arguments differ")
	}
}
