"""Support for tests, benchmarks and the quickstart: scripted oracles and (later) tiny local models."""
