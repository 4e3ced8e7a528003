"""`cua.buffer`, `cua.replay`, `cua.entropulse`: the trainer's success buffer of whole trajectories
(`success_rows`), replay of buffered successes into all-fail groups (`replay`), and Entropulse's SFT phases on them
(`entropulse`)."""
