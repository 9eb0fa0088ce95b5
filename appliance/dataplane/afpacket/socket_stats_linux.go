package afpacket

import "golang.org/x/sys/unix"

// Stats are a socket's counters since Open.
type Stats struct {
	// RxPackets counts frames the kernel put in the RX ring.
	RxPackets uint64
	// RxDrops counts frames the kernel dropped because the ring was full.
	RxDrops uint64
	// RxFreezes counts how often the ring filled up (the kernel's
	// tp_freeze_q_cnt).
	RxFreezes uint64
	// RxTruncated counts frames that did not fit a block and arrived cut
	// short (Packet.Truncated).
	RxTruncated uint64
	// RxCorrupt counts blocks whose layout did not add up; their remaining
	// frames were skipped.
	RxCorrupt uint64

	// TxSent counts frames the kernel took for transmission.
	TxSent uint64
	// TxENOBUFS counts send attempts that found the driver queue full.
	TxENOBUFS uint64
	// TxEAGAIN counts send attempts that found the send buffer exhausted.
	TxEAGAIN uint64
	// TxWrongFormat counts frames the kernel rejected (TP_STATUS_WRONG_FORMAT,
	// e.g. larger than a lowered MTU); they were dropped and their slots
	// reused.
	TxWrongFormat uint64
	// TxOversize counts frames Append rejected as longer than the MTU
	// allows or than a slot holds; TxRunt those shorter than an Ethernet
	// header. They were never queued.
	TxOversize uint64
	TxRunt     uint64
	// TxStalls counts the times Flush gave up after TxRetryTimeout (once
	// per stall, not per call while it lasts).
	TxStalls uint64
	// TxDropped counts queued frames discarded because the socket was
	// closed before they were flushed.
	TxDropped uint64
}

// Stats returns the socket's counters. The kernel resets its counters on
// every read; Stats accumulates them, so the values only grow.
func (s *Socket) Stats() Stats {
	if s.rx.blocks > 0 && s.life.acquire() {
		s.readKernelStats()
		for _, m := range s.more {
			m.readKernelStats()
		}
		s.life.release()
	}
	var st Stats
	for _, m := range append([]*Socket{s}, s.more...) {
		m.statsMu.Lock()
		st.RxPackets += m.kstats.packets
		st.RxDrops += m.kstats.drops
		st.RxFreezes += m.kstats.freezes
		m.statsMu.Unlock()
	}
	st.RxTruncated = s.rxTruncated.Load()
	st.RxCorrupt = s.rxCorrupt.Load()
	st.TxDropped = s.txDropped.Load()
	if t := s.tx; t != nil {
		st.TxSent = t.sent.Load()
		st.TxENOBUFS = t.enobufs.Load()
		st.TxEAGAIN = t.eagain.Load()
		st.TxWrongFormat = t.wrongFormat.Load()
		st.TxOversize = t.oversize.Load()
		st.TxRunt = t.runt.Load()
		st.TxStalls = t.stalls.Load()
	}
	return st
}

// readKernelStats adds PACKET_STATISTICS (reset by the read) to the totals.
func (s *Socket) readKernelStats() {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	ks, err := unix.GetsockoptTpacketStatsV3(s.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return
	}
	// For TPACKET_V3 the kernel counts drops in tp_packets too.
	s.kstats.packets += uint64(ks.Packets - min(ks.Drops, ks.Packets))
	s.kstats.drops += uint64(ks.Drops)
	s.kstats.freezes += uint64(ks.Freeze_q_cnt)
}
