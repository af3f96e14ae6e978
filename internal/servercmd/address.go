package servercmd

import (
	"fmt"
	"io"
	"net"
)

// allInterfaces reports whether addr, the listener's, is the unspecified address: `--listen
// 0.0.0.0:7080` or `--listen :7080`.
func allInterfaces(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsUnspecified()
}

// printListening prints where the server listens (docs/decisions.md, "The address the server
// prints"), and returns the URL the hints that follow name (the web UI, `hangar login`):
//   - the access URL when one is configured: what people and workspaces' machines reach the
//     server by (a load balancer's, a DNS name's), whatever the listen address;
//   - otherwise the listen URL, localURL. On all interfaces that is the loopback one (there is no
//     one address to print): it is said to be for this machine, with the hint to set the access
//     URL, which workspaces' machines and OIDC sign-in need from elsewhere.
func printListening(out io.Writer, addr net.Addr, localURL, accessURL, storeName string) string {
	if allInterfaces(addr) {
		fmt.Fprintf(out, "Hangar server listening on all interfaces, port %d (store: %s)\n", addr.(*net.TCPAddr).Port, storeName)
	} else {
		fmt.Fprintf(out, "Hangar server listening on %s (store: %s)\n", localURL, storeName)
	}
	if accessURL != "" {
		fmt.Fprintf(out, "Access URL: %s\n", accessURL)
		return accessURL
	}
	if allInterfaces(addr) {
		fmt.Fprintf(out, "On this machine: %s. From other machines, use this host's name or address; set --access-url (HANGAR_ACCESS_URL) "+
			"to that URL, as Terraform workspaces' machines and OIDC sign-in need it (until it is set, they are given %s).\n", localURL, localURL)
	}
	return localURL
}
