package console

import (
	"slices"
	"testing"
)

// The call page keeps a call's first and last events however many pass
// (ends): each count around the ring's edges gives the first n, the last
// n after them in order, and the number left out between.
func TestEndsKeepsTheFirstAndLastInOrder(t *testing.T) {
	for _, count := range []int{0, 1, 3, 4, 5, 7, 8, 9, 11, 12, 13, 30} {
		e := ends[int]{n: 4}
		for i := range count {
			e.add(i)
		}
		head, tail, omitted := e.result()
		var want []int
		for i := range count {
			want = append(want, i)
		}
		wantHead := want[:min(count, 4)]
		rest := want[len(wantHead):]
		wantTail := rest[max(len(rest)-4, 0):]
		if !slices.Equal(head, wantHead) || !slices.Equal(tail, wantTail) || omitted != len(rest)-len(wantTail) {
			t.Errorf("%d given: head %v, tail %v, %d left out; want %v, %v, %d", count, head, tail, omitted, wantHead, wantTail, len(rest)-len(wantTail))
		}
		if len(e.last) > 4 || len(e.head) > 4 {
			t.Errorf("%d given: kept %d + %d", count, len(e.head), len(e.last))
		}
	}
}
