package dashboard

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"e1kbox/webui"
)

func TestParseIRQs(t *testing.T) {
	const interrupts = `            CPU0       CPU1
   0:         38          0   IO-APIC   2-edge      timer
  27:       1204          7   PCI-MSIX-0000:00:04.0    0-edge      eth1-rx-0
  28:         11        950   PCI-MSIX-0000:00:04.0    1-edge      eth1-tx-0
  29:          2          0   PCI-MSIX-0000:00:04.0    2-edge      eth1
 NMI:          0          0   Non-maskable interrupts
`
	want := []webui.IRQStat{
		{IRQ: 27, Name: "eth1-rx-0", Count: 1211, PerCPU: []uint64{1204, 7}},
		{IRQ: 28, Name: "eth1-tx-0", Count: 961, PerCPU: []uint64{11, 950}},
		{IRQ: 29, Name: "eth1", Count: 2, PerCPU: []uint64{2, 0}},
	}
	if diff := cmp.Diff(want, parseIRQs(interrupts)); diff != "" {
		t.Errorf("parseIRQs (-want +got):\n%s", diff)
	}
}
