// The OpenFaaS gateway's shape: net/http/httputil.ReverseProxy to one upstream, nothing else.
// Usage: go-proxy LISTEN_ADDR UPSTREAM_URL
package main

import (
	"log"
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
	proxy.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	log.Fatal(http.ListenAndServe(os.Args[1], proxy))
}
