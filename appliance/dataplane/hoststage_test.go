package dataplane

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"e1kbox/appliance/dataplane/frame"
)

func TestHostStage(t *testing.T) {
	var written [][]byte
	fail := false
	s := newHostStage(func(b []byte) error {
		if fail {
			return fmt.Errorf("refused")
		}
		written = append(written, append([]byte(nil), b...))
		return nil
	}, 1522)
	fr := arpFrame(bcast, macA)
	if !s.Append(fr) || !s.AppendTagged(fr, frame.EtherTypeVLAN, 3) {
		t.Fatal("Append failed on an empty stage")
	}
	if s.Append(make([]byte, 1600)) {
		t.Errorf("Append of a frame larger than a slot succeeded")
	}
	slot := s.TxSlot()
	copy(slot, fr)
	if !s.TxCommit(len(fr)) {
		t.Fatal("TxCommit failed")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(written) != 3 || !bytes.Equal(written[0], fr) || len(written[1]) != len(fr)+4 ||
		binary.BigEndian.Uint16(written[1][12:]) != frame.EtherTypeVLAN || !bytes.Equal(written[2], fr) {
		t.Errorf("written %d frames: % x", len(written), written)
	}
	for range hostStageFrames {
		s.Append(fr)
	}
	if s.Append(fr) {
		t.Errorf("Append succeeded on a full stage")
	}
	fail = true
	if err := s.Flush(); err == nil || s.errs.Load() != hostStageFrames {
		t.Errorf("Flush = %v with %d errors, want an error per frame", err, s.errs.Load())
	}
}
