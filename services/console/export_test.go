package console

// PushViewHas reports whether the notifier's view of the devices holds a
// subscription to endpoint (a device subscribed a moment ago may not be in
// it yet: tests wait for it).
func PushViewHas(n *PushNotifier, endpoint string) bool {
	n.devices.mu.RLock()
	defer n.devices.mu.RUnlock()
	for _, s := range n.devices.subs {
		if s.Endpoint == endpoint {
			return true
		}
	}
	return false
}
