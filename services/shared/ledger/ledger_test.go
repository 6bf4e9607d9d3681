package ledger_test

import (
	"testing"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/ledger"
	"github.com/airlock-gate/airlock/services/shared/ledger/ledgertest"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestTheStreamLedgerKeepsTheContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledger.Ledger {
		n := testenv.StartNATS(t)
		deps := testenv.Deps(t, testenv.Config(n.URL()))
		return ledger.NewStream(deps.NC, deps.Config.Stream.Name, bus.NewPublisher(deps.JS, "test/ledger"))
	})
}

func TestTheInMemoryLedgerKeepsTheContract(t *testing.T) {
	ledgertest.Run(t, func(*testing.T) ledger.Ledger { return ledgertest.NewMem() })
}
