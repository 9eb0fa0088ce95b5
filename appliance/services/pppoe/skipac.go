package pppoe

// maxSkipped bounds the ACs remembered as leading nowhere.
const maxSkipped = 8

// skippedACs are the ACs whose offer led nowhere: no PADS to our PADRs,
// or a PADS with an error tag. The next discoveries pass over their PADOs,
// so that an AC answering every PADI first (a rogue, or a broken one next
// to the ISP's) cannot keep the client from an AC that completes a
// session. When a PADI goes unanswered but for passed-over offers, the
// list is forgotten: a lone AC that failed once is tried again.
type skippedACs struct {
	macs   [maxSkipped][6]byte
	n      int  // entries used (the oldest is overwritten once full)
	next   int  // where the next entry goes
	passed bool // an offer was passed over since the last PADI
}

// add remembers mac as leading nowhere.
func (s *skippedACs) add(mac [6]byte) {
	if s.has(mac) {
		return
	}
	s.macs[s.next] = mac
	s.next = (s.next + 1) % maxSkipped
	s.n = min(s.n+1, maxSkipped)
}

func (s *skippedACs) has(mac [6]byte) bool {
	for i := range s.n {
		if s.macs[i] == mac {
			return true
		}
	}
	return false
}

// skip reports whether a PADO from mac is passed over.
func (s *skippedACs) skip(mac [6]byte) bool {
	if !s.has(mac) {
		return false
	}
	s.passed = true
	return true
}

// padiUnanswered is called when a PADI got no acceptable offer: the list
// is forgotten if it is what kept the client from one.
func (s *skippedACs) padiUnanswered() {
	if s.passed {
		*s = skippedACs{}
	}
}

// padiSent starts a new round of offers.
func (s *skippedACs) padiSent() { s.passed = false }
