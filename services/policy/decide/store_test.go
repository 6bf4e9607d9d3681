package decide_test

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

func storeOf(t *testing.T, data map[string]any) storage.Store {
	t.Helper()
	return inmem.NewFromObject(data)
}
