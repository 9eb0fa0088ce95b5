module e1kbox

go 1.26.8

require (
	github.com/beevik/ntp v1.6.0
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/cilium/ebpf v0.22.0
	github.com/gokrazy/gokrazy v0.0.0-20260418085648-c38c3134b8a7
	github.com/gokrazy/kernel.amd64 v0.0.0-20260705070735-de680abf072b
	github.com/gokrazy/updater v0.0.0-20250705135802-db129c40879c
	github.com/google/go-cmp v0.7.0
	github.com/gorilla/websocket v1.5.3
	github.com/insomniacslk/dhcp v0.0.0-20260901064844-234b97448fae
	github.com/mdlayher/ethtool v0.7.0
	github.com/mdlayher/ndp v1.1.0
	github.com/mdlayher/packet v1.2.0
	github.com/miekg/dns v1.1.73
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.72.0
	github.com/safchain/ethtool v0.7.0
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/net v0.59.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/gokrazy/internal v0.0.0-20260625065634-6994f9152c44 // indirect
	github.com/google/gopacket v1.1.19 // indirect
	github.com/google/renameio/v2 v2.0.0 // indirect
	github.com/josharian/native v1.1.0 // indirect
	github.com/kenshaw/evdev v0.1.0 // indirect
	github.com/mdlayher/genetlink v1.4.0 // indirect
	github.com/mdlayher/netlink v1.11.2 // indirect
	github.com/mdlayher/socket v0.7.0 // indirect
	github.com/mdlayher/watchdog v0.0.0-20201005150459-8bdc4f41966b // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pierrec/lz4/v4 v4.1.14 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/rtr7/dhcp4 v0.0.0-20220302171438-18c84d089b46 // indirect
	github.com/u-root/uio v0.0.0-20230220225925-ffce2a382923 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
