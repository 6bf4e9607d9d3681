package approval

import (
	"context"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// ReleaseUnindexedForTest is release by a replica whose index has not yet
// seen any other call of rec's thread (the index follows the bucket a
// moment late): it knows rec alone, so only the thread's lock keeps
// another call's turn.
func (s *Service) ReleaseUnindexedForTest(ctx context.Context, rec *airlockv1.ApprovalRecord) error {
	return s.releaseAmong(ctx, rec, nil)
}

// SweepForTest runs one round of the sweeper now, as its ticker would.
func (s *Service) SweepForTest(ctx context.Context) {
	s.sweepOnce(ctx)
}
