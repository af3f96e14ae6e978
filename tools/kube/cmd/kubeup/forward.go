package main

// The host reaches the API server, which runs inside the cluster's network namespace, through a
// forwarder: kubeup opens the listening socket on the host's loopback and hands it to a process
// started inside the namespace, which accepts there and dials the API server on the namespace's
// loopback. A socket stays in the namespace it was made in, whoever holds it.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
)

// cmdForward serves `kubeup forward -dir DIR -fd N -to ADDR`.
func cmdForward(args []string) error {
	fs := flag.NewFlagSet("forward", flag.ExitOnError)
	dir := fs.String("dir", "", "cluster directory (names the process as the cluster's)")
	fd := fs.Int("fd", 3, "inherited listening socket")
	to := fs.String("to", "", "address to dial for each connection")
	_ = fs.Parse(args)
	if *dir == "" || *to == "" {
		return errors.New("forward: -dir and -to are required")
	}
	l, err := net.FileListener(os.NewFile(uintptr(*fd), "listener"))
	if err != nil {
		return fmt.Errorf("forward: inherited socket %d: %w", *fd, err)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return fmt.Errorf("forward: accept: %w", err)
		}
		go forward(c, *to)
	}
}

func forward(c net.Conn, to string) {
	defer c.Close()
	u, err := net.Dial("tcp", to)
	if err != nil {
		fmt.Fprintf(os.Stderr, "forward %s: %v\n", to, err)
		return
	}
	defer u.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go pipe(u, c)
	go pipe(c, u)
	wg.Wait()
}
