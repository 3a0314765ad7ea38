"""What operators look at: clearance, record queries, lookups, metrics, trust diffs."""
