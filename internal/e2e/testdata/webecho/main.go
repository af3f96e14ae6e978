// Command webecho is the server of the access proxy's end-to-end tests, packed alone into an image:
// on each port it is given it serves a page naming the port and the pod, /ws (a WebSocket echo),
// /ws-echo?msg=M (a page whose script sends M through /ws and shows the echo), /big?bytes=N (N
// bytes, for downloads) and /headers (the request's headers as JSON).
package main

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

func main() {
	ports := os.Args[1:]
	if len(ports) == 0 {
		ports = []string{"8080"}
	}
	host, _ := os.Hostname()
	block := make([]byte, 64<<10)
	for i := range block {
		block[i] = byte('a' + i%26)
	}
	for _, port := range ports {
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, "<h1>webecho on port %s</h1><p>pod %s, %s %s</p>\n", port, host, r.Proto, r.URL.Path)
		})
		mux.HandleFunc("/ws-echo", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, wsEchoPage)
		})
		mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "header": r.Header})
		})
		mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			for n > 0 {
				k := min(n, int64(len(block)))
				if _, err := w.Write(block[:k]); err != nil {
					return
				}
				n -= k
			}
		})
		mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
			if err != nil {
				return
			}
			defer c.CloseNow()
			c.SetReadLimit(16 << 20)
			for {
				typ, data, err := c.Read(r.Context())
				if err != nil {
					return
				}
				if err := c.Write(r.Context(), typ, data); err != nil {
					return
				}
			}
		})
		srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { log.Fatal(srv.ListenAndServe()) }()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

// wsEchoPage opens a WebSocket to its own host's /ws, sends the msg query parameter and shows
// what comes back ("echo: ..."), or "error".
const wsEchoPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>WebSocket echo</title></head>
<body><h1>WebSocket echo</h1><p id="status">connecting</p>
<script>
const status = document.getElementById("status");
const msg = new URLSearchParams(location.search).get("msg") || "";
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
ws.onopen = () => { status.textContent = "sent"; ws.send(msg); };
ws.onmessage = (ev) => { status.textContent = "echo: " + ev.data; ws.close(); };
ws.onerror = () => { status.textContent = "error"; };
</script></body></html>
`
