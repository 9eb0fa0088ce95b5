package afpacket

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGeometry(t *testing.T) {
	if os.Getpagesize() != 4096 {
		t.Fatalf("table assumes 4 KiB pages, have %d", os.Getpagesize())
	}
	tests := []struct {
		name string
		cfg  Config
		mtu  int
		want Geometry
	}{
		{
			name: "defaults at 1500",
			mtu:  1500,
			// TX slot: 48 + 1518 = 1566, rounded to 1600; 40 per 64 KiB block.
			want: Geometry{MTU: 1500, RxBlockSize: 256 << 10, RxBlockCount: 16, RxTimeout: 2 * time.Millisecond,
				TxFrameSize: 1600, TxBlockSize: 64 << 10, TxBlockCount: 26, TxFrames: 1040, TxRetryTimeout: 20 * time.Millisecond},
		},
		{
			name: "jumbo 9000",
			mtu:  9000,
			// 48 + 9018 = 9066 -> 9088; 7 per 64 KiB block.
			want: Geometry{MTU: 9000, RxBlockSize: 256 << 10, RxBlockCount: 16, RxTimeout: 2 * time.Millisecond,
				TxFrameSize: 9088, TxBlockSize: 64 << 10, TxBlockCount: 147, TxFrames: 1029, TxRetryTimeout: 20 * time.Millisecond},
		},
		{
			name: "max MTU raises the default block",
			mtu:  65535,
			cfg:  Config{TxFrames: 4},
			// One frame needs 48 + align16(82+65553) = 65696 bytes; four need
			// more than 256 KiB, so the block doubles to 512 KiB. A TX slot
			// (48+65553 -> 65664) is larger than 64 KiB: one per block.
			want: Geometry{MTU: 65535, RxBlockSize: 512 << 10, RxBlockCount: 16, RxTimeout: 2 * time.Millisecond,
				TxFrameSize: 65664, TxBlockSize: 68 << 10, TxBlockCount: 4, TxFrames: 4, TxRetryTimeout: 20 * time.Millisecond},
		},
		{
			name: "explicit sizes, timeout rounded up to ms",
			mtu:  1500,
			cfg:  Config{BlockSize: 64 << 10, BlockCount: 4, BlockTimeout: 1500 * time.Microsecond, TxFrames: 41, TxRetryTimeout: time.Second},
			want: Geometry{MTU: 1500, RxBlockSize: 64 << 10, RxBlockCount: 4, RxTimeout: 2 * time.Millisecond,
				TxFrameSize: 1600, TxBlockSize: 64 << 10, TxBlockCount: 2, TxFrames: 80, TxRetryTimeout: time.Second},
		},
		{
			name: "rx only",
			mtu:  1500,
			cfg:  Config{NoTX: true, BlockSize: 4096, BlockCount: 2},
			want: Geometry{MTU: 1500, RxBlockSize: 4096, RxBlockCount: 2, RxTimeout: 2 * time.Millisecond},
		},
		{
			// 66 + 1960 + 18 = 2044 fits 2048-byte frames ...
			name: "frame ring, tap",
			mtu:  1960,
			cfg:  Config{NoTX: true, FrameRing: true, RxFrames: 64},
			want: Geometry{MTU: 1960, RxBlockSize: 128 << 10, RxBlockCount: 2, RxFrameSize: 2048, RxFrames: 128},
		},
		{
			// ... and with two more inline tags (2052) does not.
			name: "frame ring bound to EtherTypes",
			mtu:  1960,
			cfg:  Config{NoTX: true, FrameRing: true, RxFrames: 64, Bind: []Binding{{EtherType: 0x0800}}},
			want: Geometry{MTU: 1960, RxBlockSize: 128 << 10, RxBlockCount: 2, RxFrameSize: 4096, RxFrames: 64},
		},
		{
			name: "tx only",
			mtu:  1500,
			cfg:  Config{NoRX: true, TxFrames: 1},
			want: Geometry{MTU: 1500, TxFrameSize: 1600, TxBlockSize: 64 << 10, TxBlockCount: 1, TxFrames: 40, TxRetryTimeout: 20 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.Geometry(tt.mtu)
			if err != nil {
				t.Fatalf("Geometry: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Geometry (-want +got):\n%s", diff)
			}
			if got.RxBlockCount > 0 && got.RxBlockSize < rxFootprint(tt.mtu) {
				t.Errorf("RX block %d cannot hold a max frame (%d)", got.RxBlockSize, rxFootprint(tt.mtu))
			}
			if got.TxFrames > 0 && got.TxFrameSize-tpHdrLen < got.MaxFrameLen() {
				t.Errorf("TX slot %d cannot hold MaxFrameLen %d", got.TxFrameSize, got.MaxFrameLen())
			}
		})
	}
}

func TestGeometryErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		mtu  int
	}{
		{"MTU too small", Config{}, 67},
		{"MTU too large", Config{}, 65536},
		{"no rings", Config{NoRX: true, NoTX: true}, 1500},
		{"block not page multiple", Config{BlockSize: 5000}, 1500},
		{"negative block", Config{BlockSize: -4096}, 1500},
		{"block too small for jumbo", Config{BlockSize: 8192}, 9000},
		{"one block", Config{BlockCount: 1}, 1500},
		{"negative timeout", Config{BlockTimeout: -time.Millisecond}, 1500},
		{"huge timeout", Config{BlockTimeout: time.Hour}, 1500},
		{"negative tx frames", Config{TxFrames: -1}, 1500},
		{"negative retry", Config{TxRetryTimeout: -time.Second}, 1500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g, err := tt.cfg.Geometry(tt.mtu); !errors.Is(err, ErrConfig) {
				t.Errorf("Geometry = %+v, %v; want ErrConfig", g, err)
			}
		})
	}
}

func TestLayoutConstants(t *testing.T) {
	// Values of the kernel ABI the ring code depends on.
	got := []int{tpHdrLen, rxMacOff, blockHdrLen, offPktType}
	want := []int{48, 82, 48, 58}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tpHdrLen, rxMacOff, blockHdrLen, offPktType (-want +got):\n%s", diff)
	}
}

func TestFanoutSockoptValue(t *testing.T) {
	tests := []struct {
		f    Fanout
		want int
	}{
		{Fanout{ID: 7, Mode: FanoutHash}, 7},
		{Fanout{ID: 0x1234, Mode: FanoutLB}, 0x1_1234},
		{Fanout{ID: 1, Mode: FanoutHash, Defrag: true}, 0x8000_0001},
		{Fanout{ID: 2, Mode: FanoutCPU, Rollover: true}, 0x1002_0002},
	}
	for _, tt := range tests {
		if got := tt.f.sockoptValue(); got != tt.want {
			t.Errorf("%+v.sockoptValue() = %#x, want %#x", tt.f, got, tt.want)
		}
	}
}
