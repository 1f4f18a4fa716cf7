"""Timing a verified kernel, run inside a worker: the benchmark stage (bench), CUDA-event and
CUDA-graph timers with L2 flushing (timers), medians, spreads and units (stats), GPU facts and
measured ceilings cached per GPU (device), what each autotuner tried and picked (autotune), and a
witness that nothing compiles inside a timed region (compilewatch). May import the base layer,
project/ and verify/; never run/ or live/.
"""
