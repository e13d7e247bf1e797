package defaults

import (
	"fmt"
	"os"
	"slices"

	"sigs.k8s.io/yaml"
)

// Order is the operator's default rollout order for one kind of rollout.
// Head lists node keys in order; every frontend not in Head follows it, in
// ascending number.
type Order []Key

// Sequence returns the order restricted to the given nodes: the head's keys
// that are among them, then the remaining frontends in ascending number.
// This is the reduced list when nodes holds only the live nodes.
func (o Order) Sequence(nodes []Key) []Key {
	present := make(map[Key]bool, len(nodes))
	for _, k := range nodes {
		present[k] = true
	}
	seq := make([]Key, 0, len(nodes))
	for _, k := range o {
		if present[k] {
			seq = append(seq, k)
			delete(present, k)
		}
	}
	var rest []Key
	for k := range present {
		if !k.IsBackend() {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(rest, func(a, b Key) int { return a.Frontend - b.Frontend })
	return append(seq, rest...)
}

// Predecessor returns the node right before k in the order of a tenant of
// any size, or false for the first node.
func (o Order) Predecessor(k Key) (Key, bool) {
	if i := slices.Index(o, k); i >= 0 {
		if i == 0 {
			return Key{}, false
		}
		return o[i-1], true
	}
	if k.IsBackend() {
		// Not reachable with a validated order: the Backend is always in the head.
		return Key{}, false
	}
	for n := k.Frontend - 1; n >= 1; n-- {
		if !slices.Contains(o, FrontendKey(n)) {
			return FrontendKey(n), true
		}
	}
	if len(o) == 0 {
		return Key{}, false
	}
	return o[len(o)-1], true
}

// Orders are the installation's default provisioning and upgrade orders.
type Orders struct {
	// Provisioning is the order in which nodes are provisioned and recovered.
	Provisioning Order
	// Upgrade is the order in which nodes take a new rollout target.
	Upgrade Order
}

// Builtin returns the operator's built-in orders, the ones the tenant chart
// shipped as allNodeConfig: provisioning be, fe1, fe2, …; upgrade fe1, fe2,
// be, fe3, ….
func Builtin() Orders {
	return Orders{
		Provisioning: Order{Backend},
		Upgrade:      Order{FrontendKey(1), FrontendKey(2), Backend},
	}
}

// OrdersFile is the installation's order configuration file.
type OrdersFile struct {
	// ProvisioningOrder is the head of the provisioning order.
	ProvisioningOrder []string `json:"provisioningOrder"`
	// UpgradeOrder is the head of the upgrade order.
	UpgradeOrder []string `json:"upgradeOrder"`
}

// ParseOrders reads an order configuration such as
//
//	provisioningOrder: [be]
//	upgradeOrder: [fe1, fe2, be]
//
// Each list must name the Backend once and may name frontends; frontends it
// leaves out follow in ascending number.
func ParseOrders(data []byte) (Orders, error) {
	var f OrdersFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return Orders{}, fmt.Errorf("parsing order configuration: %w", err)
	}
	prov, err := parseOrder("provisioningOrder", f.ProvisioningOrder)
	if err != nil {
		return Orders{}, err
	}
	upg, err := parseOrder("upgradeOrder", f.UpgradeOrder)
	if err != nil {
		return Orders{}, err
	}
	return Orders{Provisioning: prov, Upgrade: upg}, nil
}

// LoadOrders reads the order configuration file at path; an empty path
// means the built-in orders.
func LoadOrders(path string) (Orders, error) {
	if path == "" {
		return Builtin(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Orders{}, fmt.Errorf("reading order configuration: %w", err)
	}
	o, err := ParseOrders(data)
	if err != nil {
		return Orders{}, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

func parseOrder(field string, keys []string) (Order, error) {
	o := make(Order, 0, len(keys))
	for i, s := range keys {
		k, err := ParseKey(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		if slices.Contains(o, k) {
			return nil, fmt.Errorf("%s[%d]: %s is listed twice", field, i, k)
		}
		o = append(o, k)
	}
	if !slices.Contains(o, Backend) {
		return nil, fmt.Errorf("%s: must list %q (the Backend has no place otherwise)", field, BackendKey)
	}
	return o, nil
}

// String renders the order for logs and docs: "fe1, fe2, be, fe3, …".
func (o Order) String() string {
	s := ""
	for _, k := range o {
		s += k.String() + ", "
	}
	return s + "then remaining frontends ascending"
}
