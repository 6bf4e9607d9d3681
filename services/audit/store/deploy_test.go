package store_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlock-gate/airlock/services/audit/store"
)

func TestDeployCopyOfTheMigrationsMatchesTheEmbeddedOnes(t *testing.T) {
	entries, err := fs.ReadDir(store.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		want, _ := fs.ReadFile(store.Migrations, "migrations/"+e.Name())
		got, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "clickhouse", "migrations", e.Name()))
		if err != nil {
			t.Fatalf("deploy/clickhouse/migrations/%s: %v (copy it from services/audit/store/migrations)", e.Name(), err)
		}
		if string(got) != string(want) {
			t.Errorf("deploy/clickhouse/migrations/%s differs from services/audit/store/migrations/%s: copy it again", e.Name(), e.Name())
		}
	}
}
