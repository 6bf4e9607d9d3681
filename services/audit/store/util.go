package store

import "sort"

func sortBySeq(rows []Row) {
	sort.Slice(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
}
