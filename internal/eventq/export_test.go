package eventq

// SortedAhead is how many buckets q has loaded from a sort ahead.
func SortedAhead(q *Queue) int { return q.sortedAhead }
