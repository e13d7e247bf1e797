// Package heap measures the heap the objects a benchmark keeps hold.
package heap

import "runtime"

// PerObject is the heap, in bytes, that the n objects kept by keep(0) …
// keep(n-1) hold while all of them are held: the live heap after a
// collection with them, less the live heap before them, over n. What keep
// allocates and drops (a decoding's garbage) is not counted.
func PerObject(n int, keep func(i int) any) float64 {
	held := make([]any, n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range held {
		held[i] = keep(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(held)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
