package approval

import (
	"context"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// ReleaseUnindexedForTest is release by a replica whose index has not yet
// seen any other call of rec's thread (the index follows the bucket a
// moment late): it knows rec alone, so only the thread's lock keeps
// another call's turn.
func (s *Service) ReleaseUnindexedForTest(ctx context.Context, rec *airlockv1.ApprovalRecord) error {
	return s.releaseAmong(ctx, rec, nil)
}

// EndForTest writes key's record ended in state st and nothing else: a
// decision whose release of the thread's next call has not run yet.
func (s *Service) EndForTest(ctx context.Context, key string, st airlockv1.ApprovalState) error {
	_, _, _, err := mutate(ctx, s.store, key, func(cur *airlockv1.ApprovalRecord) (*airlockv1.ApprovalRecord, struct{}, error) {
		next := proto.Clone(cur).(*airlockv1.ApprovalRecord)
		next.State = st
		return next, struct{}{}, nil
	})
	return err
}

// SweepForTest runs one round of the sweeper now, as its ticker would.
func (s *Service) SweepForTest(ctx context.Context) {
	s.sweepOnce(ctx)
}
