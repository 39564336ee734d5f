// Package runner samples: it runs the twelve cells (package cells) on one
// or more Engines under the cache protocol, in a seeded random interleaving,
// and writes every sample as it completes (samples.jsonl, pins.json).
// stats holds the statistics and the interleaving; report renders results.
package runner
