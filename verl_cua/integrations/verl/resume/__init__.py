"""`cua.resume`: what a checkpoint holds of ours besides verl's (`state`), its files inside verl's `global_step_N`
folder (`checkpoint_io`), and what a resumed run does to the outputs of the run it continues (`outputs`)."""
