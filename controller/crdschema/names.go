package crdschema

import (
	"strings"
	"unicode"
)

// Snake is the Terraform name of a Kubernetes field: consolidateAfter →
// consolidate_after, associatePublicIPAddress → associate_public_ip_address.
func Snake(name string) string {
	// "IPv6" would otherwise split as I_pv6.
	name = strings.NewReplacer("IPv6", "Ipv6", "IPv4", "Ipv4").Replace(name)
	runes := []rune(name)
	var b strings.Builder
	for i, r := range runes {
		if unicode.IsUpper(r) {
			prevLower := i > 0 && (unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1]))
			endOfAcronym := i > 0 && unicode.IsUpper(runes[i-1]) && i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if prevLower || endOfAcronym {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
