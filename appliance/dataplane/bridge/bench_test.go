package bridge

import (
	"testing"
)

func BenchmarkLookup(b *testing.B) {
	f := newFDB(b, Options{})
	for i := range 1000 {
		m := mac(i)
		f.Learn(&m, 0, Port(1+i%4), 0)
	}
	m := mac(500)
	b.ResetTimer()
	for range b.N {
		f.Lookup(&m, 0, 0)
	}
}

func BenchmarkLearnKnown(b *testing.B) {
	f := newFDB(b, Options{})
	m := mac(7)
	f.Learn(&m, 0, 1, 0)
	b.ResetTimer()
	for range b.N {
		f.Learn(&m, 0, 1, 0)
	}
}

func BenchmarkParallelLearnLookup(b *testing.B) {
	f := newFDB(b, Options{})
	for i := range 1000 {
		m := mac(i)
		f.Learn(&m, 0, Port(1+i%4), 0)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			m := mac(i % 1000)
			f.Learn(&m, 0, Port(1+(i%1000)%4), 0)
			d := mac((i * 7) % 1000)
			f.Lookup(&d, 0, 0)
		}
	})
}
