"""Timing a verified kernel, run inside a worker: the benchmark stage (bench; its steps in checking,
timed_series, baselines, amounts and memory), CUDA-event and
CUDA-graph timers with L2 flushing (timers), medians, spreads and units (stats), GPU facts and
measured ceilings cached per GPU (device), what each autotuner tried and picked (autotune), a
witness that nothing compiles inside a timed region (compilewatch), the input copies the timed calls
go through and their counted launches (rotation), when a measured time is not posted
(plausible), and, in the parent, whether a change between two runs' samples is beyond the noise
(noise). May import the base layer, project/ and verify/; never run/ or live/.
"""
