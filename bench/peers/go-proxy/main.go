// The OpenFaaS gateway's shape: net/http/httputil.ReverseProxy to one upstream, nothing else.
// Usage: go-proxy LISTEN_ADDR UPSTREAM_URL [UNIX_SOCKET]
package main

import (
	"context"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

func main() {
	upstream, err := url.Parse(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	transport := &http.Transport{MaxIdleConnsPerHost: 256}
	if len(os.Args) > 3 {
		socket := os.Args[3]
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}
	}
	proxy.Transport = transport
	log.Fatal(http.ListenAndServe(os.Args[1], proxy))
}
