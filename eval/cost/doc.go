// Package cost measures what a reference chat costs in AWS: its test drives
// a scripted chat through the real transcript, image store and memory on
// the embedded stores, with summaries by the Bedrock adapter on a local
// Converse server, and counts every billed request. docs/memory.md ("What
// it costs") prices the counts.
package cost
