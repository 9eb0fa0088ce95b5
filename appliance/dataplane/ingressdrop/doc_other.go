//go:build !linux

// Package ingressdrop keeps the kernel's network stack off a data port (Linux only).
package ingressdrop
