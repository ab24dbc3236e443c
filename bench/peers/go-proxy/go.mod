module sless.dev/bench/go-proxy

go 1.21
