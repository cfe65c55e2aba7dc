package main

import "fmt"

// checkNodesZones refuses node and zone counts that DefaultTopology would
// otherwise quietly turn into something else (no nodes for a negative
// count, one zone for none).
func checkNodesZones(nodes, zones int) error {
	if nodes < 0 {
		return fmt.Errorf("--nodes must be 0 or more, got %d", nodes)
	}
	if zones < 1 {
		return fmt.Errorf("--zones must be at least 1, got %d", zones)
	}
	return nil
}

// checkZonesFit refuses more zones than nodes to spread over: the extra
// zones would be empty, and a topology spread over them meaningless.
func checkZonesFit(nodes, zones int) error {
	if limit := max(nodes, 1); zones > limit {
		return fmt.Errorf("--zones must be between 1 and the number of nodes (--nodes %d), got %d", nodes, zones)
	}
	return nil
}
