// CoreDNS with the plugins the test node's Corefile uses, and no others: the full set pulls in the
// cloud providers' SDKs (route53, azure, clouddns), which would add minutes to a cold CI build.
// coremain and the plugins are CoreDNS's own packages, as its generated plugin list imports them.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
